package manager

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestLongPollWaitDoesNotOverflow polls with the largest wait_ms: the
// poll is held (capped at the manager's wait) and answers the event that
// comes, instead of overflowing into a negative wait that answers at once.
func TestLongPollWaitDoesNotOverflow(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	tok, err := admin.CreateToken(ctx, "poll")
	if err != nil {
		t.Fatal(err)
	}
	_, reg := tm.registerFake(t, tm.admin.AccountID, tok.Value, "poll", "poll-host")
	polled := make(chan protocol.EventsResponse, 1)
	go func() {
		req, _ := http.NewRequest("GET", tm.url+protocol.PathEvents+"?wait_ms="+strconv.FormatInt(math.MaxInt64, 10), nil)
		req.Header.Set("Authorization", "Bearer "+reg.Session)
		var out protocol.EventsResponse
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&out)
			resp.Body.Close()
		}
		polled <- out
	}()
	eventually(t, 10*time.Second, "the poll is held", func() bool {
		_, conn, ok := tm.m.dispatch.Live(reg.InstanceID)
		return ok && conn == protocol.ConnPolling
	})
	task, err := admin.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "x"}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case evs := <-polled:
		if len(evs.Events) == 0 || evs.Events[0].TaskID != task.ID {
			t.Fatalf("poll answered %+v; want the task_available event of %s", evs, task.ID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the poll did not answer the event")
	}
}

// TestSubmitBoundsDurationsAndCounts submits durations that overflow a
// time.Duration, and counts out of range: each is refused with a message
// that names the field and its bound; the bounds themselves are accepted.
func TestSubmitBoundsDurationsAndCounts(t *testing.T) {
	tm := startTestManager(t, Config{})
	a := tm.client(t, tm.admin.APIKey)
	shell := &protocol.ShellSpec{Script: "x"}
	for _, tc := range []struct {
		name string
		spec protocol.TaskSpec
		want string // "" = accepted
	}{
		{"timeout that overflows", protocol.TaskSpec{Shell: shell, TimeoutMS: math.MaxInt64}, "timeout_ms 9223372036854775807 is out of range: use 1 to 604800000 (7 days)"},
		{"queue timeout that overflows", protocol.TaskSpec{Shell: shell, QueueTimeoutMS: math.MaxInt64 / 1000}, "queue_timeout_ms 9223372036854775 is out of range: use 1 to 604800000 (7 days)"},
		{"timeout a day over", protocol.TaskSpec{Shell: shell, TimeoutMS: 8 * 24 * 3600 * 1000}, "timeout_ms 691200000 is out of range"},
		{"negative timeout", protocol.TaskSpec{Shell: shell, TimeoutMS: -1}, "timeout_ms -1 is out of range"},
		{"negative queue timeout", protocol.TaskSpec{Shell: shell, QueueTimeoutMS: math.MinInt64}, "queue_timeout_ms -9223372036854775808 is out of range"},
		{"too many retries", protocol.TaskSpec{Shell: shell, Retries: math.MaxInt32}, "retries 2147483647 is out of range: use 0 to 100"},
		{"negative retries", protocol.TaskSpec{Shell: shell, Retries: -1}, "retries -1 is out of range"},
		{"the bounds", protocol.TaskSpec{Shell: shell, TimeoutMS: protocol.MaxTaskTimeoutMS, QueueTimeoutMS: protocol.MaxTaskTimeoutMS, Retries: protocol.MaxTaskRetries}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task, err := a.SubmitTask(context.Background(), tc.spec)
			if tc.want == "" {
				if err != nil || task.Status != protocol.StatusQueued {
					t.Fatalf("got %+v, %v; want a queued task", task, err)
				}
				return
			}
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe.Code != protocol.CodeBadRequest || !strings.Contains(pe.Message, tc.want) {
				t.Fatalf("got %+v (task %s %s); want bad_request %q", err, task.ID, task.Status, tc.want)
			}
		})
	}
}
