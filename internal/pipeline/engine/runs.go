package engine

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/events"
	"github.com/legate-dev/legate/internal/pipeline"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// A run advances in one place, AdvanceRun: it reads
// the run and the end of its running steps' tasks, lets package pipeline's
// Plan decide, and records the decision with store.AdvanceRun (which
// holds the run's row, so two managers never advance one run at once);
// only after that commit are the started steps' tasks created, through
// the same checks as a submitted task. Every step's task ID is fixed by
// the run and the step (StepTaskID), so a task created twice (two
// managers, a crash between the commit and the creation) is created once,
// and a step recorded as running whose task was never created gets it on
// the next advance.
//
// A run advances when it starts, whenever one of its tasks ends (its TaskEnded
// event notes it; Run advances it), on cancel, and from Run at start and
// every Config.RunAdvanceInterval for every unfinished run (restart
// safety, and a task that ended on a manager that died before advancing).

// StepTaskID is the task ID of step number i (in pipeline order) of run
// runID: "t_" + the run's ID without its prefix + "_" + i. Submitted
// tasks have no underscore after their prefix, so isStepTask tells the two
// apart without a query.
func StepTaskID(runID string, i int) string {
	return "t_" + strings.TrimPrefix(runID, "r_") + "_" + strconv.Itoa(i)
}

func isStepTask(id string) bool { return strings.Count(id, "_") == 2 && strings.HasPrefix(id, "t_") }

// deploymentID is the fixed ID of the deployment of stage number i of a
// run (BeginDeployment refuses a second one with store.ErrConflict).
func deploymentID(runID string, i int) string {
	return "dp_" + strings.TrimPrefix(runID, "r_") + "_" + strconv.Itoa(i)
}

// runNotes collects the step tasks that ended, for Run. Its zero value
// is not ready: use newRunNotes.
type runNotes struct {
	mu    sync.Mutex
	tasks map[string]bool
	wake  chan struct{}
}

func newRunNotes() *runNotes {
	return &runNotes{tasks: map[string]bool{}, wake: make(chan struct{}, 1)}
}

func (n *runNotes) note(taskID string) {
	n.mu.Lock()
	n.tasks[taskID] = true
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

func (n *runNotes) take() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]string, 0, len(n.tasks))
	for id := range n.tasks {
		out = append(out, id)
	}
	clear(n.tasks)
	return out
}

// Run advances every unfinished run at start and every
// Config.RunAdvanceInterval, and the run of each step task that ended,
// until ctx ends; it returns nil then. A run that fails to advance is
// logged and advanced again later.
func (svc *Service) Run(ctx context.Context) error {
	svc.advanceUnfinished(ctx)
	tick := time.NewTicker(svc.cfg.RunAdvanceInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			svc.advanceUnfinished(ctx)
		case <-svc.notes.wake:
			for _, id := range svc.notes.take() {
				ref, err := svc.st.RunOfTask(ctx, id)
				if errors.Is(err, store.ErrNotFound) {
					continue
				}
				if err != nil {
					svc.log.Warn("pipeline run of an ended task", "task", id, "err", err)
					continue
				}
				svc.advanceLogged(ctx, ref.AccountID, ref.ID)
			}
		}
	}
}

func (svc *Service) advanceUnfinished(ctx context.Context) {
	refs, err := svc.st.UnfinishedRuns(ctx)
	if err != nil {
		if ctx.Err() == nil {
			svc.log.Warn("pipeline runs to advance", "err", err)
		}
		return
	}
	for _, ref := range refs {
		if ctx.Err() != nil {
			return
		}
		svc.advanceLogged(ctx, ref.AccountID, ref.ID)
	}
}

func (svc *Service) advanceLogged(ctx context.Context, acct, id string) {
	if _, err := svc.AdvanceRun(ctx, acct, id); err != nil && ctx.Err() == nil {
		svc.log.Warn("advance pipeline run", "run", id, "err", err)
	}
}

