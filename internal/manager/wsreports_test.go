package manager

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/legate-dev/legate/internal/protocol"
)

// wsFake is a delegate of the test over a real WebSocket.
type wsFake struct {
	t  *testing.T
	c  *websocket.Conn
	ev []protocol.Event // read and not yet consumed
}

func dialFake(t *testing.T, tm *testManager, session string) (*wsFake, *http.Response) {
	t.Helper()
	h := http.Header{}
	h.Set("Authorization", "Bearer "+session)
	h.Set(protocol.HeaderProtocolVersion, strconv.Itoa(protocol.Version))
	c, resp, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(tm.url, "http")+protocol.PathWebSocket, &websocket.DialOptions{HTTPHeader: h})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	return &wsFake{t: t, c: c}, resp
}

func (f *wsFake) send(fr protocol.Frame) {
	f.t.Helper()
	if err := wsjson.Write(context.Background(), f.c, fr); err != nil {
		f.t.Fatal(err)
	}
}

// next returns the first event (read before or now) that match accepts.
func (f *wsFake) next(what string, match func(protocol.Event) bool) protocol.Event {
	f.t.Helper()
	for i, ev := range f.ev {
		if match(ev) {
			f.ev = append(f.ev[:i], f.ev[i+1:]...)
			return ev
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		var ev protocol.Event
		if err := wsjson.Read(ctx, f.c, &ev); err != nil {
			f.t.Fatalf("waiting for %s: %v", what, err)
		}
		if match(ev) {
			return ev
		}
		f.ev = append(f.ev, ev)
	}
}

func (f *wsFake) ack(req int64) protocol.Event {
	f.t.Helper()
	return f.next("ack "+strconv.FormatInt(req, 10), func(ev protocol.Event) bool { return ev.Kind == protocol.EventAck && ev.Req == req })
}

func ackCode(ev protocol.Event) protocol.Code {
	if ev.Error == nil {
		return ""
	}
	return ev.Error.Code
}

// TestWebSocketReports: started, result and acquire over the WebSocket are
// the HTTP calls' work: answered ok, or refused with the HTTP call's code;
// a repeated result is harmless; a started frame sent right before its
// result is applied first; a frame of a kind the manager does not know is
// answered unknown_frame and the connection goes on.
func TestWebSocketReports(t *testing.T) {
	tm := startTestManager(t, Config{HeartbeatInterval: time.Hour})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	tok, err := admin.CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	httpDel, reg := tm.registerFake(t, tm.admin.AccountID, tok.Value, "grp", "ws-host")
	ws, resp := dialFake(t, tm, reg.Session)
	if v := resp.Header.Get(protocol.HeaderProtocolVersion); v != strconv.Itoa(protocol.Version) {
		t.Fatalf("upgrade answer names protocol %q, want %d", v, protocol.Version)
	}

	var ids []string
	for range 2 {
		task, err := admin.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "true"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, task.ID)
	}
	for _, id := range ids {
		ws.next("offer of "+id, func(ev protocol.Event) bool { return ev.Kind == protocol.EventTaskAvailable && ev.TaskID == id })
	}

	// One frame claims both tasks and one that does not exist.
	ws.send(protocol.Frame{Kind: protocol.FrameAcquire, Req: 1, TaskIDs: []string{ids[0], "t_nosuchtask", ids[1]}})
	ack := ws.ack(1)
	if ack.Error != nil || len(ack.Acquired) != 3 {
		t.Fatalf("acquire ack: %+v", ack)
	}
	epochs := map[string]int64{}
	for i, want := range []string{ids[0], "t_nosuchtask", ids[1]} {
		a := ack.Acquired[i]
		if a.TaskID != want {
			t.Fatalf("answer %d is about %s, want %s", i, a.TaskID, want)
		}
		if want == "t_nosuchtask" {
			if a.Error == nil || a.Error.Code != protocol.CodeNotFound || a.Acquired != nil {
				t.Errorf("claim of a missing task: %+v", a)
			}
			continue
		}
		if a.Error != nil || a.Acquired == nil || a.Acquired.Epoch == 0 || a.Acquired.Spec.Shell == nil {
			t.Fatalf("claim of %s: %+v", want, a)
		}
		epochs[want] = a.Acquired.Epoch
	}
	// A single acquire over HTTP of a task claimed by the frame is the
	// holder's repeated claim: the same lease.
	again, err := httpDel.Acquire(ctx, ids[0])
	if err != nil || again.Epoch != epochs[ids[0]] {
		t.Fatalf("HTTP acquire after the frame: %+v, %v", again, err)
	}

	// A stale epoch is refused with the HTTP call's code.
	httpErr := httpDel.Started(ctx, ids[0], protocol.StartedRequest{Epoch: epochs[ids[0]] + 7})
	wantCode(t, "HTTP started with a stale epoch", httpErr, protocol.CodeStaleLease)
	ws.send(protocol.Frame{Kind: protocol.FrameStarted, Req: 2, TaskID: ids[0], Started: &protocol.StartedRequest{Epoch: epochs[ids[0]] + 7}})
	if got := ackCode(ws.ack(2)); got != protocol.CodeStaleLease {
		t.Errorf("started frame with a stale epoch: code %q, want %s", got, protocol.CodeStaleLease)
	}
	ws.send(protocol.Frame{Kind: protocol.FrameResult, Req: 3, TaskID: ids[0], Result: &protocol.ResultRequest{Epoch: epochs[ids[0]] + 7, Status: protocol.StatusSucceeded}})
	if got := ackCode(ws.ack(3)); got != protocol.CodeStaleLease {
		t.Errorf("result frame with a stale epoch: code %q, want %s", got, protocol.CodeStaleLease)
	}

	// Started and result sent back to back: applied in that order.
	zero := 0
	for _, id := range ids {
		ws.send(protocol.Frame{Kind: protocol.FrameStarted, Req: 10, TaskID: id, Started: &protocol.StartedRequest{Epoch: epochs[id]}})
		ws.send(protocol.Frame{Kind: protocol.FrameResult, Req: 11, TaskID: id,
			Result: &protocol.ResultRequest{Epoch: epochs[id], Status: protocol.StatusSucceeded, ExitCode: &zero}})
		if a := ws.ack(10); a.Error != nil {
			t.Fatalf("started frame of %s: %v", id, a.Error)
		}
		if a := ws.ack(11); a.Error != nil {
			t.Fatalf("result frame of %s: %+v", id, a)
		}
		task, err := admin.GetTask(ctx, id)
		if err != nil || task.Status != protocol.StatusSucceeded || task.StartedAt == nil {
			t.Errorf("task %s after its frames: %+v, %v; want it succeeded with a start time", id, task, err)
		}
	}

	// A repeated result (its ack was lost) is harmless, over either path.
	ws.send(protocol.Frame{Kind: protocol.FrameResult, Req: 12, TaskID: ids[0],
		Result: &protocol.ResultRequest{Epoch: epochs[ids[0]], Status: protocol.StatusSucceeded, ExitCode: &zero}})
	rep := ws.ack(12)
	_, httpErr = httpDel.Result(ctx, ids[0], protocol.ResultRequest{Epoch: epochs[ids[0]], Status: protocol.StatusSucceeded, ExitCode: &zero})
	if rep.Error != nil || httpErr != nil {
		t.Errorf("repeated result: frame %v, HTTP %v; want both accepted", rep.Error, httpErr)
	}
	task, err := admin.GetTask(ctx, ids[0])
	if err != nil || task.Status != protocol.StatusSucceeded {
		t.Errorf("task after repeated results: %+v, %v", task, err)
	}

	// Frames a newer delegate may send, and malformed ones.
	ws.send(protocol.Frame{Kind: "from_the_future", Req: 20, TaskID: ids[0]})
	if got := ackCode(ws.ack(20)); got != protocol.CodeUnknownFrame {
		t.Errorf("unknown frame kind: code %q, want %s", got, protocol.CodeUnknownFrame)
	}
	ws.send(protocol.Frame{Kind: protocol.FrameResult, Req: 21, TaskID: ids[0]})
	if got := ackCode(ws.ack(21)); got != protocol.CodeBadRequest {
		t.Errorf("result frame without a result: code %q, want %s", got, protocol.CodeBadRequest)
	}
	ws.send(protocol.Frame{Kind: protocol.FrameAcquire, Req: 22, TaskIDs: make([]string, protocol.MaxAcquireBatch+1)})
	if got := ackCode(ws.ack(22)); got != protocol.CodeBadRequest {
		t.Errorf("acquire frame of too many tasks: code %q, want %s", got, protocol.CodeBadRequest)
	}
	// Errors answered over the WebSocket are counted as the HTTP calls'.
	if got := tm.m.metrics.apiErrors.With(string(protocol.CodeUnknownFrame)).Value(); got != 1 {
		t.Errorf("legate_manager_api_errors_total{code=unknown_frame} = %v, want 1", got)
	}
	// An unnumbered frame of an unknown kind is ignored, as before.
	ws.send(protocol.Frame{Kind: "from_the_future"})
	// The connection still serves heartbeats.
	ws.send(protocol.Frame{Kind: protocol.FrameHeartbeat, Heartbeat: &protocol.Heartbeat{Seq: 99, Running: []protocol.RunningTask{}}})
	ws.next("heartbeat ack", func(ev protocol.Event) bool { return ev.Kind == protocol.EventHeartbeatAck && ev.Seq == 99 })
}
