package manager

import (
	"context"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/dispatch"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/secrets"
	"github.com/legate-dev/legate/internal/store"
)

// secretsOf is what dispatch asks of the secrets service: the checks of a
// submitted task's secret references (dispatch.Secrets). It holds the
// manager, not the service, since dispatch is built first.
type secretsOf struct{ m *Manager }

var _ dispatch.Secrets = secretsOf{}

func (s secretsOf) Bind(ctx context.Context, acct string, spec protocol.TaskSpec,
	policy func(context.Context) (*access.Policy, error)) ([]store.SecretBinding, error) {
	return s.m.secrets.Bind(ctx, acct, spec, policy)
}

func (s secretsOf) SealError(err error) error { return sealError(err) }

// sealError is secrets.KeyError for an error of a sealed value that does
// not open, nil for any other error (dispatch.Secrets, engine.Secrets).
func sealError(err error) error {
	if secrets.IsSealError(err) {
		return secrets.KeyError(err)
	}
	return nil
}
