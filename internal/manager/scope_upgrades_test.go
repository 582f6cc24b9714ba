package manager

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

// upgradeWorld is a manager of version v1.5.0 with a fake clock, org eng
// and project eng/web, an account token and a project token.
type upgradeWorld struct {
	tm              *testManager
	admin           *client.Client
	clock           *fakeClock
	acctTok, webTok string
}

func newUpgradeWorld(t *testing.T) *upgradeWorld {
	t.Helper()
	clock := &fakeClock{now: time.Now()}
	tm := startTestManager(t, Config{Version: "v1.5.0", UpgradeSoak: time.Minute, HeartbeatInterval: time.Hour, Now: clock.Now})
	ctx := context.Background()
	u := &upgradeWorld{tm: tm, admin: tm.client(t, tm.admin.APIKey), clock: clock}
	if _, err := u.admin.CreateOrg(ctx, "eng"); err != nil {
		t.Fatal(err)
	}
	if _, err := u.admin.CreateProject(ctx, "eng", "web"); err != nil {
		t.Fatal(err)
	}
	for _, tk := range []struct {
		dst          *string
		name         string
		org, project string
	}{{&u.acctTok, "acct", "", ""}, {&u.webTok, "web", "eng", "web"}} {
		tok, err := u.admin.CreateScopedToken(ctx, protocol.CreateTokenRequest{Name: tk.name, Org: tk.org, Project: tk.project})
		if err != nil {
			t.Fatal(err)
		}
		*tk.dst = tok.Value
	}
	return u
}

func (u *upgradeWorld) register(t *testing.T, token, name, host, version string) {
	t.Helper()
	if _, err := u.tm.client(t, "").Register(context.Background(), protocol.RegisterRequest{AccountID: u.tm.admin.AccountID,
		Token: token, Name: name, Hostname: host, IP: "127.0.0.1", Version: version}); err != nil {
		t.Fatal(err)
	}
}

