package identity

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/cluster"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// The way back to the first administrator. A manager start (Bootstrap)
// never undoes what an administrator did to the user admin: one who
// disabled it, or removed its account-admin binding, meant it, and a
// restart must not silently reverse that. ResetAdmin, which `legate
// manager reset-admin` runs on the store directly (as rotate-key does:
// whoever can run it can read the database anyway), does it on purpose.

// AdminDisabled reports whether the account's user admin is disabled (the
// key Bootstrap wrote to admin.env is then refused), for a start to warn.
func AdminDisabled(ctx context.Context, st Store, acct string) (bool, error) {
	p, err := st.GetPrincipal(ctx, acct, adminUserName)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return p.Disabled, err
}

// ResetAdmin gives the account back its first administrator, for when no
// one can act as an account admin through the API any more: it enables the
// user admin (creating it if it was deleted) and binds account-admin to it
// at account scope if that binding is gone; then Bootstrap makes sure
// dataDir/admin.env holds a working key (the key there works again once
// admin is enabled; a revoked or missing one is replaced by a new key of
// admin). url is the LEGATE_URL to write; empty keeps the one admin.env
// holds. Managers sharing a PostgreSQL database drop their cached policies
// at once; a manager on SQLite sees the change within its API key cache
// TTL. It returns what it changed, for the operator.
func ResetAdmin(ctx context.Context, st Store, dataDir, url string, now time.Time) (Admin, []string, error) {
	a := Admin{EnvFile: filepath.Join(dataDir, "admin.env")}
	acct, err := st.Setting(ctx, "bootstrap_account")
	if errors.Is(err, store.ErrNotFound) {
		return a, nil, errors.New("this database has no account yet: start a manager on it, which creates the account and its admin")
	}
	if err != nil {
		return a, nil, err
	}
	prev, err := readEnvFile(a.EnvFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return a, nil, fmt.Errorf("read %s: %w", a.EnvFile, err)
	}
	if url == "" {
		url = prev["LEGATE_URL"]
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
		return a, nil, fmt.Errorf("%q is a service account, not the user admin: delete it through the API first", adminUserName)
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
		b := store.Binding{ID: api.NewID("b_"), AccountID: acct, Role: access.RoleAccountAdmin, SubjectKind: admin.Kind, SubjectID: admin.ID, CreatedAt: now}
		if err := st.CreateBinding(ctx, b); err != nil && !errors.Is(err, store.ErrConflict) {
			return a, nil, fmt.Errorf("bind account-admin to the user admin: %w", err)
		}
		did = append(did, "bound account-admin to the user admin at account scope")
	}
	if a, err = Bootstrap(ctx, st, dataDir, url, now); err != nil {
		return a, nil, err
	}
	k, err := st.APIKeyByHash(ctx, api.HashSecret(a.APIKey))
	switch {
	case err != nil:
		return a, nil, fmt.Errorf("look up the key of %s: %w", a.EnvFile, err)
	case a.APIKey != prev["LEGATE_API_KEY"]:
		why := ""
		if a.Replaced != "" {
			why = " (" + a.Replaced + ")"
		}
		did = append(did, fmt.Sprintf("wrote the new API key %q of the user admin to %s%s", a.KeyName, a.EnvFile, why))
	case k.OwnerID != admin.ID:
		did = append(did, fmt.Sprintf("%s holds the key %q, which is not the user admin's: remove the file and run this again for a key of admin", a.EnvFile, a.KeyName))
	default:
		did = append(did, fmt.Sprintf("the key %q in %s works again", a.KeyName, a.EnvFile))
	}
	if st.Shared() {
		if err := st.Broadcast(ctx, cluster.Encode(cluster.Event{Kind: cluster.Access, Origin: "reset-admin", Account: acct})); err != nil {
			did = append(did, fmt.Sprintf("could not tell the running managers (%v): they see the change within their API key cache TTL", err))
		}
	}
	return a, did, nil
}
