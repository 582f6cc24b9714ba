// Package assign decides which delegates may run a task, in which order they
// are offered it, and explains every exclusion. It is pure: no I/O, no clock
// of its own.
//
// The rules are those of DESIGN §5, applied in the order of the
// protocol.Rule* constants: disconnected, draining, scope, selectors,
// task_denied, capability_denied, capacity, threshold. Evaluate reports every
// rule that excludes a delegate; Rank orders the eligible ones; Explain says,
// per delegate, why.
package assign

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// Delegate is what assignment needs to know about one delegate instance.
type Delegate struct {
	InstanceID string
	Name       string
	Hostname   string
	// Tags are the delegate's explicit selectors, normalized
	// (protocol.NormalizeSelectors). Its name and hostname are implicit
	// selectors. Unnormalized tags still match, only a little slower.
	Tags []string
	// Org and Project are the delegate's scope: Org "" is account level,
	// Org set with Project "" is org level, both set is project level.
	Org, Project string
	// LastSeen is the time of its last contact (heartbeat or any call).
	LastSeen     time.Time
	Deregistered bool
	Draining     bool
	// Running is how many tasks it runs now; Capacity how many it may run
	// at once (0 or less: unlimited).
	Running  int
	Capacity int
	// OverThreshold, when not empty, says why the delegate is over a CPU or
	// memory threshold and takes no task now.
	OverThreshold string
	// Configuring, when not empty, names the configuration whose script
	// the delegate runs now; it takes no task meanwhile.
	Configuring string
	// Pending: the delegate waits for an administrator's approval (its
	// token requires it); it takes no task meanwhile.
	Pending bool
	// ContainerRuntime is the container runtime the delegate has ("": none;
	// it is not offered container tasks).
	ContainerRuntime string
	// ContainerReason is why it has none, as it registered it ("": it did
	// not say).
	ContainerReason string
	// TaskTypes are the task types the delegate runs; nil: it did not say
	// (see protocol.RunsTaskType).
	TaskTypes []string
}

// Task is what assignment needs to know about one task.
type Task struct {
	ID           string
	Org, Project string
	// Selectors the delegate must all have (any case, any surrounding space).
	Selectors []string
	// Capabilities are the criteria keys the task needs.
	Capabilities []string
	// DeniedInstances were lost while running the task; they never get it again.
	DeniedInstances []string
	// PreferInstance, when eligible, is offered the task first: the
	// delegate that last succeeded for the task's connector.
	PreferInstance string
	// Container: the task runs in a container; only delegates with a
	// ContainerRuntime may run it.
	Container bool
	// Type is the task's type; only delegates that run it get the task.
	Type string
}

// DefaultWindow is the liveness window used when Policy.Window is not
// positive: 3 missed heartbeats of 10 s (DESIGN §3).
const DefaultWindow = 30 * time.Second

// Policy holds the liveness window: a delegate whose last contact is older
// than Window is disconnected. The window is the number of heartbeats that
// may be missed times the heartbeat interval; a contact exactly Window ago
// still counts as connected. Window <= 0 means DefaultWindow.
type Policy struct {
	Window time.Duration
	// Unresponsive, when set, says why an instance is marked unresponsive
	// ("" when it is not): it keeps its heartbeat but ignores offers
	// (internal/unresponsive). It is called on the offer path: it must be
	// cheap and must not block.
	Unresponsive func(instanceID string) string
}

// unresponsive is why d is marked unresponsive, "" when it is not.
func (p Policy) unresponsive(d *Delegate) string {
	if p.Unresponsive == nil {
		return ""
	}
	return p.Unresponsive(d.InstanceID)
}

func (p Policy) window() time.Duration {
	if p.Window <= 0 {
		return DefaultWindow
	}
	return p.Window
}

func (p Policy) connected(d *Delegate, now time.Time) bool {
	return !d.Deregistered && !d.LastSeen.IsZero() && now.Sub(d.LastSeen) <= p.window()
}

// taskView is a task prepared once for evaluating many delegates: selectors
// normalized and de-duplicated, capabilities de-duplicated, with their
// entries from the capability view (capMaps[i] holds those of caps[i]).
type taskView struct {
	t       *Task
	sel     []string
	caps    []string
	capMaps []map[string]capState
}

func prepare(t *Task, v view) taskView {
	tv := taskView{t: t}
	if n := len(t.Selectors); n > 0 {
		tv.sel = make([]string, 0, n)
	}
	if n := len(t.Capabilities); n > 0 {
		tv.caps = make([]string, 0, n)
		tv.capMaps = make([]map[string]capState, 0, n)
	}
	for _, s := range t.Selectors {
		if n := protocol.NormalizeSelector(s); n != "" && !slices.Contains(tv.sel, n) {
			tv.sel = append(tv.sel, n)
		}
	}
	for _, c := range t.Capabilities {
		if !slices.Contains(tv.caps, c) {
			tv.caps = append(tv.caps, c)
			tv.capMaps = append(tv.capMaps, v.criteria(c))
		}
	}
	return tv
}

