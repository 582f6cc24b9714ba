package webui

import (
	"cmp"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/protocol"
)

// groupsPerPage is how many delegate groups a page of the Delegates page
// shows.
const groupsPerPage = 50

// delegateFilter is the Delegates page's query. The manager filters and
// pages (protocol.DelegateQuery): the page reads only its delegates.
type delegateFilter struct {
	Name   string // the delegate's name contains it
	Tag    string // an instance has it
	Status string // "", "connected", "not_connected", "pending"
	Page   string // the last delegate name of the previous page
}

func delegateFilterOf(q url.Values) delegateFilter {
	f := delegateFilter{Name: strings.TrimSpace(q.Get("name")), Tag: strings.TrimSpace(q.Get("tag")), Status: q.Get("status"), Page: q.Get("page")}
	switch f.Status {
	case "connected", "not_connected", "pending":
	default:
		f.Status = ""
	}
	return f
}

// apiQuery is the API listing of the filter's page.
func (f delegateFilter) apiQuery() protocol.DelegateQuery {
	// All: an instance that stopped stays on the page as Not connected
	// (until it is pruned or its group deleted), as before paging.
	q := protocol.DelegateQuery{Limit: groupsPerPage, Page: f.Page, Name: f.Name, Tag: f.Tag, All: true}
	yes, no := true, false
	switch f.Status {
	case "connected":
		q.Connected = &yes
	case "not_connected":
		q.Connected = &no
	case "pending":
		q.Approval = protocol.ApprovalPending
	}
	return q
}

// query is the filter as the page's query string, at page (a cursor; ""
// for the first page).
func (f delegateFilter) query(page string) string {
	v := url.Values{}
	for k, s := range map[string]string{"name": f.Name, "tag": f.Tag, "status": f.Status, "page": page} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v.Encode()
}

// Filtered reports whether the filter selects anything less than every
// delegate.
func (f delegateFilter) Filtered() bool { return f.Name != "" || f.Tag != "" || f.Status != "" }

// delegateGroup is one delegate (a name) with its instances.
type delegateGroup struct {
	Name       string
	Scope      string
	Instances  []instanceRow
	Connected  int
	Pending    bool
	CanApprove bool
	CanDelete  bool
}

// instanceRow is one instance of a delegate.
type instanceRow struct {
	InstanceID string
	Hostname   string
	Connected  bool
	Stopped    bool
	Connection string
	Version    string
	// UpgradeState is where its upgrade stands (current, upgrade
	// available, upgrading, upgrade failed: REASON, expired);
	// AutoUpgrade is "on" or "off" under a watcher, "" otherwise.
	UpgradeState  string
	AutoUpgrade   string
	Tags          []string
	Running       int
	Capacity      int
	LastHeartbeat *time.Time
	Approval      string
	Configuration string
	Configuring   string
	Draining      bool
	OverThreshold string
	// Unresponsive is why the manager offers it no task ("": it does).
	Unresponsive string
	// Replaced, when set, is the instance that took over from this one
	// (an upgrade): it is shown as replaced, not as missing.
	Replaced *replacement
}

// delegatesView is the live part of the Delegates page.
type delegatesView struct {
	Filter    delegateFilter
	Groups    []delegateGroup
	Connected int    // instances connected, of those shown
	Instances int    // instances shown, but for those replaced
	Replaced  int    // instances replaced by another (an upgrade, a restart)
	Upgraded  int    // of those, the ones replaced by an upgrade
	FirstURL  string // set past the first page
	NextURL   string
	EventsURL string
	CSRF      string
	Now       time.Time
	// Liveness is the liveness window.
	Liveness time.Duration
}

