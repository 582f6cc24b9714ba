package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Pipelines and their runs. The store keeps definitions as text and runs
// as rows; what a definition means and what a run does next are package
// pipeline's to say. AdvanceRun is the one place a run changes: it holds
// the run's row (a row lock on PostgreSQL, the single writer on SQLite)
// while the caller decides, so two managers never advance one run at once.

// Pipeline is a stored pipeline definition.
type Pipeline struct {
	AccountID string
	// Org and Project are its scope: Org "" is account level, Org alone
	// org level, both project level.
	Org, Project string
	Name         string
	// Source is the YAML as applied.
	Source string
	// Version is 1 when created and goes up whenever an apply changes Source.
	Version   int64
	UpdatedBy string
	CreatedAt time.Time
	UpdatedAt time.Time
}

const pipelineCols = `account_id, org, project, name, source, version, updated_by, created_at, updated_at`

func scanPipeline(r rowScanner) (Pipeline, error) {
	var p Pipeline
	var created, updated int64
	if err := r.Scan(&p.AccountID, &p.Org, &p.Project, &p.Name, &p.Source, &p.Version, &p.UpdatedBy, &created, &updated); err != nil {
		return Pipeline{}, err
	}
	p.CreatedAt, p.UpdatedAt = fromMicros(created), fromMicros(updated)
	return p, nil
}

// ApplyPipeline stores p: a new pipeline at version 1, or a new source for
// an existing one at the next version. An apply with the source unchanged
// changes nothing and reports changed false.
func (s *Store) ApplyPipeline(ctx context.Context, p Pipeline, now time.Time) (out Pipeline, changed bool, err error) {
	out, changed, _, err = s.ApplyPipelineSuspending(ctx, p, "", now)
	return out, changed, err
}

// ApplyPipelineSuspending applies p as ApplyPipeline does and, when that
// stores a new version of a pipeline whose webhook is not suspended and
// suspend is not empty, suspends the webhook with the reason suspend in
// the same transaction (so no delivery runs the new version as the
// webhook's principal); suspended is the webhook's ID then, else "".
func (s *Store) ApplyPipelineSuspending(ctx context.Context, p Pipeline, suspend string, now time.Time) (out Pipeline, changed bool, suspended string, err error) {
	err = s.write(ctx, func(tx *sql.Tx) error {
		suspended = ""
		out, changed, err = s.applyPipeline(ctx, tx, p, now)
		if err != nil || !changed || out.Version == 1 || suspend == "" {
			return err
		}
		err := s.w(tx).queryRow(ctx, `SELECT id FROM pipeline_webhooks
	WHERE account_id = ? AND org = ? AND project = ? AND pipeline = ? AND suspended_reason = ''`, p.AccountID, p.Org, p.Project, p.Name).Scan(&suspended)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		_, err = s.w(tx).exec(ctx, `UPDATE pipeline_webhooks SET suspended_reason = ?, suspended_at = ? WHERE id = ?`,
			suspend, micros(now), suspended)
		return err
	})
	if err != nil {
		return Pipeline{}, false, "", fmt.Errorf("apply pipeline %s: %w", p.Name, err)
	}
	return out, changed, suspended, nil
}

func (s *Store) applyPipeline(ctx context.Context, tx *sql.Tx, p Pipeline, now time.Time) (out Pipeline, changed bool, err error) {
	cur, err := scanPipeline(s.w(tx).queryRow(ctx, `SELECT `+pipelineCols+` FROM pipelines
	WHERE account_id = ? AND org = ? AND project = ? AND name = ?`+s.lockClause("FOR UPDATE"), p.AccountID, p.Org, p.Project, p.Name))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		out = p
		out.Version = 1
		out.CreatedAt = fromMicros(micros(now))
		out.UpdatedAt = out.CreatedAt
		res, err := s.w(tx).exec(ctx, `INSERT INTO pipelines (`+pipelineCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			out.AccountID, out.Org, out.Project, out.Name, out.Source, out.Version, out.UpdatedBy, micros(out.CreatedAt), micros(out.UpdatedAt))
		if err != nil {
			return Pipeline{}, false, err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			// A concurrent first apply won; on PostgreSQL the write is
			// retried only on serialization failures, so say so.
			return Pipeline{}, false, errors.Join(ErrConflict, err)
		}
		return out, true, nil
	case err != nil:
		return Pipeline{}, false, err
	case cur.Source == p.Source:
		return cur, false, nil
	}
	out = cur
	out.Source = p.Source
	out.Version++
	out.UpdatedBy = p.UpdatedBy
	out.UpdatedAt = fromMicros(micros(now))
	_, err = s.w(tx).exec(ctx, `UPDATE pipelines SET source = ?, version = ?, updated_by = ?, updated_at = ?
	WHERE account_id = ? AND org = ? AND project = ? AND name = ?`,
		out.Source, out.Version, out.UpdatedBy, micros(out.UpdatedAt), p.AccountID, p.Org, p.Project, p.Name)
	return out, true, err
}

