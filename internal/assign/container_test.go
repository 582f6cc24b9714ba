package assign

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestContainerRuntimeRule: a container task goes only to delegates with a
// container runtime; the others are told "no container runtime". Other
// tasks do not care.
func TestContainerRuntimeRule(t *testing.T) {
	p := Policy{}
	caps := NewCapabilities()
	without, with := healthy(), healthy()
	with.ContainerRuntime = "podman"
	ct := Task{ID: "t", Container: true}
	if got := p.Evaluate(with, ct, caps, t0); len(got) != 0 {
		t.Errorf("with a runtime: %v", got)
	}
	want := []protocol.Reason{reason(protocol.RuleNoContainerRuntime,
		"no container runtime (a container task; install podman or docker on the delegate, mount a Docker API socket, or set DELEGATE_CONTAINER_RUNTIME)")}
	if diff := cmp.Diff(want, p.Evaluate(without, ct, caps, t0)); diff != "" {
		t.Errorf("without a runtime (-want +got):\n%s", diff)
	}
	// The reason the delegate registered, when it gave one.
	fargate := without
	fargate.ContainerReason = "Fargate has no container runtime: run container tasks from an ECS-on-EC2 or Kubernetes delegate, and select it with a tag"
	want = []protocol.Reason{reason(protocol.RuleNoContainerRuntime, "no container runtime (a container task): "+fargate.ContainerReason)}
	if diff := cmp.Diff(want, p.Evaluate(fargate, ct, caps, t0)); diff != "" {
		t.Errorf("on Fargate (-want +got):\n%s", diff)
	}
	if got := p.Evaluate(without, Task{ID: "s"}, caps, t0); len(got) != 0 {
		t.Errorf("a shell task on a delegate without a runtime: %v", got)
	}
	tv := prepare(&ct, caps.view())
	if ok, _ := p.eligible(&without, &tv, t0); ok {
		t.Error("eligible says yes without a runtime")
	}
	if ok, _ := p.eligible(&with, &tv, t0); !ok {
		t.Error("eligible says no with a runtime")
	}
}
