package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// "What runs where": per service and environment (and the pipeline's
// scope: one name may be deployed from several projects), the version
// that runs now is the last succeeded deployment by its end, and the one
// before is the last succeeded deployment that ended before it with
// another version (deploying the same version again does not make it
// the one to go back to; without versions, the one before).

// CurrentFilter selects the services and environments of an account.
type CurrentFilter struct {
	AccountID   string
	Service     string // "" for every service
	Environment string // "" for every environment
	// Org and Project, when Scoped, keep only that scope's.
	Scoped       bool
	Org, Project string
	// Scopes, when not nil, keeps those at or beneath one of them
	// (DeploymentFilter.Scopes).
	Scopes []ScopeFilter
}

// MaxCurrentRows bounds the services and environments CurrentDeployments
// returns.
const MaxCurrentRows = 1000

// CurrentDeployment is what runs in one environment of one service.
type CurrentDeployment struct {
	Current Deployment
	// Previous is nil when nothing succeeded before Current.
	Previous *Deployment
}

// CurrentDeployments returns, for each service and environment that f
// keeps and that has a succeeded deployment, the current and previous
// deployment, ordered by service, environment, org and project (at most
// MaxCurrentRows).
func (s *Store) CurrentDeployments(ctx context.Context, f CurrentFilter) ([]CurrentDeployment, error) {
	where := []string{"account_id = ?", "status = ?"}
	args := []any{f.AccountID, DeploymentSucceeded}
	if f.Service != "" {
		where = append(where, "service = ?")
		args = append(args, f.Service)
	}
	if f.Environment != "" {
		where = append(where, "environment = ?")
		args = append(args, f.Environment)
	}
	if f.Scoped {
		where = append(where, "org = ?", "project = ?")
		args = append(args, f.Org, f.Project)
	}
	if f.Scopes != nil {
		w, a := scopeWhere(f.Scopes)
		where = append(where, w)
		args = append(args, a...)
	}
	q := `SELECT ` + deploymentCols + ` FROM (SELECT ` + deploymentCols + `, ROW_NUMBER() OVER (
	PARTITION BY org, project, service, environment ORDER BY finished_at DESC, id DESC) AS n
	FROM deployments WHERE ` + strings.Join(where, " AND ") + `) latest WHERE n = 1
	ORDER BY service, environment, org, project LIMIT ?`
	args = append(args, MaxCurrentRows)
	rows, err := s.r(nil).query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("current deployments: %w", err)
	}
	cur, err := scanAll(rows, scanDeployment)
	if err != nil {
		return nil, fmt.Errorf("current deployments: %w", err)
	}
	out := make([]CurrentDeployment, 0, len(cur))
	for _, c := range cur {
		prev, err := s.PreviousDeployment(ctx, c)
		switch {
		case errors.Is(err, ErrNotFound):
			out = append(out, CurrentDeployment{Current: c})
		case err != nil:
			return nil, err
		default:
			out = append(out, CurrentDeployment{Current: c, Previous: &prev})
		}
	}
	return out, nil
}

// PreviousDeployment returns the succeeded deployment of d's service and
// environment (and scope) that ended last before d with another version
// than d's (any version when d has none); ErrNotFound when there is none.
func (s *Store) PreviousDeployment(ctx context.Context, d Deployment) (Deployment, error) {
	if d.FinishedAt == nil {
		return Deployment{}, fmt.Errorf("deployment before %s: it has not ended: %w", d.ID, ErrNotFound)
	}
	end := micros(*d.FinishedAt)
	q := `SELECT ` + deploymentCols + ` FROM deployments WHERE account_id = ? AND org = ? AND project = ? AND service = ?
	AND environment = ? AND status = ? AND (finished_at < ? OR (finished_at = ? AND id < ?))`
	args := []any{d.AccountID, d.Org, d.Project, d.Service, d.Environment, DeploymentSucceeded, end, end, d.ID}
	if d.Version != "" {
		q += ` AND version <> ?`
		args = append(args, d.Version)
	}
	q += ` ORDER BY finished_at DESC, id DESC LIMIT 1`
	prev, err := scanDeployment(s.r(nil).queryRow(ctx, q, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return Deployment{}, ErrNotFound
	}
	if err != nil {
		return Deployment{}, fmt.Errorf("deployment before %s: %w", d.ID, err)
	}
	return prev, nil
}
