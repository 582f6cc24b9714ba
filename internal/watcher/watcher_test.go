package watcher

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

// noManager is never called by these tests: the watcher's conversations
// with a real manager are proven by the e2e tests (e2e/upgrade_test.go).
type noManager struct{}

func (noManager) UpgradeCheck(context.Context, string, string, protocol.UpgradeCheckRequest) (protocol.UpgradeCheckResponse, error) {
	panic("not called")
}
func (noManager) ReleaseSignature(context.Context, string, string, string, string, string, string) ([]byte, error) {
	panic("not called")
}
func (noManager) DownloadRelease(context.Context, string, string, string, string, string, string, io.Writer, int64) (int64, error) {
	panic("not called")
}

func newTestWatcher(t *testing.T, auto bool, key ed25519.PublicKey) *Watcher {
	t.Helper()
	w, err := New(Options{Binary: "/bin/true", Version: "v1.0.0", Dir: t.TempDir(), Manager: noManager{},
		Name: "d", Hostname: "h", AutoUpgrade: auto, PublicKey: key})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestWantsUpgrade(t *testing.T) {
	key := make(ed25519.PublicKey, ed25519.PublicKeySize)
	want := protocol.UpgradeCheckResponse{Wanted: "v1.1.0", Available: true}
	for _, c := range []struct {
		name   string
		auto   bool
		key    ed25519.PublicKey
		resp   protocol.UpgradeCheckResponse
		failed string
		want   bool
	}{
		{"another version", true, key, want, "", true},
		{"same version", true, key, protocol.UpgradeCheckResponse{Wanted: "1.0.0", Available: true}, "", false},
		{"AUTO_UPGRADE=false", false, key, want, "", false},
		{"no public key", true, nil, want, "", false},
		{"held", true, key, protocol.UpgradeCheckResponse{Held: true, Available: true}, "", false},
		{"no binary", true, key, protocol.UpgradeCheckResponse{Wanted: "v1.1.0"}, "", false},
		{"failed before", true, key, want, "v1.1.0", false},
		{"another failed before", true, key, want, "v1.0.9", true},
		{"not a version name", true, key, protocol.UpgradeCheckResponse{Wanted: "../x", Available: true}, "", false},
		{"an older version", true, key, protocol.UpgradeCheckResponse{Wanted: "v0.9.9", Available: true}, "", false},
		{"a pre-release of the running version", true, key, protocol.UpgradeCheckResponse{Wanted: "v1.0.0-rc.1", Available: true}, "", false},
		{"a version without an order", true, key, protocol.UpgradeCheckResponse{Wanted: "nightly", Available: true}, "", false},
		{"an older version an administrator pinned", true, key, protocol.UpgradeCheckResponse{Wanted: "v0.9.9", Available: true, Pinned: true}, "", true},
		{"a newer pre-release", true, key, protocol.UpgradeCheckResponse{Wanted: "v1.1.0-rc.1", Available: true}, "", true},
	} {
		w := newTestWatcher(t, c.auto, c.key)
		if got := w.wantsUpgrade(c.resp, "v1.0.0", c.failed); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestStateSurvivesARestart: the version switched to last is started
// first (while its binary is there), and a failed version stays failed.
func TestStateSurvivesARestart(t *testing.T) {
	w := newTestWatcher(t, true, nil)
	if v, b := w.startingVersion(); v != "v1.0.0" || b != "/bin/true" {
		t.Errorf("first start: %s %s", v, b)
	}
	w.saveCurrent("v1.1.0")
	if v, _ := w.startingVersion(); v != "v1.0.0" {
		t.Errorf("current names a version whose binary is missing: started %s", v)
	}
	bin := filepath.Join(w.opts.Dir, "versions", "v1.1.0", "legate")
	if err := os.MkdirAll(filepath.Dir(bin), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if v, b := w.startingVersion(); v != "v1.1.0" || b != bin {
		t.Errorf("after a switch: %s %s", v, b)
	}
	w.saveFailed("v1.2.0", "v1.2.0 did not connect\nwithin 2m0s")
	if v, r := w.loadFailed(); v != "v1.2.0" || r != "v1.2.0 did not connect within 2m0s" {
		t.Errorf("failed: %q %q", v, r)
	}
	w.saveFailed("", "")
	if v, _ := w.loadFailed(); v != "" {
		t.Errorf("a cleared failure: %q", v)
	}
}

func TestRemoveBinaryKeepsTheRunningOne(t *testing.T) {
	w := newTestWatcher(t, true, nil)
	for _, v := range []string{"v1.1.0", "v1.2.0"} {
		p := filepath.Join(w.opts.Dir, "versions", v, "legate")
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w.removeBinary("v1.1.0", "v1.2.0")
	w.removeBinary("v1.2.0", "v1.2.0")
	w.removeBinary("..", "v1.2.0")
	if _, err := os.Stat(filepath.Join(w.opts.Dir, "versions", "v1.1.0")); !os.IsNotExist(err) {
		t.Errorf("the old binary is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(w.opts.Dir, "versions", "v1.2.0", "legate")); err != nil {
		t.Errorf("the running binary was removed: %v", err)
	}
}

func TestWarnUndelivered(t *testing.T) {
	var buf bytes.Buffer
	w, err := New(Options{Binary: "/bin/true", Version: "v1.0.0", Dir: t.TempDir(), Manager: noManager{},
		Name: "d", Hostname: "h", Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	w.warnUndelivered("v1.0.0")
	if buf.Len() != 0 {
		t.Errorf("a warning without a spool: %s", buf.String())
	}
	spool := filepath.Join(w.opts.Dir, "work", "v1.0.0", "spool")
	if err := os.MkdirAll(spool, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(spool, "t_1.result.json"), []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	w.warnUndelivered("v1.0.0")
	if !strings.Contains(buf.String(), "results=1") || !strings.Contains(buf.String(), "LEGATE_WATCHER_SLOT=v1.0.0") {
		t.Errorf("no warning for an undelivered result: %s", buf.String())
	}
}
