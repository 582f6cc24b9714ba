package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

type rowScanner interface {
	Scan(dest ...any) error
}

// errRowChanged reports that a guarded UPDATE found the row in another
// state than the one it was read in (only possible with several writers,
// as with PostgreSQL and several managers).
var errRowChanged = errors.New("task changed concurrently")

// --- tokens ------------------------------------------------------------------------

const tokenCols = `id, account_id, name, hash, created_at, revoked_at, org, project, require_approval, init_secrets, uses, uses_left`

func scanToken(r rowScanner) (Token, error) {
	var t Token
	var created int64
	var revoked sql.NullInt64
	var approval int
	var initSecrets string
	if err := r.Scan(&t.ID, &t.AccountID, &t.Name, &t.Hash, &created, &revoked, &t.Org, &t.Project, &approval, &initSecrets, &t.Uses, &t.UsesLeft); err != nil {
		return Token{}, err
	}
	if initSecrets != "" {
		t.InitSecrets = strings.Split(initSecrets, ",")
	}
	t.RequireApproval = approval != 0
	t.CreatedAt = fromMicros(created)
	t.RevokedAt = fromNullMicros(revoked)
	return t, nil
}

// --- instances ---------------------------------------------------------------------

const instanceCols = `id, account_id, identity_key, name, hostname, ip, tags, version, type,
	token_id, capacity, generation, connection, draining, registered_at, last_heartbeat, deregistered_at,
	org, project, description, approval, container_runtime, upgrade_mode, task_isolation, task_types, container_reason`

func scanInstance(r rowScanner) (Instance, error) {
	var in Instance
	var tags string
	var draining int
	var registered int64
	var heartbeat, deregistered sql.NullInt64
	var isolation, taskTypes string
	if err := r.Scan(&in.ID, &in.AccountID, &in.IdentityKey, &in.Name, &in.Hostname, &in.IP, &tags,
		&in.Version, &in.Type, &in.TokenID, &in.Capacity, &in.Generation, &in.Connection, &draining,
		&registered, &heartbeat, &deregistered, &in.Org, &in.Project, &in.Description, &in.Approval, &in.ContainerRuntime, &in.UpgradeMode, &isolation, &taskTypes, &in.ContainerReason); err != nil {
		return Instance{}, err
	}
	in.TaskIsolation = decodeIsolation(isolation)
	in.TaskTypes = decodeTaskTypes(taskTypes)
	var err error
	if in.Tags, err = decodeStrings(tags); err != nil {
		return Instance{}, fmt.Errorf("instance %s: %w", in.ID, err)
	}
	in.Draining = draining != 0
	in.RegisteredAt = fromMicros(registered)
	in.LastHeartbeat = fromNullMicros(heartbeat)
	in.DeregisteredAt = fromNullMicros(deregistered)
	return in, nil
}