// RunStart is what StartRun needs.
type RunStart struct {
	AccountID    string
	Org, Project string
	Pipeline     string
	Inputs       map[string]string
	Trigger      string // "manual", "webhook"
	TriggeredBy  string // api.PrincipalLabel of the caller, "webhook:NAME"
	// ActsKind and ActsID: the principal the run acts as (the caller, or
	// the one the webhook acts as), whose permissions its steps' secret
	// references are checked against.
	ActsKind, ActsID string
	// WebhookID and Delivery: the webhook that starts it and the
	// delivery ID its sender gave (CreateRun refuses a second run of it
	// with store.ErrConflict).
	WebhookID, Delivery string
	// Stored, when set, is the version to run (the one the caller
	// checked); otherwise the pipeline's current version.
	Stored *store.Pipeline
	// RollbackOf is the deployment a rollback run re-deploys over.
	RollbackOf string
	// Priority is the run's priority for its step tasks (checked by the
	// caller); 0: the pipeline's.
	Priority int
}

// errRunRefused wraps what refuses a run before it starts that is the
// caller's to fix (inputs, a pipeline that no longer parses): a 400.
type errRunRefused struct{ err error }

func (e *errRunRefused) Error() string { return e.err.Error() }
func (e *errRunRefused) Unwrap() error { return e.err }

// StartRun starts a run of a stored pipeline and advances it once (its
// first steps' tasks are created before it returns). A run whose
// pipeline deploys is refused with a *LimitError, before anything is
// recorded, when the account has no free deployment slot.
func (svc *Service) StartRun(ctx context.Context, rs RunStart) (store.Run, error) {
	var stored store.Pipeline
	if rs.Stored != nil {
		stored = *rs.Stored
	} else {
		var err error
		if stored, err = svc.st.GetPipeline(ctx, rs.AccountID, rs.Org, rs.Project, rs.Pipeline); err != nil {
			return store.Run{}, err
		}
	}
	p, err := pipeline.Parse([]byte(stored.Source))
	if err != nil {
		return store.Run{}, &errRunRefused{fmt.Errorf("pipeline %s (version %d) no longer parses: %w", stored.Name, stored.Version, err)}
	}
	inputs, err := p.ResolveInputs(rs.Inputs)
	if err != nil {
		return store.Run{}, &errRunRefused{err}
	}
	if deploys(p) {
		if err := svc.checkDeploymentSlot(ctx, rs.AccountID); err != nil {
			return store.Run{}, err
		}
	}
	run, err := svc.st.CreateRun(ctx, store.Run{ID: api.NewID("r_"), AccountID: rs.AccountID, Org: rs.Org, Project: rs.Project,
		Pipeline: stored.Name, Version: stored.Version, Source: stored.Source, Inputs: inputs, Status: store.RunRunning,
		Trigger: rs.Trigger, TriggeredBy: rs.TriggeredBy, WebhookID: rs.WebhookID, Delivery: rs.Delivery,
		ActsKind: rs.ActsKind, ActsID: rs.ActsID, RollbackOf: rs.RollbackOf, CreatedAt: svc.now(),
		Priority: cmp.Or(rs.Priority, p.Priority)})
	if err != nil {
		return store.Run{}, err
	}
	svc.log.Info("pipeline run started", "run", run.ID, "pipeline", run.Pipeline, "version", run.Version, "by", run.TriggeredBy)
	return svc.AdvanceRun(ctx, run.AccountID, run.ID)
}

func deploys(p *pipeline.Pipeline) bool {
	for i := range p.Stages {
		if p.Stages[i].Deployment() {
			return true
		}
	}
	return false
}

