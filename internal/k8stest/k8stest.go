// Package k8stest gives tests the real Kubernetes control plane that
// scripts/k8s-ensure runs on loopback (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, and kwok for fake nodes), a
// namespace of their own in it, and ServiceAccounts limited by RBAC to one
// namespace.
//
// The cluster is found from $K8S_HOME/run/cluster.env (K8S_HOME defaults to
// ${XDG_CACHE_HOME:-~/.cache}/legate/k8s, as in the script), which names
// the API server, the admin's certificates and kubeconfig and the
// directory of kubectl and helm. Without a cluster that answers, tests
// that ask for it are skipped, except under CI=true, where that is a
// failure. Tests share the one cluster: each works in namespaces of its
// own (Namespace), deleted when it ends.
//
// The limit: kwok stands in for the kubelet. Pods are scheduled for real
// and kwok marks them Running and Ready, but no container ever runs and no
// image is ever pulled: there are no logs, no exec, no probes, and pod IPs
// are fake. What a pod does is out of reach; its spec, its owner's rollout
// and the API's validation, admission and RBAC are real. Pods labelled
// kwok.local/never-ready=true run but never become Ready.
//
// The package uses the standard library only: the API through net/http,
// and the cluster's own kubectl for what is simpler with it (apply).
package k8stest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// Cluster is the running cluster, seen with the admin's rights
// (system:masters).
type Cluster struct {
	// API is the API server's URL (https://127.0.0.1:PORT).
	API string
	// Kubeconfig is the admin's kubeconfig file.
	Kubeconfig string
	// Bin is the directory of kubectl, helm and the cluster's binaries.
	Bin string
	// CAFile is the PEM file of the CA the API server's certificate is
	// signed by (for clients of the API other than kubectl).
	CAFile string
	// CAPEM is the same CA's PEM.
	CAPEM []byte

	admin *http.Client
	anon  *http.Client // trusts the CA, presents no certificate
}

var (
	findOnce    sync.Once
	found       *Cluster
	missingWhy  string
	requestWait = 30 * time.Second
)

// Home is the directory of scripts/k8s-ensure's cache and state.
func Home() string {
	if h := os.Getenv("K8S_HOME"); h != "" {
		return h
	}
	if x := os.Getenv("XDG_CACHE_HOME"); x != "" {
		return filepath.Join(x, "legate", "k8s")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "legate", "k8s")
}

// Require returns the running cluster, or skips tb (fails it under
// CI=true) when there is none.
func Require(tb testing.TB) *Cluster {
	tb.Helper()
	findOnce.Do(func() { found, missingWhy = find(Home()) })
	if found == nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("a Kubernetes cluster is required under CI=true: %s", missingWhy)
		}
		tb.Skipf("skipping: no Kubernetes cluster: %s (bash scripts/k8s-ensure builds and starts one)", missingWhy)
	}
	return found
}

// readEnv reads a cluster.env file: NAME=VALUE lines.
func readEnv(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s: not NAME=VALUE: %q", path, line)
		}
		env[k] = v
	}
	return env, sc.Err()
}

func find(home string) (*Cluster, string) {
	envFile := filepath.Join(home, "run", "cluster.env")
	env, err := readEnv(envFile)
	if err != nil {
		return nil, err.Error()
	}
	for _, k := range []string{"K8S_API", "K8S_BIN", "KUBECONFIG", "K8S_CA", "K8S_ADMIN_CERT", "K8S_ADMIN_KEY"} {
		if env[k] == "" {
			return nil, fmt.Sprintf("%s has no %s", envFile, k)
		}
	}
	ca, err := os.ReadFile(env["K8S_CA"])
	if err != nil {
		return nil, err.Error()
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, env["K8S_CA"] + ": no PEM certificate"
	}
	cert, err := tls.LoadX509KeyPair(env["K8S_ADMIN_CERT"], env["K8S_ADMIN_KEY"])
	if err != nil {
		return nil, err.Error()
	}
	client := func(certs []tls.Certificate) *http.Client {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, Certificates: certs, MinVersion: tls.VersionTLS12}
		return &http.Client{Transport: tr}
	}
	c := &Cluster{
		API: env["K8S_API"], Kubeconfig: env["KUBECONFIG"], Bin: env["K8S_BIN"], CAFile: env["K8S_CA"], CAPEM: ca,
		admin: client([]tls.Certificate{cert}), anon: client(nil),
	}
	if _, err := os.Stat(filepath.Join(c.Bin, "kubectl")); err != nil {
		return nil, err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code, body, err := c.Request(ctx, "", http.MethodGet, "/readyz", "", nil)
	if err != nil {
		return nil, fmt.Sprintf("the API server at %s does not answer (%v)", c.API, err)
	}
	if code != http.StatusOK {
		return nil, fmt.Sprintf("the API server at %s is not ready: HTTP %d %s", c.API, code, bytes.TrimSpace(body))
	}
	return c, ""
}

