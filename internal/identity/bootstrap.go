package identity

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/atomicfile"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// Admin is what an operator needs to drive a manager with the CLI.
type Admin struct {
	URL       string
	AccountID string
	APIKey    string
	// KeyName is the name of APIKey (legate apikey list shows it).
	KeyName string
	// EnvFile is the path of the admin.env file written for the CLI.
	EnvFile string
	// Created is true when this start created the account.
	Created bool
	// Replaced, when not empty, says why this start wrote a new API key
	// over the one admin.env held (it was revoked, or is unknown).
	Replaced string
}

// bootstrapKeyName is the name of the first API key; later ones that a
// start creates are named "admin-2", "admin-3", ...
const bootstrapKeyName = "admin"

// Bootstrap makes sure the store has an account and that dataDir/admin.env
// (mode 0600) holds LEGATE_URL, LEGATE_ACCOUNT_ID and LEGATE_API_KEY for it.
// On first start it creates the account (random ID) and its first API key,
// named "admin"; later starts keep both and only refresh LEGATE_URL. If
// admin.env was lost, or holds a key that was revoked, a new key is created
// and written (named "admin-2", "admin-3", ...; the others stay as they
// are): whoever can start a manager on the data can reach the API again.
// Several managers sharing one database each get a key of their own.
func Bootstrap(ctx context.Context, st Store, dataDir, url string, now time.Time) (Admin, error) {
	return BootstrapWithKey(ctx, st, dataDir, url, "", now)
}

// EnvAdminAPIKey presets the first administrator's API key, so that
// managers started together (replicas of a deployment on one database)
// and the people or jobs that deploy them know it in advance.
const EnvAdminAPIKey = "LEGATE_ADMIN_API_KEY"

// minPresetKeyLen is the least length of a preset key after its prefix:
// 32 hex digits, 128 bits.
const minPresetKeyLen = 32

// CheckPresetKey says what is wrong with a preset admin API key, if
// anything.
func CheckPresetKey(key string) error {
	rest, ok := strings.CutPrefix(key, apiKeyPrefix)
	if !ok || len(rest) < minPresetKeyLen || len(key) > 256 || !printableASCII(rest) {
		return fmt.Errorf("%s: want %s followed by at least %d letters or digits, e.g. %s$(openssl rand -hex 24)",
			EnvAdminAPIKey, apiKeyPrefix, minPresetKeyLen, apiKeyPrefix)
	}
	return nil
}

