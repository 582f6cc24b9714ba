package manager

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/release"
)

// TestUpgradePolicyAndStates walks a group through the upgrade states the
// listing shows: an expired delegate is refused naming the version to
// install, an older accepted one has an upgrade available, a pin or a
// hold makes it current, and a watcher's reports show as upgrading and
// as a failure with its reason.
func TestUpgradePolicyAndStates(t *testing.T) {
	tm := startTestManager(t, Config{Version: "v1.4.0", ReleaseDir: t.TempDir()})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	tok, err := admin.CreateToken(ctx, "up")
	if err != nil {
		t.Fatal(err)
	}
	register := func(version, slot, upgrade string) error {
		_, err := tm.client(t, "").Register(ctx, protocol.RegisterRequest{AccountID: tm.admin.AccountID, Token: tok.Value,
			Name: "build", Hostname: "h1", IP: "127.0.0.1", Version: version, Slot: slot, Upgrade: upgrade})
		return err
	}
	err = register("v1.2.9", "", "")
	wantCode(t, "registration of v1.2.9 by a v1.4.0 manager", err, protocol.CodeDelegateExpired)
	if !strings.Contains(err.Error(), "v1.3.0 or later") || !strings.Contains(err.Error(), "install legate v1.4.0") {
		t.Errorf("the refusal does not say what to install: %v", err)
	}
	if err := register("v1.3.5", "v1.3.5", protocol.UpgradeAuto); err != nil {
		t.Fatal(err)
	}
	state := func() protocol.Delegate {
		t.Helper()
		ds, err := admin.ListDelegates(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ds.Delegates) != 1 {
			t.Fatalf("want one instance, got %+v", ds.Delegates)
		}
		return ds.Delegates[0]
	}
	if d := state(); d.UpgradeState != protocol.UpgradeAvailable || d.WantedVersion != "v1.4.0" || d.Upgrade != protocol.UpgradeAuto {
		t.Errorf("v1.3.5 under a v1.4.0 manager: %q wanted %q mode %q", d.UpgradeState, d.WantedVersion, d.Upgrade)
	}
	policy := func(action, version string) protocol.UpgradePolicy {
		t.Helper()
		p, err := admin.SetUpgradePolicy(ctx, "build", protocol.UpgradePolicyRequest{Action: action, Version: version})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p := policy(protocol.UpgradePin, "v1.3.5"); p.Wanted != "v1.3.5" || p.OldestAccepted != "v1.3.0" {
		t.Errorf("pin: %+v", p)
	}
	if d := state(); d.UpgradeState != protocol.UpgradeCurrent {
		t.Errorf("pinned to its version: %q", d.UpgradeState)
	}
	if p := policy(protocol.UpgradeHold, ""); p.Wanted != "" || !p.Held {
		t.Errorf("hold: %+v", p)
	}
	if d := state(); d.UpgradeState != protocol.UpgradeCurrent || d.WantedVersion != "" {
		t.Errorf("held: %q wanted %q", d.UpgradeState, d.WantedVersion)
	}
	policy(protocol.UpgradeRelease, "")
	_, err = admin.SetUpgradePolicy(ctx, "build", protocol.UpgradePolicyRequest{Action: protocol.UpgradePin, Version: "v1.1.0"})
	wantCode(t, "pin to an expired version", err, protocol.CodeBadRequest)
	_, err = admin.SetUpgradePolicy(ctx, "build", protocol.UpgradePolicyRequest{Action: "upgrade"})
	wantCode(t, "an unknown action", err, protocol.CodeBadRequest)

	// The watcher of the delegate reports.
	c := tm.client(t, "")
	check := func(st, target, reason string) protocol.UpgradeCheckResponse {
		t.Helper()
		resp, err := c.UpgradeCheck(ctx, tm.admin.AccountID, tok.Value, protocol.UpgradeCheckRequest{Name: "build", Hostname: "h1",
			Version: "v1.3.5", OS: runtime.GOOS, Arch: runtime.GOARCH, AutoUpgrade: true, State: st, Target: target, Reason: reason})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := check(protocol.WatcherUpgrading, "v1.4.0", "")
	if resp.Wanted != "v1.4.0" || resp.Available || len(resp.Connected) != 1 || resp.Connected[0] != "v1.3.5" {
		t.Errorf("check: %+v", resp)
	}
	if d := state(); d.UpgradeState != protocol.UpgradeUpgrading {
		t.Errorf("while its watcher upgrades it: %q", d.UpgradeState)
	}
	check(protocol.WatcherFailed, "v1.4.0", "v1.4.0 did not connect within 1m0s")
	if d := state(); d.UpgradeState != "upgrade failed: v1.4.0 did not connect within 1m0s" {
		t.Errorf("after a failed upgrade: %q", d.UpgradeState)
	}
	// Another token cannot speak for this delegate.
	other, err := admin.CreateToken(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.UpgradeCheck(ctx, tm.admin.AccountID, other.Value, protocol.UpgradeCheckRequest{Name: "build", Hostname: "h1",
		Version: "v1.3.5"}); err != nil {
		t.Fatal(err)
	}
	if d := state(); !strings.HasPrefix(d.UpgradeState, "upgrade failed: ") {
		t.Errorf("a report with another token was recorded: %q", d.UpgradeState)
	}
	_, err = c.UpgradeCheck(ctx, tm.admin.AccountID, "wrong", protocol.UpgradeCheckRequest{Name: "build", Hostname: "h1"})
	wantCode(t, "a check with a wrong token", err, protocol.CodeUnauthenticated)
	_, err = c.UpgradeCheck(ctx, tm.admin.AccountID, tok.Value, protocol.UpgradeCheckRequest{Name: "build", Hostname: "h1", State: "bored"})
	wantCode(t, "a check with an unknown state", err, protocol.CodeBadRequest)
}

// TestReleaseServing serves a signed binary and its signature to a
// delegate token, and refuses an unsigned, a corrupted or a misnamed one.
func TestReleaseServing(t *testing.T) {
	dir := t.TempDir()
	tm := startTestManager(t, Config{Version: "v1.4.0", ReleaseDir: dir})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	tok, err := admin.CreateToken(ctx, "rel")
	if err != nil {
		t.Fatal(err)
	}
	privFile, _, err := release.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	key, err := release.ParsePrivateKey(privFile)
	if err != nil {
		t.Fatal(err)
	}
	// put writes a release binary; signedAs is the binary its signature
	// names ("" = unsigned).
	put := func(which, version string, content []byte, signedAs string) {
		t.Helper()
		p := filepath.Join(dir, version, release.ReleaseFileName(which, "linux", "amd64"))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, content, 0o755); err != nil {
			t.Fatal(err)
		}
		if signedAs == "" {
			return
		}
		d, _ := release.Digest(bytes.NewReader(content))
		sig, err := release.Sign(key, release.Manifest{Binary: signedAs, Version: version, OS: "linux", Arch: "amd64", SHA256: d})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p+".sig", sig.Encode(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put(release.BinaryLegate, "v1.4.0", []byte("binary 1.4.0"), release.BinaryLegate)
	put(release.BinaryLegate, "v1.4.1", []byte("binary 1.4.1"), "")
	put(release.BinaryLegate, "v1.4.2", []byte("binary 1.4.2"), release.BinaryLegate)
	put(release.BinaryDelegate, "v1.4.0", []byte("delegate 1.4.0"), release.BinaryDelegate)
	// legate-delegate with a signature for legate: not served as either.
	put(release.BinaryDelegate, "v1.4.2", []byte("delegate 1.4.2"), release.BinaryLegate)
	if err := os.WriteFile(filepath.Join(dir, "v1.4.2", release.BinaryName("linux", "amd64")), []byte("binary 1.4.2, altered"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := tm.client(t, "")
	var buf bytes.Buffer
	if _, err := c.DownloadRelease(ctx, tm.admin.AccountID, tok.Value, "legate", "v1.4.0", "linux", "amd64", &buf, 1<<20); err != nil || buf.String() != "binary 1.4.0" {
		t.Fatalf("download: %q, %v", buf.String(), err)
	}
	sigText, err := c.ReleaseSignature(ctx, tm.admin.AccountID, tok.Value, "legate", "v1.4.0", "linux", "amd64")
	if err != nil {
		t.Fatal(err)
	}
	if s, err := release.DecodeSignature(sigText); err != nil || s.Version != "v1.4.0" {
		t.Errorf("signature: %+v, %v", s, err)
	}
	_, err = c.DownloadRelease(ctx, tm.admin.AccountID, tok.Value, "legate", "v1.4.1", "linux", "amd64", &buf, 1<<20)
	wantCode(t, "download of an unsigned binary", err, protocol.CodeNotFound)
	_, err = c.DownloadRelease(ctx, tm.admin.AccountID, tok.Value, "legate", "v1.4.2", "linux", "amd64", &buf, 1<<20)
	wantCode(t, "download of a corrupted binary", err, protocol.CodeConflict)
	_, err = c.DownloadRelease(ctx, tm.admin.AccountID, tok.Value, "legate", "..", "linux", "amd64", &buf, 1<<20)
	if err == nil {
		t.Error("a version of .. was served")
	}
	_, err = c.DownloadRelease(ctx, tm.admin.AccountID, "wrong", "legate", "v1.4.0", "linux", "amd64", &buf, 1<<20)
	wantCode(t, "download with a wrong token", err, protocol.CodeUnauthenticated)

	// legate-delegate, the delegate alone: its own binary and signature.
	buf.Reset()
	if _, err := c.DownloadRelease(ctx, tm.admin.AccountID, tok.Value, "legate-delegate", "v1.4.0", "linux", "amd64", &buf, 1<<20); err != nil || buf.String() != "delegate 1.4.0" {
		t.Errorf("download legate-delegate: %q, %v", buf.String(), err)
	}
	if sigText, err := c.ReleaseSignature(ctx, tm.admin.AccountID, tok.Value, "legate-delegate", "v1.4.0", "linux", "amd64"); err != nil {
		t.Error(err)
	} else if s, err := release.DecodeSignature(sigText); err != nil || s.Which() != release.BinaryDelegate {
		t.Errorf("legate-delegate's signature: %+v, %v", s, err)
	}
	_, err = c.ReleaseSignature(ctx, tm.admin.AccountID, tok.Value, "legate-delegate", "v1.4.2", "linux", "amd64")
	wantCode(t, "legate-delegate signed as legate", err, protocol.CodeNotFound)
	_, err = c.DownloadRelease(ctx, tm.admin.AccountID, tok.Value, "legate-delegate", "v1.4.1", "linux", "amd64", &buf, 1<<20)
	wantCode(t, "a legate-delegate the release lacks", err, protocol.CodeNotFound)
	_, err = c.DownloadRelease(ctx, tm.admin.AccountID, tok.Value, "legate-manager", "v1.4.0", "linux", "amd64", &buf, 1<<20)
	wantCode(t, "an unknown binary", err, protocol.CodeBadRequest)
}

// TestUpgradeRings: the manager's version is offered to a ring only once
// every delegate of the nearest earlier ring with delegates runs it, for
// the soak time, with no failed upgrade to it.
func TestUpgradeRings(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	tm := startTestManager(t, Config{Version: "v1.5.0", UpgradeSoak: time.Minute, HeartbeatInterval: time.Hour, Now: clock.Now})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	tok, err := admin.CreateToken(ctx, "rings")
	if err != nil {
		t.Fatal(err)
	}
	register := func(name, host, version string) {
		t.Helper()
		if _, err := tm.client(t, "").Register(ctx, protocol.RegisterRequest{AccountID: tm.admin.AccountID, Token: tok.Value,
			Name: name, Hostname: host, IP: "127.0.0.1", Version: version}); err != nil {
			t.Fatal(err)
		}
	}
	ring := func(name, ring string) {
		t.Helper()
		if _, err := admin.SetUpgradePolicy(ctx, name, protocol.UpgradePolicyRequest{Action: protocol.UpgradeSetRing, Ring: ring}); err != nil {
			t.Fatal(err)
		}
	}
	wants := func(name string) (string, string) {
		t.Helper()
		ds, err := admin.ListDelegates(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds.Delegates {
			if d.Name == name {
				return d.WantedVersion, d.UpgradeWaiting
			}
		}
		t.Fatalf("no delegate %s", name)
		return "", ""
	}
	register("c", "c1", "v1.5.0")
	register("e", "e1", "v1.4.0")
	register("d", "d1", "v1.4.0")
	ring("c", protocol.RingCanary)
	ring("e", protocol.RingEarly)
	if w, why := wants("c"); w != "v1.5.0" || why != "" {
		t.Errorf("canary: wants %q (%s)", w, why)
	}
	if w, why := wants("e"); w != "" || !strings.Contains(why, "waits until ring canary has run v1.5.0 for 1m0s") {
		t.Errorf("early before the soak: wants %q (%s)", w, why)
	}
	if w, why := wants("d"); w != "" || why != "waits until every delegate of ring early runs v1.5.0" {
		t.Errorf("default: wants %q (%s)", w, why)
	}
	clock.Add(2 * time.Minute)
	if w, why := wants("e"); w != "v1.5.0" {
		t.Errorf("early after the soak: wants %q (%s)", w, why)
	}

	// A failed upgrade in the canary ring stops the next ring.
	register("c-two", "c2", "v1.4.0")
	ring("c-two", protocol.RingCanary)
	if _, err := tm.client(t, "").UpgradeCheck(ctx, tm.admin.AccountID, tok.Value, protocol.UpgradeCheckRequest{Name: "c-two", Hostname: "c2",
		Version: "v1.4.0", State: protocol.WatcherFailed, Target: "v1.5.0", Reason: "did not connect"}); err != nil {
		t.Fatal(err)
	}
	if w, why := wants("e"); w != "" || why != "ring canary had a failed upgrade to v1.5.0" {
		t.Errorf("early after a failed canary: wants %q (%s)", w, why)
	}
	register("c-two", "c2", "v1.5.0")
	if _, err := tm.client(t, "").UpgradeCheck(ctx, tm.admin.AccountID, tok.Value, protocol.UpgradeCheckRequest{Name: "c-two", Hostname: "c2",
		Version: "v1.5.0"}); err != nil {
		t.Fatal(err)
	}
	if w, why := wants("e"); w != "v1.5.0" {
		t.Errorf("early once the canary ring is whole again: wants %q (%s)", w, why)
	}

	// The early ring upgrades; the default ring soaks after it.
	register("e", "e1", "v1.5.0")
	if w, why := wants("d"); w != "" || !strings.Contains(why, "waits until ring early has run v1.5.0") {
		t.Errorf("default before early soaked: wants %q (%s)", w, why)
	}
	clock.Add(2 * time.Minute)
	if w, why := wants("d"); w != "v1.5.0" {
		t.Errorf("default after early soaked: wants %q (%s)", w, why)
	}
	// Pins and holds are not held by rings.
	ring("d", protocol.RingDefault)
	_, err = admin.SetUpgradePolicy(ctx, "e", protocol.UpgradePolicyRequest{Action: protocol.UpgradeSetRing, Ring: "beta"})
	wantCode(t, "an unknown ring", err, protocol.CodeBadRequest)
}