// Request sends one request to the API server: as the admin when token is
// "", else with that bearer token. path is the URL's path and query
// (/api/v1/namespaces/x/configmaps). It returns the status and body.
func (c *Cluster) Request(ctx context.Context, token, method, path, contentType string, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, requestWait)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.API, "/")+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	if contentType == "" && body != nil {
		contentType = "application/json"
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	hc := c.admin
	if token != "" {
		hc = c.anon
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, b, err
}

// Do sends a request as the admin and fails tb unless it answers a 2xx
// status (or one of okAlso). in is marshalled to JSON unless it is nil or
// []byte; the answer is decoded into out unless it is nil.
func (c *Cluster) Do(tb testing.TB, method, path string, in, out any, okAlso ...int) int {
	tb.Helper()
	var body []byte
	switch v := in.(type) {
	case nil:
	case []byte:
		body = v
	default:
		b, err := json.Marshal(v)
		if err != nil {
			tb.Fatal(err)
		}
		body = b
	}
	code, b, err := c.Request(context.Background(), "", method, path, "", body)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	ok := code/100 == 2
	for _, o := range okAlso {
		ok = ok || code == o
	}
	if !ok {
		tb.Fatalf("%s %s: HTTP %d: %s", method, path, code, bytes.TrimSpace(b))
	}
	if out != nil && code/100 == 2 {
		if err := json.Unmarshal(b, out); err != nil {
			tb.Fatalf("%s %s: decode: %v\n%s", method, path, err, b)
		}
	}
	return code
}

// Images returns the images of the containers of a workload's pod
// template, in order: resource is "deployments/NAME", "statefulsets/NAME"
// or "daemonsets/NAME" in namespace; found is false when it does not
// exist.
func (c *Cluster) Images(tb testing.TB, namespace, resource string) (images []string, found bool) {
	tb.Helper()
	var w struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct {
						Image string `json:"image"`
					} `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if c.Do(tb, http.MethodGet, "/apis/apps/v1/namespaces/"+namespace+"/"+resource, nil, &w, http.StatusNotFound) == http.StatusNotFound {
		return nil, false
	}
	for _, ct := range w.Spec.Template.Spec.Containers {
		images = append(images, ct.Image)
	}
	return images, true
}

// Image is the image of the first container of a workload (see Images)
// that must exist.
func (c *Cluster) Image(tb testing.TB, namespace, resource string) string {
	tb.Helper()
	images, found := c.Images(tb, namespace, resource)
	if !found || len(images) == 0 {
		tb.Fatalf("%s in namespace %s: not there, or without containers", resource, namespace)
	}
	return images[0]
}

// KubectlCommand is the cluster's kubectl with that kubeconfig ("" = the
// admin's) and arguments, to run as the caller likes.
func (c *Cluster) KubectlCommand(kubeconfig string, args ...string) *exec.Cmd {
	if kubeconfig == "" {
		kubeconfig = c.Kubeconfig
	}
	cmd := exec.Command(filepath.Join(c.Bin, "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "PATH="+c.Bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return cmd
}

// Kubectl runs the cluster's kubectl as the admin, with stdin, and
// returns its output; it fails tb when kubectl fails.
func (c *Cluster) Kubectl(tb testing.TB, stdin string, args ...string) string {
	tb.Helper()
	cmd := c.KubectlCommand("", args...)
	cmd.Stdin = strings.NewReader(stdin)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Run(); err != nil {
		tb.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, so.String(), se.String())
	}
	return so.String()
}

// Helm runs the cluster's helm as the admin, with its cache, configuration
// and data in the test's temp dir, and returns its output; it fails tb
// when helm fails.
func (c *Cluster) Helm(tb testing.TB, args ...string) string {
	tb.Helper()
	dir := tb.TempDir()
	cmd := exec.Command(filepath.Join(c.Bin, "helm"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig, "HELM_CACHE_HOME="+filepath.Join(dir, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(dir, "config"), "HELM_DATA_HOME="+filepath.Join(dir, "data"))
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	if err := cmd.Run(); err != nil {
		tb.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, so.String(), se.String())
	}
	return so.String()
}

// Namespace creates a namespace of the test's own (its name made from the
// test's and a random suffix) and deletes it when the test ends.
func (c *Cluster) Namespace(tb testing.TB) string {
	tb.Helper()
	name := NamespaceName(tb.Name())
	c.Do(tb, http.MethodPost, "/api/v1/namespaces", map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": name, "labels": map[string]string{"legate.test/k8stest": "true"}},
	}, nil)
	c.DeleteOnCleanup(tb, "/api/v1/namespaces/"+name)
	return name
}

// DeleteOnCleanup deletes the object at the API path when the test ends
// (as the admin, its dependents in the background; one that is gone
// already is no error). Cluster-wide objects a test makes (ClusterRoles,
// their bindings) are not deleted with its namespaces: use this for them.
func (c *Cluster) DeleteOnCleanup(tb testing.TB, path string) {
	tb.Cleanup(func() {
		code, b, err := c.Request(context.Background(), "", http.MethodDelete, path+"?propagationPolicy=Background", "", nil)
		if err != nil || (code/100 != 2 && code != http.StatusNotFound) {
			tb.Errorf("cleanup: DELETE %s: %v HTTP %d %s", path, err, code, bytes.TrimSpace(b))
		}
	})
}

// NamespaceName is a fresh, valid namespace name (a DNS label) made from
// a test's name: lower case, runs of other characters as one dash, at
// most 63 characters with a random suffix.
func NamespaceName(testName string) string {
	var b strings.Builder
	dash := true
	for _, r := range strings.ToLower(testName) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	s := strings.TrimRight(b.String(), "-")
	if s == "" || s[0] < 'a' {
		s = "t-" + s
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	suffix := "-" + hex.EncodeToString(rnd[:])
	if len(s) > 63-len(suffix) {
		s = strings.TrimRight(s[:63-len(suffix)], "-")
	}
	return s + suffix
}

// Credentials are a ServiceAccount's: its token and a kubeconfig file
// that uses it (and trusts the cluster's CA).
type Credentials struct {
	Namespace, Name string
	// Token is a bearer token for it (an hour long).
	Token string
	// Kubeconfig is a kubeconfig file with that token, in the test's temp
	// dir; its context's namespace is Namespace.
	Kubeconfig string
}

// Token issues a bearer token (an hour long) for an existing
// ServiceAccount, with the API's TokenRequest.
func (c *Cluster) Token(tb testing.TB, namespace, serviceAccount string) string {
	tb.Helper()
	var tr struct {
		Status struct {
			Token string `json:"token"`
		} `json:"status"`
	}
	c.Do(tb, http.MethodPost, "/api/v1/namespaces/"+namespace+"/serviceaccounts/"+serviceAccount+"/token", map[string]any{
		"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
		"spec": map[string]any{"expirationSeconds": 3600},
	}, &tr)
	if tr.Status.Token == "" {
		tb.Fatalf("no token for the ServiceAccount %s/%s", namespace, serviceAccount)
	}
	return tr.Status.Token
}

// NamespaceServiceAccount makes a ServiceAccount in namespace that may do
// anything in that namespace and nothing elsewhere (a Role over every
// resource of namespace and its RoleBinding; no cluster-wide rights), and
// returns its credentials. Its objects go with the namespace; they are
// also deleted when the test ends.
func (c *Cluster) NamespaceServiceAccount(tb testing.TB, namespace, name string) Credentials {
	tb.Helper()
	return c.ServiceAccountWithRole(tb, namespace, name,
		[]map[string]any{{"apiGroups": []string{"*"}, "resources": []string{"*"}, "verbs": []string{"*"}}})
}

// ServiceAccountWithRole makes a ServiceAccount name in namespace, a Role
// of the same name with rules and the RoleBinding between them, waits
// until the API server's authorizer applies them, and returns the
// ServiceAccount's credentials. The objects are deleted when the test
// ends.
//
// The wait matters: the authorizer reads Roles and RoleBindings from a
// cache that follows writes a moment later, so a request made at once
// can be refused ("role ... not found").
func (c *Cluster) ServiceAccountWithRole(tb testing.TB, namespace, name string, rules []map[string]any) Credentials {
	tb.Helper()
	if len(rules) == 0 {
		tb.Fatal("ServiceAccountWithRole: no rules")
	}
	ns := "/api/v1/namespaces/" + namespace
	rbac := "/apis/rbac.authorization.k8s.io/v1/namespaces/" + namespace
	meta := map[string]any{"name": name, "namespace": namespace}
	c.Do(tb, http.MethodPost, ns+"/serviceaccounts", map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}, nil)
	c.DeleteOnCleanup(tb, ns+"/serviceaccounts/"+name)
	c.Do(tb, http.MethodPost, rbac+"/roles", map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta, "rules": rules}, nil)
	c.DeleteOnCleanup(tb, rbac+"/roles/"+name)
	c.Do(tb, http.MethodPost, rbac+"/rolebindings", map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
		"subjects": []map[string]any{{"kind": "ServiceAccount", "name": name, "namespace": namespace}},
	}, nil)
	c.DeleteOnCleanup(tb, rbac+"/rolebindings/"+name)
	group, resource, verb := firstOf(rules[0]["apiGroups"], ""), firstOf(rules[0]["resources"], "pods"), firstOf(rules[0]["verbs"], "get")
	user := "system:serviceaccount:" + namespace + ":" + name
	Eventually(tb, time.Minute, "the Role "+name+" applied by the authorizer", func() (bool, string) {
		var review struct {
			Status struct {
				Allowed bool   `json:"allowed"`
				Reason  string `json:"reason"`
			} `json:"status"`
		}
		c.Do(tb, http.MethodPost, "/apis/authorization.k8s.io/v1/subjectaccessreviews", map[string]any{
			"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
			"spec": map[string]any{
				"user":               user,
				"groups":             []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
				"resourceAttributes": map[string]any{"namespace": namespace, "group": group, "resource": resource, "verb": verb},
			},
		}, &review)
		return review.Status.Allowed, fmt.Sprintf("%s may not %s %s: %s", user, verb, resource, review.Status.Reason)
	})
	cr := Credentials{Namespace: namespace, Name: name, Token: c.Token(tb, namespace, name)}
	cr.Kubeconfig = filepath.Join(tb.TempDir(), name+".kubeconfig")
	if err := os.WriteFile(cr.Kubeconfig, c.TokenKubeconfig(cr.Token, namespace), 0o600); err != nil {
		tb.Fatal(err)
	}
	return cr
}

// DocumentedRole is the rules of the Role a documentation page gives in
// the YAML block after the marker comment <!-- marker --> in file: tests
// grant exactly what the documentation tells users to grant.
func DocumentedRole(tb testing.TB, file, marker string) []map[string]any {
	tb.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "<!-- "+marker+" -->\n```yaml\n")
	block, _, ok2 := strings.Cut(after, "```")
	if !ok || !ok2 {
		tb.Fatalf("%s: no %s block", file, marker)
	}
	var role struct {
		Rules []map[string]any `yaml:"rules"`
	}
	if err := yaml.Unmarshal([]byte(block), &role); err != nil || len(role.Rules) == 0 {
		tb.Fatalf("%s: the Role after %s: %v", file, marker, err)
	}
	return role.Rules
}

// firstOf is the first string of a rule's list ([]string, or []any as
// YAML decodes it), or def when it is empty or "*".
func firstOf(v any, def string) string {
	var first string
	switch l := v.(type) {
	case []string:
		if len(l) > 0 {
			first = l[0]
		}
	case []any:
		if len(l) > 0 {
			first, _ = l[0].(string)
		}
	}
	if first == "" || first == "*" {
		return def
	}
	return first
}

// TokenKubeconfig is a kubeconfig for this cluster that authenticates
// with a bearer token, namespace its context's default.
func (c *Cluster) TokenKubeconfig(token, namespace string) []byte {
	// JSON is YAML: no YAML library needed.
	b, _ := json.MarshalIndent(map[string]any{
		"apiVersion": "v1", "kind": "Config",
		"clusters": []any{map[string]any{"name": "legate-test", "cluster": map[string]any{
			"server": c.API, "certificate-authority-data": base64.StdEncoding.EncodeToString(c.CAPEM)}}},
		"users": []any{map[string]any{"name": "token", "user": map[string]any{"token": token}}},
		"contexts": []any{map[string]any{"name": "legate-test", "context": map[string]any{
			"cluster": "legate-test", "user": "token", "namespace": namespace}}},
		"current-context": "legate-test",
	}, "", "  ")
	return b
}

// Eventually polls cond every 100 ms until it holds, and fails tb when it
// still does not after d; cond's string says what it saw, for the failure.
func Eventually(tb testing.TB, d time.Duration, what string, cond func() (bool, string)) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, saw := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: not after %s; last seen: %s", what, d, saw)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// StatefulSetStatus is the part of a StatefulSet's status that tells a
// rollout's progress.
type StatefulSetStatus struct {
	ObservedGeneration int64  `json:"observedGeneration"`
	Replicas           int    `json:"replicas"`
	ReadyReplicas      int    `json:"readyReplicas"`
	UpdatedReplicas    int    `json:"updatedReplicas"`
	CurrentRevision    string `json:"currentRevision"`
	UpdateRevision     string `json:"updateRevision"`
}

// StatefulSet is the part of a StatefulSet tests read.
type StatefulSet struct {
	Metadata struct {
		Generation int64 `json:"generation"`
	} `json:"metadata"`
	Spec struct {
		Replicas int `json:"replicas"`
		Template struct {
			Spec struct {
				Containers []struct {
					Name  string `json:"name"`
					Image string `json:"image"`
				} `json:"containers"`
			} `json:"spec"`
		} `json:"template"`
	} `json:"spec"`
	Status StatefulSetStatus `json:"status"`
}

// Image is the image of the named container of its pod template.
func (s StatefulSet) Image(container string) string {
	for _, c := range s.Spec.Template.Spec.Containers {
		if c.Name == container {
			return c.Image
		}
	}
	return ""
}

// RolledOut says whether the StatefulSet's controller has seen its last
// change and every replica runs it and is Ready (what kubectl rollout
// status waits for).
func (s StatefulSet) RolledOut() bool {
	st := s.Status
	return st.ObservedGeneration >= s.Metadata.Generation && st.Replicas == s.Spec.Replicas &&
		st.ReadyReplicas == s.Spec.Replicas && st.UpdatedReplicas == s.Spec.Replicas &&
		(st.UpdateRevision == "" || st.CurrentRevision == st.UpdateRevision)
}

// GetStatefulSet reads a StatefulSet as the admin.
func (c *Cluster) GetStatefulSet(tb testing.TB, namespace, name string) StatefulSet {
	tb.Helper()
	var s StatefulSet
	c.Do(tb, http.MethodGet, "/apis/apps/v1/namespaces/"+namespace+"/statefulsets/"+name, nil, &s)
	return s
}

// WaitRolledOut waits (up to d) until the StatefulSet is rolled out and
// returns it.
func (c *Cluster) WaitRolledOut(tb testing.TB, d time.Duration, namespace, name string) StatefulSet {
	tb.Helper()
	var s StatefulSet
	Eventually(tb, d, "StatefulSet "+namespace+"/"+name+" rolled out", func() (bool, string) {
		s = c.GetStatefulSet(tb, namespace, name)
		return s.RolledOut(), fmt.Sprintf("generation %d, status %+v", s.Metadata.Generation, s.Status)
	})
	return s
}

// Pod is the part of a pod tests read.
type Pod struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		NodeName   string `json:"nodeName"`
		Containers []struct {
			Name  string `json:"name"`
			Image string `json:"image"`
		} `json:"containers"`
	} `json:"spec"`
	Status struct {
		Phase      string `json:"phase"`
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		} `json:"conditions"`
	} `json:"status"`
}

// Ready says whether the pod's Ready condition is True.
func (p Pod) Ready() bool {
	for _, c := range p.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status == "True"
		}
	}
	return false
}

// Pods lists the pods of namespace that match a label selector ("" = all).
func (c *Cluster) Pods(tb testing.TB, namespace, selector string) []Pod {
	tb.Helper()
	var list struct {
		Items []Pod `json:"items"`
	}
	path := "/api/v1/namespaces/" + namespace + "/pods"
	if selector != "" {
		path += "?labelSelector=" + url.QueryEscape(selector)
	}
	c.Do(tb, http.MethodGet, path, nil, &list)
	return list.Items
}

// ErrNoCluster is what Find returns without a cluster.
var ErrNoCluster = errors.New("no Kubernetes cluster")

// Find returns the running cluster, or ErrNoCluster (wrapped, with the
// reason), for callers that decide themselves what its absence means.
func Find() (*Cluster, error) {
	findOnce.Do(func() { found, missingWhy = find(Home()) })
	if found == nil {
		return nil, fmt.Errorf("%w: %s", ErrNoCluster, missingWhy)
	}
	return found, nil
}
