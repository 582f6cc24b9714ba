package kube

import (
	"context"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// fakeAPI is a Kubernetes API on loopback (TLS) that serves discovery of
// v1 and apps/v1 and records the requests it gets; other paths answer
// with a Status 404, or with what answer says.
type fakeAPI struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []string // "METHOD path?query content-type: body"
	// answer, when set, answers a request it knows (true).
	answer func(w http.ResponseWriter, r *http.Request, body string) bool
}

func newFakeAPI(t *testing.T) *fakeAPI {
	f := &fakeAPI{}
	f.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.got = append(f.got, r.Method+" "+r.URL.RequestURI()+" "+r.Header.Get("Content-Type")+" "+r.Header.Get("Authorization")+": "+string(b))
		answer := f.answer
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1":
			io.WriteString(w, `{"resources":[{"name":"configmaps","kind":"ConfigMap","namespaced":true},{"name":"namespaces","kind":"Namespace","namespaced":false},{"name":"pods/log","kind":"Pod","namespaced":true}]}`)
			return
		case "/apis/apps/v1":
			io.WriteString(w, `{"resources":[{"name":"deployments","kind":"Deployment","namespaced":true},{"name":"deployments/status","kind":"Deployment","namespaced":true}]}`)
			return
		}
		if answer != nil && answer(w, r, string(b)) {
			return
		}
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"kind":"Status","reason":"NotFound","message":"the server could not find the requested resource"}`)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAPI) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.got...)
}

func (f *fakeAPI) client(t *testing.T) *Client {
	t.Helper()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: f.srv.Certificate().Raw})
	c, err := NewClient(Config{Server: f.srv.URL, Source: "test", CA: ca, Token: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestClientDiscoveryAndApply: kinds are found through discovery once per
// group-version, and applied with server-side apply into the namespace.
func TestClientDiscoveryAndApply(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	f.answer = func(w http.ResponseWriter, r *http.Request, body string) bool {
		if r.Method == http.MethodPatch {
			io.WriteString(w, `{"metadata":{"generation":1}}`)
			return true
		}
		return false
	}
	c := f.client(t)
	ctx := context.Background()
	r, err := c.Resource(ctx, "v1", "ConfigMap")
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Path("web", "c"); got != "/api/v1/namespaces/web/configmaps/c" {
		t.Fatalf("path %s", got)
	}
	if r, err := c.Resource(ctx, "v1", "Namespace"); err != nil || r.Path("web", "n") != "/api/v1/namespaces/n" {
		t.Fatalf("cluster-wide: %+v %v", r, err)
	}
	if _, err := c.Resource(ctx, "v1", "Pod"); err == nil || !strings.Contains(err.Error(), "no kind Pod in apiVersion v1") {
		t.Fatalf("a subresource is no kind: %v", err)
	}
	if _, err := c.Resource(ctx, "example.com/v1", "Widget"); err == nil || !strings.Contains(err.Error(), "does not serve apiVersion example.com/v1") {
		t.Fatalf("unknown group: %v", err)
	}
	if _, err := c.Resource(ctx, "a/b/c", "X"); err == nil || !strings.Contains(err.Error(), "apiVersion \"a/b/c\" is invalid") {
		t.Fatalf("bad apiVersion: %v", err)
	}
	if err := c.Apply(ctx, r.Path("web", "c"), []byte(`{"kind":"ConfigMap"}`), nil); err != nil {
		t.Fatal(err)
	}
	reqs := f.requests()
	discoveries := 0
	for _, q := range reqs {
		if strings.HasPrefix(q, "GET /api/v1 ") {
			discoveries++
		}
	}
	if discoveries != 1 {
		t.Fatalf("discovery of v1 %d times, want once (cached):\n%s", discoveries, strings.Join(reqs, "\n"))
	}
	last := reqs[len(reqs)-1]
	const want = `PATCH /api/v1/namespaces/web/configmaps/c?fieldManager=legate&force=true application/apply-patch+yaml Bearer tok: {"kind":"ConfigMap"}`
	if last != want {
		t.Fatalf("apply request\n got %s\nwant %s", last, want)
	}
}

// TestClientStatusError: an answer that is not a success is an error with
// the API's reason and message.
func TestClientStatusError(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	f.answer = func(w http.ResponseWriter, r *http.Request, body string) bool {
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"kind":"Status","reason":"Forbidden","message":"deployments.apps \"web\" is forbidden: User \"system:serviceaccount:d:legate\" cannot patch resource"}`)
		return true
	}
	c := f.client(t)
	err := c.Apply(context.Background(), "/apis/apps/v1/namespaces/web/deployments/web", []byte("{}"), nil)
	if err == nil || err.Error() != `403 Forbidden: deployments.apps "web" is forbidden: User "system:serviceaccount:d:legate" cannot patch resource` {
		t.Fatalf("err = %v", err)
	}
	if IsNotFound(err) {
		t.Fatal("403 is not a 404")
	}
}

// TestClientUntrusted: a server whose certificate the CA does not sign is
// refused.
func TestClientUntrusted(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	c, err := NewClient(Config{Server: f.srv.URL, Source: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Resource(context.Background(), "v1", "ConfigMap"); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("err = %v, want a certificate error", err)
	}
	if _, err := NewClient(Config{CA: []byte("not PEM"), Source: "test"}); err == nil {
		t.Fatal("a CA without PEM is accepted")
	}
}

// TestRunChecksBeforeApplying: a kind the cluster does not have, or a
// document in another namespace, fails the deploy before anything is
// applied.
func TestRunChecksBeforeApplying(t *testing.T) {
	t.Parallel()
	f := newFakeAPI(t)
	c := f.client(t)
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n"
	for _, tt := range []struct {
		manifests []string
		err       string
	}{
		{[]string{cm, "apiVersion: v1\nkind: Widget\nmetadata: {name: w}\n"}, "manifest 1, document 0 (widget/w): the cluster has no kind Widget in apiVersion v1"},
		{[]string{cm, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: d, namespace: prod}\n"}, `names the namespace "prod"`},
	} {
		var out strings.Builder
		o, err := Run(context.Background(), c, Deploy{Namespace: "web", Manifests: tt.manifests}, &out)
		if o.Outcome != Failed || err == nil || !strings.Contains(err.Error(), tt.err) {
			t.Fatalf("Run = %v, %v; want failed with %q", o, err, tt.err)
		}
	}
	for _, q := range f.requests() {
		if strings.HasPrefix(q, "PATCH") {
			t.Fatalf("applied before the checks passed: %s", q)
		}
	}
}
