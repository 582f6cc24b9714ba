package manager

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/access"
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
	// AdminDisabled is true when the user admin is disabled: the key in
	// admin.env is refused until an account admin enables it, or
	// ResetAdmin does (a start never re-enables it by itself).
	AdminDisabled bool
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
func Bootstrap(ctx context.Context, st *store.Store, dataDir, url string, now time.Time) (Admin, error) {
	a := Admin{URL: url, EnvFile: filepath.Join(dataDir, "admin.env")}
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
	prev, err := readEnvFile(a.EnvFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return a, fmt.Errorf("bootstrap: read %s: %w", a.EnvFile, err)
	}
	if key := prev["LEGATE_API_KEY"]; key != "" && prev["LEGATE_ACCOUNT_ID"] == a.AccountID {
		k, err := st.APIKeyByHash(ctx, hashSecret(key))
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
		if a.APIKey, a.KeyName, err = createAdminKey(ctx, st, a.AccountID, admin, now); err != nil {
			return a, fmt.Errorf("bootstrap: %w", err)
		}
	}
	a.AdminDisabled = admin.Disabled
	if err := writeAdminEnv(a); err != nil {
		return a, fmt.Errorf("bootstrap: %w", err)
	}
	return a, nil
}

// createAdminKey creates an API key of the user admin, named "admin",
// or "admin-2", "admin-3", ... when that name is taken.
func createAdminKey(ctx context.Context, st *store.Store, acct string, admin store.Principal, now time.Time) (value, name string, err error) {
	value = newSecret(apiKeyPrefix, 24)
	k := store.APIKey{ID: newID("ak_"), AccountID: acct, Hash: hashSecret(value),
		OwnerKind: admin.Kind, OwnerID: admin.ID, CreatedAt: now}
	for n := 1; ; n++ {
		k.Name = bootstrapKeyName
		if n > 1 {
			k.Name += "-" + strconv.Itoa(n)
		}
		err := st.CreateAPIKey(ctx, k)
		if err == nil {
			return value, k.Name, nil
		}
		if !errors.Is(err, store.ErrConflict) || n == 10000 {
			return "", "", fmt.Errorf("create API key: %w", err)
		}
	}
}

// writeAdminEnv writes a's credentials to a.EnvFile (mode 0600).
func writeAdminEnv(a Admin) error {
	content := fmt.Sprintf("# legate admin credentials (API key %q); load with: set -a; . %s; set +a\nLEGATE_URL=%s\nLEGATE_ACCOUNT_ID=%s\nLEGATE_API_KEY=%s\n",
		a.KeyName, a.EnvFile, a.URL, a.AccountID, a.APIKey)
	if err := atomicfile.WriteFile(a.EnvFile, []byte(content), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", a.EnvFile, err)
	}
	return nil
}