func getInstance(ctx context.Context, h handle, id string) (Instance, error) {
	in, err := scanInstance(h.queryRow(ctx, `SELECT `+instanceCols+` FROM instances WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Instance{}, ErrNotFound
	}
	return in, err
}

// --- tasks -------------------------------------------------------------------------

const taskCols = `id, account_id, spec, status, exit_code, error, http_result, timeout_ms,
	queue_timeout_ms, retries, attempts, epoch, instance_id, delegate_name, delegate_hostname,
	denied_instances, created_at, acquired_at, started_at, finished_at, queue_deadline,
	lease_expires_at, log_bytes, log_omitted, secret_names, created_by`

// taskSecretCols are taskCols and the sealed secret values, which only a
// claim reads (see scanTaskSecrets).
const taskSecretCols = taskCols + `, secrets, secret_bindings`

// scanTask reads a row of taskCols: a task without secret values.
func scanTask(r rowScanner) (Task, error) {
	t, _, err := scanTaskRow(r, false)
	return t, err
}

// scanTaskSecrets reads a row of taskSecretCols: the task without secret
// values, and its values as stored.
func scanTaskSecrets(r rowScanner) (Task, storedSecrets, error) {
	return scanTaskRow(r, true)
}

// briefTaskCols are the columns of a brief task (Result.Brief).
const briefTaskCols = `id, account_id, spec, status, epoch, instance_id`

// scanBriefTask reads a row of briefTaskCols.
func scanBriefTask(r rowScanner) (Task, error) {
	var t Task
	var spec string
	if err := r.Scan(&t.ID, &t.AccountID, &spec, &t.Status, &t.Epoch, &t.InstanceID); err != nil {
		return Task{}, err
	}
	var err error
	if t.Spec, err = decodeSpec(spec); err != nil {
		return Task{}, fmt.Errorf("task %s: %w", t.ID, err)
	}
	return t.WithoutSecretValues(), nil
}

func scanTaskRow(r rowScanner, withSecrets bool) (Task, storedSecrets, error) {
	var t Task
	var ss storedSecrets
	var spec, denied, names string
	var exitCode, acquired, started, finished, lease sql.NullInt64
	var httpResult sql.NullString
	var created, queueDeadline int64
	dest := []any{&t.ID, &t.AccountID, &spec, &t.Status, &exitCode, &t.Error, &httpResult,
		&t.TimeoutMS, &t.QueueTimeoutMS, &t.Retries, &t.Attempts, &t.Epoch, &t.InstanceID,
		&t.DelegateName, &t.DelegateHostname, &denied, &created, &acquired, &started, &finished,
		&queueDeadline, &lease, &t.LogBytes, &t.LogOmitted, &names, &t.CreatedBy}
	if withSecrets {
		dest = append(dest, &ss.sealed, &ss.bindings)
	}
	if err := r.Scan(dest...); err != nil {
		return Task{}, ss, err
	}
	if err := decodeTaskColumns(&t, spec, denied, httpResult); err != nil {
		return Task{}, ss, fmt.Errorf("task %s: %w", t.ID, err)
	}
	var err error
	if t.SecretNames, err = decodeStrings(names); err != nil {
		return Task{}, ss, fmt.Errorf("task %s: secret names: %w", t.ID, err)
	}
	// A row from before migration 0006 that the upgrade has not sealed
	// yet keeps its values in the spec, in clear.
	ss.clear = t.Spec.SecretEnv
	t = t.WithoutSecretValues()
	t.ExitCode = fromNullInt(exitCode)
	t.CreatedAt = fromMicros(created)
	t.AcquiredAt = fromNullMicros(acquired)
	t.StartedAt = fromNullMicros(started)
	t.FinishedAt = fromNullMicros(finished)
	t.QueueDeadline = fromMicros(queueDeadline)
	t.LeaseExpiresAt = fromNullMicros(lease)
	return t, ss, nil
}

// decodeTaskColumns decodes the JSON columns of a task row into t.
func decodeTaskColumns(t *Task, spec, denied string, httpResult sql.NullString) error {
	var err error
	if t.Spec, err = decodeSpec(spec); err != nil {
		return err
	}
	if t.DeniedInstances, err = decodeStrings(denied); err != nil {
		return fmt.Errorf("denied instances: %w", err)
	}
	if t.HTTPResult, err = decodeHTTPResult(httpResult); err != nil {
		return err
	}
	return nil
}

func getTask(ctx context.Context, h handle, id string) (Task, error) {
	t, err := scanTask(h.queryRow(ctx, `SELECT `+taskCols+` FROM tasks WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Task{}, ErrNotFound
	}
	return t, err
}

// getTaskForUpdate is getTask inside a write transaction that then changes
// the task: on PostgreSQL it locks the row until the transaction ends, so
// the change is made from the committed state and concurrent changers of
// the task (other managers) wait for each other, as on SQLite.
func getTaskForUpdate(ctx context.Context, h handle, id string) (Task, error) {
	t, err := scanTask(h.queryRow(ctx, `SELECT `+taskCols+` FROM tasks WHERE id = ?`+h.s.lockClause("FOR UPDATE"), id))
	if errors.Is(err, sql.ErrNoRows) {
		return Task{}, ErrNotFound
	}
	return t, err
}

func queryTasks(ctx context.Context, h handle, query string, args ...any) ([]Task, error) {
	rows, err := h.query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// updateTask writes the mutable state of t (everything but the spec, the
// creation fields and the log counters), provided the row is still in
// status prevStatus at epoch prevEpoch; errRowChanged otherwise. A task
// that ends loses its secret values (their names stay): every path to a
// terminal status goes through here.
// isQueued and isRunning are the conditions on a task's status that the
// partial indexes of queued and running tasks (migration 0019) are made
// for. They name the status as a literal: a planner uses a partial index
// only for a query whose condition implies the index's, which a bound
// parameter (any status) does not.
const (
	isQueued  = "status = '" + protocol.StatusQueued + "'"
	isRunning = "status = '" + protocol.StatusRunning + "'"
)

func updateTask(ctx context.Context, h handle, t Task, prevStatus string, prevEpoch int64) error {
	return updateTaskIf(ctx, h, t, prevStatus, prevEpoch, "")
}

// updateTaskIf is updateTask with a further condition (" AND ...", with
// ? placeholders for args) on the update.
func updateTaskIf(ctx context.Context, h handle, t Task, prevStatus string, prevEpoch int64, cond string, args ...any) error {
	httpResult, err := encodeHTTPResult(t.HTTPResult)
	if err != nil {
		return err
	}
	res, err := h.exec(ctx, `UPDATE tasks SET status = ?, exit_code = ?, error = ?,
	http_result = ?, attempts = ?, epoch = ?, instance_id = ?, delegate_name = ?, delegate_hostname = ?,
	denied_instances = ?, acquired_at = ?, started_at = ?, finished_at = ?, queue_deadline = ?,
	lease_expires_at = ?, secrets = CASE WHEN ? = 1 THEN '' ELSE secrets END
	WHERE id = ? AND status = ? AND epoch = ?`+cond,
		append([]any{t.Status, nullInt(t.ExitCode), t.Error, httpResult, t.Attempts, t.Epoch, t.InstanceID,
			t.DelegateName, t.DelegateHostname, encodeStrings(t.DeniedInstances), nullMicros(t.AcquiredAt),
			nullMicros(t.StartedAt), nullMicros(t.FinishedAt), micros(t.QueueDeadline),
			nullMicros(t.LeaseExpiresAt), boolInt(protocol.Terminal(t.Status)), t.ID, prevStatus, prevEpoch}, args...)...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return errRowChanged
	}
	return nil
}

// closeLog records the last log chunk of a task a delegate's result ended
// (see AppendLogs). It is a statement of its own rather than a column of
// updateTask: only the delegate's results set it.
func closeLog(ctx context.Context, h handle, id string, lastSeq int64) error {
	_, err := h.exec(ctx, `UPDATE tasks SET result_last_seq = ? WHERE id = ?`, max(lastSeq, 0), id)
	return err
}

// finish sets the terminal fields of t from r.
func finish(t *Task, r Result, now time.Time) {
	t.Status = r.Status
	t.ExitCode = r.ExitCode
	t.Error = cleanText(r.Error)
	t.HTTPResult = r.HTTPResult
	t.FinishedAt = timePtr(now)
	t.LeaseExpiresAt = nil
}

// deny adds instanceID to the task's deny list (once).
func deny(t *Task, instanceID string) {
	if instanceID != "" && !slices.Contains(t.DeniedInstances, instanceID) {
		t.DeniedInstances = append(t.DeniedInstances, instanceID)
	}
}

// requeue puts a running task back in the queue: it clears what the claim
// set (instance, delegate, acquired, started, lease) and restarts the queue
// timeout at now. Epoch and Attempts keep counting.
func requeue(t *Task, now time.Time) {
	t.Status = protocol.StatusQueued
	t.InstanceID, t.DelegateName, t.DelegateHostname = "", "", ""
	t.AcquiredAt, t.StartedAt, t.LeaseExpiresAt = nil, nil, nil
	t.QueueDeadline = fromMicros(micros(now.Add(time.Duration(t.QueueTimeoutMS) * time.Millisecond)))
}

// endLease ends the lease of a task the manager finished while it was
// running (lease expired, timeout, cancel): the epoch advances, so the
// delegate that held it can no longer report results or output for it.
func endLease(t *Task) { t.Epoch++ }

// heldAt reports whether a delegate holding the lease at epoch may still
// act on t: the task runs at epoch, or it finished while running at epoch
// (a task that was requeued has no AcquiredAt, so a lost delegate's late
// calls are refused even after the task ends).
func heldAt(t Task, epoch int64) bool {
	if epoch <= 0 || t.Epoch != epoch {
		return false
	}
	return t.Status == protocol.StatusRunning || (protocol.Terminal(t.Status) && t.AcquiredAt != nil)
}

func validResult(r Result) error {
	if !protocol.Terminal(r.Status) {
		return fmt.Errorf("result status %q is not a terminal status", r.Status)
	}
	return nil
}
