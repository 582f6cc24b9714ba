package upgrades

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/leaktest"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

func TestMain(m *testing.M) { os.Exit(leaktest.Main(m.Run)) }

// fleet is the manager's side in the tests: every token is valid, and the
// account's delegates are what the test sets.
type fleet struct{ ds []protocol.Delegate }

func (f *fleet) DelegateToken(http.ResponseWriter, *http.Request, string, string) (store.Token, bool) {
	return store.Token{Name: "t"}, true
}

func (f *fleet) ListDelegates(context.Context, string) ([]protocol.Delegate, error) {
	return append([]protocol.Delegate(nil), f.ds...), nil
}

// newService is the service of a manager of version over a real SQLite
// store in t's directory.
func newService(t *testing.T, version string, now func() time.Time) (*Service, *store.Store, *fleet) {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "legate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	f := &fleet{}
	return New(Config{Store: st, Tokens: f, Delegates: f, Version: version, UpgradeSoak: time.Minute,
		Log: slog.New(slog.DiscardHandler), Now: now}), st, f
}

func TestCheckUpgradeRequest(t *testing.T) {
	for _, tc := range []struct {
		req  protocol.UpgradeCheckRequest
		want string
	}{
		{protocol.UpgradeCheckRequest{Name: " build ", Hostname: " h1 "}, ""},
		{protocol.UpgradeCheckRequest{Name: "build", Hostname: "h1", State: protocol.WatcherFailed, Reason: "x"}, ""},
		{protocol.UpgradeCheckRequest{Hostname: "h1"}, "name is required"},
		{protocol.UpgradeCheckRequest{Name: strings.Repeat("n", 64), Hostname: "h1"}, "name is required"},
		{protocol.UpgradeCheckRequest{Name: "build"}, "hostname is required"},
		{protocol.UpgradeCheckRequest{Name: "build", Hostname: "h1", Target: strings.Repeat("v", 65)}, "at most 64"},
		{protocol.UpgradeCheckRequest{Name: "build", Hostname: "h1", OS: strings.Repeat("o", 33)}, "at most 32"},
		{protocol.UpgradeCheckRequest{Name: "build", Hostname: "h1", Reason: strings.Repeat("r", 1025)}, "at most 1024"},
		{protocol.UpgradeCheckRequest{Name: "build", Hostname: "h1", State: "bored"}, `state "bored"`},
	} {
		req := tc.req
		err := checkUpgradeRequest(&req)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%+v: %v", tc.req, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%+v: %v, want %q", tc.req, err, tc.want)
		case err == nil && (req.Name != strings.TrimSpace(tc.req.Name) || req.Hostname != strings.TrimSpace(tc.req.Hostname)):
			t.Errorf("%+v: name and hostname not trimmed: %+v", tc.req, req)
		}
	}
}

func TestUpgradeState(t *testing.T) {
	s, _, _ := newService(t, "v1.4.0", nil)
	failed := &store.UpgradeReport{State: protocol.WatcherFailed, Target: "v1.4.0", Reason: "no space"}
	upgrading := &store.UpgradeReport{State: protocol.WatcherUpgrading, Target: "v1.4.0"}
	for _, tc := range []struct {
		v, wanted string
		held      bool
		rep       *store.UpgradeReport
		want      string
	}{
		{"v1.2.9", "v1.4.0", false, nil, protocol.UpgradeExpired},
		{"v1.4.0", "v1.4.0", false, nil, protocol.UpgradeCurrent},
		{"v1.3.0", "v1.4.0", false, nil, protocol.UpgradeAvailable},
		{"v1.3.0", "v1.4.0", true, nil, protocol.UpgradeCurrent},
		{"v1.3.0", "", false, nil, protocol.UpgradeCurrent},
		{"v1.3.0", "v1.4.0", false, failed, protocol.UpgradeFailed + ": no space"},
		{"v1.3.0", "v1.4.0", false, upgrading, protocol.UpgradeUpgrading},
		{"v1.3.0", "v1.3.5", false, failed, protocol.UpgradeAvailable}, // the report is of another target
	} {
		if got := s.upgradeState(tc.v, tc.wanted, tc.held, tc.rep); got != tc.want {
			t.Errorf("upgradeState(%s, %s, held %v, %+v) = %q, want %q", tc.v, tc.wanted, tc.held, tc.rep, got, tc.want)
		}
	}
}

