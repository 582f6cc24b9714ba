package assign

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

const gitURL = "https://git.example.com"

// healthy is an account-level delegate that is eligible for a plain task.
func healthy() Delegate {
	return Delegate{
		InstanceID: "i-1",
		Name:       "web-delegate",
		Hostname:   "host-1",
		Tags:       []string{"docker", "linux"},
		LastSeen:   t0.Add(-5 * time.Second),
		Capacity:   2,
	}
}

func reason(rule, msg string) protocol.Reason { return protocol.Reason{Rule: rule, Message: msg} }

func TestEvaluate(t *testing.T) {
	p := Policy{Window: 30 * time.Second}
	caps := NewCapabilities()
	// Denied for 4m12s more at t0: failed 48s ago.
	caps.Record("i-1", gitURL, false, "dial tcp: connection refused", t0.Add(-48*time.Second))
	caps.Record("i-1", "tcp://db:5432", false, "", t0.Add(-4*time.Minute))
	caps.Record("i-1", "binary:kubectl", true, "", t0.Add(-time.Hour))
	caps.Record("i-1", "binary:helm", false, "not found", t0.Add(-DenyTTL)) // expired exactly now

	tests := []struct {
		name string
		d    func(*Delegate)
		t    Task
		p    *Policy
		want []protocol.Reason
	}{
		{name: "eligible", want: nil},
		{name: "disconnected", d: func(d *Delegate) { d.LastSeen = t0.Add(-47 * time.Second) },
			want: []protocol.Reason{reason(protocol.RuleDisconnected, "last heartbeat 47s ago (window 30s)")}},
		{name: "contact exactly one window ago is connected", d: func(d *Delegate) { d.LastSeen = t0.Add(-30 * time.Second) }},
		{name: "just past the window rounds up", d: func(d *Delegate) { d.LastSeen = t0.Add(-30*time.Second - 200*time.Millisecond) },
			want: []protocol.Reason{reason(protocol.RuleDisconnected, "last heartbeat 31s ago (window 30s)")}},
		{name: "long gone", d: func(d *Delegate) { d.LastSeen = t0.Add(-2 * time.Hour) },
			want: []protocol.Reason{reason(protocol.RuleDisconnected, "last heartbeat 2h ago (window 30s)")}},
		{name: "last seen in the future (clock skew) is connected", d: func(d *Delegate) { d.LastSeen = t0.Add(time.Second) }},
		{name: "never seen", d: func(d *Delegate) { d.LastSeen = time.Time{} },
			want: []protocol.Reason{reason(protocol.RuleDisconnected, "no contact yet (window 30s)")}},
		{name: "deregistered though recently seen", d: func(d *Delegate) { d.Deregistered = true },
			want: []protocol.Reason{reason(protocol.RuleDisconnected, "deregistered")}},
		{name: "zero window means the default", p: &Policy{}, d: func(d *Delegate) { d.LastSeen = t0.Add(-90 * time.Second) },
			want: []protocol.Reason{reason(protocol.RuleDisconnected, "last heartbeat 1m30s ago (window 30s)")}},
		{name: "minute window", p: &Policy{Window: 3 * time.Minute}, d: func(d *Delegate) { d.LastSeen = t0.Add(-4 * time.Minute) },
			want: []protocol.Reason{reason(protocol.RuleDisconnected, "last heartbeat 4m ago (window 3m)")}},
		{name: "draining", d: func(d *Delegate) { d.Draining = true },
			want: []protocol.Reason{reason(protocol.RuleDraining, "draining (stopping)")}},
		{name: "scope", d: func(d *Delegate) { d.Org, d.Project = "eng", "web" },
			want: []protocol.Reason{reason(protocol.RuleScope, `project delegate of org "eng" project "web" cannot serve an account-level task`)}},
		{name: "selectors", t: Task{Selectors: []string{"GPU", " linux ", "arm"}},
			want: []protocol.Reason{reason(protocol.RuleSelectors, "missing selectors: gpu, arm")}},
		{name: "task denied", t: Task{DeniedInstances: []string{"i-9", "i-1"}},
			want: []protocol.Reason{reason(protocol.RuleTaskDenied, "this delegate was lost while running the task before")}},
		{name: "capability denied", t: Task{Capabilities: []string{gitURL}},
			want: []protocol.Reason{reason(protocol.RuleCapabilityDenied,
				`capability "https://git.example.com" failed here: dial tcp: connection refused (denied for 4m12s more)`)}},
		{name: "capability denied without error text", t: Task{Capabilities: []string{"tcp://db:5432"}},
			want: []protocol.Reason{reason(protocol.RuleCapabilityDenied, `capability "tcp://db:5432" failed here (denied for 1m more)`)}},
		{name: "two capabilities denied, one reason, duplicates once", t: Task{Capabilities: []string{gitURL, "binary:kubectl", "tcp://db:5432", gitURL}},
			want: []protocol.Reason{reason(protocol.RuleCapabilityDenied,
				`capability "https://git.example.com" failed here: dial tcp: connection refused (denied for 4m12s more); `+
					`capability "tcp://db:5432" failed here (denied for 1m more)`)}},
		{name: "allowlisted, expired and unknown capabilities do not exclude", t: Task{Capabilities: []string{"binary:kubectl", "binary:helm", "binary:jq"}}},
		{name: "capacity", d: func(d *Delegate) { d.Running = 2 },
			want: []protocol.Reason{reason(protocol.RuleCapacity, "at capacity (2/2 tasks)")}},
		{name: "over capacity", d: func(d *Delegate) { d.Running = 3 },
			want: []protocol.Reason{reason(protocol.RuleCapacity, "at capacity (3/2 tasks)")}},
		{name: "unlimited capacity", d: func(d *Delegate) { d.Capacity, d.Running = 0, 500 }},
		{name: "threshold", d: func(d *Delegate) { d.OverThreshold = "cpu 93% > DELEGATE_CPU_THRESHOLD 80%" },
			want: []protocol.Reason{reason(protocol.RuleThreshold, "cpu 93% > DELEGATE_CPU_THRESHOLD 80%")}},
		{
			name: "every rule at once, in rule order",
			d: func(d *Delegate) {
				d.LastSeen = t0.Add(-47 * time.Second)
				d.Draining = true
				d.Org, d.Project = "eng", "web"
				d.Running = 2
				d.OverThreshold = "memory 95% > 90%"
			},
			t: Task{Org: "ops", Selectors: []string{"gpu"}, DeniedInstances: []string{"i-1"}, Capabilities: []string{gitURL}},
			want: []protocol.Reason{
				reason(protocol.RuleDisconnected, "last heartbeat 47s ago (window 30s)"),
				reason(protocol.RuleDraining, "draining (stopping)"),
				reason(protocol.RuleScope, `project delegate of org "eng" project "web" cannot serve an org-level task of org "ops"`),
				reason(protocol.RuleSelectors, "missing selectors: gpu"),
				reason(protocol.RuleTaskDenied, "this delegate was lost while running the task before"),
				reason(protocol.RuleCapabilityDenied, `capability "https://git.example.com" failed here: dial tcp: connection refused (denied for 4m12s more)`),
				reason(protocol.RuleCapacity, "at capacity (2/2 tasks)"),
				reason(protocol.RuleThreshold, "memory 95% > 90%"),
			},
		},
		{
			name: "some rules at once",
			d:    func(d *Delegate) { d.Deregistered = true; d.Running = 5 },
			t:    Task{Selectors: []string{"windows"}},
			want: []protocol.Reason{
				reason(protocol.RuleDisconnected, "deregistered"),
				reason(protocol.RuleSelectors, "missing selectors: windows"),
				reason(protocol.RuleCapacity, "at capacity (5/2 tasks)"),
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := healthy()
			if tt.d != nil {
				tt.d(&d)
			}
			pol := p
			if tt.p != nil {
				pol = *tt.p
			}
			got := pol.Evaluate(d, tt.t, caps, t0)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Evaluate (-want +got):\n%s", diff)
			}
			// The allocation-free check must agree.
			v := caps.view()
			tv := prepare(&tt.t, v)
			fast, _ := pol.eligible(&d, &tv, t0)
			v.done()
			if fast != (len(got) == 0) {
				t.Errorf("eligible = %v, Evaluate = %v", fast, got)
			}
			if got := ExcludedForGood(got); got != wantForGood(tt.want) {
				t.Errorf("ExcludedForGood = %v", got)
			}
		})
	}
}

