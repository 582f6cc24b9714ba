package dispatch

import (
	"encoding/json"

	"github.com/legate-dev/legate/internal/protocol"
)

// maxIsolationReason bounds the reason a delegate gives for having no
// sandbox, as stored and shown.
const maxIsolationReason = 500

// encodeTaskIsolation is what a delegate reported about how it keeps its
// tasks apart, as stored ("" for nothing reported: an older delegate).
func encodeTaskIsolation(ti *protocol.TaskIsolation) string {
	if ti == nil {
		return ""
	}
	c := *ti
	if len(c.Reason) > maxIsolationReason {
		c.Reason = c.Reason[:maxIsolationReason]
	}
	b, err := json.Marshal(c)
	if err != nil {
		return ""
	}
	return string(b)
}

// decodeTaskIsolation reverses encodeTaskIsolation (nil for "").
func decodeTaskIsolation(s string) *protocol.TaskIsolation {
	if s == "" {
		return nil
	}
	var ti protocol.TaskIsolation
	if json.Unmarshal([]byte(s), &ti) != nil {
		return nil
	}
	return &ti
}
