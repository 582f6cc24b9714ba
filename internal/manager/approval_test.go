package manager

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/pgtest"
	"github.com/legate-dev/legate/internal/protocol"
)

// approvals lists the approval state of each instance by hostname.
func (tm *testManager) approvals(t *testing.T) map[string]string {
	t.Helper()
	var list protocol.DelegateList
	if err := json.Unmarshal([]byte(tm.mustAPI(t, tm.admin.APIKey, "GET", protocol.PathDelegates, "", 200)), &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range list.Delegates {
		out[d.Hostname] = d.Approval
	}
	return out
}

// TestApprovalGatesADelegate: a delegate registered with a token that
// requires approval is listed as pending, gets no configuration and
// cannot acquire a task (its explanation says pending approval) until it
// is approved; a rejected one is refused at its next call and at every
// registration after, with delegate_rejected.
func TestApprovalGatesADelegate(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	a := tm.client(t, tm.admin.APIKey)
	admin := tm.admin.APIKey
	tm.mustAPI(t, admin, "POST", protocol.PathConfigurations, `{"name":"base","script":"true"}`, 201)
	var gated, plain protocol.Token
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "POST", protocol.PathTokens, `{"name":"gated","require_approval":true}`, 201)), &gated); err != nil {
		t.Fatal(err)
	}
	if !gated.RequireApproval {
		t.Fatalf("token created with require_approval answers %+v", gated)
	}
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "POST", protocol.PathTokens, `{"name":"plain"}`, 201)), &plain); err != nil {
		t.Fatal(err)
	}
	edge, reg := tm.registerFake(t, tm.admin.AccountID, gated.Value, "edge", "edge-1")
	if reg.Configuration != nil {
		t.Errorf("a pending delegate received configuration %+v at registration", reg.Configuration)
	}
	rogue, _ := tm.registerFake(t, tm.admin.AccountID, gated.Value, "rogue", "rogue-1")
	tm.registerFake(t, tm.admin.AccountID, plain.Value, "trusted", "trusted-1")
	if diff := cmp.Diff(map[string]string{"edge-1": "pending", "rogue-1": "pending", "trusted-1": ""}, tm.approvals(t)); diff != "" {
		t.Errorf("approvals after registration (-want +got):\n%s", diff)
	}

	task, err := a.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "true"}, Selectors: []string{"edge"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = edge.Acquire(ctx, task.ID)
	wantCode(t, "acquire while pending", err, protocol.CodeNotEligible)
	ex, err := a.ExplainTask(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(ex); !strings.Contains(string(b), "pending approval") {
		t.Errorf("explanation does not say pending approval: %s", b)
	}
	if cfg, err := edge.DelegateConfiguration(ctx); err != nil || cfg.Configuration != nil {
		t.Errorf("configuration of a pending delegate: %+v, %v; want none", cfg.Configuration, err)
	}

	// Nothing to decide, or no such delegate.
	tm.mustAPI(t, admin, "POST", protocol.PathDelegates+"/trusted/approve", "", 409)
	tm.mustAPI(t, admin, "POST", protocol.PathDelegates+"/nobody/approve", "", 404)

	var ans protocol.ApprovalAnswer
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "POST", protocol.PathDelegates+"/EDGE/approve", "", 200)), &ans); err != nil {
		t.Fatal(err)
	}
	if ans.Approval != protocol.ApprovalApproved || len(ans.Instances) != 1 || ans.Instances[0].Hostname != "edge-1" {
		t.Errorf("approve answered %+v", ans)
	}
	if cfg, err := edge.DelegateConfiguration(ctx); err != nil || cfg.Configuration == nil || cfg.Configuration.Name != "base" {
		t.Errorf("configuration of an approved delegate: %+v, %v; want base", cfg.Configuration, err)
	}
	// The approved delegate runs its configuration first (as at a
	// registration); its heartbeat says it is done.
	if _, err := edge.Heartbeat(ctx, protocol.Heartbeat{Seq: 1, Capacity: -1}); err != nil {
		t.Fatal(err)
	}
	if _, err := edge.Acquire(ctx, task.ID); err != nil {
		t.Fatalf("acquire once approved: %v", err)
	}
	// A replica of the approved delegate needs no approval of its own.
	tm.registerFake(t, tm.admin.AccountID, gated.Value, "edge", "edge-2")
	if got := tm.approvals(t)["edge-2"]; got != protocol.ApprovalApproved {
		t.Errorf("a new replica of an approved delegate is %q, want approved", got)
	}

	tm.mustAPI(t, admin, "POST", protocol.PathDelegates+"/rogue/reject", "", 200)
	_, err = rogue.Heartbeat(ctx, protocol.Heartbeat{Seq: 1, Capacity: -1})
	wantCode(t, "heartbeat of a rejected delegate", err, protocol.CodeDelegateRejected)
	c := tm.client(t, "")
	_, err = c.Register(ctx, protocol.RegisterRequest{ProtocolVersion: protocol.Version, AccountID: tm.admin.AccountID,
		Token: gated.Value, Name: "rogue", Hostname: "rogue-2", IP: "127.0.0.1", Version: "test"})
	wantCode(t, "registration of a rejected delegate", err, protocol.CodeDelegateRejected)
	if !strings.Contains(err.Error(), "rejected by an administrator") {
		t.Errorf("refusal %q does not say why", err)
	}
}

