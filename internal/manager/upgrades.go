package manager

import (
	"context"
	"net/http"

	"github.com/legate-dev/legate/internal/dispatch"
	"github.com/legate-dev/legate/internal/protocol"
)

// upgradesOf is what dispatch asks of the upgrades service: refusing a
// registration of an expired version, and the upgrade fields of the
// delegate listings (dispatch.Upgrades). It holds the manager, not the
// service: upgrades is built after dispatch, whose tokens and delegates
// it reads (upgrades.Tokens and upgrades.Delegates are dispatch's).
type upgradesOf struct{ m *Manager }

var _ dispatch.Upgrades = upgradesOf{}

func (u upgradesOf) RefusedFrom(v string) string { return u.m.upgrades.RefusedFrom(v) }

func (u upgradesOf) RefuseExpired(w http.ResponseWriter, r *http.Request, req protocol.RegisterRequest, org, project string) bool {
	return u.m.upgrades.RefuseExpired(w, r, req, org, project)
}

func (u upgradesOf) View(ctx context.Context, acct string, ds, plan []protocol.Delegate) error {
	return u.m.upgrades.View(ctx, acct, ds, plan)
}

func (u upgradesOf) PageView(ctx context.Context, acct string, ds []protocol.Delegate) error {
	return u.m.upgrades.PageView(ctx, acct, ds)
}