func (u *upgradeWorld) check(t *testing.T, token string, req protocol.UpgradeCheckRequest) protocol.UpgradeCheckResponse {
	t.Helper()
	resp, err := u.tm.client(t, "").UpgradeCheck(context.Background(), u.tm.admin.AccountID, token, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// instance is the listed instance on host.
func (u *upgradeWorld) instance(t *testing.T, host string) protocol.Delegate {
	t.Helper()
	ds, err := u.admin.ListDelegates(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds.Delegates {
		if d.Hostname == host {
			return d
		}
	}
	t.Fatalf("no delegate on %s", host)
	return protocol.Delegate{}
}

// A project token registers a delegate under the name of the account's
// canary group, on an old version, and its watcher reports a failed
// upgrade: the account's rollout goes on, and the account's ring and pin
// do not reach the project's delegate. Groups are (scope, name).
func TestProjectDelegateCannotStallTheAccountsRings(t *testing.T) {
	u := newUpgradeWorld(t)
	ctx := context.Background()
	u.register(t, u.acctTok, "canary", "c1", "v1.5.0")
	u.register(t, u.acctTok, "build", "b1", "v1.4.0")
	if _, err := u.admin.SetUpgradePolicy(ctx, "canary", protocol.UpgradePolicyRequest{Action: protocol.UpgradeSetRing, Ring: protocol.RingCanary}); err != nil {
		t.Fatal(err)
	}
	if d := u.instance(t, "b1"); d.WantedVersion != "" || !strings.Contains(d.UpgradeWaiting, "ring canary") {
		t.Fatalf("the account's default ring before the canary soaked: wants %q (%s)", d.WantedVersion, d.UpgradeWaiting)
	}

	u.register(t, u.webTok, "canary", "evil", "v1.4.0")
	u.check(t, u.webTok, protocol.UpgradeCheckRequest{Name: "canary", Hostname: "evil", Version: "v1.4.0",
		State: protocol.WatcherFailed, Target: "v1.5.0", Reason: "made up"})
	u.clock.Add(2 * time.Minute)
	if d := u.instance(t, "b1"); d.WantedVersion != "v1.5.0" || d.UpgradeWaiting != "" {
		t.Errorf("the account's default ring after the canary soaked: wants %q (%s)", d.WantedVersion, d.UpgradeWaiting)
	}
	if resp := u.check(t, u.acctTok, protocol.UpgradeCheckRequest{Name: "build", Hostname: "b1", Version: "v1.4.0"}); resp.Wanted != "v1.5.0" || resp.Held {
		t.Errorf("the account's default ring's watcher is told %+v", resp)
	}
	// The project's delegate is in a group of its own: its project's
	// default ring, not the account's canary ring.
	if d := u.instance(t, "evil"); d.UpgradeRing != protocol.RingDefault || d.WantedVersion != "v1.5.0" {
		t.Errorf("the project's delegate: ring %q wants %q (%s)", d.UpgradeRing, d.WantedVersion, d.UpgradeWaiting)
	}
	if _, err := u.admin.SetUpgradePolicy(ctx, "canary", protocol.UpgradePolicyRequest{Action: protocol.UpgradeHold}); err != nil {
		t.Fatal(err)
	}
	if resp := u.check(t, u.webTok, protocol.UpgradeCheckRequest{Name: "canary", Hostname: "evil", Version: "v1.4.0"}); resp.Held || resp.Wanted != "v1.5.0" {
		t.Errorf("the account's hold reached the project's group: %+v", resp)
	}
	// The project's group has a policy of its own, set at its scope.
	p, err := u.admin.SetUpgradePolicy(ctx, "canary", protocol.UpgradePolicyRequest{Action: protocol.UpgradeSetRing, Ring: protocol.RingEarly,
		Org: "eng", Project: "web"})
	if err != nil || p.Org != "eng" || p.Project != "web" || p.Ring != protocol.RingEarly {
		t.Fatalf("a ring of the project's group: %+v, %v", p, err)
	}
	if d := u.instance(t, "evil"); d.UpgradeRing != protocol.RingEarly {
		t.Errorf("the project's group's ring: %q", d.UpgradeRing)
	}
	if d := u.instance(t, "c1"); d.UpgradeRing != protocol.RingCanary || d.WantedVersion != "" {
		t.Errorf("the account's canary group: ring %q wants %q", d.UpgradeRing, d.WantedVersion)
	}
	_, err = u.admin.SetUpgradePolicy(ctx, "canary", protocol.UpgradePolicyRequest{Action: protocol.UpgradeHold, Org: "nope"})
	wantCode(t, "a policy of an unknown org", err, protocol.CodeBadRequest)
}

// A watcher learns whether the version it is told to run is one an
// administrator pinned: only then does it go back to an older version.
func TestUpgradeCheckSaysWhenAVersionIsPinned(t *testing.T) {
	u := newUpgradeWorld(t)
	ctx := context.Background()
	u.register(t, u.acctTok, "build", "b1", "v1.5.2")
	req := protocol.UpgradeCheckRequest{Name: "build", Hostname: "b1", Version: "v1.5.2"}
	if resp := u.check(t, u.acctTok, req); resp.Wanted != "v1.5.0" || resp.Pinned {
		t.Errorf("the manager's own version: %+v", resp)
	}
	if _, err := u.admin.SetUpgradePolicy(ctx, "build", protocol.UpgradePolicyRequest{Action: protocol.UpgradePin, Version: "v1.5.0"}); err != nil {
		t.Fatal(err)
	}
	if resp := u.check(t, u.acctTok, req); resp.Wanted != "v1.5.0" || !resp.Pinned {
		t.Errorf("pinned by an administrator: %+v", resp)
	}
	if _, err := u.admin.SetUpgradePolicy(ctx, "build", protocol.UpgradePolicyRequest{Action: protocol.UpgradeRelease}); err != nil {
		t.Fatal(err)
	}
	if resp := u.check(t, u.acctTok, req); resp.Pinned {
		t.Errorf("released: %+v", resp)
	}
}

// The web UI's hold button of a delegate holds the group of each scope
// its instances were registered in (a group is a name in a scope).
func TestUIHoldReachesTheGroupOfEachScope(t *testing.T) {
	u := newUpgradeWorld(t)
	u.register(t, u.acctTok, "build", "b1", "v1.4.0")
	u.register(t, u.webTok, "build", "w1", "v1.4.0")
	b := newBrowser(t, u.tm)
	b.signIn(u.tm.admin.APIKey)
	if resp, page := b.do("POST", "/delegates/build/hold-upgrades", url.Values{"csrf": {b.csrf("/delegates/build")}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("hold upgrades: %d\n%s", resp.StatusCode, page)
	}
	for host, tok := range map[string]string{"b1": u.acctTok, "w1": u.webTok} {
		if resp := u.check(t, tok, protocol.UpgradeCheckRequest{Name: "build", Hostname: host, Version: "v1.4.0"}); !resp.Held || resp.Wanted != "" {
			t.Errorf("the watcher on %s after a hold from the web UI: %+v", host, resp)
		}
	}
}
