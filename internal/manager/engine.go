package manager

import (
	"context"
	"errors"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/identity"
	"github.com/legate-dev/legate/internal/pipeline/engine"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/secrets"
	"github.com/legate-dev/legate/internal/store"
)

// newEngine builds the pipeline engine over the manager's store, events
// stream and metrics; what it needs of the manager is engineDeps.
func (m *Manager) newEngine() *engine.Service {
	deps := engineDeps{m}
	return engine.New(engine.Config{Store: m.st, Tasks: deps, Scopes: deps, Secrets: deps, Principals: deps,
		Events: &m.events, Metrics: m.metrics.reg, DeploymentsPerHour: m.cfg.DeploymentsPerHour,
		DeploymentsPerDay: m.cfg.DeploymentsPerDay, RunAdvanceInterval: m.cfg.RunAdvanceInterval, Log: m.log, Now: m.cfg.Now})
}

// engineDeps is what the pipeline engine needs of the manager: package
// engine's Tasks, Scopes, Secrets and Principals.
type engineDeps struct{ m *Manager }

// PrepareTask puts a step's task through the checks of a submitted task.
func (d engineDeps) PrepareTask(ctx context.Context, acct string, spec *protocol.TaskSpec) error {
	if err := d.m.validateSpec(spec); err != nil {
		return err
	}
	if err := d.m.resolveScopeAndConnector(ctx, acct, spec); err != nil {
		return err
	}
	return d.m.secrets.CheckRefs(ctx, acct, *spec)
}

func (d engineDeps) EndTask(ctx context.Context, t store.Task) { d.m.afterManagerFinish(ctx, t) }

func (d engineDeps) CheckScope(ctx context.Context, acct, org, project string) error {
	return d.m.checkScope(ctx, acct, org, project)
}

func (d engineDeps) SecretNeeds(ctx context.Context, acct string, spec protocol.TaskSpec) ([]api.Need, error) {
	return d.m.secrets.Needs(ctx, acct, spec)
}

func (d engineDeps) SealError(err error) error {
	if secrets.IsSealError(err) {
		return secrets.KeyError(err)
	}
	return nil
}

func (d engineDeps) PolicyOf(ctx context.Context, acct, kind, id string) (*access.Policy, bool, error) {
	pol, disabled, err := d.m.identity.Policy(ctx, acct, kind, id)
	if errors.Is(err, identity.ErrPrincipalGone) {
		return nil, false, nil
	}
	return pol, disabled, err
}