// delegatesView asks the API for the page the filter selects.
func (u *UI) delegatesView(r *http.Request, s *user, f delegateFilter) (delegatesView, error) {
	list, err := s.api.ListDelegatesPage(r.Context(), f.apiQuery())
	if err != nil {
		return delegatesView{}, err
	}
	byName := map[string]*delegateGroup{}
	var order []string
	resources := map[string][]access.Resource{}
	members := map[string][]protocol.Delegate{}
	for _, d := range list.Delegates {
		members[strings.ToLower(d.Name)] = append(members[strings.ToLower(d.Name)], d)
	}
	// Replacements are found among the instances of this page: the list
	// is paginated, so an instance whose replacement is on another page
	// shows as not connected here (the delegate's page shows it replaced).
	// No request per delegate: the page costs one list request.
	replaced := map[string]replacement{}
	for _, ins := range members {
		maps.Copy(replaced, replacements(ins, u.cfg.Liveness))
	}
	for _, d := range list.Delegates {
		key := strings.ToLower(d.Name)
		g := byName[key]
		if g == nil {
			g = &delegateGroup{Name: d.Name, Scope: protocol.ScopeLabel(d.Org, d.Project)}
			byName[key] = g
			order = append(order, key)
		}
		row := instanceRow{InstanceID: d.InstanceID, Hostname: d.Hostname, Connected: d.Status == protocol.DelegateConnected,
			Stopped: d.Status == protocol.DelegateDeregistered, Connection: d.Connection, Version: d.Version,
			UpgradeState: d.UpgradeState, AutoUpgrade: autoUpgrade(d.Upgrade),
			Tags: d.Tags, Running: d.RunningTasks, Capacity: d.Capacity, LastHeartbeat: d.LastHeartbeat,
			Approval: d.Approval, Configuration: d.Configuration, Configuring: d.Configuring,
			Draining: d.Draining, OverThreshold: d.OverThreshold}
		if d.Unresponsive != nil {
			row.Unresponsive = d.Unresponsive.Reason
		}
		if rp, ok := replaced[d.InstanceID]; ok {
			row.Replaced = &rp
		}
		if row.Connected {
			g.Connected++
		}
		if d.Approval == protocol.ApprovalPending && !row.Stopped && row.Replaced == nil {
			g.Pending = true
		}
		if sc := protocol.ScopeLabel(d.Org, d.Project); sc != g.Scope && !strings.Contains(g.Scope, sc) {
			g.Scope += ", " + sc
		}
		g.Instances = append(g.Instances, row)
		resources[key] = append(resources[key], access.Resource{Kind: "delegate", Name: d.Name, Scope: access.Scope{Org: d.Org, Project: d.Project}})
	}
	v := delegatesView{Filter: f, Now: u.cfg.Now(), CSRF: s.csrf, Liveness: u.cfg.Liveness}
	for _, key := range order {
		g := byName[key]
		// Connected first, replaced ones last.
		slices.SortStableFunc(g.Instances, func(a, b instanceRow) int {
			if (a.Replaced == nil) != (b.Replaced == nil) {
				if a.Replaced == nil {
					return -1
				}
				return 1
			}
			if a.Connected != b.Connected {
				if a.Connected {
					return -1
				}
				return 1
			}
			return cmp.Compare(a.Hostname, b.Hostname)
		})
		// The actions the user may take.
		rs := resources[key]
		g.CanApprove = g.Pending && s.may(access.DelegateEdit, rs...)
		g.CanDelete = s.may(access.DelegateDelete, rs...)
		v.Groups = append(v.Groups, *g)
		v.Connected += g.Connected
		for _, in := range g.Instances {
			if in.Replaced != nil {
				v.Replaced++
				if in.Replaced.Upgrade() {
					v.Upgraded++
				}
			} else {
				v.Instances++
			}
		}
	}
	if f.Page != "" {
		v.FirstURL = "/delegates?" + f.query("")
	}
	if list.Next != "" {
		v.NextURL = "/delegates?" + f.query(list.Next)
	}
	v.EventsURL = "/delegates/events?" + f.query(f.Page)
	return v, nil
}

