package manager

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/pgtest"
	"github.com/legate-dev/legate/internal/protocol"
)

// wantRevoked checks that c's key is refused as revoked, naming the key.
func wantRevoked(t *testing.T, what string, c *client.Client, name string) {
	t.Helper()
	_, err := c.WhoAmI(context.Background())
	var pe *protocol.Error
	if !errors.As(err, &pe) || pe.Code != protocol.CodeAPIKeyRevoked || pe.Status != http.StatusUnauthorized ||
		!strings.Contains(pe.Message, "revoked") || !strings.Contains(pe.Message, `"`+name+`"`) {
		t.Fatalf("%s: want 401 %s naming %q, got %v", what, protocol.CodeAPIKeyRevoked, name, err)
	}
}

func TestAPIKeyLifecycle(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	if tm.admin.KeyName != "admin" {
		t.Errorf("bootstrap key is named %q, want admin", tm.admin.KeyName)
	}

	ci, err := admin.CreateAPIKey(ctx, "ci")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ci.Value, "lgk_") || len(ci.Value) != len("lgk_")+48 {
		t.Errorf("new key value %q: want lgk_ and 48 hex digits", ci.Value)
	}
	want := protocol.APIKey{Name: "ci", Status: protocol.TokenActive, CreatedBy: "admin", OwnerKind: protocol.PrincipalUser, OwnerID: "u_" + tm.admin.AccountID, Owner: "admin"}
	ignore := cmpopts.IgnoreFields(protocol.APIKey{}, "Value", "CreatedAt", "LastUsedAt", "RevokedAt")
	if diff := cmp.Diff(want, ci, ignore); diff != "" {
		t.Errorf("created key (-want +got):\n%s", diff)
	}
	// The new key works; the manager stores only its hash.
	ciClient := tm.client(t, ci.Value)
	if who, err := ciClient.WhoAmI(ctx); err != nil || who.AccountID != tm.admin.AccountID {
		t.Fatalf("whoami with the new key: %+v, %v", who, err)
	}
	if k, err := tm.st.APIKeyByHash(ctx, api.HashSecret(ci.Value)); err != nil || k.Hash == ci.Value || k.Name != "ci" {
		t.Errorf("stored key: %+v, %v", k, err)
	}

	for _, tt := range []struct {
		name string
		code protocol.Code
	}{
		{"", protocol.CodeBadRequest},
		{"two words", protocol.CodeBadRequest},
		{"-dash", protocol.CodeBadRequest},
		{"esc\x1b[31m", protocol.CodeBadRequest},
		{strings.Repeat("k", 64), protocol.CodeBadRequest},
		{"ci", protocol.CodeConflict},
		{"admin", protocol.CodeConflict},
	} {
		_, err := admin.CreateAPIKey(ctx, tt.name)
		wantCode(t, "create API key "+tt.name, err, tt.code)
	}

	// The list shows every key, which one the caller uses, who made it
	// and its last use (the caller's own, known in memory, at least).
	list, err := ciClient.ListAPIKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantList := []protocol.APIKey{
		{Name: "admin", Status: protocol.TokenActive, OwnerKind: protocol.PrincipalUser, OwnerID: "u_" + tm.admin.AccountID, Owner: "admin"},
		{Name: "ci", Status: protocol.TokenActive, CreatedBy: "admin", OwnerKind: protocol.PrincipalUser, OwnerID: "u_" + tm.admin.AccountID, Owner: "admin", Current: true},
	}
	if diff := cmp.Diff(wantList, list.APIKeys, ignore); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}
	for _, k := range list.APIKeys {
		if k.LastUsedAt == nil {
			t.Errorf("key %s: no last use after it was used", k.Name)
		}
	}

	// Revoked through admin: refused at once, saying so.
	rk, err := admin.RevokeAPIKey(ctx, "ci", false)
	if err != nil {
		t.Fatal(err)
	}
	if rk.Status != protocol.TokenRevoked || rk.RevokedAt == nil || rk.RevokedBy != "admin" {
		t.Errorf("revoked key: %+v", rk)
	}
	wantRevoked(t, "revoked key", ciClient, "ci")
	if _, err := ciClient.CreateAPIKey(ctx, "sneaky"); !client.IsCode(err, protocol.CodeAPIKeyRevoked) {
		t.Errorf("create with a revoked key: %v", err)
	}
	if again, err := admin.RevokeAPIKey(ctx, "ci", false); err != nil || !again.RevokedAt.Equal(*rk.RevokedAt) {
		t.Errorf("second revoke: %+v, %v; want the first revocation", again, err)
	}
	_, err = admin.RevokeAPIKey(ctx, "nope", false)
	wantCode(t, "revoke unknown", err, protocol.CodeNotFound)
	// Another account's key neither sees nor revokes these.
	other := tm.client(t, tm.newAccount(t, "ACCOUNTB0000000000000B"))
	_, err = other.RevokeAPIKey(ctx, "ci", true)
	wantCode(t, "revoke from another account", err, protocol.CodeNotFound)
	if l, err := other.ListAPIKeys(ctx); err != nil || len(l.APIKeys) != 1 || !l.APIKeys[0].Current {
		t.Errorf("other account's list: %+v, %v", l, err)
	}

	// The last active key is not revoked without force, not even by itself.
	_, err = admin.RevokeAPIKey(ctx, "admin", false)
	wantCode(t, "revoke the last active key", err, protocol.CodeConflict)
	if !strings.Contains(err.Error(), "last active key") || !strings.Contains(err.Error(), "--force") {
		t.Errorf("refusal does not explain: %v", err)
	}
	if _, err := admin.WhoAmI(ctx); err != nil {
		t.Fatalf("refused revoke locked the key out: %v", err)
	}
	// With another active key, a key may revoke itself.
	ops, err := admin.CreateAPIKey(ctx, "ops")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RevokeAPIKey(ctx, "admin", false); err != nil {
		t.Fatalf("revoke the key in use while another is active: %v", err)
	}
	wantRevoked(t, "self-revoked key", admin, "admin")
	opsClient := tm.client(t, ops.Value)
	_, err = opsClient.RevokeAPIKey(ctx, "ops", false)
	wantCode(t, "revoke the last active key (ops)", err, protocol.CodeConflict)
	if _, err := opsClient.RevokeAPIKey(ctx, "ops", true); err != nil {
		t.Fatalf("forced revoke of the last key: %v", err)
	}
	wantRevoked(t, "forced revoke", opsClient, "ops")
}

