// Package store keeps legate's durable state: accounts, API keys, delegate
// tokens, delegate instances, tasks and their logs. One Store type fronts
// both SQLite (embedded, pure Go, WAL) and PostgreSQL (several managers may
// share one database), with the same schema and embedded migrations. Claims
// are compare-and-set, so exactly one delegate wins a task. Secret values
// (task secrets, the session key) are sealed with a key ring the database
// never holds (secrets.go).
package store

import (
	"github.com/jackc/pgx/v5"

	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/seal"
)

// Store is the durable state of a manager. It is safe for concurrent use.
type Store struct {
	// writer has a single connection on SQLite: every write transaction
	// goes through it, so writers queue in Go instead of fighting over the
	// lock. On PostgreSQL it is a pool, the same as reader.
	writer *sql.DB
	// reader is a pool for plain reads (WAL lets them run alongside writes).
	reader  *sql.DB
	dialect dialect
	// Prepared statements of the writer and of the reader pool.
	wcache, rcache stmtCache
	// lanes share write transactions among concurrent writers
	// (groupcommit.go): one on SQLite, several on PostgreSQL, whose
	// groups run side by side on connections of the pool. nextLane turns
	// between them.
	lanes    []*groupCommit
	nextLane atomic.Uint64
	// pgConfig opens the dedicated LISTEN connection (PostgreSQL only).
	pgConfig *pgx.ConnConfig
	// keys seal and open the secret values at rest.
	keys *seal.Ring
}

// Options configures OpenWith. The zero value means the documented defaults.
type Options struct {
	// Keys seal the secret values the store keeps (task secrets, the
	// session key). Nil means a random key made for this Store alone: what
	// it seals cannot be opened once it is closed, by another Store or by
	// another process (fine for tests that never reopen a database; a
	// manager passes the ring from its key file or LEGATE_MASTER_KEY).
	Keys *seal.Ring
}

// Open opens (creating if needed) the store named by dsn and applies
// migrations. A dsn is a file path or "sqlite://PATH" for SQLite, or a
// "postgres://..." (or "postgresql://...") URL for PostgreSQL, where
// pool_max_conns=N sets the connection pool (default 16). It is OpenWith
// with zero Options: secret values are sealed with a key that dies with
// the Store.
func Open(ctx context.Context, dsn string) (*Store, error) {
	return OpenWith(ctx, dsn, Options{})
}

// OpenWith is Open with options.
func OpenWith(ctx context.Context, dsn string, opts Options) (*Store, error) {
	keys := opts.Keys
	if keys == nil {
		var err error
		if keys, err = seal.NewRing(seal.NewKey()); err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
	}
	var s *Store
	if isPostgresDSN(dsn) {
		var err error
		if s, err = openPostgres(ctx, dsn); err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
	} else {
		path, err := parseSQLiteDSN(dsn)
		if err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
		if s, err = openSQLite(ctx, path); err != nil {
			return nil, err
		}
	}
	s.keys = keys
	return s, nil
}

// Close releases the database.
func (s *Store) Close() error {
	errs := []error{s.rcache.close(), s.wcache.close()}
	if s.reader != nil && s.reader != s.writer {
		errs = append(errs, s.reader.Close())
	}
	if s.writer != nil {
		errs = append(errs, s.writer.Close())
	}
	return errors.Join(errs...)
}

// --- settings ---------------------------------------------------------------

// SettingOrInit returns the value stored under key, storing value first if
// the key is absent (atomic: concurrent callers all get the same value).
func (s *Store) SettingOrInit(ctx context.Context, key, value string) (string, error) {
	var stored string
	err := s.write(ctx, func(tx *sql.Tx) error {
		if _, err := s.w(tx).exec(ctx, `INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT DO NOTHING`, key, value); err != nil {
			return err
		}
		return s.w(tx).queryRow(ctx, `SELECT value FROM settings WHERE key = ?`, key).Scan(&stored)
	})
	if err != nil {
		return "", fmt.Errorf("setting %s: %w", key, err)
	}
	return stored, nil
}

// Setting returns the value stored under key; ErrNotFound.
func (s *Store) Setting(ctx context.Context, key string) (string, error) {
	var v string
	if err := s.r(nil).queryRow(ctx, `SELECT value FROM settings WHERE key = ?`, key).Scan(&v); err != nil {
		return "", fmt.Errorf("setting %s: %w", key, notFound(err))
	}
	return v, nil
}

// --- accounts -------------------------------------------------------------------

// CreateAccount creates an account. ErrConflict if the ID exists.
func (s *Store) CreateAccount(ctx context.Context, a Account) error {
	err := s.insert(ctx, `INSERT INTO accounts (id, created_at) VALUES (?, ?) ON CONFLICT DO NOTHING`,
		a.ID, micros(a.CreatedAt))
	if err != nil {
		return fmt.Errorf("create account %s: %w", a.ID, err)
	}
	return nil
}

// GetAccount returns an account or ErrNotFound.
func (s *Store) GetAccount(ctx context.Context, id string) (Account, error) {
	a := Account{ID: id}
	var created int64
	err := s.r(nil).queryRow(ctx, `SELECT created_at FROM accounts WHERE id = ?`, id).Scan(&created)
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Account{}, fmt.Errorf("get account %s: %w", id, err)
	}
	a.CreatedAt = fromMicros(created)
	return a, nil
}

// --- delegate tokens -----------------------------------------------------------

// CreateToken stores a token. ErrConflict if the account already has a token
// with that name (revoked tokens keep their name).
func (s *Store) CreateToken(ctx context.Context, t Token) error {
	err := s.insert(ctx, `INSERT INTO tokens (`+tokenCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		t.ID, t.AccountID, t.Name, t.Hash, micros(t.CreatedAt), nullMicros(t.RevokedAt), t.Org, t.Project, boolInt(t.RequireApproval))
	if err != nil {
		return fmt.Errorf("create token %q: %w", t.Name, err)
	}
	return nil
}

