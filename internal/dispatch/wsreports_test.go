package dispatch

import (
	"encoding/json"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

// FuzzCheckFrame: whatever a delegate sends as a frame, checkFrame
// refuses it with a code or accepts one that answerFrame can work on
// (the fields it reads are there).
func FuzzCheckFrame(f *testing.F) {
	f.Add([]byte(`{"kind":"started","req":1,"task_id":"t","started":{"epoch":1}}`))
	f.Add([]byte(`{"kind":"result","req":2,"task_id":"t","result":{"epoch":1,"status":"succeeded"}}`))
	f.Add([]byte(`{"kind":"acquire","req":3,"task_ids":["a","b"]}`))
	f.Add([]byte(`{"kind":"acquire","req":3,"task_ids":[]}`))
	f.Add([]byte(`{"kind":"from_the_future","req":4}`))
	f.Add([]byte(`{"kind":"result","req":5,"task_id":"t"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var fr protocol.Frame
		if err := json.Unmarshal(data, &fr); err != nil {
			return
		}
		aerr := checkFrame(fr)
		if aerr != nil {
			if aerr.Code == "" || aerr.Msg == "" || aerr.Wire() == nil {
				t.Fatalf("refusal without a code or message: %+v", aerr)
			}
			return
		}
		switch fr.Kind {
		case protocol.FrameStarted:
			if fr.Started == nil || fr.TaskID == "" {
				t.Fatalf("accepted a started frame without its fields: %s", data)
			}
		case protocol.FrameResult:
			if fr.Result == nil || fr.TaskID == "" {
				t.Fatalf("accepted a result frame without its fields: %s", data)
			}
		case protocol.FrameAcquire:
			if len(fr.TaskIDs) == 0 || len(fr.TaskIDs) > protocol.MaxAcquireBatch {
				t.Fatalf("accepted an acquire frame of %d tasks", len(fr.TaskIDs))
			}
		default:
			t.Fatalf("accepted a frame of kind %q", fr.Kind)
		}
	})
}
