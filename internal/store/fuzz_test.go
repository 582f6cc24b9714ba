package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

// FuzzDecodeTaskColumns feeds arbitrary bytes to the decoders of a task
// row's JSON columns (spec, denied_instances, http_result): they must
// return an error or a value, never panic, and a decoded spec must survive
// encoding again unchanged.
func FuzzDecodeTaskColumns(f *testing.F) {
	spec, _ := encodeSpec(newTask("t1", "acc1", t0).Spec)
	f.Add(spec, `["i1","i2"]`, `{"status":200,"body_excerpt":"ok"}`, false)
	f.Add(`{"type":"http","http":{"method":"GET","url":"x","headers":{"a":"b"}}}`, `[]`, `null`, false)
	f.Add(``, ``, ``, true)
	f.Add(`null`, `null`, `[]`, false)
	f.Add(`{"type":1}`, `[1]`, `{"status":"x"}`, false)
	f.Add(`{"shell":{"script":"\u0000"},"env":{"":""}}`, `["\ud800"]`, `{`, false)
	f.Fuzz(func(t *testing.T, spec, denied, httpResult string, httpNull bool) {
		var task Task
		_ = decodeTaskColumns(&task, spec, denied, sql.NullString{String: httpResult, Valid: !httpNull})

		decoded, err := decodeSpec(spec)
		if err != nil {
			return
		}
		again, err := encodeSpec(decoded)
		if err != nil {
			t.Fatalf("re-encode decoded spec: %v", err)
		}
		twice, err := decodeSpec(again)
		if err != nil {
			t.Fatalf("decode re-encoded spec %q: %v", again, err)
		}
		if diff := cmp.Diff(decoded, twice, equateEmpty); diff != "" {
			t.Fatalf("spec changed across a round trip (-first +second):\n%s", diff)
		}
	})
}

// FuzzTaskSpecRoundTrip stores specs built from arbitrary strings and
// checks GetTask (and, with the secret values, ClaimTask) returns what
// JSON encoding preserves (invalid UTF-8 is replaced by U+FFFD, as on the
// wire).
func FuzzTaskSpecRoundTrip(f *testing.F) {
	f.Add("echo hi", "linux", "KEY", "value", "s3cret", int64(1000), 2)
	f.Add("", "", "", "", "", int64(0), 0)
	f.Add("\x00\xff'\"?;--", "?", "'", "\n", "\\u0000", int64(-1), -5)
	// Every input goes to both backends (to SQLite alone where PostgreSQL
	// is not available: see pgtest.Available).
	stores := []*Store{openTest(f)}
	if pgAvailable(f) {
		stores = append(stores, postgresBackend.open(f))
	}
	ctx := context.Background()
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, script, selector, key, value, secret string, timeoutMS int64, retries int) {
		id := fmt.Sprintf("fuzz-%d", n.Add(1))
		spec := protocol.TaskSpec{
			Type:           protocol.TaskShell,
			Shell:          &protocol.ShellSpec{Script: script},
			Selectors:      []string{selector},
			Env:            map[string]string{key: value},
			SecretEnv:      map[string]string{key: secret},
			TimeoutMS:      timeoutMS,
			QueueTimeoutMS: timeoutMS,
			Retries:        retries,
		}
		task := newTask(id, "acc1", t0)
		task.Spec = spec
		task.Retries = retries
		task.TimeoutMS = timeoutMS
		b, err := json.Marshal(spec)
		if err != nil {
			t.Fatal(err)
		}
		var want protocol.TaskSpec
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		for _, s := range stores {
			if err := s.CreateTask(ctx, task); err != nil {
				t.Fatalf("%s: %v", s.dialect, err)
			}
			got, err := s.GetTask(ctx, "acc1", id)
			if err != nil {
				t.Fatalf("%s: %v", s.dialect, err)
			}
			// Reads give the names of the secret values; the claim gives
			// the values (sealed and opened on the way).
			wantRead := want
			wantRead.SecretEnv = nil
			if diff := cmp.Diff(wantRead, got.Spec, equateEmpty); diff != "" {
				t.Fatalf("%s: spec (-want +got):\n%s", s.dialect, diff)
			}
			// The names are those of the spec as JSON gives it back:
			// a name that is not valid UTF-8 comes back with U+FFFD in it.
			var wantNames []string
			for name := range want.SecretEnv {
				wantNames = append(wantNames, name)
			}
			if diff := cmp.Diff(wantNames, got.SecretNames); diff != "" {
				t.Fatalf("%s: secret names (-want +got):\n%s", s.dialect, diff)
			}
			claimed, err := s.ClaimTask(ctx, claimFor(id, "i1"), t0)
			if err != nil {
				t.Fatalf("%s: %v", s.dialect, err)
			}
			if diff := cmp.Diff(want, claimed.Spec, equateEmpty); diff != "" {
				t.Fatalf("%s: claimed spec (-want +got):\n%s", s.dialect, diff)
			}
			if got.Retries != retries || got.TimeoutMS != timeoutMS {
				t.Fatalf("%s: retries %d timeout %d, want %d %d", s.dialect, got.Retries, got.TimeoutMS, retries, timeoutMS)
			}
		}
	})
}