// ListTokens lists an account's tokens, oldest first.
func (s *Store) ListTokens(ctx context.Context, accountID string) ([]Token, error) {
	rows, err := s.r(nil).query(ctx, `SELECT `+tokenCols+` FROM tokens WHERE account_id = ? ORDER BY created_at, id`, accountID)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	var out []Token
	for rows.Next() {
		t, err := scanToken(rows)
		if err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	return out, nil
}

// TokenByHash finds an account's token by hash, revoked or not; ErrNotFound.
func (s *Store) TokenByHash(ctx context.Context, accountID, hash string) (Token, error) {
	t, err := scanToken(s.r(nil).queryRow(ctx, `SELECT `+tokenCols+` FROM tokens WHERE account_id = ? AND hash = ? ORDER BY created_at, id LIMIT 1`, accountID, hash))
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Token{}, fmt.Errorf("look up token: %w", err)
	}
	return t, nil
}

// TokenByID returns a token by ID or ErrNotFound.
func (s *Store) TokenByID(ctx context.Context, id string) (Token, error) {
	t, err := scanToken(s.r(nil).queryRow(ctx, `SELECT `+tokenCols+` FROM tokens WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Token{}, fmt.Errorf("get token %s: %w", id, err)
	}
	return t, nil
}

// RevokeToken marks an account's token revoked (idempotent: a second revoke
// keeps the first time) and returns it; ErrNotFound for an unknown name.
func (s *Store) RevokeToken(ctx context.Context, accountID, name string, now time.Time) (Token, error) {
	var t Token
	err := s.write(ctx, func(tx *sql.Tx) error {
		if _, err := s.w(tx).exec(ctx, `UPDATE tokens SET revoked_at = ? WHERE account_id = ? AND name = ? AND revoked_at IS NULL`,
			micros(now), accountID, name); err != nil {
			return err
		}
		var err error
		t, err = scanToken(s.w(tx).queryRow(ctx, `SELECT `+tokenCols+` FROM tokens WHERE account_id = ? AND name = ?`, accountID, name))
		if errors.Is(err, sql.ErrNoRows) {
			return ErrNotFound
		}
		return err
	})
	if err != nil {
		return Token{}, fmt.Errorf("revoke token %q: %w", name, err)
	}
	return t, nil
}

// --- delegate instances --------------------------------------------------------

// IdentityConflictError is UpsertInstance's refusal of a registration
// whose identity is bound to another token that is still valid. It
// matches ErrIdentityConflict (errors.Is).
type IdentityConflictError struct {
	// InstanceID is the instance the identity belongs to.
	InstanceID string
	// TokenID and TokenName are the token it is bound to.
	TokenID, TokenName string
}

func (e *IdentityConflictError) Error() string {
	return fmt.Sprintf("identity of instance %s is bound to token %q", e.InstanceID, e.TokenName)
}

// Is makes errors.Is(err, ErrIdentityConflict) hold.
func (e *IdentityConflictError) Is(target error) bool { return target == ErrIdentityConflict }

// UpsertInstance registers an instance. If (AccountID, IdentityKey) exists
// it keeps that row's ID and RegisteredAt, updates every other field from
// in, clears DeregisteredAt and increments Generation; otherwise it inserts
// in with Generation 1. It returns the stored row.
//
// An existing instance is bound to the token it was registered with: a
// registration with another TokenID fails with *IdentityConflictError
// (ErrIdentityConflict) unless that token was revoked or deleted, and then
// the instance is bound to the new token. The check and the update are one
// transaction (the row is locked on PostgreSQL), so of two registrations
// that race for one identity with different tokens, one wins and the
// other is refused.
func (s *Store) UpsertInstance(ctx context.Context, in Instance) (Instance, error) {
	var out Instance
	err := s.write(ctx, func(tx *sql.Tx) error {
		var id, tokenID string
		var generation int64
		lookup := func() error {
			return s.w(tx).queryRow(ctx, `SELECT id, generation, token_id FROM instances WHERE account_id = ? AND identity_key = ?`+
				s.lockClause("FOR UPDATE"), in.AccountID, in.IdentityKey).Scan(&id, &generation, &tokenID)
		}
		if in.Approval != "" {
			state, err := s.approvalOf(ctx, tx, in.AccountID, in.TokenID, in.Name, in.RegisteredAt)
			if err != nil {
				return err
			}
			in.Approval = state
		}
		err := lookup()
		if errors.Is(err, sql.ErrNoRows) {
			res, err := s.w(tx).exec(ctx, `INSERT INTO instances (`+instanceCols+`)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
				in.ID, in.AccountID, in.IdentityKey, in.Name, in.Hostname, in.IP, encodeStrings(in.Tags),
				in.Version, in.Type, in.TokenID, in.Capacity, int64(1), in.Connection, boolInt(in.Draining),
				micros(in.RegisteredAt), nullMicros(in.LastHeartbeat), nil, in.Org, in.Project, cleanText(in.Description), in.Approval, in.ContainerRuntime, in.UpgradeMode)
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			if n > 0 {
				out, err = getInstance(ctx, s.w(tx), in.ID)
				return err
			}
			// Nothing inserted: the ID is taken by another identity, or
			// (PostgreSQL, several managers) the same identity registered
			// concurrently and committed first; then update that row.
			if err := lookup(); errors.Is(err, sql.ErrNoRows) {
				return ErrConflict
			} else if err != nil {
				return err
			}
		} else if err != nil {
			return err
		}
		if tokenID != in.TokenID {
			if err := s.checkRebind(ctx, tx, id, tokenID); err != nil {
				return err
			}
		}
		if err := s.updateInstance(ctx, tx, id, generation, in); err != nil {
			return err
		}
		out, err = getInstance(ctx, s.w(tx), id)
		return err
	})
	if err != nil {
		return Instance{}, fmt.Errorf("upsert instance %q: %w", in.IdentityKey, err)
	}
	return out, nil
}

// checkRebind allows instance id, bound to boundToken, to be registered
// with another token only when boundToken was revoked or deleted.
func (s *Store) checkRebind(ctx context.Context, tx *sql.Tx, id, boundToken string) error {
	var name string
	var revoked sql.NullInt64
	err := s.w(tx).queryRow(ctx, `SELECT name, revoked_at FROM tokens WHERE id = ?`, boundToken).Scan(&name, &revoked)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil // deleted
	case err != nil:
		return err
	case revoked.Valid:
		return nil
	}
	return &IdentityConflictError{InstanceID: id, TokenID: boundToken, TokenName: name}
}

