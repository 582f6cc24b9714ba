package protocol

// TaskIsolation is what a delegate reports, at registration, about how it
// keeps the tasks it runs apart (RegisterRequest.TaskIsolation), shown in
// Delegate.TaskIsolation. A delegate of an older build reports none.
type TaskIsolation struct {
	// Sandbox is SandboxNamespaces when each shell task runs in user,
	// PID, mount and IPC namespaces of its own, SandboxNone when not.
	Sandbox string `json:"sandbox"`
	// UIDs is the range of user IDs tasks run as, one per running task
	// ("FIRST-LAST"; empty: all as the delegate's user).
	UIDs string `json:"uids,omitempty"`
	// Scopes is ScopesMixed when tasks of different scopes may run at the
	// same time, ScopesOneAtATime when the delegate runs tasks of one
	// scope at a time (no sandbox, and the operator did not opt in).
	Scopes string `json:"scopes"`
	// Reason says why there is no sandbox (when there is none).
	Reason string `json:"reason,omitempty"`
}

// Values of TaskIsolation.
const (
	SandboxNamespaces = "namespaces"
	SandboxNone       = "none"
	ScopesMixed       = "mixed"
	ScopesOneAtATime  = "one_at_a_time"
)

// Summary is TaskIsolation on one line, for listings and logs.
func (ti *TaskIsolation) Summary() string {
	if ti == nil {
		return "not reported (older delegate)"
	}
	var s string
	if ti.Sandbox == SandboxNamespaces {
		s = "sandbox per task (namespaces)"
		if ti.UIDs != "" {
			s += ", a user per task from " + ti.UIDs
		}
	} else {
		s = "no sandbox"
		if ti.Reason != "" {
			s += " (" + ti.Reason + ")"
		}
	}
	switch ti.Scopes {
	case ScopesOneAtATime:
		s += "; tasks of one scope at a time"
	case ScopesMixed:
		if ti.Sandbox != SandboxNamespaces {
			s += "; tasks of different scopes at the same time (LEGATE_ALLOW_MIXED_SCOPES)"
		}
	}
	return s
}