// hasSelectors reports whether d has every (normalized) selector of sel. It
// agrees with protocol.MissingSelectors but allocates nothing: it compares
// each selector with the tags, name and hostname as they are (normalized
// in the common case) and normalizes them only when that finds nothing.
func hasSelectors(sel []string, d *Delegate) bool {
	for _, s := range sel {
		if s == d.Name || s == d.Hostname || slices.Contains(d.Tags, s) {
			continue
		}
		if s == protocol.NormalizeSelector(d.Name) || s == protocol.NormalizeSelector(d.Hostname) ||
			slices.ContainsFunc(d.Tags, func(tag string) bool { return protocol.NormalizeSelector(tag) == s }) {
			continue
		}
		return false
	}
	return true
}

// denied reports whether d is on the task's deny list.
func (tv *taskView) denied(d *Delegate) bool {
	return slices.Contains(tv.t.DeniedInstances, d.InstanceID)
}

// allowlisted reports whether d is allowlisted for every capability of the
// task at now; false when the task has none.
func (tv *taskView) allowlisted(d *Delegate, now time.Time) bool {
	if len(tv.caps) == 0 {
		return false
	}
	for _, cm := range tv.capMaps {
		s, ok := cm[d.InstanceID]
		if !ok || !s.ok || !s.live(now) {
			return false
		}
	}
	return true
}

// runsType reports whether d runs tasks of t's type (a task without one,
// in tests, is any delegate's).
func runsType(d *Delegate, t *Task) bool {
	return t.Type == "" || protocol.RunsTaskType(d.TaskTypes, t.Type)
}

// typeMessage says that d does not run tasks of type typ, and what it
// runs.
func typeMessage(d *Delegate, typ string) string {
	if d.TaskTypes == nil {
		return "does not run " + typ + " tasks (an older delegate, which runs shell, http and container tasks: upgrade it)"
	}
	return "does not run " + typ + " tasks (it runs " + strings.Join(d.TaskTypes, ", ") + ")"
}

func atCapacity(d *Delegate) bool { return d.Capacity > 0 && d.Running >= d.Capacity }

// eligible is Evaluate reduced to a yes or no, without allocating. For an
// eligible delegate it also reports whether it is allowlisted for every
// capability of the task (one lookup per capability serves both answers).
func (p Policy) eligible(d *Delegate, tv *taskView, now time.Time) (ok, allowlisted bool) {
	if !p.connected(d, now) || d.Draining || atCapacity(d) || d.OverThreshold != "" || d.Configuring != "" || d.Pending ||
		!protocol.Covers(d.Org, d.Project, tv.t.Org, tv.t.Project) || !hasSelectors(tv.sel, d) || tv.denied(d) ||
		(tv.t.Container && d.ContainerRuntime == "") || !runsType(d, tv.t) || p.unresponsive(d) != "" {
		return false, false
	}
	allowlisted = len(tv.caps) > 0
	for _, cm := range tv.capMaps {
		s, found := cm[d.InstanceID]
		if !found || !s.live(now) {
			allowlisted = false
			continue
		}
		if !s.ok {
			return false, false
		}
	}
	return true, allowlisted
}

// Evaluate applies the rules of DESIGN §5 and returns every rule that
// excludes d from t at now, in rule order, one Reason per rule (several
// denied capabilities share one capability_denied reason). Nil means d is
// eligible. It reports all failing rules, not just the first, so an
// explanation is complete. caps may be nil (no capability results).
func (p Policy) Evaluate(d Delegate, t Task, caps *Capabilities, now time.Time) []protocol.Reason {
	v := caps.view()
	defer v.done()
	tv := prepare(&t, v)
	return p.evaluate(&d, &tv, now)
}