func printableASCII(s string) bool {
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// BootstrapWithKey is Bootstrap with the first administrator's API key
// preset (see EnvAdminAPIKey; empty: none). A preset key is created (for
// the user admin) on the start that first sees it and used by every
// start after, whatever admin.env holds; a revoked one stops the start,
// so that revoking it is not undone by a restart.
func BootstrapWithKey(ctx context.Context, st Store, dataDir, url, preset string, now time.Time) (Admin, error) {
	a := Admin{URL: url, EnvFile: filepath.Join(dataDir, "admin.env")}
	if preset != "" {
		if err := CheckPresetKey(preset); err != nil {
			return a, err
		}
	}
	acctID := newAccountID()
	stored, err := st.SettingOrInit(ctx, "bootstrap_account", acctID)
	if err != nil {
		return a, fmt.Errorf("bootstrap: %w", err)
	}
	a.AccountID = stored
	if stored == acctID {
		if err := st.CreateAccount(ctx, store.Account{ID: acctID, CreatedAt: now}); err != nil && !errors.Is(err, store.ErrConflict) {
			return a, fmt.Errorf("bootstrap: create account: %w", err)
		}
		a.Created = true
	}
	admin, err := ensureAdminUser(ctx, st, a.AccountID, now)
	if err != nil {
		return a, err
	}
	if preset != "" {
		if err := presetKey(ctx, st, &a, admin, preset, now); err != nil {
			return a, err
		}
		return a, writeAdminEnv(a)
	}
	prev, err := readEnvFile(a.EnvFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return a, fmt.Errorf("bootstrap: read %s: %w", a.EnvFile, err)
	}
	if key := prev["LEGATE_API_KEY"]; key != "" && prev["LEGATE_ACCOUNT_ID"] == a.AccountID {
		k, err := st.APIKeyByHash(ctx, api.HashSecret(key))
		switch {
		case err == nil && k.AccountID == a.AccountID && k.RevokedAt == nil:
			a.APIKey, a.KeyName = key, k.Name
		case err == nil && k.RevokedAt != nil:
			a.Replaced = fmt.Sprintf("the API key %q in %s was revoked", k.Name, a.EnvFile)
		case err == nil || errors.Is(err, store.ErrNotFound):
			a.Replaced = fmt.Sprintf("the API key in %s is unknown to the database", a.EnvFile)
		default:
			return a, fmt.Errorf("bootstrap: look up the API key of %s: %w", a.EnvFile, err)
		}
	}
	if a.APIKey == "" {
		a.APIKey = api.NewSecret(apiKeyPrefix, 24)
		k := store.APIKey{ID: api.NewID("ak_"), AccountID: a.AccountID, Hash: api.HashSecret(a.APIKey),
			OwnerKind: admin.Kind, OwnerID: admin.ID, CreatedAt: now}
		for n := 1; ; n++ {
			k.Name = bootstrapKeyName
			if n > 1 {
				k.Name += "-" + strconv.Itoa(n)
			}
			err := st.CreateAPIKey(ctx, k)
			if err == nil {
				break
			}
			if !errors.Is(err, store.ErrConflict) || n == 10000 {
				return a, fmt.Errorf("bootstrap: create API key: %w", err)
			}
		}
		a.KeyName = k.Name
	}
	return a, writeAdminEnv(a)
}

// writeAdminEnv writes a's credentials to its admin.env (mode 0600).
func writeAdminEnv(a Admin) error {
	content := fmt.Sprintf("# legate admin credentials (API key %q); load with: set -a; . %s; set +a\nLEGATE_URL=%s\nLEGATE_ACCOUNT_ID=%s\nLEGATE_API_KEY=%s\n",
		a.KeyName, a.EnvFile, a.URL, a.AccountID, a.APIKey)
	if err := atomicfile.WriteFile(a.EnvFile, []byte(content), 0o600); err != nil {
		return fmt.Errorf("bootstrap: write %s: %w", a.EnvFile, err)
	}
	return nil
}

// presetKey makes the preset key the administrator's: it uses it when the
// store has it (for this account, not revoked), else creates it. Managers
// starting at once on one database may both try; the one that loses the
// insert finds the winner's key.
func presetKey(ctx context.Context, st Store, a *Admin, admin store.Principal, key string, now time.Time) error {
	hash := api.HashSecret(key)
	for n := 1; n <= 10000; n++ {
		k, err := st.APIKeyByHash(ctx, hash)
		switch {
		case err == nil && k.AccountID != a.AccountID:
			return fmt.Errorf("%s belongs to another account than this database's %s", EnvAdminAPIKey, a.AccountID)
		case err == nil && k.RevokedAt != nil:
			return fmt.Errorf("%s is the API key %q, which was revoked: set a new key (or unset it to have admin.env get one)", EnvAdminAPIKey, k.Name)
		case err == nil:
			a.APIKey, a.KeyName = key, k.Name
			return nil
		case !errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("bootstrap: look up %s: %w", EnvAdminAPIKey, err)
		}
		k = store.APIKey{ID: api.NewID("ak_"), AccountID: a.AccountID, Hash: hash, Name: bootstrapKeyName,
			OwnerKind: admin.Kind, OwnerID: admin.ID, CreatedAt: now}
		if n > 1 {
			k.Name += "-" + strconv.Itoa(n)
		}
		err = st.CreateAPIKey(ctx, k)
		if err == nil {
			a.APIKey, a.KeyName = key, k.Name
			return nil
		}
		if !errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("bootstrap: create the API key of %s: %w", EnvAdminAPIKey, err)
		}
		// The name is taken, or another manager created this key: look
		// again.
	}
	return fmt.Errorf("bootstrap: no free name for the API key of %s", EnvAdminAPIKey)
}

// adminUserName is the user of the first administrator.
const adminUserName = "admin"

// ensureAdminUser makes sure the account has the user "admin"; when this
// call creates it (a new account, or the user was deleted), it binds the
// account-admin role to it at account scope. The keys Bootstrap writes to
// admin.env belong to it. (Migration 0008 made it for accounts that
// existed before users.)
func ensureAdminUser(ctx context.Context, st Store, acct string, now time.Time) (store.Principal, error) {
	p := store.Principal{ID: "u_" + acct, AccountID: acct, Kind: protocol.PrincipalUser, Name: adminUserName,
		Display: "first administrator", CreatedAt: now}
	err := st.CreatePrincipal(ctx, p)
	switch {
	case err == nil:
		b := store.Binding{ID: api.NewID("b_"), AccountID: acct, Role: access.RoleAccountAdmin, SubjectKind: p.Kind, SubjectID: p.ID, CreatedAt: now}
		if err := st.CreateBinding(ctx, b); err != nil && !errors.Is(err, store.ErrConflict) {
			return p, fmt.Errorf("bootstrap: bind account-admin to %s: %w", adminUserName, err)
		}
		return p, nil
	case !errors.Is(err, store.ErrConflict):
		return p, fmt.Errorf("bootstrap: create user %s: %w", adminUserName, err)
	}
	p, err = st.GetPrincipal(ctx, acct, adminUserName)
	if err != nil {
		return p, fmt.Errorf("bootstrap: user %s: %w", adminUserName, err)
	}
	return p, nil
}

func newAccountID() string {
	var b [14]byte
	_, _ = rand.Read(b[:])
	s := base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:])
	return s[:22]
}

func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok {
			out[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return out, sc.Err()
}