// GetPipeline returns the pipeline of that scope and name, or ErrNotFound.
func (s *Store) GetPipeline(ctx context.Context, acct, org, project, name string) (Pipeline, error) {
	p, err := scanPipeline(s.r(nil).queryRow(ctx, `SELECT `+pipelineCols+` FROM pipelines
	WHERE account_id = ? AND org = ? AND project = ? AND name = ?`, acct, org, project, name))
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return Pipeline{}, fmt.Errorf("get pipeline %s: %w", name, err)
	}
	return p, nil
}

// ListPipelines lists an account's pipelines of every scope, by org,
// project and name; the caller filters what its user may see.
func (s *Store) ListPipelines(ctx context.Context, acct string) ([]Pipeline, error) {
	rows, err := s.r(nil).query(ctx, `SELECT `+pipelineCols+` FROM pipelines WHERE account_id = ? ORDER BY org, project, name`, acct)
	if err != nil {
		return nil, fmt.Errorf("list pipelines: %w", err)
	}
	out, err := scanAll(rows, scanPipeline)
	if err != nil {
		return nil, fmt.Errorf("list pipelines: %w", err)
	}
	return out, nil
}

// DeletePipeline deletes a pipeline and its webhook, or returns
// ErrNotFound. Its runs stay (they keep the source they ran).
func (s *Store) DeletePipeline(ctx context.Context, acct, org, project, name string) error {
	err := s.write(ctx, func(tx *sql.Tx) error {
		res, err := s.w(tx).exec(ctx, `DELETE FROM pipelines WHERE account_id = ? AND org = ? AND project = ? AND name = ?`,
			acct, org, project, name)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return errors.Join(ErrNotFound, err)
		}
		_, err = s.w(tx).exec(ctx, `DELETE FROM pipeline_webhooks WHERE account_id = ? AND org = ? AND project = ? AND pipeline = ?`,
			acct, org, project, name)
		return err
	})
	if err != nil {
		return fmt.Errorf("delete pipeline %s: %w", name, err)
	}
	return nil
}

// Run statuses (the same words as package pipeline's RunStatus).
const (
	RunRunning   = "running"
	RunSucceeded = "succeeded"
	RunFailed    = "failed"
	RunCancelled = "cancelled"
)

// Run is one run of a pipeline.
type Run struct {
	ID        string
	AccountID string
	Org       string
	Project   string
	Pipeline  string
	Version   int64
	// Source is the definition the run runs.
	Source string
	Inputs map[string]string
	Status string
	// CancelRequested: a cancel was asked for; the run ends once its
	// running steps have.
	CancelRequested bool
	// Trigger is how it started ("manual", "webhook"); TriggeredBy who.
	Trigger     string
	TriggeredBy string
	// WebhookID and Delivery: the webhook that started it and the
	// delivery ID its sender gave ("" for none); one delivery ID starts
	// one run of a webhook (CreateRun: ErrConflict).
	WebhookID string
	Delivery  string
	// ActsKind and ActsID name the principal the run acts as (who started
	// it, or whom its webhook acts as): its steps' tasks are checked
	// against that principal's permissions when they are created. Empty
	// for runs from before migration 0021.
	ActsKind, ActsID string
	// Priority is the run's own priority for its step tasks (run start
	// --priority); 0: the pipeline's, or normal.
	Priority   int
	Error      string
	CreatedAt  time.Time
	FinishedAt *time.Time
	// RollbackOf is the deployment a rollback run re-deploys over ("" for
	// other runs); its deployments carry it too.
	RollbackOf string
	// Steps are the steps that started or were skipped, in the order they
	// did (filled by GetRun and AdvanceRun, not by ListRuns).
	Steps []RunStep
}

