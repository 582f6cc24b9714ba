package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Deployments: one record per run of a deployment stage, and the
// per-account limits on how many may start in a rolling hour and a rolling
// 24 hours. BeginDeployment counts and inserts in one write transaction
// that holds the account's row lock on PostgreSQL (SQLite's single writer
// serializes it already), so several managers on one database never let
// more than the limit through.

// Deployment statuses.
const (
	DeploymentRunning   = "running"
	DeploymentSucceeded = "succeeded"
	DeploymentFailed    = "failed"
	DeploymentCancelled = "cancelled"
	// DeploymentRolledBack: its deploy failed and was rolled back to what
	// ran before.
	DeploymentRolledBack = "rolled_back"
)

// ValidDeploymentEnd reports whether status may end a deployment.
func ValidDeploymentEnd(status string) bool {
	switch status {
	case DeploymentSucceeded, DeploymentFailed, DeploymentCancelled, DeploymentRolledBack:
		return true
	}
	return false
}

// Deployment is one run of a deployment stage.
type Deployment struct {
	ID        string
	AccountID string
	// Org and Project are the pipeline's scope ("" above their level).
	Org, Project string
	Service      string
	Environment  string
	// Version is the version input of the run ("" when it has none).
	Version  string
	Pipeline string
	RunID    string
	Stage    string
	// PrincipalKind and PrincipalName say who triggered the run (a user,
	// a service account, a webhook).
	PrincipalKind string
	PrincipalName string
	Status        string
	StartedAt     time.Time
	// FinishedAt is nil while the deployment runs.
	FinishedAt *time.Time
	// Records is what its deploy steps reported they deployed: a JSON
	// array of protocol.DeployRecord ("" for none), set when it ends.
	Records string
	// RollbackOf is the deployment this one rolls back ("" for none):
	// its run was started by a rollback.
	RollbackOf string
	// Verifications is what its verify steps saw and decided: a JSON
	// array of protocol.DeploymentVerification ("" for none), set when it
	// ends. Reason says why it failed ("" when it did not or none is
	// known), e.g. the metric a verification failed on.
	Verifications string
	Reason        string
}

// DeploymentEnd is how a deployment ends.
type DeploymentEnd struct {
	// Status is succeeded, failed, cancelled or rolled_back.
	Status string
	// Records, Verifications and Reason: see Deployment.
	Records       string
	Verifications string
	Reason        string
}

// DeploymentLimits are an account's limits: at most PerHour deployments
// started in any rolling hour and PerDay in any rolling 24 hours; 0 means
// unlimited.
type DeploymentLimits struct {
	PerHour int
	PerDay  int
}

// StoredLimits is what an account's administrators set: a nil field
// means the manager's default.
type StoredLimits struct {
	PerHour *int
	PerDay  *int
	// UpdatedAt is zero when the account never set its limits.
	UpdatedAt time.Time
}

// Apply returns the effective limits: the stored ones over defaults.
func (l StoredLimits) Apply(defaults DeploymentLimits) DeploymentLimits {
	if l.PerHour != nil {
		defaults.PerHour = *l.PerHour
	}
	if l.PerDay != nil {
		defaults.PerDay = *l.PerDay
	}
	return defaults
}

// The two windows the limits apply to.
const (
	HourWindow = time.Hour
	DayWindow  = 24 * time.Hour
)

// WindowUsage is how much of one limit an account uses.
type WindowUsage struct {
	// Window is HourWindow or DayWindow.
	Window time.Duration
	// Limit is the limit (0: unlimited).
	Limit int
	// Used counts the deployments started within the window before now.
	Used int
	// NextFree is when the next slot frees up (the oldest deployment that
	// keeps the window full leaves it); zero while a slot is free.
	NextFree time.Time
}

// Full reports whether the window has no free slot.
func (u WindowUsage) Full() bool { return u.Limit > 0 && u.Used >= u.Limit }

// WindowName is how messages name the window: "hour" or "24 hours".
func WindowName(w time.Duration) string {
	if w == HourWindow {
		return "hour"
	}
	return "24 hours"
}

// DeploymentUsage is an account's usage of both limits at one instant.
type DeploymentUsage struct {
	Hour, Day WindowUsage
	// Custom reports whether the account set its own limits (either).
	Custom bool
}

