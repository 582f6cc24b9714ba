package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/pgtest"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/seal"
)

// newAPIKey creates an API key with the CLI and returns it (the last line).
func (c *cluster) newAPIKey(name string) string {
	c.t.Helper()
	out := strings.TrimSpace(c.mustCLI("apikey", "create", name))
	lines := strings.Split(out, "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// as runs the CLI with another API key.
func (c *cluster) as(key string, args ...string) cliResult {
	c.t.Helper()
	return c.cliEnv([]string{"LEGATE_API_KEY=" + key}, args...)
}

// wantKeyRevoked checks that a CLI call with key fails, saying the key
// was revoked.
func wantKeyRevoked(t *testing.T, r cliResult, name string) {
	t.Helper()
	if r.code != 1 || !strings.Contains(r.stderr, "revoked") || !strings.Contains(r.stderr, `"`+name+`"`) {
		t.Fatalf("with the revoked key %s: exit %d, stderr %q; want exit 1 and a message that it was revoked", name, r.code, r.stderr)
	}
}

// A leaked key is revoked and refused at once; the admin key keeps working.
func TestAPIKeyRevokedAtOnce(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	ci := c.newAPIKey("ci")
	if ci == c.apiKey || !strings.HasPrefix(ci, "lgk_") {
		t.Fatalf("new key %q", ci)
	}
	if r := c.as(ci, "token", "create", "from-ci"); r.code != 0 {
		t.Fatalf("the new key does not work: exit %d, stderr %q", r.code, r.stderr)
	}
	// Revoked through the admin key.
	if out := c.mustCLI("apikey", "revoke", "ci"); !strings.Contains(out, `"ci"`) {
		t.Errorf("revoke says %q", out)
	}
	wantKeyRevoked(t, c.as(ci, "token", "list"), "ci")
	wantKeyRevoked(t, c.as(ci, "apikey", "create", "persist"), "ci")

	var list protocol.APIKeyList
	if err := json.Unmarshal([]byte(c.mustCLI("apikey", "list", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	byName := map[string]protocol.APIKey{}
	for _, k := range list.APIKeys {
		byName[k.Name] = k
	}
	if k := byName["ci"]; k.Status != protocol.TokenRevoked || k.CreatedBy != "admin" || k.RevokedBy != "admin" || k.Value != "" {
		t.Errorf("ci in the list: %+v", k)
	}
	if k := byName["admin"]; k.Status != protocol.TokenActive || !k.Current || k.LastUsedAt == nil {
		t.Errorf("admin in the list: %+v", k)
	}
	if _, ok := byName["persist"]; ok {
		t.Error("the revoked key created a key")
	}
	// admin is now the last active key: not revoked without --force.
	if r := c.cli("apikey", "revoke", "admin"); r.code != 1 || !strings.Contains(r.stderr, "--force") {
		t.Errorf("revoke the last key: exit %d, stderr %q", r.code, r.stderr)
	}
	c.mustCLI("token", "list")
}

// Two managers on one PostgreSQL database, each trusting a cached key for
// an hour: a key revoked through manager A is refused by manager B at
// once. Only the broadcast between managers can do that.
func TestManagerPairAPIKeyRevokeReachesTheOtherManager(t *testing.T) {
	t.Parallel()
	dsn := pgtest.NewDatabase(t)
	flags := []string{"--api-key-cache-ttl", "1h", "--log-level", "debug"}
	key := []string{seal.EnvMasterKey + "=" + seal.EncodeKey(seal.NewKey())} // managers of one database share its master key
	a := startSharedManager(t, "manager A", dsn, key, flags...)
	b := startSharedManager(t, "manager B", dsn, key, flags...)
	eventually(t, 15*time.Second, "manager B listening to the other managers", func() bool {
		return strings.Contains(b.mgr.out.String(), "listening to other managers")
	})

	leaked := a.newAPIKey("leaked")
	if r := b.as(leaked, "token", "list"); r.code != 0 { // B caches the key now, for an hour
		t.Fatalf("the key on B: exit %d, stderr %q", r.code, r.stderr)
	}
	a.mustCLI("apikey", "revoke", "leaked")
	start := time.Now()
	eventually(t, 10*time.Second, "manager B refusing the key revoked through A", func() bool {
		r := b.as(leaked, "token", "list")
		return r.code != 0 && strings.Contains(r.stderr, "revoked")
	})
	t.Logf("manager B refused the key %s after the revocation through A returned", time.Since(start).Round(time.Millisecond))
	wantKeyRevoked(t, b.as(leaked, "delegates", "list"), "leaked")
	// Each manager's own key still works on both.
	for _, c := range []*cluster{a, b} {
		for _, key := range []string{a.apiKey, b.apiKey} {
			if r := c.as(key, "token", "list"); r.code != 0 {
				t.Errorf("%s with a manager's own key: exit %d, stderr %q", c.mgr.name, r.code, r.stderr)
			}
		}
	}
}
