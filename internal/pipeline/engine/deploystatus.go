package engine

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/legate-dev/legate/internal/pipeline"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// A deployment's status follows what happened to its deploy steps, never
// the run's last step (docs/deployments.md, "Status"):
//   - its deploy steps are the stage's kubernetes and helm steps (but
//     those that run only on failure: an abort, a rollback), or,
//     when it has none, its steps that run on success (not `when:
//     failure` or `always`: those clean up after a failure);
//   - any step of the stage that reports deploy_status=rolled_back makes
//     it rolled_back (the kubernetes step's own rollback, an abort step, a
//     rollback script writing it to $LEGATE_OUTPUT);
//   - else a deploy step that failed, that never ran because a step
//     failed (in this stage or an earlier one), or any step that reports
//     deploy_status=failed (a verification), or a verify step that
//     failed or reported a verification that did not pass, makes it
//     failed;
//   - else a deploy step that was cancelled or never ran because the run
//     was cancelled makes it cancelled;
//   - else it succeeded.

// deployStepNames returns the names of the stage's deploy steps.
func deployStepNames(st *pipeline.Stage) map[string]bool {
	typed, onSuccess, all := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, it := range st.Items {
		for _, s := range it.Steps {
			all[s.Name] = true
			// A deploy step that runs only on failure (a canary's abort,
			// a helm rollback) undoes a deploy: skipped when all went
			// well, it is no deploy step that never ran. What it did
			// counts through the deploy_status it reports.
			if (s.Type == protocol.TaskKubernetes || s.Type == protocol.TaskHelm) && s.When != pipeline.WhenFailure {
				typed[s.Name] = true
			}
			if s.When != pipeline.WhenFailure && s.When != pipeline.WhenAlways {
				onSuccess[s.Name] = true
			}
		}
	}
	switch {
	case len(typed) > 0:
		return typed
	case len(onSuccess) > 0:
		return onSuccess
	}
	return all
}

// stageOutcome is the status of the deployment of stage st of run, and
// whether it is decided: false while a step of the stage runs or, in a
// running run, is still to come (a rollback step may still report).
func stageOutcome(run store.Run, st *pipeline.Stage) (status string, decided bool) {
	rows := map[string]store.RunStep{}
	for _, s := range run.Steps {
		if s.Stage == st.Name {
			rows[s.Step] = s
		}
	}
	steps := 0
	for _, it := range st.Items {
		steps += len(it.Steps)
	}
	for _, r := range rows {
		if stepStatus(r.Status) == pipeline.StepRunning {
			return "", false
		}
	}
	if len(rows) < steps && run.Status == store.RunRunning {
		return "", false
	}
	runCancelled := run.CancelRequested || run.Status == store.RunCancelled
	rolledBack, failed, cancelled := false, false, false
	for _, r := range rows {
		switch r.Outputs[protocol.OutputDeployStatus] {
		case protocol.DeployRolledBack:
			rolledBack = true
		case protocol.DeployFailed:
			// A deploy step that was stopped says failed: the cancel is
			// the truer word.
			failed = failed || r.Status != protocol.StatusCancelled
		}
	}
	failed = failed || verifyFailed(rows, st)
	for name := range deployStepNames(st) {
		r, ok := rows[name]
		switch {
		case !ok || r.Status == string(pipeline.StepSkipped):
			if runCancelled {
				cancelled = true
			} else {
				failed = true
			}
		case r.Status == protocol.StatusCancelled:
			cancelled = true
		case stepStatus(r.Status) == pipeline.StepFailed:
			failed = true
		}
	}
	switch {
	case rolledBack:
		return protocol.DeploymentRolledBack, true
	case failed:
		return protocol.DeploymentFailed, true
	case cancelled:
		return protocol.DeploymentCancelled, true
	}
	return protocol.DeploymentSucceeded, true
}

// badRecord is a deploy record a step reported that does not parse.
type badRecord struct {
	step string
	err  error
}

// stageRecords returns the deploy records the steps of stage st
// reported, in the order the steps ran, as the JSON array a deployment
// keeps ("" for none), and those that do not parse (left out).
func stageRecords(run store.Run, st *pipeline.Stage) (string, []badRecord) {
	var recs []protocol.DeployRecord
	var bad []badRecord
	for _, s := range run.Steps {
		v, ok := s.Outputs[protocol.OutputDeployRecord]
		if s.Stage != st.Name || !ok {
			continue
		}
		r, err := protocol.ParseDeployRecord(v)
		if err != nil {
			bad = append(bad, badRecord{step: s.Stage + "." + s.Step, err: err})
			continue
		}
		recs = append(recs, r)
	}
	if len(recs) == 0 {
		return "", bad
	}
	b, err := json.Marshal(recs)
	if err != nil { // cannot happen: the records came from JSON
		return "", append(bad, badRecord{step: st.Name, err: err})
	}
	return string(b), bad
}