func wantForGood(rs []protocol.Reason) bool {
	for _, r := range rs {
		switch r.Rule {
		case protocol.RuleScope, protocol.RuleSelectors, protocol.RuleTaskDenied, protocol.RuleCapabilityDenied:
			return true
		}
	}
	return false
}

func TestEvaluateNilCapabilities(t *testing.T) {
	if got := (Policy{}).Evaluate(healthy(), Task{Capabilities: []string{gitURL}}, nil, t0); got != nil {
		t.Errorf("Evaluate with nil caps = %v, want eligible", got)
	}
}

func TestExcludedForGood(t *testing.T) {
	tests := []struct {
		rules []string
		want  bool
	}{
		{nil, false},
		{[]string{protocol.RuleDisconnected}, false},
		{[]string{protocol.RuleDraining}, false},
		{[]string{protocol.RuleCapacity, protocol.RuleThreshold}, false},
		{[]string{"some_future_rule"}, false},
		{[]string{protocol.RuleScope}, true},
		{[]string{protocol.RuleSelectors}, true},
		{[]string{protocol.RuleTaskDenied}, true},
		{[]string{protocol.RuleCapabilityDenied}, true},
		{[]string{protocol.RuleDisconnected, protocol.RuleSelectors, protocol.RuleCapacity}, true},
	}
	for _, tt := range tests {
		var rs []protocol.Reason
		for _, r := range tt.rules {
			rs = append(rs, reason(r, ""))
		}
		if got := ExcludedForGood(rs); got != tt.want {
			t.Errorf("ExcludedForGood(%v) = %v, want %v", tt.rules, got, tt.want)
		}
	}
}