// LimitError refuses a deployment that would exceed a limit.
type LimitError struct {
	Usage WindowUsage
}

func (e *LimitError) Error() string {
	u := e.Usage
	return fmt.Sprintf("deployment limit reached: %d of %d deployments per %s used; the next slot frees up at %s",
		u.Used, u.Limit, WindowName(u.Window), u.NextFree.UTC().Format(time.RFC3339))
}

// Message is the error's text with the time until the next slot from now.
func (e *LimitError) Message(now time.Time) string {
	u := e.Usage
	wait := u.NextFree.Sub(now).Round(time.Second)
	if wait < time.Second {
		wait = time.Second
	}
	return fmt.Sprintf("%s (in %s)", e.Error(), wait)
}

const deploymentCols = `id, account_id, org, project, service, environment, version, pipeline, run_id, stage,
	principal_kind, principal_name, status, started_at, finished_at, records, rollback_of,
	verifications, reason`

func scanDeployment(r rowScanner) (Deployment, error) {
	var d Deployment
	var started int64
	var finished sql.NullInt64
	if err := r.Scan(&d.ID, &d.AccountID, &d.Org, &d.Project, &d.Service, &d.Environment, &d.Version, &d.Pipeline,
		&d.RunID, &d.Stage, &d.PrincipalKind, &d.PrincipalName, &d.Status, &started, &finished, &d.Records, &d.RollbackOf,
		&d.Verifications, &d.Reason); err != nil {
		return Deployment{}, err
	}
	d.StartedAt, d.FinishedAt = fromMicros(started), fromNullMicros(finished)
	return d, nil
}

// storedLimits reads an account's own limits through h.
func storedLimits(ctx context.Context, h handle, acct string) (StoredLimits, error) {
	var perHour, perDay sql.NullInt64
	var updated int64
	err := h.queryRow(ctx, `SELECT per_hour, per_day, updated_at FROM deployment_limits WHERE account_id = ?`, acct).
		Scan(&perHour, &perDay, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return StoredLimits{}, nil
	}
	if err != nil {
		return StoredLimits{}, err
	}
	return StoredLimits{PerHour: fromNullInt(perHour), PerDay: fromNullInt(perDay), UpdatedAt: fromMicros(updated)}, nil
}

// windowUsage counts an account's deployments within window before now
// through h and, when the window is full, finds when its next slot frees
// up. A deployment occupies [start, start+window).
func windowUsage(ctx context.Context, h handle, acct string, window time.Duration, limit int, now time.Time) (WindowUsage, error) {
	u := WindowUsage{Window: window, Limit: limit}
	from := micros(now.Add(-window))
	if err := h.queryRow(ctx, `SELECT COUNT(*) FROM deployments WHERE account_id = ? AND started_at > ?`, acct, from).Scan(&u.Used); err != nil {
		return WindowUsage{}, err
	}
	if !u.Full() {
		return u, nil
	}
	// Used-Limit+1 deployments must leave the window before one more
	// fits: the (Used-Limit)th oldest (from 0) is the last of them.
	var started int64
	if err := h.queryRow(ctx, `SELECT started_at FROM deployments WHERE account_id = ? AND started_at > ?
	ORDER BY started_at, id LIMIT 1 OFFSET ?`, acct, from, u.Used-u.Limit).Scan(&started); err != nil {
		return WindowUsage{}, err
	}
	u.NextFree = fromMicros(started).Add(window)
	return u, nil
}

func usage(ctx context.Context, h handle, acct string, defaults DeploymentLimits, now time.Time) (DeploymentUsage, error) {
	stored, err := storedLimits(ctx, h, acct)
	if err != nil {
		return DeploymentUsage{}, err
	}
	lim := stored.Apply(defaults)
	out := DeploymentUsage{Custom: stored.PerHour != nil || stored.PerDay != nil}
	if out.Hour, err = windowUsage(ctx, h, acct, HourWindow, lim.PerHour, now); err != nil {
		return DeploymentUsage{}, err
	}
	if out.Day, err = windowUsage(ctx, h, acct, DayWindow, lim.PerDay, now); err != nil {
		return DeploymentUsage{}, err
	}
	return out, nil
}

