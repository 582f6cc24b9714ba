package protocol

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// A delegate's reason for having no sandbox is stored and shown cut to
// MaxIsolationReason; nothing reported stays nothing.
func TestBoundIsolation(t *testing.T) {
	if BoundIsolation(nil) != nil {
		t.Error("nothing reported: want nil")
	}
	in := &TaskIsolation{Sandbox: SandboxNone, Reason: strings.Repeat("x", 2*MaxIsolationReason)}
	got := BoundIsolation(in)
	if len(got.Reason) != MaxIsolationReason || got.Sandbox != SandboxNone {
		t.Errorf("bounded: %d bytes of reason, sandbox %q; want %d, none", len(got.Reason), got.Sandbox, MaxIsolationReason)
	}
	if len(in.Reason) != 2*MaxIsolationReason {
		t.Error("the report given was changed")
	}
}

func TestRegisteredTaskTypesAndRuntime(t *testing.T) {
	if RegisteredTaskTypes(nil) != nil {
		t.Error("nothing registered: want nil (an older delegate)")
	}
	many := make([]string, MaxTaskTypes+5)
	for i := range many {
		many[i] = "t"
	}
	if got := RegisteredTaskTypes(append([]string{"", "a b", strings.Repeat("x", MaxLabelLen+1), "shell"}, many...)); got[0] != "shell" || len(got) != MaxTaskTypes {
		t.Errorf("bounded types: %v", got)
	}
	if got := RegisteredTaskTypes([]string{}); got == nil || len(got) != 0 {
		t.Errorf("an empty list stays an empty list: %#v", got)
	}
	for in, want := range map[string]string{" podman ": "podman", "a\x01b": "unknown", strings.Repeat("d", 33): "unknown", "": ""} {
		if got := RegisteredContainerRuntime(in); got != want {
			t.Errorf("RegisteredContainerRuntime(%q) = %q, want %q", in, got, want)
		}
	}
}

// A delegate's reason for having no container runtime is stored and
// shown on one line, cut to MaxContainerReason; one that has a runtime
// keeps none.
func TestRegisteredContainerReason(t *testing.T) {
	if got := RegisteredContainerReason("podman", "anything"); got != "" {
		t.Errorf("with a runtime: %q", got)
	}
	if got := RegisteredContainerReason("", "no runtime:\n\x1b[31mred\x1b[0m\ttab"); got != "no runtime: [31mred [0m tab" {
		t.Errorf("control characters: %q", got)
	}
	if got := RegisteredContainerReason("", strings.Repeat("é", MaxContainerReason)); len(got) > MaxContainerReason || !utf8.ValidString(got) {
		t.Errorf("bounded: %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
}
