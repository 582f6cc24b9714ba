package watcher

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

// fakeManager answers as it is told and counts the calls it gets.
type fakeManager struct {
	name  string
	err   error  // every call's error
	wrote string // what a download writes before err
	calls int
}

func (m *fakeManager) UpgradeCheck(context.Context, string, string, protocol.UpgradeCheckRequest) (protocol.UpgradeCheckResponse, error) {
	m.calls++
	if m.err != nil {
		return protocol.UpgradeCheckResponse{}, m.err
	}
	return protocol.UpgradeCheckResponse{Wanted: m.name}, nil
}

func (m *fakeManager) ReleaseSignature(context.Context, string, string, string, string, string, string) ([]byte, error) {
	m.calls++
	if m.err != nil {
		return nil, m.err
	}
	return []byte("sig of " + m.name), nil
}

func (m *fakeManager) DownloadRelease(_ context.Context, _, _, _, _, _, _ string, w io.Writer, _ int64) (int64, error) {
	m.calls++
	n, _ := io.WriteString(w, m.wrote)
	if m.err != nil {
		return int64(n), m.err
	}
	n2, _ := io.WriteString(w, "binary of "+m.name)
	return int64(n + n2), nil
}

var (
	errRefused = errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	errDenied  = &protocol.Error{Code: protocol.CodeUnauthenticated, Message: "bad token", Status: 401}
	errMissing = &protocol.Error{Code: protocol.CodeNotFound, Message: "no such release", Status: 404}
	errBusy    = &protocol.Error{Code: protocol.CodeUnavailable, Message: "shutting down", Status: 503}
)

// TestFailover: a watcher given several manager URLs asks the next when
// one cannot be reached, stays with the one that answered, and does not
// go around a manager's deliberate answer or a download already begun.
func TestFailover(t *testing.T) {
	ctx := t.Context()
	a, b := &fakeManager{name: "a", err: errRefused}, &fakeManager{name: "b"}
	f := Failover(a, b)
	resp, err := f.UpgradeCheck(ctx, "acc", "tok", protocol.UpgradeCheckRequest{})
	if err != nil || resp.Wanted != "b" {
		t.Fatalf("a unreachable: %+v, %v; want b's answer", resp, err)
	}
	a.err = nil // a is back, but b answered last: b is asked first
	if sig, err := f.ReleaseSignature(ctx, "acc", "tok", "legate", "v1", "linux", "amd64"); err != nil || string(sig) != "sig of b" {
		t.Errorf("after b answered: %q, %v; want b's", sig, err)
	}
	if a.calls != 1 || b.calls != 2 {
		t.Errorf("calls a=%d b=%d, want 1 and 2", a.calls, b.calls)
	}

	// A deliberate answer is the answer: no second manager is asked.
	b.err = errDenied
	if _, err := f.UpgradeCheck(ctx, "acc", "tok", protocol.UpgradeCheckRequest{}); !errors.Is(err, errDenied) || a.calls != 1 {
		t.Errorf("b refuses the token: %v (a called %d times); want the refusal, a not asked", err, a.calls)
	}
	// Unavailable (503) and a release b does not hold go on to a.
	for _, e := range []error{errBusy, errMissing} {
		b.err = e
		var buf bytes.Buffer
		if n, err := f.DownloadRelease(ctx, "acc", "tok", "legate", "v1", "linux", "amd64", &buf, 1<<20); err != nil || buf.String() != "binary of a" || n != int64(buf.Len()) {
			t.Errorf("b answers %v: %q (%d), %v; want a's binary", e, buf.String(), n, err)
		}
		f.(*failover).cur = 1 // b first again
	}
	// An UpgradeCheck's 404 is an answer, not a missing release.
	b.err = errMissing
	if _, err := f.UpgradeCheck(ctx, "acc", "tok", protocol.UpgradeCheckRequest{}); !errors.Is(err, errMissing) {
		t.Errorf("upgrade check 404: %v, want it returned", err)
	}
	// A download that broke off after writing is not restarted elsewhere.
	b.err, b.wrote = errRefused, "half of b"
	var buf bytes.Buffer
	callsA := a.calls
	if _, err := f.DownloadRelease(ctx, "acc", "tok", "legate", "v1", "linux", "amd64", &buf, 1<<20); !errors.Is(err, errRefused) || a.calls != callsA || buf.String() != "half of b" {
		t.Errorf("download broken after writing: %v, wrote %q, a called %d more; want b's error and a not asked", err, buf.String(), a.calls-callsA)
	}
	// Every manager unreachable: the last error, each asked once.
	a.err, b.err, b.wrote = errRefused, errBusy, ""
	a.calls, b.calls = 0, 0
	if _, err := f.UpgradeCheck(ctx, "acc", "tok", protocol.UpgradeCheckRequest{}); err == nil || a.calls != 1 || b.calls != 1 {
		t.Errorf("none reachable: %v, calls a=%d b=%d; want an error, each asked once", err, a.calls, b.calls)
	}
	// A cancelled context stops at the first failure.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	a.calls, b.calls = 0, 0
	if _, err := f.UpgradeCheck(cctx, "acc", "tok", protocol.UpgradeCheckRequest{}); err == nil || a.calls+b.calls != 1 {
		t.Errorf("cancelled: %v, calls a=%d b=%d; want one call", err, a.calls, b.calls)
	}
	if one := (&fakeManager{name: "only"}); Failover(one) != Manager(one) {
		t.Error("Failover of one manager should be that manager")
	}
}
