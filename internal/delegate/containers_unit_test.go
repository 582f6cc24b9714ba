package delegate

import (
	"context"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/executor"
	"github.com/legate-dev/legate/internal/protocol"
)

// TestNoContainerRuntimeReachesTheExecutorAsNil: a delegate without a
// container runtime hands the executor none (a nil interface, not one
// holding a nil *containers.Runtime), so that a container task fails as
// the delegate's fault saying there is none, not with an internal error.
func TestNoContainerRuntimeReachesTheExecutorAsNil(t *testing.T) {
	a := &Agent{}
	if c := a.taskContainers(); c != nil {
		t.Fatalf("taskContainers() = %#v, want nil", c)
	}
	spec := protocol.TaskSpec{Type: protocol.TaskContainer, Container: &protocol.ContainerSpec{Image: "img", Command: []string{"true"}}}
	o := executor.Run(context.Background(), spec, executor.Options{Containers: a.taskContainers(), TaskID: "t_1"}, nil)
	if o.Status != protocol.StatusFailed || !o.DelegateFault || !strings.Contains(o.Error, "no container runtime on this delegate") {
		t.Fatalf("outcome %+v, want a delegate fault: no container runtime", o)
	}
}
