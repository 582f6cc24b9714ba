package manager

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/protocol"
)

// testCAPEM is a self-signed CA certificate's PEM.
func testCAPEM(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, IsCA: true,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// kubeTask is a kubernetes task's body, with extra JSON fields in the
// task (task) and in its kubernetes section (k8s).
func kubeTask(task, k8s string) string {
	return `{"type":"kubernetes"` + task + `,"kubernetes":{"namespace":"web","manifests":["apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"]` + k8s + `}}`
}

// TestKubernetesConnectorGivesItsTasksTheCluster: a connector of type
// kubernetes carries its API server, CA and the name of the stored secret
// with its token (bad ones are refused, saying what to give); it shows
// the secret's name, never the token. A kubernetes task that names it,
// submitted or a pipeline's step, gets the cluster with the token as a
// reference to the secret, which the caller needs secret:access for and
// which the delegate gets resolved and masked when it claims the task. A
// task that also sets its own cluster, and a shell task, are refused.
func TestKubernetesConnectorGivesItsTasksTheCluster(t *testing.T) {
	tm := startTestManager(t, Config{})
	admin := tm.admin.APIKey
	ctx := context.Background()
	ca := testCAPEM(t)
	caJSON, _ := json.Marshal(ca)
	tm.mustAPI(t, admin, "POST", protocol.PathSecrets, `{"name":"PROD_TOKEN","value":"the-sa-token"}`, 201)

	for _, tc := range []struct{ body, want string }{
		{`{"name":"k","type":"kubernetes","url":"https://k8s.internal:6443"}`, "needs token_secret"},
		{`{"name":"k","type":"kubernetes","url":"http://k8s.internal:6443","token_secret":"PROD_TOKEN"}`, "https://HOST[:PORT]"},
		{`{"name":"k","type":"kubernetes","url":"https://k8s.internal:6443/api","token_secret":"PROD_TOKEN"}`, "has a path"},
		{`{"name":"k","type":"kubernetes","url":"https://k8s.internal:6443","token_secret":"no-such name"}`, "secret name"},
		{`{"name":"k","type":"kubernetes","url":"https://k8s.internal:6443","token_secret":"PROD_TOKEN","ca_pem":"not a pem"}`, "not PEM"},
		{`{"name":"k","type":"kubernetes","url":"https://k8s.internal:6443","token_secret":"PROD_TOKEN","ca_pem":"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"}`, "certificate 1"},
		{`{"name":"k","type":"git","url":"https://git.internal","token_secret":"PROD_TOKEN"}`, "only a connector of type kubernetes"},
	} {
		if status, body := tm.api(t, admin, "POST", protocol.PathConnectors, tc.body); status != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("create %s: %d %s; want 400 saying %q", tc.body, status, body, tc.want)
		}
	}
	created := tm.mustAPI(t, admin, "POST", protocol.PathConnectors,
		`{"name":"prod","type":"kubernetes","url":"https://k8s.internal:6443","ca_pem":`+string(caJSON)+`,"token_secret":"PROD_TOKEN","selectors":["k8s"]}`, 201)
	var conn protocol.Connector
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "GET", protocol.PathConnectors+"/prod", "", 200)), &conn); err != nil {
		t.Fatal(err)
	}
	if conn.TokenSecret != "PROD_TOKEN" || conn.CAPEM != ca || conn.URL != "https://k8s.internal:6443" {
		t.Errorf("the connector as shown: %+v", conn)
	}
	list := tm.mustAPI(t, admin, "GET", protocol.PathConnectors, "", 200)
	for _, body := range []string{created, list} {
		if strings.Contains(body, "the-sa-token") {
			t.Errorf("a connector answer holds the token: %s", body)
		}
	}

	wantCluster := protocol.KubeCluster{Server: "https://k8s.internal:6443", CAPEM: ca, Token: "${secrets.PROD_TOKEN}"}
	var task protocol.Task
	body := tm.mustAPI(t, admin, "POST", protocol.PathTasks, kubeTask(`,"connector":"prod"`, ""), 201)
	if err := json.Unmarshal([]byte(body), &task); err != nil {
		t.Fatal(err)
	}
	if task.Kubernetes == nil || task.Kubernetes.Cluster == nil || *task.Kubernetes.Cluster != wantCluster {
		t.Fatalf("the submitted task's cluster: %+v", task.Kubernetes)
	}
	if !slices.Equal(task.Selectors, []string{"k8s"}) || !slices.Equal(task.Capabilities, []string{"tcp://k8s.internal:6443"}) {
		t.Errorf("the task's selectors %v and capabilities %v: want the connector's selectors and a TCP connection to its API server", task.Selectors, task.Capabilities)
	}
	if strings.Contains(body, "the-sa-token") || strings.Contains(tm.mustAPI(t, admin, "GET", protocol.PathTasks+"/"+task.ID, "", 200), "the-sa-token") {
		t.Errorf("a task answer holds the token: %s", body)
	}

	// The delegate that claims it gets the token, and the value to mask.
	tok, err := tm.client(t, admin).CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	del, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "k8s", "h", "k8s")
	acq, err := del.Acquire(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if acq.Spec.Kubernetes == nil || acq.Spec.Kubernetes.Cluster == nil || acq.Spec.Kubernetes.Cluster.Token != "the-sa-token" ||
		!slices.Contains(acq.Mask, "the-sa-token") {
		t.Errorf("the claimed task's cluster %+v, mask %q: want the token resolved and masked", acq.Spec.Kubernetes, acq.Mask)
	}

	// Who may use the connector but not the secret is refused.
	tm.mustAPI(t, admin, "POST", protocol.PathRoles, `{"name":"runner","permissions":["task:run","task:view","connector:access","connector:view","pipeline:execute","pipeline:view"]}`, 201)
	key := tm.userKey(t, "rita", "runner", access.Account)
	if status, body := tm.api(t, key, "POST", protocol.PathTasks, kubeTask(`,"connector":"prod"`, "")); status != http.StatusForbidden || !strings.Contains(body, "secret:access") {
		t.Errorf("a kubernetes task through the connector without secret:access: %d %s, want 403 naming secret:access", status, body)
	}

	// A task with its own cluster, and a shell task, are refused.
	own := `,"cluster":{"server":"https://other:6443","token":"${secrets.PROD_TOKEN}"}`
	for _, tc := range []struct{ body, want string }{
		{kubeTask(`,"connector":"prod"`, own), "give one or the other"},
		{`{"type":"shell","shell":{"script":"kubectl get pods"},"connector":"prod"}`, "a shell task cannot use it"},
		{kubeTask("", `,"cluster":{"server":"https://other:6443","token":"a-literal-token"}`), "must be a stored secret's reference"},
	} {
		if status, resp := tm.api(t, admin, "POST", protocol.PathTasks, tc.body); status != http.StatusBadRequest || !strings.Contains(resp, tc.want) {
			t.Errorf("submit %s: %d %s; want 400 saying %q", tc.body, status, resp, tc.want)
		}
	}

	// A pipeline's kubernetes step that names it gets the same.
	tm.applyPipeline(t, "name: ship\nstages:\n  - name: s\n    steps:\n      - name: a\n        connector: prod\n        kubernetes:\n          namespace: web\n          manifests:\n            - {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}\n")
	var run protocol.Run
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "POST", protocol.PathPipelines+"/ship/runs", `{}`, 201)), &run); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "GET", protocol.PathTasks+"/"+run.Steps[0].TaskID, "", 200)), &task); err != nil {
		t.Fatal(err)
	}
	if task.Kubernetes == nil || task.Kubernetes.Cluster == nil || *task.Kubernetes.Cluster != wantCluster {
		t.Errorf("the pipeline step's task's cluster: %+v", task.Kubernetes)
	}
	if status, resp := tm.runAs(t, key, "ship", nil); status != http.StatusForbidden || !strings.Contains(resp, "secret:access") {
		t.Errorf("a run of the step without secret:access: %d %s, want 403 naming secret:access", status, resp)
	}
}