// TestApprovalSurvivesRestart: the decision is in the store; a manager
// started again on it keeps the delegate approved (and the other
// pending).
func TestApprovalSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	dsn := dir + "/legate.db"
	tm, stop := runTestManager(t, dsn, dir, Config{})
	admin := tm.admin.APIKey
	var gated protocol.Token
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "POST", protocol.PathTokens, `{"name":"gated","require_approval":true}`, 201)), &gated); err != nil {
		t.Fatal(err)
	}
	tm.registerFake(t, tm.admin.AccountID, gated.Value, "edge", "edge-1")
	tm.registerFake(t, tm.admin.AccountID, gated.Value, "wait", "wait-1")
	tm.mustAPI(t, admin, "POST", protocol.PathDelegates+"/edge/approve", "", 200)
	stop()

	tm2 := startTestManagerOn(t, dsn, dir, Config{})
	ctx := context.Background()
	edge, _ := tm2.registerFake(t, tm2.admin.AccountID, gated.Value, "edge", "edge-1")
	wait, _ := tm2.registerFake(t, tm2.admin.AccountID, gated.Value, "wait", "wait-1")
	a := tm2.client(t, tm2.admin.APIKey)
	task, err := a.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "true"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = wait.Acquire(ctx, task.ID)
	wantCode(t, "acquire by the pending delegate after a restart", err, protocol.CodeNotEligible)
	if _, err := edge.Acquire(ctx, task.ID); err != nil {
		t.Fatalf("acquire by the approved delegate after a restart: %v", err)
	}
}

// TestApprovalReachesTheOtherManager: on PostgreSQL, a delegate pending
// on manager B takes work once approved through manager A, and is
// refused by B once rejected through A.
func TestApprovalReachesTheOtherManager(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	tms := startTestManagers(t, dsn, Config{}, Config{})
	a, b := tms[0], tms[1]
	ctx := context.Background()
	var gated protocol.Token
	if err := json.Unmarshal([]byte(a.mustAPI(t, a.admin.APIKey, "POST", protocol.PathTokens, `{"name":"gated","require_approval":true}`, 201)), &gated); err != nil {
		t.Fatal(err)
	}
	edge, _ := b.registerFake(t, b.admin.AccountID, gated.Value, "edge", "edge-1")
	admin := a.client(t, a.admin.APIKey)
	eventually(t, 10*time.Second, "manager B listening", func() bool { return b.m.bus.Listening() })
	a.mustAPI(t, a.admin.APIKey, "POST", protocol.PathDelegates+"/edge/approve", "", 200)
	task, err := admin.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "true"}})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the delegate on manager B acquiring the task", func() bool {
		_, err := edge.Acquire(ctx, task.ID)
		return err == nil
	})
	a.mustAPI(t, a.admin.APIKey, "POST", protocol.PathDelegates+"/edge/reject", "", 200)
	eventually(t, 10*time.Second, "manager B refusing the rejected delegate", func() bool {
		_, err := edge.Heartbeat(ctx, protocol.Heartbeat{Seq: 2, Capacity: -1})
		return err != nil && strings.Contains(err.Error(), string(protocol.CodeDelegateRejected))
	})
}

