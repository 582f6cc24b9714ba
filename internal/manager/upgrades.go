package manager

import (
	"context"
	"net/http"

	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
	"github.com/legate-dev/legate/internal/upgrades"
)

// upgradeHost is what the upgrades service asks of the manager: the
// delegate tokens watchers send, and the account's delegates its plan
// reads (upgrades.Tokens, upgrades.Delegates).
type upgradeHost struct{ m *Manager }

var (
	_ upgrades.Tokens    = upgradeHost{}
	_ upgrades.Delegates = upgradeHost{}
)

func (h upgradeHost) DelegateToken(w http.ResponseWriter, r *http.Request, accountID, token string) (store.Token, bool) {
	return h.m.delegateToken(w, r, accountID, token)
}

func (h upgradeHost) ListDelegates(ctx context.Context, acct string) ([]protocol.Delegate, error) {
	return h.m.delegateList(ctx, acct, false)
}
