package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

// verifiedDeployment is a rolled-back deployment with a failed
// verification of two metrics: a threshold and a canary against its
// baseline.
func verifiedDeployment() protocol.Deployment {
	end := testNow.Add(5 * 60 * 1e9)
	return protocol.Deployment{ID: "dp_1", Service: "web", Environment: "prod", Version: "1.2", Pipeline: "ship", RunID: "r_1", Stage: "prod",
		TriggeredBy: "user:ana", Status: protocol.DeploymentRolledBack, StartedAt: testNow, FinishedAt: &end,
		Reason: "verification check failed: error_rate: 0.2 at 12:03:30 is not < 0.01",
		Verifications: []protocol.DeploymentVerification{{Step: "check", VerifyRecord: protocol.VerifyRecord{
			Verdict: protocol.VerifyFailed, Reason: "error_rate: 0.2 at 12:03:30 is not < 0.01", Provider: "http://prom:9090",
			StartMS: testNow.UnixMilli(), IntervalMS: 30000,
			Metrics: []protocol.VerifyMetricResult{
				{Name: "error_rate", Query: "sum(rate(errors_total[1m]))", Threshold: &protocol.Threshold{Op: "<", Value: 0.01},
					Verdict: protocol.VerifyFailed, Reason: "0.2 at 12:03:30 is not < 0.01",
					Points: [][2]float64{{0, 0.001}, {30000, 0.005}, {60000, 0.2}, {90000, 0.002}}},
				{Name: "latency_p95", Query: "histogram_quantile(0.95, new)", Baseline: "histogram_quantile(0.95, old)", Tolerance: 0.1,
					Verdict: protocol.VerifyPassed, Points: [][2]float64{{0, 0.2}, {30000, 0.3}}, BaselinePoints: [][2]float64{{0, 0.25}, {30000, 0.35}}},
			}}}}}
}

// TestDeploymentsGetPrintsVerifications: deployments get prints the
// deployment's reason and each verification: its verdict and reason, and
// per metric its threshold, baseline and tolerance, the number of data
// points, their min/mean/max/last and its verdict; -o json gives the
// whole record, every data point included.
func TestDeploymentsGetPrintsVerifications(t *testing.T) {
	t.Parallel()
	d := verifiedDeployment()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(protocol.HeaderProtocolVersion) != strconv.Itoa(protocol.Version) || r.Header.Get("Authorization") != "Bearer "+testKey {
			writeError(w, 401, protocol.CodeUnauthenticated, "invalid API key")
			return
		}
		if r.Method != http.MethodGet || r.URL.Path != protocol.PathDeployments+"/dp_1" {
			writeError(w, 404, protocol.CodeNotFound, "not found")
			return
		}
		writeJSON(w, 200, d)
	}))
	t.Cleanup(srv.Close)
	env := map[string]string{EnvURL: srv.URL, EnvAPIKey: testKey}

	r := runCLI(t.Context(), env, "", "deployments", "get", "dp_1")
	if r.err != nil {
		t.Fatalf("deployments get: %v, stderr %q", r.err, r.stderr)
	}
	fields := func(line string) string { return strings.Join(strings.Fields(line), " ") }
	var lines []string
	for _, l := range strings.Split(r.stdout, "\n") {
		lines = append(lines, fields(l))
	}
	out := strings.Join(lines, "\n")
	for _, want := range []string{
		"Status: rolled_back",
		"Reason: verification check failed: error_rate: 0.2 at 12:03:30 is not < 0.01",
		"Verification: check: failed",
		"Reason: error_rate: 0.2 at 12:03:30 is not < 0.01",
		"Provider: http://prom:9090",
		"METRIC VERDICT THRESHOLD BASELINE TOLERANCE POINTS MIN MEAN MAX LAST",
		"error_rate failed < 0.01 - - 4 0.001 0.052 0.2 0.002",
		"latency_p95 passed - mean 0.3 10% 2 0.2 0.25 0.3 0.3",
		"error_rate: 0.2 at 12:03:30 is not < 0.01",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("deployments get: no %q in\n%s", want, r.stdout)
		}
	}

	r = runCLI(t.Context(), env, "", "deployments", "get", "dp_1", "-o", "json")
	if r.err != nil {
		t.Fatalf("deployments get -o json: %v", r.err)
	}
	var got protocol.Deployment
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("-o json: %v\n%s", err, r.stdout)
	}
	if diff := cmp.Diff(d.Verifications, got.Verifications); diff != "" || got.Reason != d.Reason {
		t.Errorf("-o json verifications (-want +got):\n%s\nreason %q", diff, got.Reason)
	}
}

// TestConnectorCreatePrometheus: connector create --type prometheus sends
// the CA, and the bearer token's secret or the basic auth user and
// password secret; both at once, or half of basic auth, are usage errors;
// get shows the secrets' names.
func TestConnectorCreatePrometheus(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{})
	r := runCLI(t.Context(), m.env(), "", "connector", "create", "prom", "--url", "https://prom.internal:9090", "--type", "prometheus",
		"--username", "reader", "--password-secret", "PROM_PASSWORD")
	if r.err != nil {
		t.Fatalf("create: %v, stderr %q", r.err, r.stderr)
	}
	m.mu.Lock()
	req := m.connReqs[0]
	m.mu.Unlock()
	want := protocol.CreateConnectorRequest{Name: "prom", URL: "https://prom.internal:9090", Type: protocol.ProviderPrometheus,
		Username: "reader", PasswordSecret: "PROM_PASSWORD"}
	if diff := cmp.Diff(want, req); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
	r = runCLI(t.Context(), m.env(), "", "connector", "get", "prom")
	if r.err != nil || !strings.Contains(r.stdout, "reader") || !strings.Contains(r.stdout, "secret PROM_PASSWORD") {
		t.Errorf("get: %v\n%s", r.err, r.stdout)
	}
	for _, args := range [][]string{
		{"--token-secret", "T", "--username", "u", "--password-secret", "P"},
		{"--username", "u"},
	} {
		r := runCLI(t.Context(), m.env(), "", append([]string{"connector", "create", "p2", "--url", "https://prom", "--type", "prometheus"}, args...)...)
		if r.err == nil {
			t.Errorf("create %v: no error", args)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.connReqs) != 1 {
		t.Errorf("refused commands reached the manager: %v", m.connReqs[1:])
	}
}