// RunStep is one step of a run.
type RunStep struct {
	Stage, Step string
	// TaskID is the step's task; "" when it never had one (skipped, or
	// failed before its task could be created).
	TaskID     string
	Status     string
	Outputs    map[string]string
	Error      string
	StartedAt  time.Time
	FinishedAt *time.Time
}

const runCols = `id, account_id, org, project, pipeline, version, source, inputs, status, cancel_requested,
	trigger_kind, triggered_by, error, created_at, finished_at, webhook_id, delivery, acts_kind, acts_id, rollback_of, priority`

func scanRun(r rowScanner) (Run, error) {
	var run Run
	var inputs string
	var cancel int
	var created int64
	var finished sql.NullInt64
	if err := r.Scan(&run.ID, &run.AccountID, &run.Org, &run.Project, &run.Pipeline, &run.Version, &run.Source, &inputs,
		&run.Status, &cancel, &run.Trigger, &run.TriggeredBy, &run.Error, &created, &finished, &run.WebhookID, &run.Delivery,
		&run.ActsKind, &run.ActsID, &run.RollbackOf, &run.Priority); err != nil {
		return Run{}, err
	}
	if err := json.Unmarshal([]byte(inputs), &run.Inputs); err != nil {
		return Run{}, fmt.Errorf("run %s: decode inputs: %w", run.ID, err)
	}
	run.Inputs = decodedMap(run.Inputs)
	run.CancelRequested = cancel != 0
	run.CreatedAt = fromMicros(created)
	run.FinishedAt = fromNullMicros(finished)
	return run, nil
}

const runStepCols = `stage, step, task_id, status, outputs, error, started_at, finished_at`

func scanRunStep(r rowScanner) (RunStep, error) {
	var st RunStep
	var outputs string
	var started int64
	var finished sql.NullInt64
	if err := r.Scan(&st.Stage, &st.Step, &st.TaskID, &st.Status, &outputs, &st.Error, &started, &finished); err != nil {
		return RunStep{}, err
	}
	if err := json.Unmarshal([]byte(outputs), &st.Outputs); err != nil {
		return RunStep{}, fmt.Errorf("step %s.%s: decode outputs: %w", st.Stage, st.Step, err)
	}
	st.Outputs = decodedMap(st.Outputs)
	st.StartedAt = fromMicros(started)
	st.FinishedAt = fromNullMicros(finished)
	return st, nil
}

func encodeMap(m map[string]string) string {
	if m == nil {
		m = map[string]string{}
	}
	b, err := json.Marshal(m)
	if err != nil { // cannot happen for map[string]string
		panic(err)
	}
	return string(b)
}

// CreateRun stores a new run (its steps empty); ErrConflict if the ID is
// taken or its webhook started a run for its delivery ID already. The caller fills every field but Steps and FinishedAt.
func (s *Store) CreateRun(ctx context.Context, r Run) (Run, error) {
	r.CreatedAt = fromMicros(micros(r.CreatedAt))
	r.Inputs = decodedMap(r.Inputs)
	err := s.insert(ctx, `INSERT INTO pipeline_runs (`+runCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		r.ID, r.AccountID, r.Org, r.Project, r.Pipeline, r.Version, r.Source, encodeMap(r.Inputs), r.Status,
		boolInt(r.CancelRequested), r.Trigger, r.TriggeredBy, cleanText(r.Error), micros(r.CreatedAt), r.WebhookID, r.Delivery,
		r.ActsKind, r.ActsID, r.RollbackOf, r.Priority)
	if err != nil {
		return Run{}, fmt.Errorf("create run %s: %w", r.ID, err)
	}
	r.Steps, r.FinishedAt = nil, nil
	return r, nil
}

