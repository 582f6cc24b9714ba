package dispatch

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/protocol"
)

// wsReportSlots bounds the numbered frames of one WebSocket being worked
// on at once; a frame beyond it is refused (CodeUnavailable) and the
// delegate makes the HTTP call instead.
const wsReportSlots = 256

// wsReportTimeout bounds the work of one numbered frame. The work is not
// cut short when the connection closes (the delegate may already have
// moved on to the HTTP call, which is idempotent with it).
const wsReportTimeout = 15 * time.Second

// wsReports runs the numbered frames (started, result, acquire) of one
// WebSocket, each in its own goroutine, at most wsReportSlots at once, so
// that a slow store write never holds up the connection's reader (and the
// heartbeats and acknowledgements behind it). Frames about one task are
// applied in the order they were read (a task's started before its
// result), frames about different tasks at the same time.
type wsReports struct {
	slots chan struct{}
	wg    sync.WaitGroup

	mu sync.Mutex
	// last holds, per task, a channel closed when the last frame read
	// about it has been worked on.
	last map[string]chan struct{}
}

func newWSReports() *wsReports {
	return &wsReports{slots: make(chan struct{}, wsReportSlots), last: map[string]chan struct{}{}}
}

// queue puts a frame about task id (none: "") behind the frames read
// about it before; the frame's work waits on prev (nil: nothing to wait
// for) and calls done when it ends.
func (r *wsReports) queue(id string) (prev <-chan struct{}, done func()) {
	if id == "" {
		return nil, func() {}
	}
	mine := make(chan struct{})
	r.mu.Lock()
	prev = r.last[id]
	r.last[id] = mine
	r.mu.Unlock()
	return prev, func() {
		close(mine)
		r.mu.Lock()
		if r.last[id] == mine {
			delete(r.last, id)
		}
		r.mu.Unlock()
	}
}

// frame checks a numbered frame and has it worked on; its acknowledgement
// is queued for the connection's writer.
func (m *Service) frame(ctx context.Context, d *live, f protocol.Frame, reports *wsReports) {
	ack := protocol.Event{Kind: protocol.EventAck, Req: f.Req}
	if aerr := checkFrame(f); aerr != nil {
		if aerr.Code == protocol.CodeUnknownFrame {
			m.log.Debug("answered a WebSocket frame of an unknown kind", "instance", d.id, "kind", f.Kind)
		}
		ack.Error = aerr.Wire()
		m.pushAck(d, ack)
		return
	}
	select {
	case reports.slots <- struct{}{}:
	default:
		ack.Error = api.NewError(http.StatusServiceUnavailable, protocol.CodeUnavailable,
			"%d frames of this delegate are being worked on: make the HTTP call", wsReportSlots).Wire()
		m.pushAck(d, ack)
		return
	}
	prev, done := reports.queue(f.TaskID)
	reports.wg.Go(func() {
		defer func() { <-reports.slots }()
		defer done()
		if prev != nil {
			<-prev
		}
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wsReportTimeout)
		defer cancel()
		m.pushAck(d, m.answerFrame(wctx, d, f))
	})
}

// pushAck queues an acknowledgement for the delegate, counting its errors
// in legate_manager_api_errors_total as the HTTP calls' are counted.
func (m *Service) pushAck(d *live, ack protocol.Event) {
	if ack.Error != nil {
		m.metrics.apiErrors.With(string(ack.Error.Code)).Inc()
	}
	for _, a := range ack.Acquired {
		if a.Error != nil {
			m.metrics.apiErrors.With(string(a.Error.Code)).Inc()
		}
	}
	d.push(ack)
}

// checkFrame refuses a numbered frame that is not well formed, or of a
// kind this manager does not know (CodeUnknownFrame).
func checkFrame(f protocol.Frame) *api.Error {
	bad := func(format string, args ...any) *api.Error {
		return api.NewError(http.StatusBadRequest, protocol.CodeBadRequest, format, args...)
	}
	switch f.Kind {
	case protocol.FrameStarted:
		if f.Started == nil || f.TaskID == "" {
			return bad("a started frame needs task_id and started")
		}
	case protocol.FrameResult:
		if f.Result == nil || f.TaskID == "" {
			return bad("a result frame needs task_id and result")
		}
	case protocol.FrameAcquire:
		if n := len(f.TaskIDs); n == 0 || n > protocol.MaxAcquireBatch {
			return bad("an acquire frame claims 1 to %d tasks, not %d", protocol.MaxAcquireBatch, n)
		}
	default:
		return api.NewError(http.StatusBadRequest, protocol.CodeUnknownFrame,
			"this manager (protocol %d) does not know frames of kind %q: make the HTTP call", protocol.Version, f.Kind)
	}
	return nil
}

// answerFrame does a checked frame's work, through the code of the HTTP
// call it stands for, and returns its acknowledgement.
func (m *Service) answerFrame(ctx context.Context, d *live, f protocol.Frame) protocol.Event {
	ack := protocol.Event{Kind: protocol.EventAck, Req: f.Req}
	switch f.Kind {
	case protocol.FrameStarted:
		ack.Error = m.startTask(ctx, d, f.TaskID, *f.Started).Wire()
	case protocol.FrameResult:
		_, aerr := m.completeTask(ctx, d, f.TaskID, *f.Result, true)
		ack.Error = aerr.Wire()
	case protocol.FrameAcquire:
		// Each claim is fenced and accounted on its own; made at once,
		// they share the store's write transactions (group commit).
		ack.Acquired = make([]protocol.AcquireAnswer, len(f.TaskIDs))
		var claims sync.WaitGroup
		for i, id := range f.TaskIDs {
			claims.Go(func() {
				an := &ack.Acquired[i]
				an.TaskID = id
				resp, aerr := m.acquire(ctx, d, id)
				if aerr != nil {
					an.Error = aerr.Wire()
					return
				}
				an.Acquired = &resp
			})
		}
		claims.Wait()
	}
	return ack
}