// updateInstance is the re-registration half of UpsertInstance: row id,
// read (and locked) at generation, takes every field of in but the ID and
// RegisteredAt.
func (s *Store) updateInstance(ctx context.Context, tx *sql.Tx, id string, generation int64, in Instance) error {
	_, err := s.w(tx).exec(ctx, `UPDATE instances SET name = ?, hostname = ?, ip = ?, tags = ?,
	version = ?, type = ?, token_id = ?, capacity = ?, generation = ?, connection = ?, draining = ?,
	last_heartbeat = ?, deregistered_at = NULL, org = ?, project = ?, description = ?, approval = ?, container_runtime = ?, upgrade_mode = ? WHERE id = ?`,
		in.Name, in.Hostname, in.IP, encodeStrings(in.Tags), in.Version, in.Type, in.TokenID,
		in.Capacity, generation+1, in.Connection, boolInt(in.Draining), nullMicros(in.LastHeartbeat),
		in.Org, in.Project, cleanText(in.Description), in.Approval, in.ContainerRuntime, in.UpgradeMode, id)
	return err
}

// GetInstance returns an instance by ID or ErrNotFound.
func (s *Store) GetInstance(ctx context.Context, id string) (Instance, error) {
	in, err := getInstance(ctx, s.r(nil), id)
	if err != nil {
		return Instance{}, fmt.Errorf("get instance %s: %w", id, err)
	}
	return in, nil
}

// ListInstances lists an account's instances (deregistered ones included),
// ordered by name then hostname.
func (s *Store) ListInstances(ctx context.Context, accountID string) ([]Instance, error) {
	rows, err := s.r(nil).query(ctx, `SELECT `+instanceCols+` FROM instances WHERE account_id = ? ORDER BY name, hostname, id`, accountID)
	if err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	defer rows.Close()
	var out []Instance
	for rows.Next() {
		in, err := scanInstance(rows)
		if err != nil {
			return nil, fmt.Errorf("list instances: %w", err)
		}
		out = append(out, in)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list instances: %w", err)
	}
	return out, nil
}