// statusOf is the listed status of the instance on hostname.
func (tm *testManager) statusOf(t *testing.T, hostname string) string {
	t.Helper()
	var list protocol.DelegateList
	if err := json.Unmarshal([]byte(tm.mustAPI(t, tm.admin.APIKey, "GET", protocol.PathDelegates, "", 200)), &list); err != nil {
		t.Fatal(err)
	}
	for _, d := range list.Delegates {
		if d.Hostname == hostname {
			return d.Status
		}
	}
	return "absent"
}

// TestRejectedDelegateListedDisconnected: a rejected delegate is refused at
// every call, so it is listed as not connected as soon as the decision is
// made, on the manager it was connected to and on the others of its
// database — not for the rest of its heartbeat window.
func TestRejectedDelegateListedDisconnected(t *testing.T) {
	check := func(t *testing.T, decider, holder *testManager) {
		ctx := context.Background()
		var gated protocol.Token
		if err := json.Unmarshal([]byte(decider.mustAPI(t, decider.admin.APIKey, "POST", protocol.PathTokens, `{"name":"gated","require_approval":true}`, 201)), &gated); err != nil {
			t.Fatal(err)
		}
		rogue, _ := holder.registerFake(t, holder.admin.AccountID, gated.Value, "rogue", "rogue-1")
		if holder != decider {
			eventually(t, 10*time.Second, "the holding manager listening", func() bool { return holder.m.bus.Listening() })
		}
		if _, err := rogue.Heartbeat(ctx, protocol.Heartbeat{Seq: 1, Capacity: -1}); err != nil {
			t.Fatal(err)
		}
		for _, tm := range []*testManager{decider, holder} {
			if got := tm.statusOf(t, "rogue-1"); got != protocol.DelegateConnected {
				t.Fatalf("a pending delegate that heartbeats is listed %q", got)
			}
		}
		decider.mustAPI(t, decider.admin.APIKey, "POST", protocol.PathDelegates+"/rogue/reject", "", 200)
		if got := decider.statusOf(t, "rogue-1"); got != protocol.DelegateDisconnected {
			t.Errorf("right after the rejection, the deciding manager lists it %q", got)
		}
		// The holding manager learns of the decision from the database's
		// notification, or reads it again at a heartbeat.
		seq := int64(1)
		eventually(t, 10*time.Second, "the rejected delegate refused", func() bool {
			seq++
			_, err := rogue.Heartbeat(ctx, protocol.Heartbeat{Seq: seq, Capacity: -1})
			var pe *protocol.Error
			return errors.As(err, &pe) && pe.Code == protocol.CodeDelegateRejected
		})
		for i, tm := range []*testManager{decider, holder} {
			if got := tm.statusOf(t, "rogue-1"); got != protocol.DelegateDisconnected {
				t.Errorf("manager %d lists the refused delegate %q", i, got)
			}
		}
	}
	t.Run("one manager", func(t *testing.T) {
		tm := startTestManager(t, Config{})
		check(t, tm, tm)
	})
	t.Run("two managers", func(t *testing.T) {
		tms := startTestManagers(t, pgtest.NewDatabase(t), Config{}, Config{})
		check(t, tms[0], tms[1])
	})
}
