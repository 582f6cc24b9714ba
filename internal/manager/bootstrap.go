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
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/atomicfile"
	"github.com/legate-dev/legate/internal/store"
)

// Admin is what an operator needs to drive a manager with the CLI.
type Admin struct {
	URL       string
	AccountID string
	APIKey    string
	// EnvFile is the path of the admin.env file written for the CLI.
	EnvFile string
	// Created is true when this start created the account.
	Created bool
}

// Bootstrap makes sure the store has an account and that dataDir/admin.env
// (mode 0600) holds LEGATE_URL, LEGATE_ACCOUNT_ID and LEGATE_API_KEY for it.
// On first start it creates the account (random ID) and an admin API key;
// later starts keep both and only refresh LEGATE_URL. If admin.env was
// lost, a new API key is created (the old one stays valid).
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
	prev, err := readEnvFile(a.EnvFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return a, fmt.Errorf("bootstrap: read %s: %w", a.EnvFile, err)
	}
	if key := prev["LEGATE_API_KEY"]; key != "" && prev["LEGATE_ACCOUNT_ID"] == a.AccountID {
		if acct, err := st.AccountForAPIKey(ctx, hashSecret(key)); err == nil && acct == a.AccountID {
			a.APIKey = key
		}
	}
	if a.APIKey == "" {
		a.APIKey = newSecret("lgk_", 24)
		if err := st.CreateAPIKey(ctx, a.AccountID, "admin", hashSecret(a.APIKey), now); err != nil {
			return a, fmt.Errorf("bootstrap: create API key: %w", err)
		}
	}
	content := fmt.Sprintf("# legate admin credentials; load with: set -a; . %s; set +a\nLEGATE_URL=%s\nLEGATE_ACCOUNT_ID=%s\nLEGATE_API_KEY=%s\n",
		a.EnvFile, url, a.AccountID, a.APIKey)
	if err := atomicfile.WriteFile(a.EnvFile, []byte(content), 0o600); err != nil {
		return a, fmt.Errorf("bootstrap: write %s: %w", a.EnvFile, err)
	}
	return a, nil
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