// checkDeploymentSlot returns a *LimitError when the account has no free
// deployment slot now.
func (svc *Service) checkDeploymentSlot(ctx context.Context, acct string) error {
	now := svc.now()
	u, err := svc.st.DeploymentUsage(ctx, acct, svc.limits(), now)
	if err != nil {
		return err
	}
	for _, w := range []store.WindowUsage{u.Hour, u.Day} {
		if w.Full() {
			label := "hour"
			if w.Window == store.DayWindow {
				label = "day"
			}
			svc.refusals.With(label).Inc()
			le := &store.LimitError{Usage: w}
			svc.log.Info("pipeline run refused", "account", acct, "limit", label, "max", w.Limit, "used", w.Used, "next_free", w.NextFree)
			return &LimitError{Window: w.Window, Limit: w.Limit, Used: w.Used, NextFree: w.NextFree, msg: le.Message(now)}
		}
	}
	return nil
}

// taskEnd is what the engine knows of a step's task that ended, or of one
// that could not be created (err).
type taskEnd struct {
	status string
	err    string
}

// stepState maps a run's step rows to the planner's state: a running step
// whose task ended (ends) takes the task's end.
func stepState(run store.Run, ends map[string]taskEnd) (pipeline.State, pipeline.Outputs) {
	st := pipeline.State{Steps: map[pipeline.StepRef]pipeline.StepStatus{}, Cancelled: run.CancelRequested}
	outs := pipeline.Outputs{}
	for _, s := range run.Steps {
		ref := pipeline.StepRef{Stage: s.Stage, Step: s.Step}
		status := s.Status
		if status == store.RunRunning {
			if e, ok := ends[s.TaskID]; ok {
				status = e.status
			}
		}
		st.Steps[ref] = stepStatus(status)
		if len(s.Outputs) > 0 {
			outs[ref] = s.Outputs
		}
	}
	return st, outs
}

// stepStatus maps a task's (or a step row's) status to the planner's.
func stepStatus(s string) pipeline.StepStatus {
	switch s {
	case protocol.StatusQueued, protocol.StatusRunning: // store.RunRunning too
		return pipeline.StepRunning
	case protocol.StatusSucceeded:
		return pipeline.StepSucceeded
	case string(pipeline.StepSkipped):
		return pipeline.StepSkipped
	}
	return pipeline.StepFailed
}

// AdvanceRun advances a run until it waits on running tasks or is over,
// and returns it as stored.
func (svc *Service) AdvanceRun(ctx context.Context, acct, id string) (store.Run, error) {
	changed := false
	defer func() {
		// The web UI's run pages look again (they send only what changed),
		// here and, when the run moved, on the other managers.
		svc.events.Publish(ctx, events.Event{Kind: events.RunAdvanced, Account: acct, Broadcast: changed})
	}()
	ends := map[string]taskEnd{}
	for range 1000 { // each pass ends steps or starts some: bounded by the steps
		run, progressed, moved, err := svc.advanceOnce(ctx, acct, id, ends)
		changed = changed || moved
		if err != nil || !progressed {
			return run, err
		}
	}
	return svc.st.GetRun(ctx, acct, id)
}

