package secrets

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/leaktest"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/seal"
	"github.com/legate-dev/legate/internal/secretref"
	"github.com/legate-dev/legate/internal/store"
)

func TestMain(m *testing.M) { os.Exit(leaktest.Main(m.Run)) }

var t0 = time.Date(2026, 11, 22, 8, 0, 0, 0, time.UTC)

// orgs is the scopes the tests know: org o1 with project p1.
type orgs struct{}

func (orgs) CheckScope(_ context.Context, _, org, project string) error {
	if org != "" && org != "o1" || project != "" && project != "p1" {
		return fmt.Errorf("unknown scope %s/%s", org, project)
	}
	return nil
}

// newService is the service over a real SQLite store in t's directory.
func newService(t *testing.T) *Service {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "legate.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return New(Config{Store: st, Scopes: orgs{}, Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return t0 }})
}

// serve mounts the service's routes as account acc1's, without the
// checks of the API server (the manager's tests run those).
func serve(s *Service) http.Handler {
	mux := http.NewServeMux()
	for _, rt := range s.Routes() {
		mux.HandleFunc(rt.Method+" "+rt.Pattern, func(w http.ResponseWriter, r *http.Request) { rt.Admin(w, r, "acc1") })
	}
	return mux
}

// call sends a request to h and returns the answer's status and body.
func call(h http.Handler, method, path, body string) (int, string) {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, path, strings.NewReader(body)))
	return w.Code, w.Body.String()
}

func TestCheckSecretValue(t *testing.T) {
	for _, tc := range []struct {
		value, want string
	}{
		{"s3cr3t", ""},
		{strings.Repeat("x", protocol.MaxSecretValue), ""},
		{"", "is empty"},
		{strings.Repeat("x", protocol.MaxSecretValue+1), "at most"},
		{"a\x00b", "must be text"},
		{"\xff\xfe", "must be text"},
	} {
		got := checkSecretValue(tc.value)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("checkSecretValue(%.20q) = %q, want %q", tc.value, got, tc.want)
		}
	}
}

// TestHandlers: values go in, never out; a name is unique within its
// scope; the scope must exist.
func TestHandlers(t *testing.T) {
	h := serve(newService(t))
	for _, tc := range []struct {
		body string
		code int
		want string
	}{
		{`{"name":"TOKEN","value":"account-token"}`, 201, `"name":"TOKEN"`},
		{`{"name":"TOKEN","org":"o1","project":"p1","value":"project-token"}`, 201, `"project":"p1"`},
		{`{"name":"TOKEN","value":"again"}`, 409, `secret \"TOKEN\" at account scope already exists; change its value with legate secret update`},
		{`{"name":"bad-name","value":"v"}`, 400, "bad-name"},
		{`{"name":"EMPTY","value":""}`, 400, "the secret's value is empty"},
		{`{"name":"ELSEWHERE","org":"o2","value":"v"}`, 400, "unknown scope o2/"},
	} {
		code, body := call(h, "POST", protocol.PathSecrets, tc.body)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("create %s: %d %s, want %d with %q", tc.body, code, body, tc.code, tc.want)
		}
		if strings.Contains(body, "-token") {
			t.Errorf("create %s: the answer carries the value: %s", tc.body, body)
		}
	}
	path := protocol.PathSecrets + "/TOKEN?org=o1&project=p1"
	if code, body := call(h, "PATCH", path, `{"value":"project-token-2"}`); code != 200 || !strings.Contains(body, `"version":2`) {
		t.Errorf("update: %d %s", code, body)
	}
	if code, body := call(h, "GET", path, ""); code != 200 || strings.Contains(body, "project-token") {
		t.Errorf("get: %d %s", code, body)
	}
	if code, _ := call(h, "DELETE", path, ""); code != 204 {
		t.Errorf("delete: %d", code)
	}
	if code, body := call(h, "GET", path, ""); code != 404 || !strings.Contains(body, `secret \"TOKEN\" at project o1/p1 scope`) {
		t.Errorf("get after delete: %d %s", code, body)
	}
}

