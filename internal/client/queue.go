package client

import (
	"context"
	"net/http"
	"strings"

	"github.com/legate-dev/legate/internal/protocol"
)

// Queue returns the account's queue per selector set.
func (c *Client) Queue(ctx context.Context) (protocol.QueueSummary, error) {
	var out protocol.QueueSummary
	err := c.do(ctx, &call{op: "read the queue", method: http.MethodGet, path: protocol.PathQueue, out: &out})
	return out, err
}

// QueueSignal returns the queue of one selector set: the tasks with
// exactly these selectors, and those a delegate with these tags could take.
func (c *Client) QueueSignal(ctx context.Context, selectors []string) (protocol.QueueSignal, error) {
	var out protocol.QueueSignal
	q := map[string][]string{"selectors": {strings.Join(selectors, ",")}}
	err := c.do(ctx, &call{op: "read the queue signal", method: http.MethodGet, path: protocol.PathQueue, query: q, out: &out})
	return out, err
}