// verifyFailed reports whether a verify step of the stage failed (with
// or without a record: a provider it could not reach fails it too) or a
// step reported a verification that did not pass.
func verifyFailed(rows map[string]store.RunStep, st *pipeline.Stage) bool {
	for _, it := range st.Items {
		for _, s := range it.Steps {
			r, ok := rows[s.Name]
			if ok && s.Type == protocol.TaskVerify && stepStatus(r.Status) == pipeline.StepFailed && r.Status != protocol.StatusCancelled {
				return true
			}
		}
	}
	for _, r := range rows {
		if v, ok := r.Outputs[protocol.OutputVerifyRecord]; ok {
			if rec, err := protocol.ParseVerifyRecord(v); err == nil && rec.Verdict != protocol.VerifyPassed {
				return true
			}
		}
	}
	return false
}

// stageVerifications returns the verifications the steps of stage st
// reported, in the order the steps ran (the latest
// MaxDeploymentVerifications), as the JSON array a deployment keeps (""
// for none), the reason of the first that did not pass ("" when all
// passed), and those that do not parse (left out).
func stageVerifications(run store.Run, st *pipeline.Stage) (string, string, []badRecord) {
	var vs []protocol.DeploymentVerification
	var bad []badRecord
	reason := ""
	for _, s := range run.Steps {
		v, ok := s.Outputs[protocol.OutputVerifyRecord]
		if s.Stage != st.Name || !ok {
			continue
		}
		r, err := protocol.ParseVerifyRecord(v)
		if err != nil {
			bad = append(bad, badRecord{step: s.Stage + "." + s.Step, err: err})
			continue
		}
		if reason == "" && r.Verdict != protocol.VerifyPassed {
			reason = verificationReason(s.Step, r)
		}
		vs = append(vs, protocol.DeploymentVerification{Step: s.Step, VerifyRecord: r})
	}
	if len(vs) > protocol.MaxDeploymentVerifications {
		vs = vs[len(vs)-protocol.MaxDeploymentVerifications:]
	}
	if len(vs) == 0 {
		return "", reason, bad
	}
	b, err := json.Marshal(vs)
	if err != nil { // cannot happen: the records came from JSON
		return "", reason, append(bad, badRecord{step: st.Name, err: err})
	}
	return string(b), reason, bad
}

// verificationReason is the reason of a deployment whose verification r
// by step did not pass: the record's reason, or else the metrics that did
// not pass.
func verificationReason(step string, r protocol.VerifyRecord) string {
	why := r.Reason
	if why == "" {
		var names []string
		for _, m := range r.Metrics {
			if m.Verdict != protocol.VerifyPassed {
				names = append(names, m.Name+" "+m.Verdict)
			}
		}
		why = strings.Join(names, ", ")
	}
	out := "verification " + step + " " + r.Verdict
	if why != "" {
		out += ": " + why
	}
	if len(out) > protocol.MaxDeploymentReasonBytes {
		out = strings.ToValidUTF8(out[:protocol.MaxDeploymentReasonBytes-len("…")], "") + "…"
	}
	return out
}

// stageFailedStep is the reason of a failed deployment none of whose
// verifications failed: the first step of the stage that failed, with
// its error ("" when none did).
func stageFailedStep(run store.Run, st *pipeline.Stage) string {
	for _, s := range run.Steps {
		if s.Stage != st.Name || stepStatus(s.Status) != pipeline.StepFailed || s.Status == protocol.StatusCancelled {
			continue
		}
		out := "step " + s.Step + " " + s.Status
		if s.Error != "" {
			out += ": " + s.Error
		}
		if len(out) > protocol.MaxDeploymentReasonBytes {
			out = strings.ToValidUTF8(out[:protocol.MaxDeploymentReasonBytes-len("…")], "") + "…"
		}
		return out
	}
	return ""
}

// endStage ends the deployment of stage number i of run with its status
// and records, once its status is decided. A record that does not parse
// is logged, once, when the deployment ends, and left out: it never
// fails the run.
func (svc *Service) endStage(ctx context.Context, run store.Run, p *pipeline.Pipeline, i int) error {
	st := &p.Stages[i]
	status, decided := stageOutcome(run, st)
	if !decided {
		return nil
	}
	records, bad := stageRecords(run, st)
	verifs, reason, badVerifs := stageVerifications(run, st)
	switch {
	case status == protocol.DeploymentSucceeded || status == protocol.DeploymentCancelled:
		reason = ""
	case reason == "":
		reason = stageFailedStep(run, st)
	}
	_, ended, err := svc.st.EndDeployment(ctx, run.AccountID, deploymentID(run.ID, i),
		store.DeploymentEnd{Status: status, Records: records, Verifications: verifs, Reason: reason}, svc.now())
	if err != nil {
		return err
	}
	if ended {
		for _, b := range bad {
			svc.log.Warn("deploy record ignored", "run", run.ID, "step", b.step, "err", b.err)
		}
		for _, b := range badVerifs {
			svc.log.Warn("verify record ignored", "run", run.ID, "step", b.step, "err", b.err)
		}
	}
	return nil
}
