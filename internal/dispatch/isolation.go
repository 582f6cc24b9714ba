package dispatch

import "github.com/legate-dev/legate/internal/protocol"

// maxIsolationReason bounds the reason a delegate gives for having no
// sandbox, as stored and shown.
const maxIsolationReason = 500

// boundIsolation is what a delegate reported about how it keeps its tasks
// apart, its reason cut to maxIsolationReason (nil: nothing reported).
func boundIsolation(ti *protocol.TaskIsolation) *protocol.TaskIsolation {
	if ti == nil {
		return nil
	}
	c := *ti
	if len(c.Reason) > maxIsolationReason {
		c.Reason = c.Reason[:maxIsolationReason]
	}
	return &c
}