// decodedMap is m as a JSON round trip gives it back (nil for none).
func decodedMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// GetRun returns a run of an account with its steps; ErrNotFound also for
// another account's run.
func (s *Store) GetRun(ctx context.Context, acct, id string) (Run, error) {
	var run Run
	err := s.read(ctx, func(tx *sql.Tx) error {
		var err error
		run, err = getRun(ctx, s.r(tx), id, "")
		return err
	})
	if err == nil && run.AccountID != acct {
		err = ErrNotFound
	}
	if err != nil {
		return Run{}, fmt.Errorf("get run %s: %w", id, err)
	}
	return run, nil
}

func getRun(ctx context.Context, h handle, id, lock string) (Run, error) {
	run, err := scanRun(h.queryRow(ctx, `SELECT `+runCols+` FROM pipeline_runs WHERE id = ?`+lock, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Run{}, ErrNotFound
	}
	if err != nil {
		return Run{}, err
	}
	rows, err := h.query(ctx, `SELECT `+runStepCols+` FROM pipeline_run_steps WHERE run_id = ? ORDER BY started_at, stage, step`, id)
	if err != nil {
		return Run{}, err
	}
	run.Steps, err = scanAll(rows, scanRunStep)
	return run, err
}

// RunFilter narrows ListRuns; zero fields match everything.
type RunFilter struct {
	Pipeline string
	// Status keeps the runs in that status.
	Status string
	// Org and Project, when Pipeline is set and InScope is true, keep the
	// runs of the pipeline of that scope (a name may exist in several).
	InScope      bool
	Org, Project string
	// Scopes, when not nil, keeps the runs at or beneath one of them (the
	// scopes a caller may view), before the limit: see TaskFilter.Scopes.
	Scopes []ScopeFilter
	// Before, when not nil, keeps the runs older than it in the listing's
	// order (created_at, then ID, both descending): the next page.
	Before *RunCursor
	// Limit bounds the answer (0: 100; at most 1000).
	Limit int
}

// RunCursor is a position in a run listing: that of the run with this
// creation time and ID.
type RunCursor struct {
	CreatedAt time.Time
	ID        string
}

// ListRuns lists an account's runs, newest first (ties broken by ID,
// descending), without their steps.
func (s *Store) ListRuns(ctx context.Context, acct string, f RunFilter) ([]Run, error) {
	q := `SELECT ` + runCols + ` FROM pipeline_runs WHERE account_id = ?`
	args := []any{acct}
	if f.Pipeline != "" {
		q += ` AND pipeline = ?`
		args = append(args, f.Pipeline)
	}
	if f.InScope {
		q += ` AND org = ? AND project = ?`
		args = append(args, f.Org, f.Project)
	}
	if f.Status != "" {
		q += ` AND status = ?`
		args = append(args, f.Status)
	}
	if f.Scopes != nil {
		w, a := scopeWhere(f.Scopes)
		q += ` AND ` + w
		args = append(args, a...)
	}
	if f.Before != nil {
		c := micros(f.Before.CreatedAt)
		q += ` AND (created_at < ? OR (created_at = ? AND id < ?))`
		args = append(args, c, c, f.Before.ID)
	}
	q += ` ORDER BY created_at DESC, id DESC LIMIT ?`
	args = append(args, listLimit(f.Limit))
	rows, err := s.r(nil).query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	out, err := scanAll(rows, scanRun)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return out, nil
}

// RunRef names a run of an account.
type RunRef struct {
	AccountID, ID string
}

// UnfinishedRuns returns the runs still running, oldest first: what a
// manager advances when it starts.
func (s *Store) UnfinishedRuns(ctx context.Context) ([]RunRef, error) {
	rows, err := s.r(nil).query(ctx, `SELECT account_id, id FROM pipeline_runs WHERE status = ? ORDER BY created_at`, RunRunning)
	if err != nil {
		return nil, fmt.Errorf("unfinished runs: %w", err)
	}
	out, err := scanAll(rows, func(r rowScanner) (RunRef, error) {
		var ref RunRef
		return ref, r.Scan(&ref.AccountID, &ref.ID)
	})
	if err != nil {
		return nil, fmt.Errorf("unfinished runs: %w", err)
	}
	return out, nil
}

// RunOfTask returns the run whose step has that task, or ErrNotFound when
// the task is no step of a run.
func (s *Store) RunOfTask(ctx context.Context, taskID string) (RunRef, error) {
	var ref RunRef
	err := s.r(nil).queryRow(ctx, `SELECT r.account_id, r.id FROM pipeline_run_steps s JOIN pipeline_runs r ON r.id = s.run_id
	WHERE s.task_id = ?`, taskID).Scan(&ref.AccountID, &ref.ID)
	if errors.Is(err, sql.ErrNoRows) {
		err = ErrNotFound
	}
	if err != nil {
		return RunRef{}, fmt.Errorf("run of task %s: %w", taskID, err)
	}
	return ref, nil
}

// RunChange is what an advance of a run writes.
type RunChange struct {
	// Steps are inserted, or replace the step of the same stage and name.
	Steps []RunStep
	// Status, when set, is the run's new status; Error its error line;
	// FinishedAt is set with a final status.
	Status     string
	Error      string
	FinishedAt *time.Time
	// Cancel sets CancelRequested.
	Cancel bool
}

// AdvanceRun holds run id of account acct (a row lock on PostgreSQL; on
// SQLite the single writer) and writes what decide returns from the run as
// stored, steps included; it returns the run as written. decide may be
// called more than once (a retried write) and must depend on its argument
// alone. A finished run is handed to decide like any other; an unknown one
// is ErrNotFound.
func (s *Store) AdvanceRun(ctx context.Context, acct, id string, decide func(Run) (RunChange, error)) (Run, error) {
	var out Run
	err := s.write(ctx, func(tx *sql.Tx) error {
		h := s.w(tx)
		run, err := getRun(ctx, h, id, s.lockClause("FOR UPDATE"))
		if err == nil && run.AccountID != acct {
			err = ErrNotFound
		}
		if err != nil {
			return err
		}
		ch, err := decide(run)
		if err != nil {
			return err
		}
		for _, st := range ch.Steps {
			st.Outputs = decodedMap(st.Outputs)
			st.Error = cleanText(st.Error)
			st.StartedAt = fromMicros(micros(st.StartedAt))
			if st.FinishedAt != nil {
				st.FinishedAt = timePtr(*st.FinishedAt)
			}
			if _, err := h.exec(ctx, `INSERT INTO pipeline_run_steps (run_id, `+runStepCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (run_id, stage, step) DO UPDATE SET task_id = excluded.task_id, status = excluded.status,
	outputs = excluded.outputs, error = excluded.error, started_at = excluded.started_at, finished_at = excluded.finished_at`,
				id, st.Stage, st.Step, st.TaskID, st.Status, encodeMap(st.Outputs), st.Error, micros(st.StartedAt), nullMicros(st.FinishedAt)); err != nil {
				return err
			}
			replaced := false
			for i := range run.Steps {
				if run.Steps[i].Stage == st.Stage && run.Steps[i].Step == st.Step {
					run.Steps[i], replaced = st, true
				}
			}
			if !replaced {
				run.Steps = append(run.Steps, st)
			}
		}
		if ch.Status != "" || ch.Cancel {
			if ch.Status != "" {
				run.Status = ch.Status
				run.Error = cleanText(ch.Error)
				if ch.FinishedAt != nil {
					run.FinishedAt = timePtr(*ch.FinishedAt)
				}
			}
			run.CancelRequested = run.CancelRequested || ch.Cancel
			if _, err := h.exec(ctx, `UPDATE pipeline_runs SET status = ?, error = ?, finished_at = ?, cancel_requested = ? WHERE id = ?`,
				run.Status, run.Error, nullMicros(run.FinishedAt), boolInt(run.CancelRequested), id); err != nil {
				return err
			}
		}
		out = run
		return nil
	})
	if err != nil {
		return Run{}, fmt.Errorf("advance run %s: %w", id, err)
	}
	return out, nil
}