// advanceOnce is one pass of AdvanceRun. ends holds the tasks that could
// not be created, across passes. progressed reports that another pass may
// change more.
func (svc *Service) advanceOnce(ctx context.Context, acct, id string, ends map[string]taskEnd) (_ store.Run, progressed, changed bool, _ error) {
	run, err := svc.st.GetRun(ctx, acct, id)
	if err != nil {
		return store.Run{}, false, false, err
	}
	if run.Status != store.RunRunning {
		return run, false, false, nil
	}
	p, err := pipeline.Parse([]byte(run.Source))
	if err != nil {
		run, _, err := svc.failRun(ctx, run, fmt.Sprintf("its pipeline (version %d) does not parse: %v", run.Version, err))
		return run, false, err == nil, err
	}
	missing, err := svc.readEnds(ctx, run, ends)
	if err != nil {
		return run, false, false, err
	}
	ps := &pass{p: p, index: map[pipeline.StepRef]int{}, ends: ends}
	for i, r := range p.Steps() {
		ps.index[r] = i
	}
	state, _ := stepState(run, ends)
	plan := p.Plan(state)
	if ps.refused, err = svc.beginStages(ctx, run, p, plan.Start); err != nil {
		return run, false, false, err
	}
	if len(plan.Start) == 0 && len(plan.Skip) == 0 && !plan.Done && len(missing) == 0 && !endsRunning(run, ends) {
		return run, false, false, nil // nothing to record: the run waits on its tasks
	}
	ps.now = svc.now()
	// A run that is about to end ends its deployments first, so that
	// whoever sees the run over sees its deployments over (they are ended
	// again, changing nothing, after the commit).
	if ch, _ := ps.decide(run); ch.Status != "" {
		svc.endStages(ctx, projectRun(run, ch), p)
	}
	var started []pipeline.StepRef
	run, err = svc.st.AdvanceRun(ctx, acct, id, func(cur store.Run) (store.RunChange, error) {
		var ch store.RunChange
		ch, started = ps.decide(cur)
		return ch, nil
	})
	if err != nil {
		return store.Run{}, false, false, err
	}
	// Recorded: the pages that show the run look again.
	failed, err := svc.createStepTasks(ctx, run, p, started, missing, ends)
	if err != nil {
		return run, false, false, err
	}
	progressed = len(ps.refused) > 0 || failed
	svc.endStages(ctx, run, p)
	if run.Status != store.RunRunning {
		svc.log.Info("pipeline run ended", "run", run.ID, "pipeline", run.Pipeline, "status", run.Status)
		return run, false, true, nil
	}
	// Another pass when steps failed without a task: the next item (a
	// `when: failure` step) may start.
	return run, progressed, true, nil
}

// readEnds adds to ends the end of each running step's task that ended,
// and returns the running steps' tasks that were never created. A task's
// end never changes, so reading it before the run is held is as good as
// inside.
func (svc *Service) readEnds(ctx context.Context, run store.Run, ends map[string]taskEnd) (missing map[string]bool, _ error) {
	missing = map[string]bool{}
	for _, s := range run.Steps {
		if s.Status != store.RunRunning || s.TaskID == "" {
			continue
		}
		if _, ok := ends[s.TaskID]; ok {
			continue
		}
		t, err := svc.st.GetTask(ctx, run.AccountID, s.TaskID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			missing[s.TaskID] = true
		case err != nil:
			return nil, err
		case protocol.Terminal(t.Status):
			msg := t.Error
			if msg == "" && t.Status != protocol.StatusSucceeded {
				msg = "its task " + t.ID + " " + strings.ReplaceAll(t.Status, "_", " ")
			}
			ends[s.TaskID] = taskEnd{status: t.Status, err: msg}
		}
	}
	return missing, nil
}

// beginStages begins the deployment of each deployment stage about to
// start (a step of start is its first). A stage over a deployment limit
// does not start: refused maps it to why its steps fail.
func (svc *Service) beginStages(ctx context.Context, run store.Run, p *pipeline.Pipeline, start []pipeline.StepRef) (refused map[string]string, _ error) {
	refused = map[string]string{}
	for _, ref := range start {
		stage, _ := p.Step(ref)
		if !stage.Deployment() || refused[stage.Name] != "" || stageStarted(run, stage.Name) {
			continue
		}
		if err := svc.beginStage(ctx, run, p, stage.Name); err != nil {
			var le *LimitError
			if !errors.As(err, &le) {
				return nil, err
			}
			refused[stage.Name] = le.Error()
		}
	}
	return refused, nil
}

// pass is what one pass of advanceOnce knows before it holds the run.
type pass struct {
	p *pipeline.Pipeline
	// index is each step's number in pipeline order (StepTaskID).
	index map[pipeline.StepRef]int
	ends  map[string]taskEnd
	// refused maps a deployment stage that may not start to why its
	// steps fail.
	refused map[string]string
	now     time.Time
}

