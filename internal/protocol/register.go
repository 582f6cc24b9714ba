package protocol

import "strings"

// What a manager keeps of a RegisterRequest's free-form reports: bounded
// and printable, since they are stored and shown.

// MaxIsolationReason bounds the reason a delegate gives for having no
// sandbox (TaskIsolation.Reason), as stored and shown.
const MaxIsolationReason = 500

// BoundIsolation is what a delegate reported about how it keeps its tasks
// apart, its reason cut to MaxIsolationReason (nil: nothing reported).
// The report given is not changed.
func BoundIsolation(ti *TaskIsolation) *TaskIsolation {
	if ti == nil {
		return nil
	}
	c := *ti
	if len(c.Reason) > MaxIsolationReason {
		c.Reason = c.Reason[:MaxIsolationReason]
	}
	return &c
}

// RegisteredTaskTypes bounds the task types a delegate registered: at
// most MaxTaskTypes, each a short printable name (what is not cannot be a
// task's type). nil stays nil: a delegate that did not say (see
// RunsTaskType).
func RegisteredTaskTypes(types []string) []string {
	if types == nil {
		return nil
	}
	out := []string{}
	for _, t := range types {
		if len(out) == MaxTaskTypes {
			break
		}
		if t != "" && len(t) <= MaxLabelLen && printableASCII(t) {
			out = append(out, t)
		}
	}
	return out
}

// RegisteredContainerRuntime keeps a registered container runtime's name
// short and printable ("unknown" otherwise): only its presence matters.
func RegisteredContainerRuntime(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 32 || !printableASCII(s) {
		return "unknown"
	}
	return s
}

// MaxContainerReason bounds the reason a delegate gives for having no
// container runtime (RegisterRequest.ContainerReason), as stored and shown.
const MaxContainerReason = 500

// RegisteredContainerReason is a registered reason for having no container
// runtime, on one line and cut to MaxContainerReason; "" when the delegate
// has a runtime (runtime not empty).
func RegisteredContainerReason(runtime, reason string) string {
	if strings.TrimSpace(runtime) != "" {
		return ""
	}
	reason = strings.Join(strings.FieldsFunc(reason, func(r rune) bool { return r < 0x20 || r == 0x7f || r == ' ' }), " ")
	if len(reason) > MaxContainerReason {
		reason = strings.ToValidUTF8(reason[:MaxContainerReason], "")
	}
	return reason
}

func printableASCII(s string) bool {
	return !strings.ContainsFunc(s, func(r rune) bool { return r < 0x21 || r > 0x7e })
}
