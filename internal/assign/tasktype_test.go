package assign

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestTaskTypeRule: a task goes only to delegates that registered its
// type; one that registered none (older than the field) runs shell, http
// and container tasks but is told it does not run kubernetes ones.
func TestTaskTypeRule(t *testing.T) {
	p := Policy{}
	caps := NewCapabilities()
	older, newer := healthy(), healthy()
	newer.TaskTypes = []string{protocol.TaskHTTP, protocol.TaskKubernetes, protocol.TaskShell}
	kt := Task{ID: "k", Type: protocol.TaskKubernetes}
	if got := p.Evaluate(newer, kt, caps, t0); len(got) != 0 {
		t.Errorf("a kubernetes task on a delegate that runs the type: %v", got)
	}
	want := []protocol.Reason{reason(protocol.RuleTaskType,
		"does not run kubernetes tasks (an older delegate, which runs shell, http and container tasks: upgrade it)")}
	if diff := cmp.Diff(want, p.Evaluate(older, kt, caps, t0)); diff != "" {
		t.Errorf("a kubernetes task on an older delegate (-want +got):\n%s", diff)
	}
	for _, typ := range []string{protocol.TaskShell, protocol.TaskHTTP} {
		if got := p.Evaluate(older, Task{ID: "s", Type: typ}, caps, t0); len(got) != 0 {
			t.Errorf("a %s task on an older delegate: %v", typ, got)
		}
	}
	want = []protocol.Reason{reason(protocol.RuleTaskType, "does not run container tasks (it runs http, kubernetes, shell)")}
	newer.ContainerRuntime = "podman"
	if diff := cmp.Diff(want, p.Evaluate(newer, Task{ID: "c", Type: protocol.TaskContainer, Container: true}, caps, t0)); diff != "" {
		t.Errorf("a type the delegate did not register (-want +got):\n%s", diff)
	}
	tv := prepare(&kt, caps.view())
	if ok, _ := p.eligible(&older, &tv, t0); ok {
		t.Error("eligible says yes for an older delegate")
	}
	if ok, _ := p.eligible(&newer, &tv, t0); !ok {
		t.Error("eligible says no for a delegate that runs the type")
	}
}