// decide is what the run records: the ends of its running steps' tasks,
// the steps that start and those skipped, and its end.
func (ps *pass) decide(cur store.Run) (ch store.RunChange, started []pipeline.StepRef) {
	if cur.Status != store.RunRunning {
		return ch, nil
	}
	now := ps.now
	state, _ := stepState(cur, ps.ends)
	// Running steps whose task ended take its end.
	for _, s := range cur.Steps {
		if e, ok := ps.ends[s.TaskID]; ok && s.Status == store.RunRunning {
			if stepStatus(e.status) == pipeline.StepRunning {
				continue
			}
			// The row keeps the task's own word (timed_out, cancelled…).
			s.Status, s.Error = e.status, e.err
			s.FinishedAt = &now
			ch.Steps = append(ch.Steps, s)
		}
	}
	d := ps.p.Plan(state)
	for _, ref := range d.Start {
		stage, _ := ps.p.Step(ref)
		rs := store.RunStep{Stage: ref.Stage, Step: ref.Step, Status: store.RunRunning, StartedAt: now}
		if why := ps.refused[stage.Name]; why != "" {
			rs.Status, rs.Error, rs.FinishedAt = store.RunFailed, why, &now
		} else {
			rs.TaskID = StepTaskID(cur.ID, ps.index[ref])
			started = append(started, ref)
		}
		ch.Steps = append(ch.Steps, rs)
	}
	for _, ref := range d.Skip {
		ch.Steps = append(ch.Steps, store.RunStep{Stage: ref.Stage, Step: ref.Step, Status: string(pipeline.StepSkipped), StartedAt: now, FinishedAt: &now})
	}
	if d.Done {
		ch.Status, ch.FinishedAt = string(d.Status), &now
		if d.Status == pipeline.RunFailed {
			ch.Error = runError(cur, ch.Steps)
		}
	}
	return ch, started
}

// createStepTasks creates the tasks of the steps just started and of
// those whose task was never created (missing). A step that cannot get
// its task takes a failed end in ends; failed reports that one did.
func (svc *Service) createStepTasks(ctx context.Context, run store.Run, p *pipeline.Pipeline, started []pipeline.StepRef,
	missing map[string]bool, ends map[string]taskEnd) (failed bool, _ error) {
	for _, s := range run.Steps {
		if s.Status != store.RunRunning || s.TaskID == "" {
			continue
		}
		isNew := missing[s.TaskID]
		for _, ref := range started {
			if ref.Stage == s.Stage && ref.Step == s.Step {
				isNew = true
			}
		}
		if !isNew {
			continue
		}
		if err := svc.createStepTask(ctx, run, p, pipeline.StepRef{Stage: s.Stage, Step: s.Step}, s.TaskID); err != nil {
			var refusal *errRunRefused
			if !errors.As(err, &refusal) {
				return false, err
			}
			ends[s.TaskID] = taskEnd{status: protocol.StatusFailed, err: refusal.Error()}
			failed = true
		}
	}
	return failed, nil
}

// projectRun is run as it will be once ch is recorded (as
// store.AdvanceRun writes it).
func projectRun(run store.Run, ch store.RunChange) store.Run {
	run.Steps = slices.Clone(run.Steps)
	for _, st := range ch.Steps {
		i := slices.IndexFunc(run.Steps, func(s store.RunStep) bool { return s.Stage == st.Stage && s.Step == st.Step })
		if i >= 0 {
			run.Steps[i] = st
		} else {
			run.Steps = append(run.Steps, st)
		}
	}
	if ch.Status != "" {
		run.Status, run.Error, run.FinishedAt = ch.Status, ch.Error, ch.FinishedAt
	}
	run.CancelRequested = run.CancelRequested || ch.Cancel
	return run
}

// endsRunning reports whether a step the run has as running has ended.
func endsRunning(run store.Run, ends map[string]taskEnd) bool {
	for _, s := range run.Steps {
		if _, ok := ends[s.TaskID]; ok && s.Status == store.RunRunning {
			return true
		}
	}
	return false
}

