package manager

import (
	"context"
	"errors"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/identity"
	"github.com/legate-dev/legate/internal/pipeline/engine"
	"github.com/legate-dev/legate/internal/protocol"
)

// newEngine builds the pipeline engine over the manager's store, events
// stream and metrics; what it needs of the other services is dispatch and
// engineDeps.
func (m *Manager) newEngine() *engine.Service {
	deps := engineDeps{m}
	return engine.New(engine.Config{Store: m.st, Tasks: m.dispatch, Scopes: m.scopes, Secrets: deps, Principals: deps,
		Events: &m.events, Metrics: m.metrics.reg, DeploymentsPerHour: m.cfg.DeploymentsPerHour,
		DeploymentsPerDay: m.cfg.DeploymentsPerDay, RunAdvanceInterval: m.cfg.RunAdvanceInterval, Log: m.log, Now: m.cfg.Now})
}

// engineDeps is what the pipeline engine needs of the secrets and
// identity services: package engine's Secrets and Principals (its Tasks
// are dispatch's; Scopes is the scopes service).
type engineDeps struct{ m *Manager }

func (d engineDeps) SecretNeeds(ctx context.Context, acct string, spec protocol.TaskSpec) ([]api.Need, error) {
	return d.m.secrets.Needs(ctx, acct, spec)
}

func (d engineDeps) SealError(err error) error { return sealError(err) }

func (d engineDeps) PolicyOf(ctx context.Context, acct, kind, id string) (*access.Policy, bool, error) {
	pol, disabled, err := d.m.identity.Policy(ctx, acct, kind, id)
	if errors.Is(err, identity.ErrPrincipalGone) {
		return nil, false, nil
	}
	return pol, disabled, err
}
