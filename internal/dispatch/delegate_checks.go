package dispatch

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// What the delegate API checks beyond authentication: that every task and
// configuration a delegate names is within the scope of its token (the
// rule of the offer, protocol.Covers), that what it registers is printable
// text, and that the task lists it sends are bounded.

// Calls that name a task or a configuration, the "call" label of
// legate_manager_scope_refusals_total.
const (
	callAcquire             = "acquire"
	callStarted             = "started"
	callLogs                = "logs"
	callResult              = "result"
	callHeartbeat           = "heartbeat"
	callRegister            = "register"
	callCapabilities        = "capabilities"
	callConfigurationResult = "configuration_result"
)

var scopeCalls = []string{callAcquire, callStarted, callLogs, callResult, callHeartbeat, callRegister,
	callCapabilities, callConfigurationResult}

// covers reports whether the delegate's scope covers a task or
// configuration of scope org/project: the rule of the offer.
func (l *live) covers(org, project string) bool {
	return protocol.Covers(l.org, l.project, org, project)
}

// holder is the delegate as the store checks the sender of a report: its
// instance and the scope of its registration (store.Holder).
func (l *live) holder() store.Holder {
	return store.Holder{Instance: l.id, Org: l.org, Project: l.project}
}

// refuseScope records that a delegate named a task or configuration
// outside its scope; the caller answers as for one of another account.
func (m *Service) refuseScope(d *live, call, kind, id, org, project string) {
	m.metrics.scopeRefused(call)
	m.log.Warn("refused a delegate call on a "+kind+" outside the scope of its token", "call", call, kind, id,
		"scope", protocol.ScopeLabel(org, project), "instance", d.id, "name", d.name, "hostname", d.hostname,
		"delegate_scope", protocol.ScopeLabel(d.org, d.project))
}

// maxTaskIDLen bounds a task ID a delegate sends. The manager's IDs are 18
// bytes; anything much longer is not one of them.
const maxTaskIDLen = 64

// validTaskID reports whether id may be a task ID (the answer for one
// that may not is "not found", without echoing it).
func validTaskID(id string) bool { return id != "" && len(id) <= maxTaskIDLen }

// maxRunningListed bounds the running list of a heartbeat or registration
// of a delegate with unlimited capacity; runningSlack is what a delegate
// with a capacity may list beyond it (results kept on disk from an earlier
// run are listed at a fresh start beside the tasks that run).
const (
	maxRunningListed = 10000
	runningSlack     = 64
)

// runningLimit is how many entries of a delegate's running list are
// looked at.
func runningLimit(capacity int) int {
	if capacity <= 0 || capacity > maxRunningListed-runningSlack {
		return maxRunningListed
	}
	return capacity + runningSlack
}

// boundRunning cuts a running list to the delegate's limit and drops
// repeated IDs. An honest delegate never lists more tasks than it may run,
// so the cut only costs a dishonest one (its excess entries are neither
// extended nor aborted); it is logged once per delegate instance.
func (m *Service) boundRunning(d *live, call string, capacity int, running []protocol.RunningTask) []protocol.RunningTask {
	limit := runningLimit(capacity)
	if len(running) > limit {
		d.mu.Lock()
		first := !d.warnedRunning
		d.warnedRunning = true
		d.mu.Unlock()
		if first {
			m.log.Warn("a delegate listed more running tasks than it may run; only the first ones are looked at",
				"call", call, "listed", len(running), "looked_at", limit, "capacity", capacity,
				"instance", d.id, "name", d.name, "hostname", d.hostname)
		}
		running = running[:limit]
	}
	return running
}

// checkRunning refuses a running list with an entry that cannot be a
// task ID.
func checkRunning(running []protocol.RunningTask) error {
	for i, rt := range running {
		if !validTaskID(rt.ID) {
			return fmt.Errorf("running[%d]: a task ID is 1-%d bytes, not %d", i, maxTaskIDLen, len(rt.ID))
		}
	}
	return nil
}

// checkRegistration refuses registration fields that are not printable
// text of a sane length. Name and hostname lengths are checked before.
func checkRegistration(req *protocol.RegisterRequest) error {
	fields := []struct {
		name, value string
		max         int
	}{
		{"name", req.Name, 63},
		{"hostname", req.Hostname, 253},
		{"ip", req.IP, 64},
		{"version", req.Version, 64},
		{"type", req.Type, 64},
		{"description", req.Description, 1024},
	}
	for _, f := range fields {
		if err := protocol.CheckText(f.name, f.value, f.max); err != nil {
			return err
		}
	}
	for i, tag := range req.Tags {
		if err := protocol.CheckText(fmt.Sprintf("tags[%d]", i), tag, 253); err != nil {
			return err
		}
	}
	return nil
}

// identityConflict answers a registration whose identity is bound to
// another valid token.
func identityConflict(w http.ResponseWriter, req protocol.RegisterRequest, ic *store.IdentityConflictError) {
	who := fmt.Sprintf("name %q, hostname %q", req.Name, req.Hostname)
	if !req.IdentityByHostname {
		who += fmt.Sprintf(", IP %q", strings.TrimSpace(req.IP))
	}
	api.WriteError(w, http.StatusConflict, protocol.CodeIdentityConflict,
		"a delegate with this identity (%s) is registered with the delegate token %q, which is still valid; "+
			"an identity stays bound to the token that registered it. Start this delegate with that token, "+
			"or revoke it first (legate token revoke %s), or give this delegate another DELEGATE_NAME",
		who, ic.TokenName, ic.TokenName)
}

// checkPerf keeps the performance figures of a heartbeat that make sense
// (percentages from 0 to 100, counts and sizes not negative) and drops
// the others: a figure is for display only.
func checkPerf(p protocol.DelegatePerf) *protocol.DelegatePerf {
	pct := func(v *float64) *float64 {
		if v == nil || !(*v >= 0 && *v <= 100) {
			return nil
		}
		x := *v
		return &x
	}
	out := &protocol.DelegatePerf{CPUPercent: pct(p.CPUPercent), ProcessCPUPercent: pct(p.ProcessCPUPercent),
		MemoryPercent: pct(p.MemoryPercent), TasksRun: max(0, p.TasksRun), TasksFailed: max(0, min(p.TasksFailed, p.TasksRun))}
	if p.RSSBytes != nil && *p.RSSBytes >= 0 {
		rss := *p.RSSBytes
		out.RSSBytes = &rss
	}
	if p.AcquireMS >= 0 && p.AcquireMS < 1e9 {
		out.AcquireMS = p.AcquireMS
	}
	return out
}