func (u *UI) handleDelegates(w http.ResponseWriter, r *http.Request, s *user) {
	v, err := u.delegatesView(r, s, delegateFilterOf(r.URL.Query()))
	if err != nil {
		u.apiError(w, r, s, err)
		return
	}
	u.render(w, r, s, http.StatusOK, "delegates", page{Title: "Delegates", Nav: "delegates", Data: v})
}

// handleDelegateEvents streams the Delegates page's list: the page of the
// stream's filter, rendered again when the manager says the account's
// delegates changed, at most once per Config.DelegateUpdateEvery.
func (u *UI) handleDelegateEvents(w http.ResponseWriter, r *http.Request, s *user) {
	f := delegateFilterOf(r.URL.Query())
	changes, stop := u.cfg.Backend.WatchDelegates(s.account)
	defer stop()
	ev, ok := u.startEvents(w)
	if !ok {
		return
	}
	send := func() bool {
		v, err := u.delegatesView(r, s, f)
		if err != nil {
			if statusOf(err) == http.StatusUnauthorized {
				_ = ev.send("signedout", "")
			}
			return false
		}
		var b strings.Builder
		if err := u.fragments.ExecuteTemplate(&b, "delegate-list", v); err != nil {
			u.cfg.Logger.Error("web UI: render the delegate list", "err", err)
			return false
		}
		return ev.send("delegates", b.String()) == nil
	}
	u.followEvery(r, ev, changes, send, u.cfg.DelegateUpdateEvery)
}

// delegateActions are the POSTs of the Delegates page, each an API call.
var delegateActions = map[string]string{"approve": "approved", "reject": "rejected", "delete": "deleted",
	"hold-upgrades": "held at the version it runs", "resume-upgrades": "upgraded again to the version the manager wants"}

func (u *UI) handleDelegateAction(w http.ResponseWriter, r *http.Request, s *user) {
	name, action := r.PathValue("name"), r.PathValue("action")
	done, ok := delegateActions[action]
	if !ok {
		u.errorPage(w, r, s, http.StatusNotFound, "There is no delegate action "+action+".")
		return
	}
	if action == "delete" {
		u.deleteDelegate(w, r, s, name)
		return
	}
	var err error
	switch action {
	case "approve":
		_, err = s.api.ApproveDelegate(r.Context(), name)
	case "reject":
		_, err = s.api.RejectDelegate(r.Context(), name)
	case "hold-upgrades":
		err = setUpgradePolicies(r, s, name, protocol.UpgradeHold)
	case "resume-upgrades":
		err = setUpgradePolicies(r, s, name, protocol.UpgradeRelease)
	}
	if err != nil {
		u.delegateError(w, r, s, name, err)
		return
	}
	http.Redirect(w, r, "/delegates?notice="+url.QueryEscape("Delegate "+name+" "+done+"."), http.StatusSeeOther)
}

// setUpgradePolicies holds or releases the upgrades of the delegates
// named name: a group is a name in one scope (docs/upgrades.md), so the
// page's one button acts on the group of each scope its instances were
// registered in.
func setUpgradePolicies(r *http.Request, s *user, name, action string) error {
	d, err := s.api.DescribeDelegate(r.Context(), name)
	if err != nil {
		return err
	}
	done := map[[2]string]bool{}
	for _, in := range d.Instances {
		sc := [2]string{in.Org, in.Project}
		if done[sc] {
			continue
		}
		done[sc] = true
		if _, err := s.api.SetUpgradePolicy(r.Context(), name, protocol.UpgradePolicyRequest{Action: action,
			Org: in.Org, Project: in.Project}); err != nil {
			return err
		}
	}
	return nil
}

// autoUpgrade is how the Delegates page names an instance's upgrade mode:
// "on" or "off" under a watcher, "" when nothing upgrades it.
func autoUpgrade(mode string) string {
	switch mode {
	case protocol.UpgradeAuto:
		return "on"
	case protocol.UpgradeOff:
		return "off"
	}
	return ""
}