// runError is the error line of a failed run: the first failed step's.
func runError(run store.Run, changed []store.RunStep) string {
	for _, steps := range [][]store.RunStep{run.Steps, changed} {
		for _, s := range steps {
			if stepStatus(s.Status) == pipeline.StepFailed {
				msg := "step " + s.Stage + "." + s.Step + " failed"
				if s.Error != "" {
					msg += ": " + s.Error
				}
				return msg
			}
		}
	}
	return ""
}

// failRun ends a run that cannot go on.
func (svc *Service) failRun(ctx context.Context, run store.Run, why string) (store.Run, bool, error) {
	now := svc.now()
	out, err := svc.st.AdvanceRun(ctx, run.AccountID, run.ID, func(cur store.Run) (store.RunChange, error) {
		if cur.Status != store.RunRunning {
			return store.RunChange{}, nil
		}
		return store.RunChange{Status: store.RunFailed, Error: why, FinishedAt: &now}, nil
	})
	svc.log.Warn("pipeline run failed", "run", run.ID, "why", why)
	return out, false, err
}

func stageStarted(run store.Run, stage string) bool {
	for _, s := range run.Steps {
		if s.Stage == stage && s.Status != string(pipeline.StepSkipped) {
			return true
		}
	}
	return false
}

func stageIndex(p *pipeline.Pipeline, name string) int {
	for i := range p.Stages {
		if p.Stages[i].Name == name {
			return i
		}
	}
	return -1
}

// beginStage records the deployment of a deployment stage that starts;
// beginning it again (another manager, a retried pass) changes nothing.
func (svc *Service) beginStage(ctx context.Context, run store.Run, p *pipeline.Pipeline, stage string) error {
	i := stageIndex(p, stage)
	st := &p.Stages[i]
	kind, name := principalOfLabel(run.TriggeredBy)
	_, err := svc.BeginDeployment(ctx, DeploymentStart{ID: deploymentID(run.ID, i), AccountID: run.AccountID, Org: run.Org,
		Project: run.Project, Service: st.Service, Environment: st.Environment, Version: run.Inputs["version"],
		Pipeline: run.Pipeline, RunID: run.ID, Stage: stage, PrincipalKind: kind, PrincipalName: name, RollbackOf: run.RollbackOf})
	if errors.Is(err, store.ErrConflict) {
		return nil
	}
	return err
}

// principalOfLabel is the inverse of api.PrincipalLabel: the kind and name of
// the principal a run's TriggeredBy names.
func principalOfLabel(label string) (kind, name string) {
	for _, k := range []string{access.KindServiceAccount, access.KindUser} {
		p := access.Principal{Kind: k, Name: "x"}.String()
		if prefix := strings.TrimSuffix(p, "x"); strings.HasPrefix(label, prefix) {
			return k, strings.TrimPrefix(label, prefix)
		}
	}
	return label, ""
}

// endStages ends the deployment of every deployment stage of the run
// whose status is decided (again: ending one twice changes nothing).
func (svc *Service) endStages(ctx context.Context, run store.Run, p *pipeline.Pipeline) {
	for i := range p.Stages {
		st := &p.Stages[i]
		if !st.Deployment() || !stageStarted(run, st.Name) {
			continue
		}
		if err := svc.endStage(ctx, run, p, i); err != nil && !errors.Is(err, store.ErrNotFound) {
			svc.log.Warn("end deployment", "run", run.ID, "stage", st.Name, "err", err)
		}
	}
}

