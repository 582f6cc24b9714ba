package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// ErrInUse is returned when deleting something that others still use.
var ErrInUse = errors.New("in use")

// Org is an organization of an account.
type Org struct {
	AccountID string
	Name      string
	CreatedAt time.Time
}

// Project is a project of an organization.
type Project struct {
	AccountID string
	Org       string
	Name      string
	CreatedAt time.Time
}

// Connector is a named third-party endpoint.
type Connector struct {
	AccountID string
	Name      string
	URL       string
	Type      string
	Selectors []string
	// CAPEM and TokenSecret belong to a Kubernetes connector
	// (protocol.ConnectorKubernetes): the PEM of the CA that signs its API
	// server's certificate, and the name of the stored secret holding its
	// token (the token itself is never stored here).
	CAPEM       string
	TokenSecret string
	// Username and PasswordSecret are a verification provider's basic
	// auth (protocol.ProviderPrometheus, whose TokenSecret names the
	// secret of its bearer token instead): the name of the stored secret,
	// never the password.
	Username       string
	PasswordSecret string
	// LastSuccessInstance is the instance that last succeeded for it.
	LastSuccessInstance string
	CreatedAt           time.Time
}

// CapabilityResult is one validation of a capability criteria by one
// delegate instance: an allowlist entry when OK, a deny-list entry when
// not, valid until ExpiresAt.
type CapabilityResult struct {
	InstanceID string
	Criteria   string
	OK         bool
	Error      string
	CheckedAt  time.Time
	ExpiresAt  time.Time
}

// --- organizations and projects ------------------------------------------------

// CreateOrg creates an organization; ErrConflict if the name is taken.
func (s *Store) CreateOrg(ctx context.Context, o Org) error {
	err := s.insert(ctx, `INSERT INTO orgs (account_id, name, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
		o.AccountID, o.Name, micros(o.CreatedAt))
	if err != nil {
		return fmt.Errorf("create org %q: %w", o.Name, err)
	}
	return nil
}

// ListOrgs lists an account's organizations by name.
func (s *Store) ListOrgs(ctx context.Context, accountID string) ([]Org, error) {
	rows, err := s.r(nil).query(ctx, `SELECT account_id, name, created_at FROM orgs WHERE account_id = ? ORDER BY name`, accountID)
	if err != nil {
		return nil, fmt.Errorf("list orgs: %w", err)
	}
	out, err := scanAll(rows, scanOrg)
	if err != nil {
		return nil, fmt.Errorf("list orgs: %w", err)
	}
	return out, nil
}

// GetOrg returns an organization or ErrNotFound.
func (s *Store) GetOrg(ctx context.Context, accountID, name string) (Org, error) {
	o, err := scanOrg(s.r(nil).queryRow(ctx, `SELECT account_id, name, created_at FROM orgs WHERE account_id = ? AND name = ?`,
		accountID, name))
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Org{}, fmt.Errorf("get org %q: %w", name, err)
	}
	return o, nil
}

// DeleteOrg deletes an organization: ErrNotFound if unknown, ErrInUse if it
// still has projects, tokens that are not revoked, or configurations.
func (s *Store) DeleteOrg(ctx context.Context, accountID, name string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		// Locked (PostgreSQL) so that a concurrent CreateProject either
		// commits first and is counted below or finds the org gone.
		if err := exists(ctx, s.w(tx), `SELECT 1 FROM orgs WHERE account_id = ? AND name = ?`+s.lockClause("FOR UPDATE"),
			accountID, name); err != nil {
			return err
		}
		var n int
		if err := s.w(tx).queryRow(ctx, `SELECT COUNT(*) FROM projects WHERE account_id = ? AND org = ?`,
			accountID, name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("%w: %d project(s)", ErrInUse, n)
		}
		if err := s.w(tx).queryRow(ctx, `SELECT COUNT(*) FROM tokens WHERE account_id = ? AND org = ? AND revoked_at IS NULL`,
			accountID, name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("%w: %d token(s) not revoked", ErrInUse, n)
		}
		if err := s.w(tx).queryRow(ctx, `SELECT COUNT(*) FROM configurations WHERE account_id = ? AND org = ?`,
			accountID, name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("%w: %d configuration(s)", ErrInUse, n)
		}
		_, err := s.w(tx).exec(ctx, `DELETE FROM orgs WHERE account_id = ? AND name = ?`, accountID, name)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete org %q: %w", name, err)
	}
	return nil
}

// CreateProject creates a project: ErrNotFound if its org does not exist,
// ErrConflict if the org already has a project with that name.
func (s *Store) CreateProject(ctx context.Context, p Project) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		if err := exists(ctx, s.w(tx), `SELECT 1 FROM orgs WHERE account_id = ? AND name = ?`+s.lockClause("FOR SHARE"),
			p.AccountID, p.Org); err != nil {
			return fmt.Errorf("org %q: %w", p.Org, err)
		}
		res, err := s.w(tx).exec(ctx, `INSERT INTO projects (account_id, org, name, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			p.AccountID, p.Org, p.Name, micros(p.CreatedAt))
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
		return fmt.Errorf("create project %q: %w", p.Org+"/"+p.Name, err)
	}
	return nil
}

