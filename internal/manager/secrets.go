package manager

import (
	"context"

	"github.com/legate-dev/legate/internal/secrets"
)

// scopeChecker is what the secrets service asks of the manager: whether
// the org and project a secret is created at exist (secrets.Scopes).
type scopeChecker struct{ m *Manager }

var _ secrets.Scopes = scopeChecker{}

func (c scopeChecker) CheckScope(ctx context.Context, acct, org, project string) error {
	return c.m.checkScope(ctx, acct, org, project)
}
