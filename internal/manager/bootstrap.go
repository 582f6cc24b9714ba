package manager

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
		a.APIKey = newSecret(apiKeyPrefix, 24)
		k := store.APIKey{ID: newID("ak_"), AccountID: a.AccountID, Hash: hashSecret(a.APIKey),
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
	content := fmt.Sprintf("# legate admin credentials (API key %q); load with: set -a; . %s; set +a\nLEGATE_URL=%s\nLEGATE_ACCOUNT_ID=%s\nLEGATE_API_KEY=%s\n",
		a.KeyName, a.EnvFile, url, a.AccountID, a.APIKey)
	if err := atomicfile.WriteFile(a.EnvFile, []byte(content), 0o600); err != nil {
		return a, fmt.Errorf("bootstrap: write %s: %w", a.EnvFile, err)
	}
	return a, nil
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