// ResetAdmin gives the account back its first administrator, for when no
// one can act as an account admin through the API any more (the user
// admin was disabled, lost its role, or its keys were revoked): it enables
// the user admin (creating it if it was deleted), binds account-admin to
// it at account scope if that binding is gone, creates a new API key for
// it and writes it to dataDir/admin.env, keeping LEGATE_URL from the file
// when url is empty. It works on the store directly, like rotate-key: who
// can run it can read the database anyway. Managers sharing a PostgreSQL
// database drop their cached policies at once; a running manager on
// SQLite sees the change within its --api-key-cache-ttl.
//
// A manager start does not do this by itself: an administrator who
// disabled admin, or removed its role, meant it, and a restart must not
// undo that silently. It returns what it changed, for the operator.
func ResetAdmin(ctx context.Context, st *store.Store, dataDir, url string, now time.Time) (Admin, []string, error) {
	a := Admin{URL: url, EnvFile: filepath.Join(dataDir, "admin.env")}
	acct, err := st.Setting(ctx, "bootstrap_account")
	if errors.Is(err, store.ErrNotFound) {
		return a, nil, errors.New("this database has no account yet: start a manager on it, which creates the account and its admin")
	}
	if err != nil {
		return a, nil, err
	}
	a.AccountID = acct
	if a.URL == "" {
		prev, err := readEnvFile(a.EnvFile)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return a, nil, fmt.Errorf("read %s: %w", a.EnvFile, err)
		}
		a.URL = prev["LEGATE_URL"]
	}
	var did []string
	if _, err := st.GetPrincipal(ctx, acct, adminUserName); errors.Is(err, store.ErrNotFound) {
		did = append(did, "created the user admin, account-admin at account scope (it had been deleted)")
	}
	admin, err := ensureAdminUser(ctx, st, acct, now)
	if err != nil {
		return a, nil, err
	}
	if admin.Kind != protocol.PrincipalUser {
		return a, nil, fmt.Errorf("%s is a service account, not the user admin: rename or delete it through the API first", adminUserName)
	}
	if admin.Disabled {
		if admin, err = st.UpdatePrincipal(ctx, acct, adminUserName, false, nil); err != nil {
			return a, nil, fmt.Errorf("enable the user admin: %w", err)
		}
		did = append(did, "enabled the user admin")
	}
	bs, err := st.ListBindings(ctx, acct, admin.ID)
	if err != nil {
		return a, nil, err
	}
	bound := false
	for _, b := range bs {
		bound = bound || (b.Role == access.RoleAccountAdmin && b.SubjectID == admin.ID && b.Org == "" && b.Project == "")
	}
	if !bound {
		b := store.Binding{ID: newID("b_"), AccountID: acct, Role: access.RoleAccountAdmin, SubjectKind: admin.Kind, SubjectID: admin.ID, CreatedAt: now}
		if err := st.CreateBinding(ctx, b); err != nil && !errors.Is(err, store.ErrConflict) {
			return a, nil, fmt.Errorf("bind account-admin to the user admin: %w", err)
		}
		did = append(did, "bound account-admin to the user admin at account scope")
	}
	if a.APIKey, a.KeyName, err = createAdminKey(ctx, st, acct, admin, now); err != nil {
		return a, nil, err
	}
	if err := writeAdminEnv(a); err != nil {
		return a, nil, err
	}
	did = append(did, fmt.Sprintf("created the API key %q of the user admin and wrote it to %s", a.KeyName, a.EnvFile))
	if st.Shared() {
		b, _ := json.Marshal(clusterEvent{Kind: clusterAccess, Origin: "reset-admin", Account: acct})
		if err := st.Broadcast(ctx, string(b)); err != nil {
			did = append(did, fmt.Sprintf("could not tell the running managers (%v): they see the change within their --api-key-cache-ttl", err))
		}
	}
	return a, did, nil
}

// adminUserName is the user of the first administrator.
const adminUserName = "admin"

// ensureAdminUser makes sure the account has the user "admin"; when this
// call creates it (a new account, or the user was deleted), it binds the
// account-admin role to it at account scope. The keys Bootstrap writes to
// admin.env belong to it. (Migration 0008 made it for accounts that
// existed before users.)
func ensureAdminUser(ctx context.Context, st *store.Store, acct string, now time.Time) (store.Principal, error) {
	p := store.Principal{ID: "u_" + acct, AccountID: acct, Kind: protocol.PrincipalUser, Name: adminUserName,
		Display: "first administrator", CreatedAt: now}
	err := st.CreatePrincipal(ctx, p)
	switch {
	case err == nil:
		b := store.Binding{ID: newID("b_"), AccountID: acct, Role: access.RoleAccountAdmin, SubjectKind: p.Kind, SubjectID: p.ID, CreatedAt: now}
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

// IssueToken creates a delegate token directly in the store (for dev mode,
// before the API is serving) and returns its value.
func IssueToken(ctx context.Context, st *store.Store, accountID, name string, now time.Time) (string, error) {
	value := newSecret("", 24)
	t := store.Token{ID: newID("k_"), AccountID: accountID, Name: name, Hash: hashSecret(value), CreatedAt: now}
	if err := st.CreateToken(ctx, t); err != nil {
		return "", fmt.Errorf("create token %q: %w", name, err)
	}
	return value, nil
}