// createStepTask creates and offers the task of a step that started,
// through the checks of a submitted task; a step that cannot get its task
// (an output it needs is missing, its connector is gone) fails with an
// *errRunRefused that says why. Creating it again is a no-op.
func (svc *Service) createStepTask(ctx context.Context, run store.Run, p *pipeline.Pipeline, ref pipeline.StepRef, taskID string) error {
	_, outs := stepState(run, nil)
	spec, err := p.StepSpec(ref, run.Inputs, outs)
	if err == nil {
		err = svc.placeWorkspaces(ctx, run, p, ref, &spec)
	}
	var bindings []store.SecretBinding
	if err == nil {
		spec.Org, spec.Project = run.Org, run.Project
		spec.Priority = run.Priority // the run's, else its pipeline's (0: normal)
		// The step's final spec: inputs and outputs are in it, so a
		// reference they complete is checked as one written out.
		bindings, err = svc.tasks.PrepareTask(ctx, run.AccountID, &spec, svc.actorOf(run))
	}
	if err != nil {
		svc.log.Info("pipeline step cannot start", "run", run.ID, "step", ref.String(), "err", err)
		return &errRunRefused{err}
	}
	now := svc.now()
	t := store.Task{
		ID: taskID, AccountID: run.AccountID, Spec: spec, Status: protocol.StatusQueued,
		TimeoutMS: spec.TimeoutMS, QueueTimeoutMS: spec.QueueTimeoutMS, Retries: spec.Retries,
		CreatedAt: now, QueueDeadline: now.Add(time.Duration(spec.QueueTimeoutMS) * time.Millisecond),
		CreatedBy: run.TriggeredBy, SecretBindings: bindings,
	}
	if err := svc.st.CreateTask(ctx, t); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil // created already
		}
		return err
	}
	t = t.WithoutSecretValues()
	svc.events.Publish(ctx, events.Event{Kind: events.TaskQueued, Account: run.AccountID, TaskID: t.ID, Task: &t})
	return nil
}

// actorOf returns the policy, now, of the principal run acts as: its
// steps' secret references are checked against it when their tasks are
// created (a permission taken away during the run stops the steps after).
func (svc *Service) actorOf(run store.Run) func(context.Context) (*access.Policy, error) {
	return func(ctx context.Context) (*access.Policy, error) {
		if run.ActsKind == "" {
			return nil, fmt.Errorf("run %s started before this version of the manager recorded whom a run acts as, and this step references a stored secret: start the run again", run.ID)
		}
		pol, disabled, err := svc.principals.PolicyOf(ctx, run.AccountID, run.ActsKind, run.ActsID)
		switch {
		case err != nil:
			return nil, fmt.Errorf("the permissions of the principal run %s acts as: %w", run.ID, err)
		case pol == nil:
			return nil, fmt.Errorf("run %s acts as %s %s, who was deleted; this step references a stored secret: start the run again as someone who may use it", run.ID, run.ActsKind, run.ActsID)
		case disabled:
			return nil, fmt.Errorf("run %s acts as %s, who is disabled; this step references a stored secret: start the run again as someone who may use it", run.ID, pol.Principal)
		}
		return pol, nil
	}
}

// placeWorkspaces names the stage workspaces a step uses (one
// runtime volume per account, run, stage and volume name) and sends the
// step where they are: the first step of the stage that runs with one
// creates it; a later one gets the selectors of the delegate that ran that
// step (its name and hostname), since the volume lives in that delegate's
// container runtime. The delegate refuses a step whose workspace it does
// not have rather than run it on an empty one.
func (svc *Service) placeWorkspaces(ctx context.Context, run store.Run, p *pipeline.Pipeline, ref pipeline.StepRef, spec *protocol.TaskSpec) error {
	if dws := deployWorkspace(spec); dws != nil {
		return svc.placeDeployWorkspace(ctx, run, p, ref, spec, dws)
	}
	if spec.Container == nil {
		return nil
	}
	for i := range spec.Container.Volumes {
		v := &spec.Container.Volumes[i]
		if v.EmptyDir == nil || v.EmptyDir.Workspace == nil {
			continue
		}
		ws := v.EmptyDir.Workspace
		ws.Key = workspaceKey(run, ref.Stage, v.Name)
		where, err := svc.workspaceHolder(ctx, run, p, ref, v.Name)
		if err != nil {
			return err
		}
		if where == nil {
			ws.Create = true
			continue
		}
		pinTo(spec, where)
	}
	return nil
}