// TestKubernetesConnectorGivesHelmTasksTheCluster: a helm task (submitted
// or a pipeline's step) that names a Kubernetes connector gets its
// cluster as a kubernetes task does: the token a secret reference checked
// for the caller, resolved and masked at claim; its own cluster as well as
// the connector, or a literal token, are refused.
func TestKubernetesConnectorGivesHelmTasksTheCluster(t *testing.T) {
	tm := startTestManager(t, Config{})
	admin := tm.admin.APIKey
	ctx := context.Background()
	ca := testCAPEM(t)
	caJSON, _ := json.Marshal(ca)
	tm.mustAPI(t, admin, "POST", protocol.PathSecrets, `{"name":"PROD_TOKEN","value":"the-sa-token"}`, 201)
	tm.mustAPI(t, admin, "POST", protocol.PathConnectors,
		`{"name":"prod","type":"kubernetes","url":"https://k8s.internal:6443","ca_pem":`+string(caJSON)+`,"token_secret":"PROD_TOKEN","selectors":["k8s"]}`, 201)
	helmTask := func(task, helm string) string {
		return `{"type":"helm"` + task + `,"helm":{"release":"web","namespace":"web","repo":"https://charts.internal","chart":"web"` + helm + `}}`
	}
	wantCluster := protocol.KubeCluster{Server: "https://k8s.internal:6443", CAPEM: ca, Token: "${secrets.PROD_TOKEN}"}
	var task protocol.Task
	body := tm.mustAPI(t, admin, "POST", protocol.PathTasks, helmTask(`,"connector":"prod"`, ""), 201)
	if err := json.Unmarshal([]byte(body), &task); err != nil {
		t.Fatal(err)
	}
	if task.Helm == nil || task.Helm.Cluster == nil || *task.Helm.Cluster != wantCluster {
		t.Fatalf("the submitted helm task's cluster: %+v", task.Helm)
	}
	if strings.Contains(body, "the-sa-token") {
		t.Errorf("a task answer holds the token: %s", body)
	}
	tok, err := tm.client(t, admin).CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	del, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "k8s", "h", "k8s")
	acq, err := del.Acquire(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if acq.Spec.Helm == nil || acq.Spec.Helm.Cluster == nil || acq.Spec.Helm.Cluster.Token != "the-sa-token" || !slices.Contains(acq.Mask, "the-sa-token") {
		t.Errorf("the claimed helm task's cluster %+v, mask %q: want the token resolved and masked", acq.Spec.Helm, acq.Mask)
	}
	// The stored task keeps the reference: resolving at claim wrote into a copy.
	if got := tm.mustAPI(t, admin, "GET", protocol.PathTasks+"/"+task.ID, "", 200); strings.Contains(got, "the-sa-token") || !strings.Contains(got, "${secrets.PROD_TOKEN}") {
		t.Errorf("the stored helm task after its claim: %s", got)
	}

	tm.mustAPI(t, admin, "POST", protocol.PathRoles, `{"name":"runner","permissions":["task:run","task:view","connector:access","connector:view"]}`, 201)
	key := tm.userKey(t, "rita", "runner", access.Account)
	if status, body := tm.api(t, key, "POST", protocol.PathTasks, helmTask(`,"connector":"prod"`, "")); status != http.StatusForbidden || !strings.Contains(body, "secret:access") {
		t.Errorf("a helm task through the connector without secret:access: %d %s, want 403 naming secret:access", status, body)
	}
	for _, tc := range []struct{ body, want string }{
		{helmTask(`,"connector":"prod"`, `,"cluster":{"server":"https://other:6443","token":"${secrets.PROD_TOKEN}"}`), "give one or the other"},
		{helmTask("", `,"cluster":{"server":"https://other:6443","token":"a-literal-token"}`), "helm task's cluster token must be a stored secret's reference"},
	} {
		if status, resp := tm.api(t, admin, "POST", protocol.PathTasks, tc.body); status != http.StatusBadRequest || !strings.Contains(resp, tc.want) {
			t.Errorf("submit %s: %d %s; want 400 saying %q", tc.body, status, resp, tc.want)
		}
	}

	tm.applyPipeline(t, "name: ship\nstages:\n  - name: s\n    steps:\n      - name: a\n        connector: prod\n        helm: {release: web, namespace: web, repo: 'https://charts.internal', chart: web}\n")
	var run protocol.Run
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "POST", protocol.PathPipelines+"/ship/runs", `{}`, 201)), &run); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "GET", protocol.PathTasks+"/"+run.Steps[0].TaskID, "", 200)), &task); err != nil {
		t.Fatal(err)
	}
	if task.Helm == nil || task.Helm.Cluster == nil || *task.Helm.Cluster != wantCluster {
		t.Errorf("the pipeline helm step's task's cluster: %+v", task.Helm)
	}
}
