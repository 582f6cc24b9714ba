package identity

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/store"
)

// TestBootstrapKeys: the first start makes the key "admin"; a restart
// keeps the key of admin.env while it is active, and replaces it (under a
// new name) when it was revoked or admin.env was lost.
func TestBootstrapKeys(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, dir+"/legate.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	boot := func(what string) Admin {
		t.Helper()
		a, err := Bootstrap(ctx, st, dir, "http://127.0.0.1:1", time.Now())
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		env, err := readEnvFile(a.EnvFile)
		if err != nil || env["LEGATE_API_KEY"] != a.APIKey || env["LEGATE_ACCOUNT_ID"] != a.AccountID {
			t.Fatalf("%s: admin.env %v, %v; want the key and account", what, env, err)
		}
		return a
	}
	first := boot("first start")
	if first.KeyName != "admin" || !first.Created || first.Replaced != "" {
		t.Errorf("first start: %+v", first)
	}
	if again := boot("restart"); again.APIKey != first.APIKey || again.KeyName != "admin" || again.Replaced != "" {
		t.Errorf("restart changed the key: %+v", again)
	}
	// Revoked (with force: it is the last one): the next start writes a new one.
	if _, err := st.RevokeAPIKey(ctx, first.AccountID, "admin", "", time.Now(), true); err != nil {
		t.Fatal(err)
	}
	second := boot("start after the key was revoked")
	if second.APIKey == first.APIKey || second.KeyName != "admin-2" || !strings.Contains(second.Replaced, "revoked") {
		t.Errorf("after revocation: %+v", second)
	}
	// admin.env lost: a new key; the one it held stays valid.
	if err := os.Remove(second.EnvFile); err != nil {
		t.Fatal(err)
	}
	third := boot("start without admin.env")
	if third.APIKey == second.APIKey || third.KeyName != "admin-3" {
		t.Errorf("after admin.env was lost: %+v", third)
	}
	if k, err := st.APIKeyByHash(ctx, api.HashSecret(second.APIKey)); err != nil || k.RevokedAt != nil {
		t.Errorf("the key of the lost admin.env: %+v, %v", k, err)
	}
}

// TestBootstrapPresetKey: LEGATE_ADMIN_API_KEY is the administrator's
// key on every manager that starts with it (replicas with data
// directories of their own, one database), also when they start at once;
// admin.env holds it; once revoked it stops a start instead of being
// replaced; a malformed one is refused with what to write.
func TestBootstrapPresetKey(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir()+"/legate.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	preset := "lgk_" + strings.Repeat("ab12", 12)
	boot := func(key string) (Admin, error) {
		return BootstrapWithKey(ctx, st, t.TempDir(), "http://127.0.0.1:1", key, time.Now())
	}

	// Replicas starting at once: one key, known to all.
	const replicas = 4
	admins := make([]Admin, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i := range replicas {
		wg.Add(1)
		go func() { defer wg.Done(); admins[i], errs[i] = boot(preset) }()
	}
	wg.Wait()
	for i := range replicas {
		if errs[i] != nil {
			t.Fatalf("replica %d: %v", i, errs[i])
		}
		env, err := readEnvFile(admins[i].EnvFile)
		if err != nil || env["LEGATE_API_KEY"] != preset || admins[i].APIKey != preset || admins[i].KeyName != admins[0].KeyName {
			t.Errorf("replica %d: %+v, admin.env %v, %v; want the preset key", i, admins[i], env, err)
		}
	}
	keys, err := st.ListAPIKeys(ctx, admins[0].AccountID)
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0].Hash != api.HashSecret(preset) || keys[0].OwnerID != "u_"+admins[0].AccountID {
		t.Errorf("keys after the replicas started: %+v; want the preset key alone, the user admin's", keys)
	}
	// Without the preset a start keeps using admin.env's key as before.
	if a, err := BootstrapWithKey(ctx, st, filepath.Dir(admins[0].EnvFile), "http://127.0.0.1:1", "", time.Now()); err != nil || a.APIKey != preset {
		t.Errorf("start without the preset on a replica's data: %+v, %v", a, err)
	}

	// Revoked: the next start with it stops and says why.
	if _, err := st.RevokeAPIKey(ctx, admins[0].AccountID, admins[0].KeyName, "", time.Now(), true); err != nil {
		t.Fatal(err)
	}
	if _, err := boot(preset); err == nil || !strings.Contains(err.Error(), "revoked") {
		t.Errorf("start with a revoked preset key: %v; want a refusal that says it was revoked", err)
	}

	for _, bad := range []string{"secret", "lgk_short", "lgk_" + strings.Repeat("a", 31), "lgk_" + strings.Repeat("é", 32), "lgk_" + strings.Repeat("a b ", 10)} {
		if _, err := boot(bad); err == nil || !strings.Contains(err.Error(), EnvAdminAPIKey) {
			t.Errorf("preset %q: %v; want a refusal naming %s", bad, err, EnvAdminAPIKey)
		}
	}
}