// TouchInstances records liveness for many instances in one transaction.
// It returns the IDs it found no row for (an instance deleted or pruned
// while its delegate was still in contact with a manager).
func (s *Store) TouchInstances(ctx context.Context, touches []InstanceTouch) (missing []string, err error) {
	if len(touches) == 0 {
		return nil, nil
	}
	err = s.write(ctx, func(tx *sql.Tx) error {
		missing = nil
		stmt, err := s.w(tx).stmt(ctx, `UPDATE instances SET last_heartbeat = ?, connection = ?, draining = ? WHERE id = ?`)
		if err != nil {
			return err
		}
		for _, t := range touches {
			res, err := stmt.ExecContext(ctx, micros(t.LastHeartbeat), t.Connection, boolInt(t.Draining), t.ID)
			if err != nil {
				return err
			}
			if n, err := res.RowsAffected(); err != nil {
				return err
			} else if n == 0 {
				missing = append(missing, t.ID)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("touch %d instances: %w", len(touches), err)
	}
	return missing, nil
}

// DeregisterInstance marks an instance deregistered at now; ErrNotFound
// for an unknown ID.
func (s *Store) DeregisterInstance(ctx context.Context, id string, now time.Time) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := s.w(tx).exec(ctx, `UPDATE instances SET deregistered_at = ? WHERE id = ?`, micros(now), id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("deregister instance %s: %w", id, err)
	}
	return nil
}

// --- tasks -----------------------------------------------------------------------

// CreateTask inserts a queued task. The caller fills ID, AccountID, Spec,
// TimeoutMS, QueueTimeoutMS, Retries, CreatedAt and QueueDeadline. The
// scope (Spec.Org, Spec.Project) is also stored in columns of its own.
// Spec.SecretEnv's values are sealed for the task (the database never
// holds them in clear); their names are kept apart, in clear.
func (s *Store) CreateTask(ctx context.Context, t Task) error {
	sealed, err := s.sealSecrets(t.ID, t.Spec.SecretEnv)
	if err != nil {
		return fmt.Errorf("create task %s: %w", t.ID, err)
	}
	names := t.WithoutSecretValues().SecretNames
	spec := t.Spec
	spec.SecretEnv = nil
	specText, err := encodeSpec(spec)
	if err != nil {
		return fmt.Errorf("create task %s: %w", t.ID, err)
	}
	err = s.insert(ctx, `INSERT INTO tasks (id, account_id, type, spec, status, exit_code, error,
	http_result, timeout_ms, queue_timeout_ms, retries, attempts, epoch, instance_id, delegate_name,
	delegate_hostname, denied_instances, created_at, acquired_at, started_at, finished_at,
	queue_deadline, lease_expires_at, log_bytes, log_omitted, org, project, secret_names, secrets, created_by)
	VALUES (?, ?, ?, ?, ?, NULL, '', NULL, ?, ?, ?, 0, 0, '', '', '', '[]', ?, NULL, NULL, NULL, ?, NULL, 0, 0, ?, ?, ?, ?, ?)
	ON CONFLICT DO NOTHING`,
		t.ID, t.AccountID, t.Spec.Type, specText, protocol.StatusQueued, t.TimeoutMS, t.QueueTimeoutMS,
		t.Retries, micros(t.CreatedAt), micros(t.QueueDeadline), t.Spec.Org, t.Spec.Project,
		encodeStrings(names), sealed, t.CreatedBy)
	if err != nil {
		return fmt.Errorf("create task %s: %w", t.ID, err)
	}
	return nil
}

// GetTask returns a task of an account; ErrNotFound also when the task
// belongs to another account.
func (s *Store) GetTask(ctx context.Context, accountID, id string) (Task, error) {
	t, err := getTask(ctx, s.r(nil), id)
	if err == nil && t.AccountID != accountID {
		err = ErrNotFound
	}
	if err != nil {
		return Task{}, fmt.Errorf("get task %s: %w", id, err)
	}
	return t, nil
}

// TaskHolder returns who holds (or last held) a task of an account and the
// task's scope. ErrNotFound also when the task belongs to another account.
// It reads four columns, so the delegate's reports can be checked without
// decoding the task.
func (s *Store) TaskHolder(ctx context.Context, accountID, id string) (TaskHolding, error) {
	var acct string
	var h TaskHolding
	err := s.r(nil).queryRow(ctx, `SELECT account_id, instance_id, org, project FROM tasks WHERE id = ?`, id).
		Scan(&acct, &h.InstanceID, &h.Org, &h.Project)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && acct != accountID) {
		err = ErrNotFound
	}
	if err != nil {
		return TaskHolding{}, fmt.Errorf("get task %s: %w", id, err)
	}
	return h, nil
}

// TasksHeldBy returns those of ids that run on the instance, each with the
// epoch of its lease and its scope, in one query whatever the number of
// ids: it reads the instance's running tasks (the index of running tasks
// by instance; never more than the instance's capacity) and keeps the listed
// ones. An ID listed twice is returned once; unknown IDs are left out.
func (s *Store) TasksHeldBy(ctx context.Context, instanceID string, ids []string) (map[string]HeldTask, error) {
	out := map[string]HeldTask{}
	if len(ids) == 0 {
		return out, nil
	}
	want := make(map[string]struct{}, len(ids))
	for _, id := range ids {
		want[id] = struct{}{}
	}
	rows, err := s.r(nil).query(ctx, `SELECT id, epoch, org, project FROM tasks WHERE instance_id = ? AND `+isRunning,
		instanceID)
	if err != nil {
		return nil, fmt.Errorf("tasks held by %s: %w", instanceID, err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var h HeldTask
		if err := rows.Scan(&id, &h.Epoch, &h.Org, &h.Project); err != nil {
			return nil, fmt.Errorf("tasks held by %s: %w", instanceID, err)
		}
		if _, ok := want[id]; ok {
			out[id] = h
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("tasks held by %s: %w", instanceID, err)
	}
	return out, nil
}

// ListTasks lists tasks, newest first (ties broken by ID, descending).
// The limit is 100 by default and at most 1000.
func (s *Store) ListTasks(ctx context.Context, f TaskFilter) ([]Task, error) {
	var where []string
	var args []any
	if f.AccountID != "" {
		where = append(where, "account_id = ?")
		args = append(args, f.AccountID)
	}
	if f.Status != "" {
		where = append(where, "status = ?")
		args = append(args, f.Status)
	}
	if f.Scopes != nil {
		w, a := scopeWhere(f.Scopes)
		where = append(where, w)
		args = append(args, a...)
	}
	if f.Within != nil {
		where = append(where, "org = ?")
		args = append(args, f.Within.Org)
		if f.Within.Project != "" {
			where = append(where, "project = ?")
			args = append(args, f.Within.Project)
		}
	}
	if f.Delegate != "" {
		d := strings.ToLower(f.Delegate)
		where = append(where, "(LOWER(delegate_name) = ? OR LOWER(delegate_hostname) = ?)")
		args = append(args, d, d)
	}
	if f.Before != nil {
		c := micros(f.Before.CreatedAt)
		where = append(where, "(created_at < ? OR (created_at = ? AND id < ?))")
		args = append(args, c, c, f.Before.ID)
	}
	q := `SELECT ` + taskCols + ` FROM tasks`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY created_at DESC, id DESC LIMIT ?"
	args = append(args, listLimit(f.Limit))
	tasks, err := queryTasks(ctx, s.r(nil), q, args...)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return tasks, nil
}

// scopeWhere is the condition of TaskFilter.Scopes on the org and
// project columns.
func scopeWhere(scopes []ScopeFilter) (string, []any) {
	var or []string
	var args []any
	for _, sc := range scopes {
		switch {
		case sc.Org == "":
			return "1 = 1", nil // the account: everything
		case sc.Project == "":
			or = append(or, "org = ?")
			args = append(args, sc.Org)
		default:
			or = append(or, "(org = ? AND project = ?)")
			args = append(args, sc.Org, sc.Project)
		}
	}
	if len(or) == 0 {
		return "1 = 0", nil
	}
	return "(" + strings.Join(or, " OR ") + ")", args
}

// QueuedPage lists queued tasks of every account in queue order (created
// first, then ID), at most limit (limit <= 0 means 100), starting after
// the task after (nil = from the start): a caller reads the whole queue
// page by page.
func (s *Store) QueuedPage(ctx context.Context, after *Task, limit int) ([]Task, error) {
	q := `SELECT ` + taskCols + ` FROM tasks WHERE ` + isQueued
	var args []any
	if after != nil {
		q += ` AND (created_at > ? OR (created_at = ? AND id > ?))`
		args = append(args, micros(after.CreatedAt), micros(after.CreatedAt), after.ID)
	}
	q += ` ORDER BY created_at, id LIMIT ?`
	args = append(args, listLimit(limit))
	tasks, err := queryTasks(ctx, s.r(nil), q, args...)
	if err != nil {
		return nil, fmt.Errorf("queued tasks: %w", err)
	}
	return tasks, nil
}

// QueuedPastDeadline lists queued tasks (of every account) whose queue
// deadline is before now, earliest deadline first, at most limit (limit <= 0
// means 100). It reads the index of queued tasks by deadline, so a deep
// queue does not make it slower.
func (s *Store) QueuedPastDeadline(ctx context.Context, now time.Time, limit int) ([]Task, error) {
	tasks, err := queryTasks(ctx, s.r(nil), `SELECT `+taskCols+` FROM tasks
	WHERE `+isQueued+` AND queue_deadline < ? ORDER BY queue_deadline, id LIMIT ?`,
		micros(now), listLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("queued tasks past their deadline: %w", err)
	}
	return tasks, nil
}

// ClaimTask moves a queued task to running for the claimer, in one
// transaction: it fails with ErrNotFound (no such task), ErrAlreadyClaimed
// (not queued any more), ErrTaskTerminal (finished) or ErrNoCapacity (the
// claimer already runs Capacity tasks, when Capacity > 0). On success it
// increments Epoch and Attempts, sets InstanceID, DelegateName,
// DelegateHostname, AcquiredAt = now, clears StartedAt, and sets
// LeaseExpiresAt = now + LeaseDuration. Exactly one concurrent claimer wins,
// also across several Stores (managers) on one PostgreSQL database: the
// task is read FOR UPDATE, so a claimer that waited for that row lock
// reads the committed row and sees it is no longer queued. The capacity check holds under concurrency too (see
// getTaskSecretsForClaim). A queued task is usually claimed by one
// statement instead (claimQueued), with the same outcome.
//
// The task it returns carries its secret values in Spec.SecretEnv, opened
// with the store's keys: the only read that does, and only for the claimer
// that holds the task (the winner, or the holder whose repeated claim Check
// refused). A value that does not open fails the claim (the task stays
// queued) with an error wrapping the seal package's error. The values of
// the stored secrets the spec references come in StoredSecrets; a
// reference no secret answers any more (it was deleted after the task was
// submitted) fails the claim with a *MissingSecretsError and the task as
// read (the task stays as it was: the caller decides its end).
func (s *Store) ClaimTask(ctx context.Context, c Claim, now time.Time) (Task, error) {
	if s.dialect == dialectSQLite || c.Capacity == 0 {
		t, err := s.claimQueued(ctx, c, now)
		if !errors.Is(err, errClaimLongWay) {
			if err != nil {
				return Task{}, fmt.Errorf("claim task %s: %w", c.TaskID, err)
			}
			return t, nil
		}
	}
	var t Task
	var checkErr error
	// In a transaction of its own (writeMode.own).
	err := s.writeIn(ctx, writeMode{own: true}, func(tx *sql.Tx) error {
		var err error
		var ss storedSecrets
		checkErr = nil
		if c.Capacity > 0 && s.dialect == dialectPostgres {
			// The instance's claims lock is taken by the statement that
			// reads (and locks) the task, a round trip less: the capacity
			// count below, a later statement, sees every claim committed
			// before it was granted.
			t, ss, err = getTaskSecretsForClaim(ctx, s.w(tx), c.TaskID, c.InstanceID)
		} else {
			t, ss, err = getTaskSecretsForUpdate(ctx, s.w(tx), c.TaskID)
		}
		if err != nil {
			return err
		}
		if c.Check != nil {
			if checkErr = c.Check(t); checkErr != nil {
				if t.Status == protocol.StatusRunning && t.InstanceID == c.InstanceID {
					if t, err = s.withSecrets(ctx, tx, t, ss); err != nil {
						checkErr = nil
						return err
					}
				}
				return checkErr
			}
		}
		if t.Status != protocol.StatusQueued {
			if protocol.Terminal(t.Status) {
				return ErrTaskTerminal
			}
			return ErrAlreadyClaimed
		}
		claimed, err := s.withSecrets(ctx, tx, t, ss)
		if err != nil {
			return err
		}
		prevEpoch := t.Epoch
		t.Status = protocol.StatusRunning
		t.Epoch++
		t.Attempts++
		t.InstanceID, t.DelegateName, t.DelegateHostname = c.InstanceID, c.DelegateName, c.DelegateHostname
		t.AcquiredAt, t.StartedAt = timePtr(now), nil
		t.LeaseExpiresAt = timePtr(now.Add(c.LeaseDuration))
		if c.Capacity == 0 {
			if err := updateTask(ctx, s.w(tx), t, protocol.StatusQueued, prevEpoch); err != nil {
				if errors.Is(err, errRowChanged) {
					return ErrAlreadyClaimed
				}
				return err
			}
		} else {
			// The capacity check is a condition of the update: the row is
			// locked (PostgreSQL) or the writer is (SQLite), so an update
			// that changed nothing found the instance full.
			err := updateTaskIf(ctx, s.w(tx), t, protocol.StatusQueued, prevEpoch,
				` AND (SELECT COUNT(*) FROM tasks WHERE instance_id = ? AND `+isRunning+`) < ?`,
				c.InstanceID, c.Capacity)
			if errors.Is(err, errRowChanged) {
				return ErrNoCapacity
			}
			if err != nil {
				return err
			}
		}
		t.Spec.SecretEnv, t.StoredSecrets = claimed.Spec.SecretEnv, claimed.StoredSecrets
		return nil
	})
	if err != nil {
		var missing *MissingSecretsError
		if checkErr != nil || errors.As(err, &missing) {
			return t, fmt.Errorf("claim task %s: %w", c.TaskID, err)
		}
		return Task{}, fmt.Errorf("claim task %s: %w", c.TaskID, err)
	}
	return t, nil
}

// withSecrets returns t, a task its claimer holds, with its secret values
// (opened from ss, as stored) and the values of the stored secrets its
// spec references: what only a claim hands out.
func (s *Store) withSecrets(ctx context.Context, tx *sql.Tx, t Task, ss storedSecrets) (Task, error) {
	values, err := s.openSecrets(t.ID, ss)
	if err != nil {
		return t, err
	}
	stored, err := s.referencedSecrets(ctx, s.w(tx), t)
	if err != nil {
		return t, err
	}
	t.Spec.SecretEnv, t.StoredSecrets = values, stored
	return t, nil
}

// errClaimLongWay says that claimQueued did not claim the task and
// changed nothing: ClaimTask reads the task and decides.
var errClaimLongWay = errors.New("claim the long way")

// claimQueued is ClaimTask's way for a queued task: one statement claims
// it, if it is queued and the claimer has room, and returns the claimed
// row, instead of a read of the row and an update of every column (issue
// 18). Anything else (not queued, no room, Check refuses, secrets that do
// not open or resolve) undoes the claim and returns errClaimLongWay, and
// ClaimTask decides on the row as read, as it always did. On PostgreSQL
// it serves claimers of unlimited capacity only (a capacity count needs
// the instance's claims lock first, see getTaskSecretsForClaim): the
// update locks the row, and a concurrent claimer that waited for the lock
// finds the task no longer queued and goes the long way. A round trip
// less than the long way (BEGIN, UPDATE, COMMIT).
func (s *Store) claimQueued(ctx context.Context, c Claim, now time.Time) (Task, error) {
	var t Task
	err := s.writeIn(ctx, writeMode{own: true}, func(tx *sql.Tx) error {
		q := `UPDATE tasks SET status = ?, epoch = epoch + 1, attempts = attempts + 1, instance_id = ?,
	delegate_name = ?, delegate_hostname = ?, acquired_at = ?, started_at = NULL, lease_expires_at = ?
	WHERE id = ? AND ` + isQueued
		args := []any{protocol.StatusRunning, c.InstanceID, c.DelegateName, c.DelegateHostname,
			micros(now), micros(now.Add(c.LeaseDuration)), c.TaskID}
		if c.Capacity > 0 {
			q += ` AND (SELECT COUNT(*) FROM tasks WHERE instance_id = ? AND ` + isRunning + `) < ?`
			args = append(args, c.InstanceID, c.Capacity)
		}
		var ss storedSecrets
		var err error
		t, ss, err = scanTaskSecrets(s.w(tx).queryRow(ctx, q+` RETURNING `+taskSecretCols, args...))
		if errors.Is(err, sql.ErrNoRows) {
			return errClaimLongWay
		}
		if err != nil {
			return err
		}
		if c.Check != nil {
			before := t
			before.Status = protocol.StatusQueued
			before.Epoch--
			before.Attempts--
			before.InstanceID, before.DelegateName, before.DelegateHostname = "", "", ""
			before.AcquiredAt, before.StartedAt, before.LeaseExpiresAt = nil, nil, nil
			if c.Check(before) != nil {
				return errClaimLongWay
			}
		}
		if t, err = s.withSecrets(ctx, tx, t, ss); err != nil {
			return errClaimLongWay
		}
		return nil
	})
	if err != nil {
		return Task{}, err
	}
	return t, nil
}

// MarkStarted records that the task's process started (StartedAt = now) if
// the task is running at epoch; ErrStaleLease otherwise (ErrNotFound for an
// unknown task). A second call keeps the first StartedAt.
func (s *Store) MarkStarted(ctx context.Context, id string, epoch int64, now time.Time) error {
	_, err := s.StartTask(ctx, id, epoch, Holder{}, now)
	return err
}

// StartTask is MarkStarted that also says when the task was queued (the
// start of its queue timeout) if this call recorded the start, and the
// zero time if the start was recorded before: what a pickup-latency
// measure needs, without reading the task. A holder is the delegate the
// report comes from: the start is recorded only if it holds the task
// (ErrStaleLease otherwise), checked by the statement that records it, so
// a delegate's report needs no read of who holds the task first.
func (s *Store) StartTask(ctx context.Context, id string, epoch int64, holder Holder, now time.Time) (queuedAt time.Time, err error) {
	cond, condArgs := holderCond(holder)
	err = s.writeSingle(ctx, func(tx *sql.Tx) error {
		queuedAt = time.Time{}
		var deadline, timeoutMS int64
		err := s.w(tx).queryRow(ctx, `UPDATE tasks SET started_at = ?
	WHERE id = ? AND status = ? AND epoch = ? AND started_at IS NULL`+cond+`
	RETURNING queue_deadline, queue_timeout_ms`,
			append([]any{micros(now), id, protocol.StatusRunning, epoch}, condArgs...)...).Scan(&deadline, &timeoutMS)
		if err == nil {
			queuedAt = fromMicros(deadline).Add(-time.Duration(timeoutMS) * time.Millisecond)
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		t, err := getTask(ctx, s.w(tx), id)
		if err != nil {
			return err
		}
		if t.Status != protocol.StatusRunning || t.Epoch != epoch || !holder.holds(t) {
			return ErrStaleLease
		}
		return nil // already started at this epoch
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("mark task %s started (epoch %d): %w", id, epoch, err)
	}
	return queuedAt, nil
}

// CompleteTask applies a delegate's result. If the task is running at
// epoch it becomes r.Status with FinishedAt = now, and its log is closed
// after chunk r.LastSeq (AppendLogs refuses chunks numbered past it). If it is already
// terminal and was finished at this epoch, the call is a no-op that returns
// the stored task (results are idempotent). Otherwise ErrStaleLease
// (ErrNotFound for an unknown task). "Finished at this epoch" means it was
// still running at epoch when it ended: a task that was requeued and then
// ended by the manager refuses the lost delegate's result. With r.Holder
// set, the task must be (or have been, at epoch) held by r.Holder too.
// r.Status must be terminal.
func (s *Store) CompleteTask(ctx context.Context, id string, epoch int64, r Result, now time.Time) (Task, error) {
	if err := validResult(r); err != nil {
		return Task{}, fmt.Errorf("complete task %s: %w", id, err)
	}
	httpResult, err := encodeHTTPResult(r.HTTPResult)
	if err != nil {
		return Task{}, fmt.Errorf("complete task %s: %w", id, err)
	}
	var t Task
	cond, condArgs := holderCond(r.Holder)
	// Clean (writeMode): it fails before its first change, or on a
	// statement's error.
	err = s.writeIn(ctx, writeMode{clean: true}, func(tx *sql.Tx) error {
		// One statement ends the task (finish, its secret values dropped
		// as updateTask drops them) and closes its log, and returns the
		// row: no read first (issue 18).
		var err error
		q := `UPDATE tasks SET status = ?, exit_code = ?, error = ?,
	http_result = ?, finished_at = ?, lease_expires_at = NULL, secrets = '', result_last_seq = ?
	WHERE id = ? AND status = ? AND epoch = ?` + cond + `
	RETURNING `
		args := append([]any{r.Status, nullInt(r.ExitCode), cleanText(r.Error), httpResult, micros(now), max(r.LastSeq, 0),
			id, protocol.StatusRunning, epoch}, condArgs...)
		if r.Brief {
			t, err = scanBriefTask(s.w(tx).queryRow(ctx, q+briefTaskCols, args...))
		} else {
			t, err = scanTask(s.w(tx).queryRow(ctx, q+taskCols, args...))
		}
		if errors.Is(err, sql.ErrNoRows) {
			// Not running at epoch: finished at this epoch already
			// (results are idempotent), or stale.
			if t, err = getTask(ctx, s.w(tx), id); err != nil {
				return err
			}
			if !heldAt(t, epoch) || t.Status == protocol.StatusRunning || !r.Holder.holds(t) {
				return ErrStaleLease
			}
			return nil
		}
		if err != nil {
			return err
		}
		if len(r.Outputs) > 0 {
			if _, err := s.w(tx).exec(ctx, `UPDATE pipeline_run_steps SET outputs = ? WHERE task_id = ?`, encodeMap(r.Outputs), id); err != nil {
				return err
			}
		}
		if t.Status == protocol.StatusSucceeded && t.Spec.Connector != "" {
			// In the same transaction: whoever sees the task succeeded
			// (the pipeline engine starting the stage's next step, a CLI
			// submitting the next task) sees its delegate preferred.
			if _, err := s.w(tx).exec(ctx, `UPDATE connectors SET last_success_instance = ? WHERE account_id = ? AND name = ?`,
				t.InstanceID, t.AccountID, t.Spec.Connector); err != nil {
				return fmt.Errorf("set last success of connector %q: %w", t.Spec.Connector, err)
			}
		}
		return nil
	})
	if err != nil {
		return Task{}, fmt.Errorf("complete task %s (epoch %d): %w", id, epoch, err)
	}
	return t, nil
}

// FinishTask ends a task that is queued or running (whatever its epoch) with
// r, as the manager decides (cancel, timeout, not_assigned). A running
// task's lease ends with it: its epoch advances, so the delegate's late
// result and output are refused (ErrStaleLease), never applied. ErrTaskTerminal
// if it already finished (the stored task is returned with it);
// ErrNotFound if unknown or of another account. r.Status must be terminal.
func (s *Store) FinishTask(ctx context.Context, accountID, id string, r Result, now time.Time) (Task, error) {
	return s.finishTask(ctx, accountID, id, r, now, false)
}

// FinishQueuedTask ends a task with r only while it is queued (a task no
// delegate took: not_assigned); one a delegate claimed meanwhile is left
// alone, with ErrAlreadyClaimed. Otherwise as FinishTask.
func (s *Store) FinishQueuedTask(ctx context.Context, accountID, id string, r Result, now time.Time) (Task, error) {
	return s.finishTask(ctx, accountID, id, r, now, true)
}

func (s *Store) finishTask(ctx context.Context, accountID, id string, r Result, now time.Time, queuedOnly bool) (Task, error) {
	if err := validResult(r); err != nil {
		return Task{}, fmt.Errorf("finish task %s: %w", id, err)
	}
	var t Task
	err := s.write(ctx, func(tx *sql.Tx) error {
		var err error
		t, err = getTaskForUpdate(ctx, s.w(tx), id)
		if err != nil {
			return err
		}
		if t.AccountID != accountID {
			t = Task{}
			return ErrNotFound
		}
		if protocol.Terminal(t.Status) {
			return ErrTaskTerminal
		}
		if queuedOnly && t.Status != protocol.StatusQueued {
			return ErrAlreadyClaimed
		}
		prevStatus, prevEpoch := t.Status, t.Epoch
		finish(&t, r, now)
		if prevStatus == protocol.StatusRunning {
			endLease(&t)
		}
		return updateTask(ctx, s.w(tx), t, prevStatus, prevEpoch)
	})
	if err != nil {
		return t, fmt.Errorf("finish task %s: %w", id, err)
	}
	return t, nil
}

// ExtendLeases sets LeaseExpiresAt for tasks still running at the given
// epochs, in one transaction; others are ignored.
func (s *Store) ExtendLeases(ctx context.Context, ext []LeaseExtension) error {
	if len(ext) == 0 {
		return nil
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		stmt, err := s.w(tx).stmt(ctx, `UPDATE tasks SET lease_expires_at = ? WHERE id = ? AND epoch = ? AND status = ?`)
		if err != nil {
			return err
		}
		for _, e := range ext {
			if _, err := stmt.ExecContext(ctx, micros(e.ExpiresAt), e.TaskID, e.Epoch, protocol.StatusRunning); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("extend %d leases: %w", len(ext), err)
	}
	return nil
}

// ShortenLeases ends each listed lease at its To if it ends later than
// that and no later than its Known (the task still running under that
// epoch): the delegate holding them lost its connection, so its tasks fail
// over sooner than a silent delegate's. A lease already ending sooner, or
// extended past Known since (the delegate reached another manager), is
// left alone.
func (s *Store) ShortenLeases(ctx context.Context, cuts []LeaseCut) error {
	if len(cuts) == 0 {
		return nil
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		stmt, err := s.w(tx).stmt(ctx, `UPDATE tasks SET lease_expires_at = ?
	WHERE id = ? AND epoch = ? AND status = ? AND lease_expires_at > ? AND lease_expires_at <= ?`)
		if err != nil {
			return err
		}
		for _, c := range cuts {
			to := micros(c.To)
			if _, err := stmt.ExecContext(ctx, to, c.TaskID, c.Epoch, protocol.StatusRunning, to, micros(c.Known)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("shorten %d leases: %w", len(cuts), err)
	}
	return nil
}

// ExpireLeases handles running tasks whose LeaseExpiresAt is before now: a
// task with Attempts <= Retries goes back to queued (its instance appended
// to DeniedInstances, InstanceID/DelegateName/DelegateHostname/AcquiredAt/
// StartedAt/LeaseExpiresAt cleared, QueueDeadline = now + QueueTimeoutMS);
// otherwise it ends failed with an Error naming the delegate (name and
// hostname) that was lost while running it.
//
// The sweeps (ExpireLeases, TimeoutRunning) run on every
// manager. On PostgreSQL they lock the rows they take and skip rows that
// another transaction holds, so concurrent sweeps of several managers
// split the work and each task is reported by exactly one of them; a row
// skipped because a claim or a result holds it is looked at again by the
// next sweep. Nothing to sweep is not an error: the result is empty.
// NextLeaseExpiry returns the earliest lease end of the running tasks (of
// every account); ok is false when no running task has a lease. It reads
// the index of running tasks by lease end.
func (s *Store) NextLeaseExpiry(ctx context.Context) (at time.Time, ok bool, err error) {
	var v sql.NullInt64
	if err := s.r(nil).queryRow(ctx, `SELECT MIN(lease_expires_at) FROM tasks WHERE `+isRunning).Scan(&v); err != nil {
		return time.Time{}, false, fmt.Errorf("next lease expiry: %w", err)
	}
	if !v.Valid {
		return time.Time{}, false, nil
	}
	return fromMicros(v.Int64), true, nil
}

func (s *Store) ExpireLeases(ctx context.Context, now time.Time) ([]LeaseOutcome, error) {
	var out []LeaseOutcome
	err := s.write(ctx, func(tx *sql.Tx) error {
		out = nil
		expired, err := queryTasks(ctx, s.w(tx), `SELECT `+taskCols+` FROM tasks
	WHERE `+isRunning+` AND lease_expires_at < ? ORDER BY lease_expires_at, id`+s.lockClause("FOR UPDATE SKIP LOCKED"),
			micros(now))
		if err != nil {
			return err
		}
		for _, t := range expired {
			o := LeaseOutcome{LostInstanceID: t.InstanceID}
			prevEpoch := t.Epoch
			if t.Attempts <= t.Retries {
				o.Requeued = true
				deny(&t, t.InstanceID)
				requeue(&t, now)
			} else {
				finish(&t, Result{
					Status: protocol.StatusFailed,
					Error: fmt.Sprintf("delegate %q (host %s) disconnected while running the task (lease expired)",
						t.DelegateName, t.DelegateHostname),
				}, now)
				endLease(&t)
			}
			err := updateTask(ctx, s.w(tx), t, protocol.StatusRunning, prevEpoch)
			if errors.Is(err, errRowChanged) {
				continue
			}
			if err != nil {
				return fmt.Errorf("task %s: %w", t.ID, err)
			}
			o.Task = t
			out = append(out, o)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("expire leases: %w", err)
	}
	return out, nil
}

// TimeoutRunning ends timed_out every running task whose AcquiredAt +
// TimeoutMS + grace is before now, and returns them. This enforces
// timeouts even when the delegate running the task is gone. A task with
// TimeoutMS 0 has no timeout here.
func (s *Store) TimeoutRunning(ctx context.Context, now time.Time, grace time.Duration) ([]Task, error) {
	var out []Task
	err := s.write(ctx, func(tx *sql.Tx) error {
		out = nil
		late, err := queryTasks(ctx, s.w(tx), `SELECT `+taskCols+` FROM tasks
	WHERE `+isRunning+` AND timeout_ms > 0 AND acquired_at + timeout_ms * 1000 < ?
	ORDER BY acquired_at, id`+s.lockClause("FOR UPDATE SKIP LOCKED"),
			micros(now)-grace.Microseconds())
		if err != nil {
			return err
		}
		for _, t := range late {
			prevEpoch := t.Epoch
			finish(&t, Result{
				Status: protocol.StatusTimedOut,
				Error: fmt.Sprintf("timed out after %s (enforced by the manager; the delegate did not report)",
					time.Duration(t.TimeoutMS)*time.Millisecond),
			}, now)
			endLease(&t)
			err := updateTask(ctx, s.w(tx), t, protocol.StatusRunning, prevEpoch)
			if errors.Is(err, errRowChanged) {
				continue
			}
			if err != nil {
				return fmt.Errorf("task %s: %w", t.ID, err)
			}
			out = append(out, t)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("time out running tasks: %w", err)
	}
	return out, nil
}

// RunningTasksOf lists the tasks running on an instance.
func (s *Store) RunningTasksOf(ctx context.Context, instanceID string) ([]Task, error) {
	tasks, err := queryTasks(ctx, s.r(nil), `SELECT `+taskCols+` FROM tasks
	WHERE instance_id = ? AND `+isRunning+` ORDER BY acquired_at, id`, instanceID)
	if err != nil {
		return nil, fmt.Errorf("running tasks of %s: %w", instanceID, err)
	}
	return tasks, nil
}

// --- logs --------------------------------------------------------------------------

// AppendLogs stores chunks for the task's attempt at epoch (the attempt
// number equals the epoch) if the task's epoch equals epoch (running, or
// terminal within the same epoch); else ErrStaleLease (ErrNotFound for an
// unknown task). Once a delegate's result ended the task, a batch with a
// chunk numbered past the result's LastSeq is refused whole with
// ErrLogClosed (which matches ErrTaskTerminal); chunks up to it are still
// taken. A chunk whose (attempt, seq) is already stored is ignored
// (delivery is idempotent). The cap keeps the first cap.Head bytes and the
// last cap.Tail bytes of each attempt; chunks that fall between are dropped
// (deleted, or never written when the append itself shows the cap drops
// them) and their size added to LogOmitted. LogBytes counts all bytes received.
// A chunk that starts inside the head is kept whole; while cap.Tail > 0 the
// newest chunk is never dropped, so the tail may exceed cap.Tail by less
// than one chunk. A zero cap keeps everything. NUL bytes and invalid UTF-8
// in Data are stored as U+FFFD (see cleanText), and sizes count the bytes
// stored (for a dropped chunk: the bytes it would take stored).
func (s *Store) AppendLogs(ctx context.Context, taskID string, epoch int64, chunks []protocol.LogChunk, cap LogCap) error {
	if len(chunks) == 0 {
		return nil
	}
	err := s.write(ctx, func(tx *sql.Tx) error {
		return s.appendLogs(ctx, tx, taskID, epoch, chunks, cap, true)
	})
	if err != nil {
		return fmt.Errorf("append %d log chunks to task %s (epoch %d): %w", len(chunks), taskID, epoch, err)
	}
	return nil
}

// ReadLogs returns up to limit chunks after cursor, ordered by attempt then
// seq. Where chunks were dropped by the cap, a synthetic chunk is returned
// in their place whose Data is "\n[legate: N bytes of output omitted
// here: ...]\n" (omittedMarker) and whose Seq is that of the first
// dropped chunk. limit <= 0 means 1000 (at most 10000). An unknown task
// has no chunks.
func (s *Store) ReadLogs(ctx context.Context, taskID string, after LogCursor, limit int) ([]StoredChunk, error) {
	var out []StoredChunk
	err := s.read(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = s.readLogs(ctx, tx, taskID, after, limit)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read logs of task %s: %w", taskID, err)
	}
	return out, nil
}