type scope struct{ org, project string }

func (s scope) String() string {
	switch {
	case s.org == "":
		return "account"
	case s.project == "":
		return "org " + s.org
	}
	return "project " + s.org + "/" + s.project
}

// TestScopeRule: Evaluate excludes a delegate by the scope rule
// (protocol.Covers) exactly when its scope does not cover the task's.
func TestScopeRule(t *testing.T) {
	account, orgEng, orgOps := scope{}, scope{"eng", ""}, scope{"ops", ""}
	engWeb, engAPI, opsWeb := scope{"eng", "web"}, scope{"eng", "api"}, scope{"ops", "web"}
	tasks := []scope{account, orgEng, orgOps, engWeb, engAPI, opsWeb}
	tests := []struct {
		d      scope
		covers []scope // every other task scope is not covered
	}{
		{account, tasks},
		{orgEng, []scope{orgEng, engWeb, engAPI}},
		{orgOps, []scope{orgOps, opsWeb}},
		{engWeb, []scope{engWeb}},
		{engAPI, []scope{engAPI}},
		{opsWeb, []scope{opsWeb}},
		// A project without an org counts as account level.
		{scope{"", "web"}, tasks},
		// Names are identifiers: exact match, case and space matter.
		{scope{"Eng", ""}, nil},
		{scope{"eng ", "web"}, nil},
	}
	p := Policy{Window: 30 * time.Second}
	for _, tt := range tests {
		for _, ts := range tasks {
			want := false
			for _, c := range tt.covers {
				want = want || c == ts
			}
			d := healthy()
			d.Org, d.Project = tt.d.org, tt.d.project
			rs := p.Evaluate(d, Task{Org: ts.org, Project: ts.project}, nil, t0)
			if want {
				if len(rs) != 0 {
					t.Errorf("%v delegate, %v task: reasons %v, want eligible", tt.d, ts, rs)
				}
				continue
			}
			if len(rs) != 1 || rs[0].Rule != protocol.RuleScope {
				t.Errorf("%v delegate, %v task: reasons %v, want one scope reason", tt.d, ts, rs)
			}
		}
	}

	messages := []struct {
		d, t scope
		want string
	}{
		{engWeb, account, `project delegate of org "eng" project "web" cannot serve an account-level task`},
		{engWeb, orgEng, `project delegate of org "eng" project "web" cannot serve an org-level task of org "eng"`},
		{engWeb, engAPI, `project delegate of org "eng" project "web" cannot serve a task of org "eng" project "api"`},
		{engWeb, opsWeb, `project delegate of org "eng" project "web" cannot serve a task of org "ops" project "web"`},
		{orgEng, account, `org delegate of org "eng" cannot serve an account-level task`},
		{orgEng, orgOps, `org delegate of org "eng" cannot serve an org-level task of org "ops"`},
		{orgEng, opsWeb, `org delegate of org "eng" cannot serve a task of org "ops" project "web"`},
	}
	for _, m := range messages {
		d := healthy()
		d.Org, d.Project = m.d.org, m.d.project
		got := p.Evaluate(d, Task{Org: m.t.org, Project: m.t.project}, nil, t0)
		if diff := cmp.Diff([]protocol.Reason{reason(protocol.RuleScope, m.want)}, got); diff != "" {
			t.Errorf("%v delegate, %v task (-want +got):\n%s", m.d, m.t, diff)
		}
	}
}

