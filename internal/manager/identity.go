package manager

import (
	"context"
	"time"

	"github.com/legate-dev/legate/internal/dispatch"
)

// identityOf is the identity service's housekeeping that dispatch's loops
// run: API key uses flushed with liveness, the audit log pruned with the
// delegates (dispatch.Housekeeping). It holds the manager, not the
// service, since dispatch is built first.
type identityOf struct{ m *Manager }

var _ dispatch.Housekeeping = identityOf{}

func (i identityOf) FlushAPIKeyUse(ctx context.Context) { i.m.identity.FlushAPIKeyUse(ctx) }

func (i identityOf) PruneAudit(ctx context.Context, now time.Time) int {
	return i.m.identity.PruneAudit(ctx, now)
}