// TestRefuseExpired: a delegate older than the manager accepts is told
// what to install: the manager's version, or its group's pin.
func TestRefuseExpired(t *testing.T) {
	s, st, _ := newService(t, "v1.4.0", nil)
	ctx := context.Background()
	if err := st.SetUpgradePolicy(ctx, "acc1", store.UpgradePolicy{Name: "pinned", Pinned: "v1.3.5"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, version string
		want          string // "" = accepted
	}{
		{"build", "v1.3.0", ""},
		{"build", "dev", ""},
		{"build", "v1.2.9", "delegate version v1.2.9 is older than this manager (v1.4.0) accepts (v1.3.0 or later): install legate v1.4.0"},
		{"pinned", "v1.2.9", "install legate v1.3.5"},
	} {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", protocol.PathRegister, nil)
		refused := s.RefuseExpired(w, r, protocol.RegisterRequest{AccountID: "acc1", Name: tc.name, Hostname: "h", Version: tc.version}, "", "")
		switch {
		case tc.want == "" && (refused || w.Body.Len() > 0):
			t.Errorf("%s %s: refused (%d %s)", tc.name, tc.version, w.Code, w.Body)
		case tc.want != "" && (!refused || w.Code != http.StatusUpgradeRequired || !strings.Contains(w.Body.String(), tc.want) ||
			!strings.Contains(w.Body.String(), string(protocol.CodeDelegateExpired))):
			t.Errorf("%s %s: refused %v, %d %s; want 426 with %q", tc.name, tc.version, refused, w.Code, w.Body, tc.want)
		}
	}
}

// TestRings: the default ring waits for the canary ring to run the
// manager's version, then for its soak time; a pinned group wants its pin
// and a held one nothing.
func TestRings(t *testing.T) {
	now := time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)
	s, st, f := newService(t, "v1.5.0", func() time.Time { return now })
	ctx := context.Background()
	for _, p := range []store.UpgradePolicy{{Name: "c", Ring: protocol.RingCanary}, {Name: "p", Pinned: "v1.4.2"}, {Name: "h", Held: true}} {
		if err := st.SetUpgradePolicy(ctx, "acc1", p); err != nil {
			t.Fatal(err)
		}
	}
	delegate := func(name, version string) protocol.Delegate {
		return protocol.Delegate{Name: name, Hostname: name + "-host", Version: version, Status: protocol.DelegateConnected}
	}
	type view struct{ Wanted, Waiting, Ring, State string }
	look := func() map[string]view {
		t.Helper()
		ds, _ := f.ListDelegates(ctx, "acc1")
		if err := s.View(ctx, "acc1", ds, nil); err != nil {
			t.Fatal(err)
		}
		page := []protocol.Delegate{delegate("d", "v1.4.0")}
		if err := s.PageView(ctx, "acc1", page); err != nil {
			t.Fatal(err)
		}
		out := map[string]view{"page": {page[0].WantedVersion, page[0].UpgradeWaiting, page[0].UpgradeRing, page[0].UpgradeState}}
		for _, d := range ds {
			out[d.Name] = view{d.WantedVersion, d.UpgradeWaiting, d.UpgradeRing, d.UpgradeState}
		}
		return out
	}
	f.ds = []protocol.Delegate{delegate("c", "v1.4.0"), delegate("d", "v1.4.0"), delegate("p", "v1.4.0"), delegate("h", "v1.4.0")}
	waitC := "waits until every delegate of ring canary runs v1.5.0"
	want := map[string]view{
		"c":    {"v1.5.0", "", protocol.RingCanary, protocol.UpgradeAvailable},
		"d":    {"", waitC, protocol.RingDefault, protocol.UpgradeCurrent},
		"page": {"", waitC, protocol.RingDefault, protocol.UpgradeCurrent},
		"p":    {"v1.4.2", "", protocol.RingDefault, protocol.UpgradeAvailable},
		"h":    {"", "", protocol.RingDefault, protocol.UpgradeCurrent},
	}
	if diff := cmp.Diff(want, look()); diff != "" {
		t.Errorf("canary behind (-want +got):\n%s", diff)
	}

	f.ds[0].Version = "v1.5.0"
	soak := "waits until ring canary has run v1.5.0 for 1m0s (at 2026-11-22T08:01:00Z)"
	want["c"] = view{"v1.5.0", "", protocol.RingCanary, protocol.UpgradeCurrent}
	want["d"] = view{"", soak, protocol.RingDefault, protocol.UpgradeCurrent}
	want["page"] = want["d"]
	if diff := cmp.Diff(want, look()); diff != "" {
		t.Errorf("canary soaking (-want +got):\n%s", diff)
	}

	now = now.Add(time.Minute)
	want["d"] = view{"v1.5.0", "", protocol.RingDefault, protocol.UpgradeAvailable}
	want["page"] = want["d"]
	if diff := cmp.Diff(want, look()); diff != "" {
		t.Errorf("canary soaked (-want +got):\n%s", diff)
	}
}

// TestReleaseFiles: nothing is served without a release directory, or
// for a name that is not a version or a platform.
func TestReleaseFiles(t *testing.T) {
	s, _, _ := newService(t, "v1.4.0", nil)
	if _, _, err := s.releaseFiles("legate", "v1.4.0", "linux", "amd64"); err == nil || !strings.Contains(err.Error(), "no release directory") {
		t.Errorf("without a release directory: %v", err)
	}
	s.cfg.ReleaseDir = t.TempDir()
	for _, tc := range [][3]string{{"..", "linux", "amd64"}, {"v1.4.0", "../x", "amd64"}, {"v1.4.0", "linux", "AMD64"}, {"v1.4.0", "", "amd64"}} {
		if _, _, err := s.releaseFiles("legate", tc[0], tc[1], tc[2]); err == nil || !strings.Contains(err.Error(), "not a valid version or platform") {
			t.Errorf("%v: %v", tc, err)
		}
	}
	if _, _, err := s.releaseFiles("legate", "v1.4.0", "linux", "amd64"); err == nil || !strings.Contains(err.Error(), "no legate of v1.4.0 for linux/amd64") {
		t.Errorf("a missing binary: %v", err)
	}
}

// TestRoutes: the routes list without a service (the manager's route
// table is read so in its tests).
func TestRoutes(t *testing.T) {
	var s *Service
	if n := len(s.Routes()); n != 4 {
		t.Errorf("%d routes, want 4", n)
	}
}