// TestBindAndNeeds: a task's references must resolve from its scope, the
// principal needs secret:access where each resolves, and each name is
// bound to the exact secret it resolved to.
func TestBindAndNeeds(t *testing.T) {
	s := newService(t)
	ctx := context.Background()
	for _, b := range []string{`{"name":"TOKEN","value":"a"}`, `{"name":"PW","org":"o1","value":"b"}`} {
		if code, body := call(serve(s), "POST", protocol.PathSecrets, b); code != 201 {
			t.Fatalf("create %s: %d %s", b, code, body)
		}
	}
	spec := func(script, org, project string) protocol.TaskSpec {
		return protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: script}, Org: org, Project: project}
	}
	policy := func(scopes ...access.Scope) func(context.Context) (*access.Policy, error) {
		pr := access.Principal{Kind: access.KindUser, ID: "u1", Name: "ann"}
		pol := &access.Policy{Principal: pr}
		for _, sc := range scopes {
			pol.Bindings = append(pol.Bindings, access.Binding{Role: access.RoleAccountAdmin, SubjectKind: access.KindUser, SubjectID: pr.ID, Scope: sc})
		}
		return func(context.Context) (*access.Policy, error) { return pol, nil }
	}
	all := policy(access.Account)
	bound, err := s.Bind(ctx, "acc1", spec("echo ${secrets.TOKEN} ${secrets.PW}", "o1", "p1"), all)
	if err != nil || len(bound) != 2 || bound[0].Name != "PW" || bound[0].Org != "o1" || bound[0].Version != 1 || bound[0].ID == "" ||
		bound[1].Name != "TOKEN" || bound[1].Org != "" {
		t.Errorf("Bind, both resolve: %+v, %v", bound, err)
	}
	noCall := func(context.Context) (*access.Policy, error) {
		return nil, errors.New("asked for a policy without references")
	}
	if bound, err := s.Bind(ctx, "acc1", spec("true $${secrets.X}", "", ""), noCall); err != nil || bound != nil {
		t.Errorf("Bind, no references: %v, %v", bound, err)
	}
	for _, tc := range []struct {
		spec   protocol.TaskSpec
		policy func(context.Context) (*access.Policy, error)
		status int
		want   string
	}{
		{spec("echo ${secrets.PW}", "", ""), all, 400, "unknown secret PW: the task's account has none of that name (looked in the account)"},
		{spec("echo ${secrets.NONE}", "o1", "p1"), all, 400, "looked in project o1/p1, then org o1, then the account"},
		{spec("echo ${secrets.bad-name}", "", ""), all, 400, "malformed secret reference"},
		// The org's secret needs secret:access at the org: at the project is not enough.
		{spec("echo ${secrets.PW}", "o1", "p1"), policy(access.Scope{Org: "o1", Project: "p1"}), 403, `secret:access on secret "PW" at org o1`},
		// A name found nowhere needs it at the task's scope, before it is said to be unknown.
		{spec("echo ${secrets.NONE}", "o2", ""), policy(access.Scope{Org: "o1"}), 403, `secret:access on secret "NONE" at org o2`},
	} {
		_, err := s.Bind(ctx, "acc1", tc.spec, tc.policy)
		var re *RefError
		if !errors.As(err, &re) || re.HTTPStatus() != tc.status || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Bind %q at %s/%s: %v; want %d saying %q", tc.spec.Shell.Script, tc.spec.Org, tc.spec.Project, err, tc.status, tc.want)
		}
	}

	// A configuration's script and a token's init secrets are checked as a
	// task's spec: the refusal names what refers to the secret.
	for what, want := range map[string]string{
		"configuration":  "unknown secret NONE: the configuration's org o1 has none of that name",
		"delegate token": "unknown secret NONE: the delegate token's org o1 has none of that name",
	} {
		_, err := s.Bind(secretref.ReferredBy(ctx, what), "acc1", spec("echo ${secrets.NONE}", "o1", ""), all)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "task") {
			t.Errorf("Bind for a %s: %v; want %q", what, err, want)
		}
	}

	needs, err := s.Needs(ctx, "acc1", spec("echo ${secrets.PW} ${secrets.TOKEN} ${secrets.NONE}", " o1 ", "p1"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]access.Scope{}
	for _, n := range needs {
		if n.Perm != access.SecretAccess || n.Res.Kind != "secret" {
			t.Errorf("need %+v: want secret:access on a secret", n)
		}
		got[n.Res.Name] = n.Res.Scope
	}
	want := map[string]access.Scope{"PW": {Org: "o1"}, "TOKEN": access.Account, "NONE": {Org: "o1", Project: "p1"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Needs: scopes (-want +got):\n%s", diff)
	}
	if needs, err := s.Needs(ctx, "acc1", spec("echo ${secrets.bad-name}", "", "")); err != nil || needs != nil {
		t.Errorf("Needs, a malformed reference: %v, %v; want none (the handler refuses it)", needs, err)
	}
}

func TestKeyError(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
		seal bool
	}{
		{&seal.UnknownKeyError{ID: "k2", Have: []string{"k1"}}, "sealed with key k2; give this manager the same key (" + seal.EnvMasterKey + " or --master-key-file); it has key k1", true},
		{fmt.Errorf("open: %w", &seal.UnknownKeyError{ID: "k3", Have: []string{"k1", "k2"}}), "it has keys k1, k2", true},
		{fmt.Errorf("read: %w", seal.ErrAuth), "does not open (restore the database from a backup", true},
		{seal.ErrMalformed, "does not open", true},
		{errors.New("disk full"), "disk full", false},
	} {
		if got := KeyError(tc.err).Error(); !strings.Contains(got, tc.want) {
			t.Errorf("KeyError(%v) = %q, want %q", tc.err, got, tc.want)
		}
		if got := IsSealError(tc.err); got != tc.seal {
			t.Errorf("IsSealError(%v) = %v, want %v", tc.err, got, tc.seal)
		}
	}
	if KeyError(nil) != nil {
		t.Error("KeyError(nil) is not nil")
	}
}

// TestRoutes: the routes list without a service (the manager's route
// table is read so in its tests), and each handler is set.
func TestRoutes(t *testing.T) {
	var s *Service
	for _, rt := range s.Routes() {
		if rt.Admin == nil || rt.Rule.Perm == "" {
			t.Errorf("%s %s: no admin handler or permission", rt.Method, rt.Pattern)
		}
	}
}
