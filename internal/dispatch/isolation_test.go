package dispatch

import (
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

// A delegate's reason for having no sandbox is stored and shown cut to
// maxIsolationReason; nothing reported stays nothing.
func TestBoundIsolation(t *testing.T) {
	if boundIsolation(nil) != nil {
		t.Error("nothing reported: want nil")
	}
	in := &protocol.TaskIsolation{Sandbox: protocol.SandboxNone, Reason: strings.Repeat("x", 2*maxIsolationReason)}
	got := boundIsolation(in)
	if len(got.Reason) != maxIsolationReason || got.Sandbox != protocol.SandboxNone {
		t.Errorf("bounded: %d bytes of reason, sandbox %q; want %d, none", len(got.Reason), got.Sandbox, maxIsolationReason)
	}
	if len(in.Reason) != 2*maxIsolationReason {
		t.Error("the report given was changed")
	}
}
