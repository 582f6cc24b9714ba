package webui

import (
	"cmp"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

// The delegate detail page: every instance of one delegate with its
// capability lists, configuration and last configuration run; its recent
// tasks; and why it could not take the queued tasks that wait.

// Bounds of the detail page: the recent tasks it shows, and how many
// queued tasks it explains.
const (
	delegateRecentTasks = 20
	delegateExplained   = 10
)

type delegateDetailView struct {
	Name       string
	Scope      string
	Instances  []instanceDetail
	Recent     []taskRow
	Waiting    []waitingTask
	Pending    bool
	CanApprove bool
	CanDelete  bool
	// Held: the group's upgrades are held back (docs/upgrades.md), so
	// its instances want no other version; Wanted is the version the
	// group wants otherwise. CanHold: the user may hold or resume them
	// (user:manage at the account, as the API asks).
	Held     bool
	Wanted   string
	RingWait string
	CanHold  bool
	CSRF     string
	Liveness string
	Now      time.Time
}

type instanceDetail struct {
	protocol.DelegateDetail
	Connected bool
	Stopped   bool
	// Replaced, when set, is the instance that took over from this one
	// (an upgrade).
	Replaced *replacement
}

// waitingTask is a queued task this delegate may not take, and why.
type waitingTask struct {
	Task    taskRow
	Reasons []protocol.Reason
	Host    string
}

func (u *UI) handleDelegate(w http.ResponseWriter, r *http.Request, s *user) {
	name := r.PathValue("name")
	ctx := r.Context()
	d, err := s.api.DescribeDelegate(ctx, name)
	if err != nil {
		u.delegateError(w, r, s, name, err)
		return
	}
	v := delegateDetailView{Name: d.Name, CSRF: s.csrf, Liveness: u.cfg.Liveness.String(), Now: u.cfg.Now()}
	plain := make([]protocol.Delegate, len(d.Instances))
	for i, in := range d.Instances {
		plain[i] = in.Delegate
	}
	replaced := replacements(plain, u.cfg.Liveness)
	var res []access.Resource
	hosts := map[string]bool{}
	for i, in := range d.Instances {
		sc := protocol.ScopeLabel(in.Org, in.Project)
		if i == 0 {
			v.Scope = sc
		} else if !strings.Contains(v.Scope, sc) {
			v.Scope += ", " + sc
		}
		res = append(res, access.Resource{Kind: "delegate", Name: in.Name, Scope: access.Scope{Org: in.Org, Project: in.Project}})
		det := instanceDetail{DelegateDetail: in, Connected: in.Status == protocol.DelegateConnected, Stopped: in.Status == protocol.DelegateDeregistered}
		if rp, ok := replaced[in.InstanceID]; ok {
			det.Replaced = &rp
		}
		if in.Approval == protocol.ApprovalPending && !det.Stopped && det.Replaced == nil {
			v.Pending = true
		}
		hosts[in.InstanceID] = true
		v.Instances = append(v.Instances, det)
	}
	// The instances that run first, those replaced by an upgrade last.
	slices.SortStableFunc(v.Instances, func(a, b instanceDetail) int {
		return cmp.Compare(btoi(a.Replaced != nil), btoi(b.Replaced != nil))
	})
	v.CanApprove = s.may(access.DelegateEdit, res...)
	v.CanDelete = s.may(access.DelegateDelete, res...)
	// The API says held as: no wanted version, and not because its ring
	// waits for an earlier one.
	v.Held = len(d.Instances) > 0
	for _, in := range d.Instances {
		if in.WantedVersion != "" || in.UpgradeWaiting != "" {
			v.Held, v.Wanted, v.RingWait = false, in.WantedVersion, in.UpgradeWaiting
		}
	}
	v.CanHold = len(d.Instances) > 0 && s.policy.Allows(access.UserManage, access.Account)
	if list, err := s.api.ListTasksPage(ctx, client.TaskQuery{Delegate: d.Name, Limit: delegateRecentTasks}); err == nil {
		for _, t := range list.Tasks {
			v.Recent = append(v.Recent, taskRow{Task: t, What: taskWhat(t), Scope: protocol.ScopeLabel(t.Org, t.Project)})
		}
	}
	if queued, err := s.api.ListTasks(ctx, protocol.StatusQueued, delegateExplained); err == nil {
		for _, t := range queued.Tasks {
			ex, err := s.api.ExplainTask(ctx, t.ID)
			if err != nil {
				continue
			}
			for _, vd := range ex.Delegates {
				if hosts[vd.InstanceID] && !vd.Eligible {
					v.Waiting = append(v.Waiting, waitingTask{Task: taskRow{Task: t, What: taskWhat(t)}, Reasons: vd.Reasons, Host: vd.Hostname})
				}
			}
		}
	}
	u.render(w, r, s, http.StatusOK, "delegate", page{Title: "Delegate " + d.Name, Nav: "delegates", Data: v})
}

// delegateURL is the detail page of a delegate.
func delegateURL(name string) string { return "/delegates/" + url.PathEscape(name) }

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