// ListProjects lists an account's projects (of one org when org != ""),
// ordered by org then name.
func (s *Store) ListProjects(ctx context.Context, accountID, org string) ([]Project, error) {
	const cols = `SELECT account_id, org, name, created_at FROM projects WHERE account_id = ?`
	var rows *sql.Rows
	var err error
	if org == "" {
		rows, err = s.r(nil).query(ctx, cols+` ORDER BY org, name`, accountID)
	} else {
		rows, err = s.r(nil).query(ctx, cols+` AND org = ? ORDER BY org, name`, accountID, org)
	}
	if err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	out, err := scanAll(rows, scanProject)
	if err != nil {
		return nil, fmt.Errorf("list projects: %w", err)
	}
	return out, nil
}

// GetProject returns a project or ErrNotFound.
func (s *Store) GetProject(ctx context.Context, accountID, org, name string) (Project, error) {
	p, err := scanProject(s.r(nil).queryRow(ctx, `SELECT account_id, org, name, created_at FROM projects
	WHERE account_id = ? AND org = ? AND name = ?`, accountID, org, name))
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Project{}, fmt.Errorf("get project %q: %w", org+"/"+name, err)
	}
	return p, nil
}

// DeleteProject deletes a project: ErrNotFound if unknown, ErrInUse if
// tokens that are not revoked or configurations still name it.
func (s *Store) DeleteProject(ctx context.Context, accountID, org, name string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		if err := exists(ctx, s.w(tx), `SELECT 1 FROM projects WHERE account_id = ? AND org = ? AND name = ?`+
			s.lockClause("FOR UPDATE"), accountID, org, name); err != nil {
			return err
		}
		var n int
		if err := s.w(tx).queryRow(ctx, `SELECT COUNT(*) FROM tokens
	WHERE account_id = ? AND org = ? AND project = ? AND revoked_at IS NULL`, accountID, org, name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("%w: %d token(s) not revoked", ErrInUse, n)
		}
		if err := s.w(tx).queryRow(ctx, `SELECT COUNT(*) FROM configurations WHERE account_id = ? AND org = ? AND project = ?`,
			accountID, org, name).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("%w: %d configuration(s)", ErrInUse, n)
		}
		_, err := s.w(tx).exec(ctx, `DELETE FROM projects WHERE account_id = ? AND org = ? AND name = ?`, accountID, org, name)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete project %q: %w", org+"/"+name, err)
	}
	return nil
}

// --- connectors ------------------------------------------------------------------

// CreateConnector creates a connector; ErrConflict if the name is taken.
func (s *Store) CreateConnector(ctx context.Context, c Connector) error {
	err := s.insert(ctx, `INSERT INTO connectors (`+connectorCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		c.AccountID, c.Name, c.URL, c.Type, encodeStrings(c.Selectors), c.LastSuccessInstance, micros(c.CreatedAt), c.CAPEM, c.TokenSecret,
		c.Username, c.PasswordSecret)
	if err != nil {
		return fmt.Errorf("create connector %q: %w", c.Name, err)
	}
	return nil
}

// ListConnectors lists an account's connectors by name.
func (s *Store) ListConnectors(ctx context.Context, accountID string) ([]Connector, error) {
	rows, err := s.r(nil).query(ctx, `SELECT `+connectorCols+` FROM connectors WHERE account_id = ? ORDER BY name`, accountID)
	if err != nil {
		return nil, fmt.Errorf("list connectors: %w", err)
	}
	out, err := scanAll(rows, scanConnector)
	if err != nil {
		return nil, fmt.Errorf("list connectors: %w", err)
	}
	return out, nil
}

// GetConnector returns a connector or ErrNotFound.
func (s *Store) GetConnector(ctx context.Context, accountID, name string) (Connector, error) {
	c, err := scanConnector(s.r(nil).queryRow(ctx, `SELECT `+connectorCols+` FROM connectors WHERE account_id = ? AND name = ?`,
		accountID, name))
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Connector{}, fmt.Errorf("get connector %q: %w", name, err)
	}
	return c, nil
}