// DeploymentUsage returns an account's usage of its limits at now (the
// account's own limits over defaults).
func (s *Store) DeploymentUsage(ctx context.Context, acct string, defaults DeploymentLimits, now time.Time) (DeploymentUsage, error) {
	var out DeploymentUsage
	err := s.read(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = usage(ctx, s.r(tx), acct, defaults, now)
		return err
	})
	if err != nil {
		return DeploymentUsage{}, fmt.Errorf("deployment usage of %s: %w", acct, err)
	}
	return out, nil
}

// StoredDeploymentLimits returns the limits an account set (nil fields
// for those it did not).
func (s *Store) StoredDeploymentLimits(ctx context.Context, acct string) (StoredLimits, error) {
	l, err := storedLimits(ctx, s.r(nil), acct)
	if err != nil {
		return StoredLimits{}, fmt.Errorf("deployment limits of %s: %w", acct, err)
	}
	return l, nil
}

// SetDeploymentLimits changes an account's limits: a nil argument keeps
// that limit as it is; reset first puts both back to the manager's
// defaults. It returns the stored limits.
func (s *Store) SetDeploymentLimits(ctx context.Context, acct string, perHour, perDay *int, reset bool, now time.Time) (StoredLimits, error) {
	var out StoredLimits
	err := s.write(ctx, func(tx *sql.Tx) error {
		cur, err := storedLimits(ctx, s.w(tx), acct)
		if err != nil {
			return err
		}
		if reset {
			cur = StoredLimits{}
		}
		if perHour != nil {
			v := *perHour
			cur.PerHour = &v
		}
		if perDay != nil {
			v := *perDay
			cur.PerDay = &v
		}
		cur.UpdatedAt = fromMicros(micros(now))
		if _, err := s.w(tx).exec(ctx, `INSERT INTO deployment_limits (account_id, per_hour, per_day, updated_at) VALUES (?, ?, ?, ?)
	ON CONFLICT (account_id) DO UPDATE SET per_hour = excluded.per_hour, per_day = excluded.per_day, updated_at = excluded.updated_at`,
			acct, nullInt(cur.PerHour), nullInt(cur.PerDay), micros(cur.UpdatedAt)); err != nil {
			return err
		}
		out = cur
		return nil
	})
	if err != nil {
		return StoredLimits{}, fmt.Errorf("set deployment limits of %s: %w", acct, err)
	}
	return out, nil
}