// placeDeployWorkspace names the workspace a kubernetes or helm step reads
// its files or chart from and sends the step to the delegate that holds
// it; when no earlier step that uses it ran (they were skipped), the step
// cannot start, and says which steps should have written it.
func (svc *Service) placeDeployWorkspace(ctx context.Context, run store.Run, p *pipeline.Pipeline, ref pipeline.StepRef, spec *protocol.TaskSpec, ws *protocol.DeployWorkspace) error {
	ws.Key = workspaceKey(run, ref.Stage, ws.Name)
	where, err := svc.workspaceHolder(ctx, run, p, ref, ws.Name)
	if err != nil {
		return err
	}
	if where == nil {
		return fmt.Errorf("the workspace %q of stage %s was never written: none of the steps before this one that use it (%s) ran", ws.Name, ref.Stage, strings.Join(ws.WrittenBy, ", "))
	}
	pinTo(spec, where)
	return nil
}

// deployWorkspace is the workspace of a kubernetes or helm step's task.
func deployWorkspace(spec *protocol.TaskSpec) *protocol.DeployWorkspace {
	switch {
	case spec.Kubernetes != nil:
		return spec.Kubernetes.Workspace
	case spec.Helm != nil:
		return spec.Helm.Workspace
	}
	return nil
}

// workspaceKey names the runtime volume of the workspace name of a run's
// stage.
func workspaceKey(run store.Run, stage, name string) string {
	sum := sha256.Sum256([]byte(run.AccountID + "\x00" + run.ID + "\x00" + stage + "\x00" + name))
	return hex.EncodeToString(sum[:12])
}

// workspaceHolder is the task of the earlier step of ref's stage that
// uses the workspace name and ran on a delegate, or nil when none did.
func (svc *Service) workspaceHolder(ctx context.Context, run store.Run, p *pipeline.Pipeline, ref pipeline.StepRef, name string) (*store.Task, error) {
	_, users := p.Workspace(ref.Stage, name)
	for _, s := range run.Steps {
		if s.Stage != ref.Stage || s.Step == ref.Step || s.TaskID == "" || !slices.Contains(users, s.Step) {
			continue
		}
		t, err := svc.st.GetTask(ctx, run.AccountID, s.TaskID)
		if err != nil {
			return nil, fmt.Errorf("find where the workspace %s of stage %s is: %w", name, ref.Stage, err)
		}
		if t.DelegateName != "" || t.DelegateHostname != "" {
			return &t, nil
		}
	}
	return nil, nil
}

// pinTo adds the selectors of the delegate that ran where (its name and
// hostname) to spec's.
func pinTo(spec *protocol.TaskSpec, where *store.Task) {
	for _, sel := range []string{where.DelegateName, where.DelegateHostname} {
		if n := protocol.NormalizeSelector(sel); n != "" && !slices.Contains(spec.Selectors, n) {
			spec.Selectors = append(spec.Selectors, n)
		}
	}
}

// CancelRun marks a run cancelled and cancels its running steps' tasks;
// the run ends once they have.
func (svc *Service) CancelRun(ctx context.Context, acct, id string) (store.Run, error) {
	run, err := svc.st.AdvanceRun(ctx, acct, id, func(cur store.Run) (store.RunChange, error) {
		if cur.Status != store.RunRunning {
			return store.RunChange{}, nil
		}
		return store.RunChange{Cancel: true}, nil
	})
	if err != nil {
		return store.Run{}, err
	}
	for _, s := range run.Steps {
		if s.Status != store.RunRunning || s.TaskID == "" {
			continue
		}
		t, err := svc.st.FinishTask(ctx, acct, s.TaskID, store.Result{Status: protocol.StatusCancelled, Error: "its pipeline run was cancelled"}, svc.now())
		if err != nil {
			if errors.Is(err, store.ErrTaskTerminal) || errors.Is(err, store.ErrNotFound) {
				continue
			}
			return run, err
		}
		svc.tasks.EndTask(ctx, t)
	}
	return svc.AdvanceRun(ctx, acct, id)
}
