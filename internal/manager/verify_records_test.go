package manager

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

// verifyRecord is a verify record of one metric, error_rate, with
// verdict and a few points.
func verifyRecord(verdict, reason string) string {
	b, _ := json.Marshal(protocol.VerifyRecord{Verdict: verdict, Reason: reason, Provider: "http://prom:9090", StartMS: 1_700_000_000_000, IntervalMS: 1000,
		Metrics: []protocol.VerifyMetricResult{{Name: "error_rate", Query: "sum(rate(errors_total[1m]))", Threshold: &protocol.Threshold{Op: "<", Value: 0.01},
			Verdict: verdict, Reason: reason, Points: [][2]float64{{0, 0.001}, {1000, 0.002}, {2000, 0.2}}}}})
	return string(b)
}

// TestDeploymentKeepsVerifications: a deployment keeps the verify
// records its stage's steps reported (a bad one is logged and left out),
// shown by GET by ID; a verification that did not pass fails the
// deployment even when its step succeeded and reported no deploy_status,
// and a rollback after it makes it rolled_back; either way the
// deployment's reason names the failed metric.
func TestDeploymentKeepsVerifications(t *testing.T) {
	f := newRunFixture(t, Config{})
	admin := f.tm.admin.APIKey
	get := func(id string) protocol.Deployment {
		t.Helper()
		var d protocol.Deployment
		if err := json.Unmarshal([]byte(f.tm.mustAPI(t, admin, "GET", protocol.PathDeployments+"/"+id, "", 200)), &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	const why = "error_rate: 0.2 at 12:03:30 is not < 0.01"

	passed := get(f.deploy(t, "1.0", protocol.StatusSucceeded, map[string]string{protocol.OutputVerifyRecord: verifyRecord(protocol.VerifyPassed, "")}, nil).ID)
	if passed.Status != protocol.DeploymentSucceeded || passed.Reason != "" || len(passed.Verifications) != 1 ||
		passed.Verifications[0].Step != "push" || passed.Verifications[0].Verdict != protocol.VerifyPassed ||
		len(passed.Verifications[0].Metrics) != 1 || len(passed.Verifications[0].Metrics[0].Points) != 3 {
		t.Errorf("a passed verification's deployment: %+v", passed)
	}

	failed := get(f.deploy(t, "1.1", protocol.StatusSucceeded, map[string]string{protocol.OutputVerifyRecord: verifyRecord(protocol.VerifyFailed, why)}, nil).ID)
	if failed.Status != protocol.DeploymentFailed || !strings.Contains(failed.Reason, why) || len(failed.Verifications) != 1 ||
		failed.Verifications[0].Verdict != protocol.VerifyFailed {
		t.Errorf("a failed verification's deployment: status %s reason %q verifications %+v; want failed naming the metric", failed.Status, failed.Reason, failed.Verifications)
	}

	rolled := get(f.deploy(t, "1.2", protocol.StatusFailed,
		map[string]string{protocol.OutputVerifyRecord: verifyRecord(protocol.VerifyFailed, why), protocol.OutputDeployStatus: protocol.DeployFailed},
		map[string]string{protocol.OutputDeployStatus: protocol.DeployRolledBack}).ID)
	if rolled.Status != protocol.DeploymentRolledBack || !strings.Contains(rolled.Reason, why) || len(rolled.Verifications) != 1 {
		t.Errorf("a failed verification rolled back: status %s reason %q; want rolled_back naming the metric", rolled.Status, rolled.Reason)
	}

	bad := get(f.deploy(t, "1.3", protocol.StatusSucceeded, map[string]string{protocol.OutputVerifyRecord: `{"verdict":"maybe"}`}, nil).ID)
	if bad.Status != protocol.DeploymentSucceeded || len(bad.Verifications) != 0 || bad.Reason != "" {
		t.Errorf("a bad verify record: %+v; want it left out, the deployment succeeded", bad)
	}

	// The listing stays small: verifications come with one deployment.
	for _, d := range f.listDeployments(t) {
		if len(d.Verifications) != 0 {
			t.Errorf("the listing carries verifications: %+v", d)
		}
	}
}