func (p Policy) evaluate(d *Delegate, tv *taskView, now time.Time) []protocol.Reason {
	var rs []protocol.Reason
	add := func(rule, msg string) { rs = append(rs, protocol.Reason{Rule: rule, Message: msg}) }

	switch {
	case d.Deregistered:
		add(protocol.RuleDisconnected, "deregistered")
	case d.LastSeen.IsZero():
		add(protocol.RuleDisconnected, "no contact yet (window "+fmtDuration(p.window())+")")
	case !p.connected(d, now):
		add(protocol.RuleDisconnected, "last heartbeat "+fmtDuration(ceilDuration(now.Sub(d.LastSeen)))+
			" ago (window "+fmtDuration(p.window())+")")
	}
	if d.Draining {
		add(protocol.RuleDraining, "draining (stopping)")
	}
	if t := tv.t; !protocol.Covers(d.Org, d.Project, t.Org, t.Project) {
		add(protocol.RuleScope, delegateScope(d.Org, d.Project)+" cannot serve "+taskScope(t.Org, t.Project))
	}
	if !hasSelectors(tv.sel, d) {
		missing := protocol.MissingSelectors(tv.sel, d.Tags, d.Name, d.Hostname)
		add(protocol.RuleSelectors, "missing selectors: "+strings.Join(missing, ", "))
	}
	if tv.t.Container && d.ContainerRuntime == "" {
		add(protocol.RuleNoContainerRuntime, noRuntimeMessage(d))
	}
	if !runsType(d, tv.t) {
		add(protocol.RuleTaskType, typeMessage(d, tv.t.Type))
	}
	if tv.denied(d) {
		add(protocol.RuleTaskDenied, "this delegate was lost while running the task before")
	}
	var capMsgs []string
	for i, c := range tv.caps {
		s, ok := tv.capMaps[i][d.InstanceID]
		if !ok || s.ok || !s.live(now) {
			continue
		}
		m := "capability " + strconv.Quote(c) + " failed here"
		if s.err != "" {
			m += ": " + s.err
		}
		m += " (denied for " + fmtDuration(ceilDuration(s.expiresAt.Sub(now))) + " more)"
		capMsgs = append(capMsgs, m)
	}
	if len(capMsgs) > 0 {
		add(protocol.RuleCapabilityDenied, strings.Join(capMsgs, "; "))
	}
	if atCapacity(d) {
		add(protocol.RuleCapacity, fmt.Sprintf("at capacity (%d/%d tasks)", d.Running, d.Capacity))
	}
	if d.OverThreshold != "" {
		add(protocol.RuleThreshold, d.OverThreshold)
	}
	if d.Configuring != "" {
		add(protocol.RuleConfiguring, "running the script of configuration "+d.Configuring)
	}
	if d.Pending {
		add(protocol.RulePendingApproval, "pending approval (legate delegates approve "+d.Name+")")
	}
	if why := p.unresponsive(d); why != "" {
		add(protocol.RuleUnresponsive, why)
	}
	return rs
}

func delegateScope(org, project string) string {
	switch {
	case org == "":
		return "account delegate"
	case project == "":
		return "org delegate of org " + strconv.Quote(org)
	default:
		return "project delegate of org " + strconv.Quote(org) + " project " + strconv.Quote(project)
	}
}

func taskScope(org, project string) string {
	switch {
	case org == "":
		return "an account-level task"
	case project == "":
		return "an org-level task of org " + strconv.Quote(org)
	default:
		return "a task of org " + strconv.Quote(org) + " project " + strconv.Quote(project)
	}
}

// ceilDuration rounds d up to a whole second (to a whole millisecond below
// one second), so "denied for 0s more" or "30s ago (window 30s)" never show.
func ceilDuration(d time.Duration) time.Duration {
	unit := time.Second
	if d < time.Second {
		unit = time.Millisecond
	}
	if r := d.Truncate(unit); r < d {
		return r + unit
	}
	return d
}

// fmtDuration prints d as time.Duration does, without zero tails:
// "4m12s", "5m", "6h".
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// staticRule reports whether a rule excludes a delegate until something
// outside it changes (the task, the delegate's configuration, or a deny
// entry's expiry), as opposed to a dynamic rule that may clear by itself
// soon. Unknown rules count as dynamic: waiting is the safe default.
func staticRule(rule string) bool {
	switch rule {
	case protocol.RuleScope, protocol.RuleSelectors, protocol.RuleTaskDenied, protocol.RuleCapabilityDenied:
		return true
	}
	return false
}

// ExcludedForGood reports whether reasons include at least one static rule:
// scope, selectors, task_denied or capability_denied (unresponsive is
// dynamic: the mark lifts by itself). Nothing about the
// delegate will lift such an exclusion by itself (a capability deny entry
// does expire, after DenyTTL at most, but the seeds count it as "will not
// be tried again"), so when every delegate is excluded for good the task
// should fail fast with its explanation instead of waiting for its queue
// timeout. It is false for an eligible delegate (no reasons) and for one
// excluded only by dynamic rules, which may clear soon by themselves:
// disconnected, draining, capacity, threshold, and any rule this package
// does not know.
func ExcludedForGood(reasons []protocol.Reason) bool {
	for _, r := range reasons {
		if staticRule(r.Rule) {
			return true
		}
	}
	return false
}

// noRuntimeMessage says why a delegate without a container runtime does
// not get a container task: with the reason it registered, when it gave
// one (a delegate on Fargate says it can have none).
func noRuntimeMessage(d *Delegate) string {
	m := "no container runtime (a container task; install podman or docker on the delegate, mount a Docker API socket, or set DELEGATE_CONTAINER_RUNTIME)"
	if d.ContainerReason != "" {
		m = "no container runtime (a container task): " + d.ContainerReason
	}
	return m
}