// DeleteConnector deletes a connector or returns ErrNotFound.
func (s *Store) DeleteConnector(ctx context.Context, accountID, name string) error {
	res, err := s.w(nil).exec(ctx, `DELETE FROM connectors WHERE account_id = ? AND name = ?`, accountID, name)
	if err == nil {
		var n int64
		if n, err = res.RowsAffected(); err == nil && n == 0 {
			err = ErrNotFound
		}
	}
	if err != nil {
		return fmt.Errorf("delete connector %q: %w", name, err)
	}
	return nil
}

// SetConnectorSuccess records the instance that last succeeded for a
// connector (no error if the connector was deleted meanwhile).
func (s *Store) SetConnectorSuccess(ctx context.Context, accountID, name, instanceID string) error {
	if _, err := s.w(nil).exec(ctx, `UPDATE connectors SET last_success_instance = ? WHERE account_id = ? AND name = ?`,
		instanceID, accountID, name); err != nil {
		return fmt.Errorf("set last success of connector %q: %w", name, err)
	}
	return nil
}

// --- capability results ------------------------------------------------------------

// RecordCapabilities upserts results by (InstanceID, Criteria) in one
// transaction: the newest result replaces the previous one.
//
// "Newest" is by CheckedAt: a result checked before the stored one (a late,
// reordered report) does not replace it; one checked at the same time does,
// so within a batch the later of two equal results wins.
func (s *Store) RecordCapabilities(ctx context.Context, rs []CapabilityResult) error {
	if len(rs) == 0 {
		return nil
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		stmt, err := s.w(tx).stmt(ctx, `INSERT INTO capability_results
	(instance_id, criteria, ok, error, checked_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)
	ON CONFLICT (instance_id, criteria) DO UPDATE SET ok = excluded.ok, error = excluded.error,
	checked_at = excluded.checked_at, expires_at = excluded.expires_at
	WHERE capability_results.checked_at <= excluded.checked_at`)
		if err != nil {
			return err
		}
		for _, r := range rs {
			if _, err := stmt.ExecContext(ctx, r.InstanceID, r.Criteria, boolInt(r.OK), cleanText(r.Error),
				micros(r.CheckedAt), micros(r.ExpiresAt)); err != nil {
				return fmt.Errorf("instance %s, criteria %q: %w", r.InstanceID, r.Criteria, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record %d capability results: %w", len(rs), err)
	}
	return nil
}

// LiveCapabilities returns every result whose ExpiresAt is after now, for
// the instances of one account ("" = all accounts), ordered by instance
// then criteria. Expired rows may be deleted as a side effect.
//
// The purge takes the writer only when the expires_at index shows an
// expired row, so a read with nothing to purge stays on the reader pool.
func (s *Store) LiveCapabilities(ctx context.Context, accountID string, now time.Time) ([]CapabilityResult, error) {
	var rows *sql.Rows
	var err error
	if accountID == "" {
		rows, err = s.r(nil).query(ctx, `SELECT `+capabilityCols+` FROM capability_results
	WHERE expires_at > ? ORDER BY instance_id, criteria`, micros(now))
	} else {
		rows, err = s.r(nil).query(ctx, `SELECT c.instance_id, c.criteria, c.ok, c.error, c.checked_at, c.expires_at
	FROM capability_results c JOIN instances i ON i.id = c.instance_id
	WHERE i.account_id = ? AND c.expires_at > ? ORDER BY c.instance_id, c.criteria`, accountID, micros(now))
	}
	if err != nil {
		return nil, fmt.Errorf("live capabilities: %w", err)
	}
	out, err := scanAll(rows, scanCapability)
	if err != nil {
		return nil, fmt.Errorf("live capabilities: %w", err)
	}
	if err := s.purgeCapabilities(ctx, now); err != nil {
		return nil, fmt.Errorf("live capabilities: %w", err)
	}
	return out, nil
}

// purgeCapabilities deletes the results that expired at or before now.
func (s *Store) purgeCapabilities(ctx context.Context, now time.Time) error {
	var one int
	err := s.r(nil).queryRow(ctx, `SELECT 1 FROM capability_results WHERE expires_at <= ? LIMIT 1`, micros(now)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("purge expired capability results: %w", err)
	}
	// In a write transaction for its deadlock retry (PostgreSQL): managers
	// recording results meanwhile lock the same rows in another order.
	err = s.write(ctx, func(tx *sql.Tx) error {
		_, err := s.w(tx).exec(ctx, `DELETE FROM capability_results WHERE expires_at <= ?`, micros(now))
		return err
	})
	if err != nil {
		return fmt.Errorf("purge expired capability results: %w", err)
	}
	return nil
}

// --- delegate faults ---------------------------------------------------------------

// RequeueTask handles a delegate-fault result for a task running at epoch:
// the instance is appended to DeniedInstances; if Attempts <= Retries the
// task goes back to queued (cleared like ExpireLeases does, QueueDeadline =
// now + QueueTimeoutMS) and requeued is true; otherwise it ends failed with
// reason as its Error and its log is closed after chunk lastSeq (as
// CompleteTask does; 0 when no more output may come). ErrStaleLease if the
// task is not running at epoch (ErrNotFound for an unknown task). An empty
// instanceID means the instance holding the task.
func (s *Store) RequeueTask(ctx context.Context, id string, epoch int64, instanceID, reason string, lastSeq int64, now time.Time) (t Task, requeued bool, err error) {
	err = s.write(ctx, func(tx *sql.Tx) error {
		var err error
		t, err = getTaskForUpdate(ctx, s.w(tx), id)
		if err != nil {
			return err
		}
		if epoch <= 0 || t.Status != protocol.StatusRunning || t.Epoch != epoch {
			return ErrStaleLease
		}
		lost := instanceID
		if lost == "" {
			lost = t.InstanceID
		}
		deny(&t, lost)
		requeued = t.Attempts <= t.Retries
		if requeued {
			requeue(&t, now)
		} else {
			finish(&t, Result{Status: protocol.StatusFailed, Error: reason}, now)
		}
		err = updateTask(ctx, s.w(tx), t, protocol.StatusRunning, epoch)
		if errors.Is(err, errRowChanged) {
			return ErrStaleLease
		}
		if err != nil || requeued {
			return err
		}
		return closeLog(ctx, s.w(tx), id, lastSeq)
	})
	if err != nil {
		return Task{}, false, fmt.Errorf("requeue task %s (epoch %d): %w", id, epoch, err)
	}
	return t, requeued, nil
}

// --- rows --------------------------------------------------------------------------

func scanOrg(r rowScanner) (Org, error) {
	var o Org
	var created int64
	if err := r.Scan(&o.AccountID, &o.Name, &created); err != nil {
		return Org{}, err
	}
	o.CreatedAt = fromMicros(created)
	return o, nil
}

func scanProject(r rowScanner) (Project, error) {
	var p Project
	var created int64
	if err := r.Scan(&p.AccountID, &p.Org, &p.Name, &created); err != nil {
		return Project{}, err
	}
	p.CreatedAt = fromMicros(created)
	return p, nil
}

const connectorCols = `account_id, name, url, type, selectors, last_success_instance, created_at, ca_pem, token_secret, username, password_secret`

func scanConnector(r rowScanner) (Connector, error) {
	var c Connector
	var selectors string
	var created int64
	if err := r.Scan(&c.AccountID, &c.Name, &c.URL, &c.Type, &selectors, &c.LastSuccessInstance, &created, &c.CAPEM, &c.TokenSecret,
		&c.Username, &c.PasswordSecret); err != nil {
		return Connector{}, err
	}
	var err error
	if c.Selectors, err = decodeStrings(selectors); err != nil {
		return Connector{}, fmt.Errorf("connector %q: %w", c.Name, err)
	}
	c.CreatedAt = fromMicros(created)
	return c, nil
}

const capabilityCols = `instance_id, criteria, ok, error, checked_at, expires_at`

func scanCapability(r rowScanner) (CapabilityResult, error) {
	var c CapabilityResult
	var ok int
	var checked, expires int64
	if err := r.Scan(&c.InstanceID, &c.Criteria, &ok, &c.Error, &checked, &expires); err != nil {
		return CapabilityResult{}, err
	}
	c.OK = ok != 0
	c.CheckedAt = fromMicros(checked)
	c.ExpiresAt = fromMicros(expires)
	return c, nil
}

// scanAll scans every row with scan and closes rows.
func scanAll[T any](rows *sql.Rows, scan func(rowScanner) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// scanStrings reads a query of one text column (IDs, names) and closes
// its rows.
func scanStrings(rows *sql.Rows) ([]string, error) {
	return scanAll(rows, func(r rowScanner) (string, error) {
		var v string
		return v, r.Scan(&v)
	})
}

// exists runs a query that selects at most one row: ErrNotFound if it
// selects none.
func exists(ctx context.Context, h handle, query string, args ...any) error {
	var one int
	err := h.queryRow(ctx, query, args...).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	return err
}
