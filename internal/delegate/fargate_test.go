package delegate_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/executor/containers"
	"github.com/legate-dev/legate/internal/protocol"
)

// TestFargateDelegateRegistersNoContainerRuntime: a delegate on Fargate
// (DELEGATE_PLATFORM=fargate, or ECS's AWS_EXECUTION_ENV=AWS_ECS_FARGATE)
// registers no container runtime, even with a CLI on its PATH (Fargate
// can run none), and says why: the delegate's listing shows the reason,
// and task explain gives it as the rule that keeps a container task from
// it.
func TestFargateDelegateRegistersNoContainerRuntime(t *testing.T) {
	for _, env := range []string{"DELEGATE_PLATFORM=fargate", "AWS_EXECUTION_ENV=AWS_ECS_FARGATE"} {
		t.Run(env, func(t *testing.T) {
			tm := startManager(t, testConfig())
			ag := startAgent(t, tm, agentOpts{environ: []string{"PATH=" + os.Getenv("PATH"), env}})
			d := tm.waitConnected(t, ag.hostname, protocol.ConnWebSocket)
			if d.ContainerRuntime != "" || d.ContainerReason != containers.NoRuntimeOnFargate {
				t.Fatalf("registered container runtime %q, reason %q; want none, %q", d.ContainerRuntime, d.ContainerReason, containers.NoRuntimeOnFargate)
			}
			task := tm.submit(t, protocol.TaskSpec{Type: protocol.TaskContainer,
				Container: &protocol.ContainerSpec{Image: "localhost/none:1", Command: []string{"true"}}})
			e, err := tm.api.ExplainTask(context.Background(), task.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(e.Delegates) != 1 {
				t.Fatalf("explain: %+v", e)
			}
			var found bool
			for _, r := range e.Delegates[0].Reasons {
				found = found || r.Rule == protocol.RuleNoContainerRuntime && strings.Contains(r.Message, "Fargate has no container runtime: run container tasks from an ECS-on-EC2 or Kubernetes delegate")
			}
			if !found {
				t.Errorf("explain reasons %+v: want %s saying Fargate has no container runtime", e.Delegates[0].Reasons, protocol.RuleNoContainerRuntime)
			}
		})
	}
}
