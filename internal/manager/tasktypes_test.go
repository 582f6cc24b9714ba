package manager

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestTaskTypesDecideWhoGetsATask: a delegate that registers without
// task types (one older than the field) is not eligible for a kubernetes
// task, which task explain says (rule task_type), and its claim of one is
// refused; it still gets shell tasks. A delegate that registered the type
// gets it. The store keeps what each registered.
func TestTaskTypesDecideWhoGetsATask(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	a := tm.client(t, tm.admin.APIKey)
	tok, err := a.CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	newer, nreg := tm.registerFake(t, tm.admin.AccountID, tok.Value, "newer", "h-new", "k8s")
	older := tm.client(t, "")
	oreg, err := older.Register(ctx, protocol.RegisterRequest{ProtocolVersion: protocol.Version, AccountID: tm.admin.AccountID,
		Token: tok.Value, Name: "older", Hostname: "h-old", IP: "127.0.0.1", Tags: []string{"k8s"}, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	older.SetSecret(oreg.Session)

	kt, err := a.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskKubernetes, Selectors: []string{"k8s"}, Kubernetes: &protocol.KubernetesSpec{
		Namespace: "web", Manifests: []string{"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"}}})
	if err != nil {
		t.Fatal(err)
	}
	ex, err := a.ExplainTask(ctx, kt.ID)
	if err != nil {
		t.Fatal(err)
	}
	verdicts := map[string]protocol.DelegateVerdict{}
	for _, v := range ex.Delegates {
		verdicts[v.Name] = v
	}
	if v := verdicts["older"]; v.Eligible || len(v.Reasons) != 1 || v.Reasons[0].Rule != protocol.RuleTaskType ||
		!strings.Contains(v.Reasons[0].Message, "does not run kubernetes tasks") {
		t.Errorf("the older delegate's verdict: %+v", v)
	}
	if v := verdicts["newer"]; !v.Eligible {
		t.Errorf("the newer delegate's verdict: %+v", v)
	}
	_, err = older.Acquire(ctx, kt.ID)
	wantCode(t, "the older delegate claims the kubernetes task", err, protocol.CodeNotEligible)
	if acq, err := newer.Acquire(ctx, kt.ID); err != nil || acq.Spec.Type != protocol.TaskKubernetes {
		t.Errorf("the newer delegate claims it: %+v, %v", acq, err)
	}

	st, err := a.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "true"}, Selectors: []string{"h-old"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := older.Acquire(ctx, st.ID); err != nil {
		t.Errorf("the older delegate claims a shell task: %v", err)
	}

	oin, err := tm.st.GetInstance(ctx, oreg.InstanceID)
	if err != nil || oin.TaskTypes != nil {
		t.Errorf("the older instance's stored task types: %v, %v; want nil", oin.TaskTypes, err)
	}
	nin, err := tm.st.GetInstance(ctx, nreg.InstanceID)
	if err != nil || !slices.Contains(nin.TaskTypes, protocol.TaskKubernetes) {
		t.Errorf("the newer instance's stored task types: %v, %v", nin.TaskTypes, err)
	}
}