// BeginDeployment records d as running from d.StartedAt unless that would
// exceed one of the account's limits (its own over defaults), in which
// case it records nothing and returns a *LimitError (the hourly limit's
// when both are reached). The count and the insert share one transaction
// holding the account row's lock, so concurrent begins, on one manager or
// several, let exactly the limit through. ErrNotFound if the account does
// not exist; ErrConflict if the ID does.
func (s *Store) BeginDeployment(ctx context.Context, d Deployment, defaults DeploymentLimits) (Deployment, error) {
	d.Status = DeploymentRunning
	d.StartedAt = fromMicros(micros(d.StartedAt))
	d.FinishedAt, d.Records, d.Verifications, d.Reason = nil, "", "", ""
	err := s.write(ctx, func(tx *sql.Tx) error {
		h := s.w(tx)
		var id string
		err := h.queryRow(ctx, `SELECT id FROM accounts WHERE id = ?`+s.lockClause("FOR UPDATE"), d.AccountID).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("account %s: %w", d.AccountID, ErrNotFound)
		}
		if err != nil {
			return err
		}
		u, err := usage(ctx, h, d.AccountID, defaults, d.StartedAt)
		if err != nil {
			return err
		}
		for _, w := range []WindowUsage{u.Hour, u.Day} {
			if w.Full() {
				return &LimitError{Usage: w}
			}
		}
		res, err := h.exec(ctx, `INSERT INTO deployments (`+deploymentCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT DO NOTHING`,
			d.ID, d.AccountID, d.Org, d.Project, d.Service, d.Environment, d.Version, d.Pipeline, d.RunID, d.Stage,
			d.PrincipalKind, d.PrincipalName, d.Status, micros(d.StartedAt), nil, "", d.RollbackOf, "", "")
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return ErrConflict
		}
		return nil
	})
	if err != nil {
		var le *LimitError
		if errors.As(err, &le) {
			return Deployment{}, le
		}
		return Deployment{}, fmt.Errorf("begin deployment %s/%s: %w", d.Service, d.Environment, err)
	}
	return d, nil
}

// EndDeployment finishes a running deployment as end says at now and
// returns it, and whether this call ended it. Ending one that has ended
// already changes nothing and returns it as it is (the engine may report
// twice after a restart). ErrNotFound if it does not exist.
func (s *Store) EndDeployment(ctx context.Context, acct, id string, end DeploymentEnd, now time.Time) (Deployment, bool, error) {
	if !ValidDeploymentEnd(end.Status) {
		return Deployment{}, false, fmt.Errorf("end deployment %s: status %q is not succeeded, failed, cancelled or rolled_back", id, end.Status)
	}
	var out Deployment
	ended := false
	err := s.write(ctx, func(tx *sql.Tx) error {
		h := s.w(tx)
		d, err := scanDeployment(h.queryRow(ctx, `SELECT `+deploymentCols+` FROM deployments WHERE account_id = ? AND id = ?`+
			s.lockClause("FOR UPDATE"), acct, id))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		ended = false
		if d.FinishedAt == nil {
			d.Status, d.FinishedAt, d.Records = end.Status, timePtr(now), end.Records
			d.Verifications, d.Reason = end.Verifications, end.Reason
			if _, err := h.exec(ctx, `UPDATE deployments SET status = ?, finished_at = ?, records = ?, verifications = ?, reason = ? WHERE id = ?`,
				d.Status, micros(*d.FinishedAt), d.Records, d.Verifications, d.Reason, d.ID); err != nil {
				return err
			}
			ended = true
		}
		out = d
		return nil
	})
	if err != nil {
		return Deployment{}, false, fmt.Errorf("end deployment %s: %w", id, err)
	}
	return out, ended, nil
}

// GetDeployment returns a deployment or ErrNotFound.
func (s *Store) GetDeployment(ctx context.Context, acct, id string) (Deployment, error) {
	d, err := scanDeployment(s.r(nil).queryRow(ctx, `SELECT `+deploymentCols+` FROM deployments WHERE account_id = ? AND id = ?`, acct, id))
	if err != nil {
		return Deployment{}, fmt.Errorf("get deployment %s: %w", id, notFound(err))
	}
	return d, nil
}

// DeploymentFilter selects deployments of an account.
type DeploymentFilter struct {
	AccountID   string
	Service     string // "" for every service
	Environment string // "" for every environment
	// Since keeps those started at or after it (zero: all).
	Since time.Time
	// Scopes, when not nil, keeps those at or beneath one of them, as
	// TaskFilter.Scopes does.
	Scopes []ScopeFilter
	// Before, when not nil, starts the page after this deployment in the
	// listing's order (newest first): the last of the previous page.
	Before *Deployment
	// Limit caps the number of rows; 0 means 100, at most 1000.
	Limit int
}

// ListDeployments lists deployments newest first (ties broken by ID,
// descending).
func (s *Store) ListDeployments(ctx context.Context, f DeploymentFilter) ([]Deployment, error) {
	where := []string{"account_id = ?"}
	args := []any{f.AccountID}
	if f.Service != "" {
		where = append(where, "service = ?")
		args = append(args, f.Service)
	}
	if f.Environment != "" {
		where = append(where, "environment = ?")
		args = append(args, f.Environment)
	}
	if !f.Since.IsZero() {
		where = append(where, "started_at >= ?")
		args = append(args, micros(f.Since))
	}
	if f.Scopes != nil {
		w, a := scopeWhere(f.Scopes)
		where = append(where, w)
		args = append(args, a...)
	}
	if f.Before != nil {
		b := micros(f.Before.StartedAt)
		where = append(where, "(started_at < ? OR (started_at = ? AND id < ?))")
		args = append(args, b, b, f.Before.ID)
	}
	q := `SELECT ` + deploymentCols + ` FROM deployments WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY started_at DESC, id DESC LIMIT ?`
	args = append(args, listLimit(f.Limit))
	rows, err := s.r(nil).query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list deployments: %w", err)
	}
	out, err := scanAll(rows, scanDeployment)
	if err != nil {
		return nil, fmt.Errorf("list deployments: %w", err)
	}
	return out, nil
}
