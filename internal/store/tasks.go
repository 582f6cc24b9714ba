package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// CreateTask inserts a queued task. The caller fills ID, AccountID, Spec,
// TimeoutMS, QueueTimeoutMS, Retries, CreatedAt and QueueDeadline. The
// scope (Spec.Org, Spec.Project) is also stored in columns of its own.
// Spec.SecretEnv's values are sealed for the task (the database never
// holds them in clear); their names are kept apart, in clear.
// SecretBindings are stored for the claim to hand out: the caller fills
// them for every stored secret the spec references (a reference without
// a binding fails the task's claim).
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
	queue_deadline, lease_expires_at, log_bytes, log_omitted, org, project, secret_names, secrets, created_by,
	secret_bindings, queue_rank, selectors)
	VALUES (?, ?, ?, ?, ?, NULL, '', NULL, ?, ?, ?, 0, 0, '', '', '', '[]', ?, NULL, NULL, NULL, ?, NULL, 0, 0, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT DO NOTHING`,
		t.ID, t.AccountID, t.Spec.Type, specText, protocol.StatusQueued, t.TimeoutMS, t.QueueTimeoutMS,
		t.Retries, micros(t.CreatedAt), micros(t.QueueDeadline), t.Spec.Org, t.Spec.Project,
		encodeStrings(names), sealed, t.CreatedBy, encodeBindings(t.SecretBindings), t.QueueRank(),
		encodeStrings(protocol.NormalizeSelectors(t.Spec.Selectors)))
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

// QueuedPage lists queued tasks of every account in queue order (by
// Task.QueueRank: effective priority, highest first; then ID), at most
// limit (limit <= 0 means 100), starting after the task after (nil = from
// the start): a caller reads the whole queue page by page. It reads the
// index of queued tasks by rank.
func (s *Store) QueuedPage(ctx context.Context, after *Task, limit int) ([]Task, error) {
	q := `SELECT ` + taskCols + ` FROM tasks WHERE ` + isQueued
	var args []any
	if after != nil {
		r := after.QueueRank()
		q += ` AND (queue_rank > ? OR (queue_rank = ? AND id > ?))`
		args = append(args, r, r, after.ID)
	}
	q += ` ORDER BY queue_rank, id LIMIT ?`
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
		// row: no read first.
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

// RunningTasksOf lists the tasks running on an instance.
func (s *Store) RunningTasksOf(ctx context.Context, instanceID string) ([]Task, error) {
	tasks, err := queryTasks(ctx, s.r(nil), `SELECT `+taskCols+` FROM tasks
	WHERE instance_id = ? AND `+isRunning+` ORDER BY acquired_at, id`, instanceID)
	if err != nil {
		return nil, fmt.Errorf("running tasks of %s: %w", instanceID, err)
	}
	return tasks, nil
}