func TestSelectors(t *testing.T) {
	tests := []struct {
		name    string
		d       func(*Delegate)
		sel     []string
		missing []string
	}{
		{name: "none", sel: nil},
		{name: "empty and blank selectors are ignored", sel: []string{"", "   "}},
		{name: "tag", sel: []string{"docker"}},
		{name: "every tag", sel: []string{"docker", "linux"}},
		{name: "tag in another case with spaces", sel: []string{"  DoCkEr "}},
		{name: "implicit name", sel: []string{"web-delegate"}},
		{name: "implicit name in another case", sel: []string{"WEB-DELEGATE"}},
		{name: "implicit hostname", sel: []string{" Host-1 "}},
		{name: "name, hostname and tag", sel: []string{"web-delegate", "host-1", "linux"}},
		{name: "delegate name and tags not normalized", d: func(d *Delegate) {
			d.Name, d.Hostname, d.Tags = " Web-Delegate", "HOST-1", []string{" GPU "}
		}, sel: []string{"web-delegate", "host-1", "gpu"}},
		{name: "one missing", sel: []string{"linux", "gpu"}, missing: []string{"gpu"}},
		{name: "all missing, task order, duplicates once", sel: []string{"GPU", "arm", "gpu"}, missing: []string{"gpu", "arm"}},
		{name: "no tags", d: func(d *Delegate) { d.Tags = nil }, sel: []string{"linux"}, missing: []string{"linux"}},
		{name: "a tag is not a prefix match", sel: []string{"lin"}, missing: []string{"lin"}},
	}
	p := Policy{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := healthy()
			if tt.d != nil {
				tt.d(&d)
			}
			var want []protocol.Reason
			if len(tt.missing) > 0 {
				want = []protocol.Reason{reason(protocol.RuleSelectors, "missing selectors: "+strings.Join(tt.missing, ", "))}
			}
			got := p.Evaluate(d, Task{Selectors: tt.sel}, nil, t0)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Evaluate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFormatting(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{4*time.Minute + 11*time.Second + time.Millisecond, "4m12s"},
		{5 * time.Minute, "5m"},
		{6 * time.Hour, "6h"},
		{time.Hour + time.Second, "1h0m1s"},
		{1500 * time.Microsecond, "2ms"},
		{30 * time.Second, "30s"},
	}
	for _, tt := range tests {
		if got := fmtDuration(ceilDuration(tt.d)); got != tt.want {
			t.Errorf("fmtDuration(ceilDuration(%v)) = %q, want %q", tt.d, got, tt.want)
		}
	}
}