// TestAPIKeyCacheTTL revokes a key behind the manager's back, as when the
// broadcast of another manager is lost: the cache TTL bounds how long the
// manager keeps accepting it.
func TestAPIKeyCacheTTL(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	tm := startTestManager(t, Config{Now: clock.Now, HeartbeatInterval: time.Hour, APIKeyCacheTTL: 10 * time.Second})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	k, err := admin.CreateAPIKey(ctx, "leaked")
	if err != nil {
		t.Fatal(err)
	}
	leaked := tm.client(t, k.Value)
	if _, err := leaked.WhoAmI(ctx); err != nil { // cached now
		t.Fatal(err)
	}
	if _, err := tm.st.RevokeAPIKey(ctx, tm.admin.AccountID, "leaked", "", clock.Now(), false); err != nil {
		t.Fatal(err)
	}
	clock.Add(9 * time.Second)
	if _, err := leaked.WhoAmI(ctx); err != nil {
		t.Fatalf("within the TTL the cached key still works (that is the window the broadcast closes): %v", err)
	}
	clock.Add(2 * time.Second)
	wantRevoked(t, "after the TTL", leaked, "leaked")
}

// TestAPIKeyLastUseIsBatched checks that uses are written by the flush
// loop, not by requests, and at most once a minute per key.
func TestAPIKeyLastUseIsBatched(t *testing.T) {
	t0 := time.Now().UTC().Truncate(time.Second)
	clock := &fakeClock{now: t0}
	// A heartbeat interval of an hour keeps the flush loop out of the way:
	// the test flushes.
	tm := startTestManager(t, Config{Now: clock.Now, HeartbeatInterval: time.Hour})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	stored := func() *time.Time {
		t.Helper()
		k, err := tm.st.APIKeyByHash(ctx, api.HashSecret(tm.admin.APIKey))
		if err != nil {
			t.Fatal(err)
		}
		return k.LastUsedAt
	}
	use := func() {
		t.Helper()
		for range 3 {
			if _, err := admin.WhoAmI(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	steps := []struct {
		what    string
		advance time.Duration
		use     bool
		want    time.Time // zero: not recorded yet
	}{
		{"used, not flushed: no write on the request path", 0, true, time.Time{}},
		{"flushed", 0, false, t0},
		{"used 30s later", 30 * time.Second, true, t0},
		{"flushed within the minute: not written", 0, false, t0},
		{"a minute after the write, the latest use is written", 31 * time.Second, false, t0.Add(30 * time.Second)},
		{"used again, flushed within the minute", 10 * time.Second, true, t0.Add(30 * time.Second)},
	}
	for i, s := range steps {
		clock.Add(s.advance)
		if s.use {
			use()
		}
		if i > 0 {
			tm.m.identity.FlushAPIKeyUse(ctx)
		}
		got := stored()
		if (got == nil) != s.want.IsZero() || (got != nil && !got.Equal(s.want)) {
			t.Fatalf("step %q: stored last use %v, want %v", s.what, got, s.want)
		}
	}
}

// TestAPIKeyRevokeReachesTheOtherManager runs two managers on one
// PostgreSQL database with a cache TTL of an hour: a key revoked through
// one is refused by the other at once, by broadcast.
func TestAPIKeyRevokeReachesTheOtherManager(t *testing.T) {
	dsn := pgtest.NewDatabase(t) // first: dropped after the managers stop
	cfg := Config{APIKeyCacheTTL: time.Hour}
	tms := startTestManagers(t, dsn, cfg, cfg)
	a, b := tms[0], tms[1]
	if a.admin.AccountID != b.admin.AccountID || a.admin.KeyName == b.admin.KeyName {
		t.Fatalf("managers: account %s key %s, account %s key %s; want one account, a key each",
			a.admin.AccountID, a.admin.KeyName, b.admin.AccountID, b.admin.KeyName)
	}
	ctx := context.Background()
	k, err := a.client(t, a.admin.APIKey).CreateAPIKey(ctx, "roaming")
	if err != nil {
		t.Fatal(err)
	}
	onB := b.client(t, k.Value)
	if _, err := onB.WhoAmI(ctx); err != nil { // B caches it, for an hour
		t.Fatal(err)
	}
	// B listens to the other managers before the revocation is sent.
	eventually(t, 10*time.Second, "manager B listening", func() bool { return b.m.bus.Listening() })
	if _, err := a.client(t, a.admin.APIKey).RevokeAPIKey(ctx, "roaming", false); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "manager B refusing the revoked key", func() bool {
		_, err := onB.WhoAmI(ctx)
		return client.IsCode(err, protocol.CodeAPIKeyRevoked)
	})
	// B's own key is untouched.
	if _, err := b.client(t, b.admin.APIKey).WhoAmI(ctx); err != nil {
		t.Errorf("manager B's key: %v", err)
	}
}
