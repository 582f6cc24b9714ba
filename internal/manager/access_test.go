package manager

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/identity"
	"github.com/legate-dev/legate/internal/pgtest"
	"github.com/legate-dev/legate/internal/pipeline/engine"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// What package identity promises of sign-ins, as these tests expect it:
// the failed sign-ins a user or address may make in a row (more are
// refused), and how long a sign-in link and a sign-in session last.
const (
	signInFailures = 10
	signInLinkTTL  = 5 * time.Minute
	sessionTTL     = time.Hour
)

// accessFixture is a request that reaches one admin route for a resource
// at a known scope, and how to make sure that resource exists before it.
type accessFixture struct {
	path, body string
	// at is the scope of the resource the route acts on.
	at access.Scope
	// ensure recreates what an earlier allowed request may have removed.
	ensure func()
}

// api makes one admin request with key and returns the status and body.
func (tm *testManager) api(t *testing.T, key, method, path, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, tm.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set(protocol.HeaderProtocolVersion, fmt.Sprint(protocol.Version))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// mustAPI is api that fails the test on a status outside ok.
func (tm *testManager) mustAPI(t *testing.T, key, method, path, body string, ok ...int) string {
	t.Helper()
	st, b := tm.api(t, key, method, path, body)
	for _, s := range ok {
		if st == s {
			return b
		}
	}
	t.Fatalf("%s %s %s: %d %s", method, path, body, st, b)
	return ""
}

// userKey creates a user with role bound at scope s and returns an API
// key of it.
func (tm *testManager) userKey(t *testing.T, name, role string, s access.Scope) string {
	t.Helper()
	admin := tm.admin.APIKey
	tm.mustAPI(t, admin, "POST", protocol.PathUsers, fmt.Sprintf(`{"name":%q}`, name), 201)
	if role != "" {
		tm.mustAPI(t, admin, "POST", protocol.PathBindings, fmt.Sprintf(`{"role":%q,"subject_kind":"user","subject":%q,"org":%q,"project":%q}`,
			role, name, s.Org, s.Project), 201)
	}
	var k protocol.APIKey
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "POST", protocol.PathAPIKeys, fmt.Sprintf(`{"name":"k-%s","owner":%q}`, name, name), 201)), &k); err != nil {
		t.Fatal(err)
	}
	return k.Value
}

// TestEveryRouteEnforcesItsRule walks every admin route with every
// built-in role bound at the resource's scope, above it, at a sibling and
// beneath, and checks that each is allowed or refused (403) as the
// route's rule and the role's permissions say. A new admin route without
// a fixture here fails the test; one without a rule fails
// TestEveryAdminRouteHasARule.
func TestEveryRouteEnforcesItsRule(t *testing.T) {
	tm := startTestManager(t, Config{})
	admin := tm.admin.APIKey
	ctx := context.Background()
	o1, o2 := access.Scope{Org: "o1"}, access.Scope{Org: "o2"}
	p1, p2 := access.Scope{Org: "o1", Project: "p1"}, access.Scope{Org: "o1", Project: "p2"}
	for _, o := range []string{"o1", "o2"} {
		tm.mustAPI(t, admin, "POST", protocol.PathOrgs, fmt.Sprintf(`{"name":%q}`, o), 201)
	}
	for _, p := range []string{"o1/p1", "o1/p2", "o2/p1"} {
		org, name, _ := strings.Cut(p, "/")
		tm.mustAPI(t, admin, "POST", protocol.PathOrgs+"/"+org+"/projects", fmt.Sprintf(`{"name":%q}`, name), 201)
	}
	// Tokens: t-o1 is revoked by the walk; t-p1 keeps project p1 from
	// being deleted; t-d registers the delegate d-o1 at o1.
	tm.mustAPI(t, admin, "POST", protocol.PathTokens, `{"name":"t-o1","org":"o1"}`, 201)
	tm.mustAPI(t, admin, "POST", protocol.PathTokens, `{"name":"t-p1","org":"o1","project":"p1"}`, 201)
	var td protocol.Token
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "POST", protocol.PathTokens, `{"name":"t-d","org":"o1"}`, 201)), &td); err != nil {
		t.Fatal(err)
	}
	registered := false
	ensureDelegate := func() {
		if ds, err := tm.st.ListInstances(ctx, tm.admin.AccountID); err == nil && len(ds) > 0 && registered {
			return
		}
		tm.registerFake(t, tm.admin.AccountID, td.Value, "d-o1", "host-"+fmt.Sprint(len(t.Name())))
		registered = true
	}
	ensureDelegate()
	// t-a requires approval: d-a waits for it at o1.
	var ta protocol.Token
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "POST", protocol.PathTokens, `{"name":"t-a","org":"o1","require_approval":true}`, 201)), &ta); err != nil {
		t.Fatal(err)
	}
	tm.registerFake(t, tm.admin.AccountID, ta.Value, "d-a", "host-a")
	ensureConfig := func() {
		tm.mustAPI(t, admin, "POST", protocol.PathConfigurations, `{"name":"c-p1","script":"true","org":"o1","project":"p1"}`, 201, 409)
	}
	ensureConfig()
	ensureConnector := func() {
		tm.mustAPI(t, admin, "POST", protocol.PathConnectors, `{"name":"conn","url":"http://127.0.0.1:1"}`, 201, 409)
	}
	ensureConnector()
	var task protocol.Task
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "POST", protocol.PathTasks, `{"type":"shell","shell":{"script":"true"},"org":"o1","project":"p1"}`, 201)), &task); err != nil {
		t.Fatal(err)
	}
	ensureVictim := func() {
		tm.mustAPI(t, admin, "POST", protocol.PathUsers, `{"name":"victim"}`, 201, 409)
	}
	ensureVictim()
	ensureGroup := func() {
		tm.mustAPI(t, admin, "POST", protocol.PathGroups, `{"name":"grp"}`, 201, 409)
		tm.mustAPI(t, admin, "POST", protocol.PathGroups+"/grp/members", `{"member":"victim"}`, 204)
	}
	ensureGroup()
	ensureRole := func() {
		tm.mustAPI(t, admin, "POST", protocol.PathRoles, `{"name":"custom","permissions":["delegate:delete"]}`, 201, 409)
	}
	ensureRole()
	ensureBinding := func() {
		ensureVictim()
		tm.mustAPI(t, admin, "POST", protocol.PathBindings, `{"role":"viewer","subject_kind":"user","subject":"victim","org":"o1","project":"p1"}`, 201, 409)
	}
	ensureBinding()
	tm.mustAPI(t, admin, "POST", protocol.PathAPIKeys, `{"name":"spare","owner":"victim"}`, 201)
	ensureSecret := func() {
		tm.mustAPI(t, admin, "POST", protocol.PathSecrets, `{"name":"S_P1","org":"o1","project":"p1","value":"v"}`, 201, 409)
	}
	ensureSecret()
	secretP := protocol.PathSecrets + "/S_P1?org=o1&project=p1"

	const plBody = `{"source":"name: pl\nstages:\n  - name: s\n    steps:\n      - name: a\n        shell: \"true\"\n","org":"o1","project":"p1"}`
	ensurePipeline := func() {
		tm.mustAPI(t, admin, "POST", protocol.PathPipelines, plBody, 200, 201)
	}
	ensurePipeline()
	var run protocol.Run
	if err := json.Unmarshal([]byte(tm.mustAPI(t, admin, "POST", protocol.PathPipelines+"/pl/runs?org=o1&project=p1", `{}`, 201)), &run); err != nil {
		t.Fatal(err)
	}
	plP := protocol.PathPipelines + "/pl?org=o1&project=p1"
	runP := protocol.PathRuns + "/" + run.ID
	depID, err := tm.m.engine.BeginDeployment(ctx, engine.DeploymentStart{AccountID: tm.admin.AccountID, Org: "o1", Project: "p1",
		Service: "web", Environment: "prod", Pipeline: "pl", RunID: run.ID, Stage: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tm.m.engine.EndDeployment(ctx, tm.admin.AccountID, depID, protocol.DeploymentSucceeded); err != nil {
		t.Fatal(err)
	}

	taskP := protocol.PathTasks + "/" + task.ID
	fixtures := map[string]accessFixture{
		"GET " + protocol.PathWhoAmI:                                 {path: protocol.PathWhoAmI},
		"POST " + protocol.PathTokens:                                {path: protocol.PathTokens, body: `{"name":"t-new","org":"o1"}`, at: o1},
		"GET " + protocol.PathTokens:                                 {path: protocol.PathTokens},
		"POST " + protocol.PathTokens + "/{name}/revoke":             {path: protocol.PathTokens + "/t-o1/revoke", at: o1},
		"GET " + protocol.PathDelegates:                              {path: protocol.PathDelegates},
		"GET " + protocol.PathDelegates + "/{name}":                  {path: protocol.PathDelegates + "/d-o1", at: o1, ensure: ensureDelegate},
		"DELETE " + protocol.PathDelegates + "/{name}":               {path: protocol.PathDelegates + "/d-o1", at: o1, ensure: ensureDelegate},
		"POST " + protocol.PathDelegates + "/{name}/approve":         {path: protocol.PathDelegates + "/d-a/approve", at: o1},
		"POST " + protocol.PathDelegates + "/{name}/reject":          {path: protocol.PathDelegates + "/d-a/reject", at: o1},
		"PUT " + protocol.PathDelegates + "/{name}/upgrade":          {path: protocol.PathDelegates + "/d-o1/upgrade", body: `{"action":"hold"}`},
		"GET " + protocol.PathAudit:                                  {path: protocol.PathAudit},
		"POST " + protocol.PathTasks:                                 {path: protocol.PathTasks, body: `{"type":"shell","shell":{"script":"true"},"org":"o1","project":"p1"}`, at: p1},
		"GET " + protocol.PathTasks:                                  {path: protocol.PathTasks},
		"GET " + protocol.PathQueue:                                  {path: protocol.PathQueue + "?selectors=gpu"},
		"GET " + protocol.PathTasks + "/{id}":                        {path: taskP, at: p1},
		"POST " + protocol.PathTasks + "/{id}/cancel":                {path: taskP + "/cancel", at: p1},
		"GET " + protocol.PathTasks + "/{id}/logs":                   {path: taskP + "/logs", at: p1},
		"GET " + protocol.PathTasks + "/{id}/explain":                {path: taskP + "/explain", at: p1},
		"POST " + protocol.PathOrgs:                                  {path: protocol.PathOrgs, body: `{"name":"o-new"}`},
		"GET " + protocol.PathOrgs:                                   {path: protocol.PathOrgs},
		"DELETE " + protocol.PathOrgs + "/{org}":                     {path: protocol.PathOrgs + "/o2"}, // it has a project: 409 once allowed
		"POST " + protocol.PathOrgs + "/{org}/projects":              {path: protocol.PathOrgs + "/o1/projects", body: `{"name":"p-new"}`, at: o1},
		"GET " + protocol.PathProjects:                               {path: protocol.PathProjects},
		"DELETE " + protocol.PathOrgs + "/{org}/projects/{name}":     {path: protocol.PathOrgs + "/o1/projects/p1", at: o1}, // active token t-p1: 409
		"POST " + protocol.PathConnectors:                            {path: protocol.PathConnectors, body: `{"name":"conn-new","url":"http://127.0.0.1:1"}`},
		"GET " + protocol.PathConnectors:                             {path: protocol.PathConnectors},
		"GET " + protocol.PathConnectors + "/{name}":                 {path: protocol.PathConnectors + "/conn", ensure: ensureConnector},
		"DELETE " + protocol.PathConnectors + "/{name}":              {path: protocol.PathConnectors + "/conn", ensure: ensureConnector},
		"POST " + protocol.PathConfigurations:                        {path: protocol.PathConfigurations, body: `{"name":"c-new","script":"true","org":"o1","project":"p1"}`, at: p1},
		"GET " + protocol.PathConfigurations:                         {path: protocol.PathConfigurations},
		"GET " + protocol.PathConfigurations + "/{name}":             {path: protocol.PathConfigurations + "/c-p1", at: p1, ensure: ensureConfig},
		"PATCH " + protocol.PathConfigurations + "/{name}":           {path: protocol.PathConfigurations + "/c-p1", body: `{"script":"true"}`, at: p1, ensure: ensureConfig},
		"DELETE " + protocol.PathConfigurations + "/{name}":          {path: protocol.PathConfigurations + "/c-p1", at: p1, ensure: ensureConfig},
		"POST " + protocol.PathAPIKeys:                               {path: protocol.PathAPIKeys, body: `{"name":"mine-%s"}`},
		"GET " + protocol.PathAPIKeys:                                {path: protocol.PathAPIKeys},
		"POST " + protocol.PathAPIKeys + "/{name}/revoke":            {path: protocol.PathAPIKeys + "/mine-%s/revoke"},
		"DELETE " + protocol.PathSessions:                            {path: protocol.PathSessions},
		"POST " + protocol.PathSignInLinks:                           {path: protocol.PathSignInLinks},
		"POST " + protocol.PathUsers:                                 {path: protocol.PathUsers, body: `{"name":"new-%s"}`},
		"GET " + protocol.PathUsers:                                  {path: protocol.PathUsers},
		"GET " + protocol.PathUsers + "/{name}":                      {path: protocol.PathUsers + "/victim", ensure: ensureVictim},
		"PATCH " + protocol.PathUsers + "/{name}":                    {path: protocol.PathUsers + "/victim", body: `{"disabled":false}`, ensure: ensureVictim},
		"DELETE " + protocol.PathUsers + "/{name}":                   {path: protocol.PathUsers + "/victim", ensure: ensureVictim},
		"POST " + protocol.PathGroups:                                {path: protocol.PathGroups, body: `{"name":"g-new"}`},
		"GET " + protocol.PathGroups:                                 {path: protocol.PathGroups},
		"DELETE " + protocol.PathGroups + "/{name}":                  {path: protocol.PathGroups + "/grp", ensure: func() { ensureVictim(); ensureGroup() }},
		"POST " + protocol.PathGroups + "/{name}/members":            {path: protocol.PathGroups + "/grp/members", body: `{"member":"victim"}`, ensure: func() { ensureVictim(); ensureGroup() }},
		"DELETE " + protocol.PathGroups + "/{name}/members/{member}": {path: protocol.PathGroups + "/grp/members/victim", ensure: func() { ensureVictim(); ensureGroup() }},
		"POST " + protocol.PathRoles:                                 {path: protocol.PathRoles, body: `{"name":"r-new","permissions":["task:view"]}`},
		"GET " + protocol.PathRoles:                                  {path: protocol.PathRoles},
		"GET " + protocol.PathRoles + "/{name}":                      {path: protocol.PathRoles + "/custom", ensure: ensureRole},
		"DELETE " + protocol.PathRoles + "/{name}":                   {path: protocol.PathRoles + "/custom", ensure: ensureRole},
		"PATCH " + protocol.PathRoles + "/{name}":                    {path: protocol.PathRoles + "/custom", body: `{"permissions":["delegate:delete"]}`, ensure: ensureRole},
		"POST " + protocol.PathBindings:                              {path: protocol.PathBindings, body: `{"role":"viewer","subject_kind":"user","subject":"victim","org":"o1","project":"p1"}`, at: p1, ensure: ensureVictim},
		"GET " + protocol.PathBindings:                               {path: protocol.PathBindings},
		"DELETE " + protocol.PathBindings:                            {path: protocol.PathBindings + "?role=viewer&subject_kind=user&subject=victim&org=o1&project=p1", at: p1, ensure: ensureBinding},
		"POST " + protocol.PathManifests:                             {path: protocol.PathManifests, body: `{"kind":"docker","token":"tok","org":"o1","project":"p1"}`, at: p1},
		"POST " + protocol.PathSecrets:                               {path: protocol.PathSecrets, body: `{"name":"S_NEW","org":"o1","project":"p1","value":"v"}`, at: p1},
		"GET " + protocol.PathSecrets:                                {path: protocol.PathSecrets},
		"GET " + protocol.PathSecrets + "/{name}":                    {path: secretP, at: p1, ensure: ensureSecret},
		"PATCH " + protocol.PathSecrets + "/{name}":                  {path: secretP, body: `{"value":"v2"}`, at: p1, ensure: ensureSecret},
		"DELETE " + protocol.PathSecrets + "/{name}":                 {path: secretP, at: p1, ensure: ensureSecret},
		"GET " + protocol.PathDeployments:                            {path: protocol.PathDeployments},
		"GET " + protocol.PathDeployments + "/{id}":                  {path: protocol.PathDeployments + "/" + depID, at: p1},
		"GET " + protocol.PathDeploymentsCurrent:                     {path: protocol.PathDeploymentsCurrent},
		"POST " + protocol.PathDeploymentsRollback:                   {path: protocol.PathDeploymentsRollback, body: `{"service":"web","environment":"prod"}`, at: p1},
		"GET " + protocol.PathLimits:                                 {path: protocol.PathLimits},
		"PUT " + protocol.PathLimits:                                 {path: protocol.PathLimits, body: `{"per_hour":40}`},
		"POST " + protocol.PathPipelines:                             {path: protocol.PathPipelines, body: plBody, at: p1},
		"POST " + protocol.PathPipelines + "/dry-run":                {path: protocol.PathPipelines + "/dry-run", body: plBody, at: p1},
		"GET " + protocol.PathPipelines:                              {path: protocol.PathPipelines},
		"GET " + protocol.PathPipelines + "/{name}":                  {path: plP, at: p1, ensure: ensurePipeline},
		"DELETE " + protocol.PathPipelines + "/{name}":               {path: plP, at: p1, ensure: ensurePipeline},
		"POST " + protocol.PathPipelines + "/{name}/runs":            {path: protocol.PathPipelines + "/pl/runs?org=o1&project=p1", body: `{}`, at: p1, ensure: ensurePipeline},
		"POST " + protocol.PathPipelines + "/{name}/webhook":         {path: protocol.PathPipelines + "/pl/webhook?org=o1&project=p1", body: `{"rotate":true}`, at: p1, ensure: ensurePipeline},
		"DELETE " + protocol.PathPipelines + "/{name}/webhook":       {path: protocol.PathPipelines + "/pl/webhook?org=o1&project=p1", at: p1, ensure: ensurePipeline},
		"GET " + protocol.PathRuns:                                   {path: protocol.PathRuns},
		"GET " + protocol.PathRuns + "/{id}":                         {path: runP, at: p1},
		"POST " + protocol.PathRuns + "/{id}/cancel":                 {path: runP + "/cancel", at: p1},
		"POST " + protocol.PathRuns + "/{id}/rerun":                  {path: runP + "/rerun", body: `{}`, at: p1},
	}

	// A user per built-in role and binding scope: the account, the
	// resources' orgs and projects, and their siblings.
	type principal struct {
		role string
		at   access.Scope
		key  string
	}
	var principals []principal
	for _, r := range access.Builtins() {
		for _, s := range []access.Scope{access.Account, o1, o2, p1, p2} {
			name := fmt.Sprintf("%s-%s", r.Name, strings.ReplaceAll(s.Key(), "/", "-"))
			principals = append(principals, principal{role: r.Name, at: s, key: tm.userKey(t, name, r.Name, s)})
		}
	}

	for _, rt := range tm.m.routes() {
		if rt.Access() != api.AccessAPIKey {
			continue
		}
		key := rt.Method + " " + rt.Pattern
		fx, ok := fixtures[key]
		if !ok {
			t.Errorf("route %s has no fixture in TestEveryRouteEnforcesItsRule: add one (a request, the scope of its resource)", key)
			continue
		}
		for _, p := range principals {
			role, _ := access.Builtin(p.role)
			var want bool
			switch {
			case rt.Rule.Self || rt.Rule.List:
				want = true
			case rt.Rule.Perm == access.DelegateView:
				want = true
			case rt.Rule.Scope.Resolve == nil: // anywhere
				want = role.Has(rt.Rule.Perm)
			default:
				want = role.Has(rt.Rule.Perm) && p.at.Covers(fx.at)
			}
			if fx.ensure != nil {
				fx.ensure()
			}
			name := fmt.Sprintf("%s-%s", p.role, strings.ReplaceAll(p.at.Key(), "/", "-"))
			path, body := fx.path, fx.body
			if strings.Contains(path, "%s") {
				path = fmt.Sprintf(path, name)
			}
			if strings.Contains(body, "%s") {
				body = fmt.Sprintf(body, name)
			}
			status, answer := tm.api(t, p.key, rt.Method, path, body)
			if got := status != http.StatusForbidden; got != want {
				t.Errorf("%s as %s bound at %s (resource at %s): got %d %s; want allowed=%v",
					key, p.role, p.at, fx.at, status, strings.TrimSpace(answer), want)
			}
			if status == http.StatusUnauthorized || status >= 500 {
				t.Errorf("%s as %s at %s: %d %s", key, p.role, p.at, status, answer)
			}
		}
	}
}

// TestEveryAdminRouteHasARule: an admin route without a permission (or
// self) would be open to every signed-in principal.
func TestEveryAdminRouteHasARule(t *testing.T) {
	m := &Manager{metrics: &managerMetrics{}}
	for _, rt := range m.routes() {
		if rt.Access() != api.AccessAPIKey {
			continue
		}
		rl := rt.Rule
		if !rl.Self && (rl.Perm == "" || (!rl.List && rl.Scope.Name == "")) {
			t.Errorf("%s %s has no rule: give it a permission and a scope source in routes()", rt.Method, rt.Pattern)
		}
	}
}

// selfRoutes are the only admin routes open to every signed-in principal
// (each limits itself to the caller's own objects).
var selfRoutes = map[string]bool{
	"GET " + protocol.PathWhoAmI:                      true,
	"POST " + protocol.PathAPIKeys:                    true,
	"GET " + protocol.PathAPIKeys:                     true,
	"POST " + protocol.PathAPIKeys + "/{name}/revoke": true,
	"DELETE " + protocol.PathSessions:                 true,
	"POST " + protocol.PathSignInLinks:                true,
}

func TestOnlyOwnObjectRoutesAreSelf(t *testing.T) {
	m := &Manager{metrics: &managerMetrics{}}
	for _, rt := range m.routes() {
		if key := rt.Method + " " + rt.Pattern; rt.Rule.Self != selfRoutes[key] {
			t.Errorf("%s: self is %v; only %v may be", key, rt.Rule.Self, selfRoutes)
		}
	}
}

func TestAccessScenarios(t *testing.T) {
	tm := startTestManager(t, Config{})
	admin := tm.admin.APIKey
	tm.mustAPI(t, admin, "POST", protocol.PathOrgs, `{"name":"o1"}`, 201)
	for _, p := range []string{"p1", "p2"} {
		tm.mustAPI(t, admin, "POST", protocol.PathOrgs+"/o1/projects", fmt.Sprintf(`{"name":%q}`, p), 201)
		tm.mustAPI(t, admin, "POST", protocol.PathTasks, fmt.Sprintf(`{"type":"shell","shell":{"script":"true"},"org":"o1","project":%q}`, p), 201)
	}
	tm.mustAPI(t, admin, "POST", protocol.PathConnectors, `{"name":"conn","url":"http://127.0.0.1:1"}`, 201)
	tm.mustAPI(t, admin, "POST", protocol.PathRoles, `{"name":"runner","permissions":["task:run","task:view"]}`, 201)
	p1 := access.Scope{Org: "o1", Project: "p1"}
	viewer := tm.userKey(t, "vera", access.RoleViewer, p1)
	runner := tm.userKey(t, "rune", "runner", p1)
	member := tm.userKey(t, "pam", access.RoleProjectAdmin, p1)
	tm.mustAPI(t, admin, "POST", protocol.PathAPIKeys, `{"name":"spare","owner":"pam"}`, 201)

	t.Run("listings are filtered", func(t *testing.T) {
		var tl protocol.TaskList
		_ = json.Unmarshal([]byte(tm.mustAPI(t, viewer, "GET", protocol.PathTasks, "", 200)), &tl)
		if len(tl.Tasks) != 1 || tl.Tasks[0].Project != "p1" {
			t.Errorf("a viewer of p1 lists %+v, want p1's one task", tl.Tasks)
		}
		var kl protocol.APIKeyList
		_ = json.Unmarshal([]byte(tm.mustAPI(t, viewer, "GET", protocol.PathAPIKeys, "", 200)), &kl)
		if len(kl.APIKeys) != 1 || kl.APIKeys[0].Owner != "vera" {
			t.Errorf("vera lists keys %+v, want her own", kl.APIKeys)
		}
	})
	t.Run("others' keys need user:manage", func(t *testing.T) {
		if st, b := tm.api(t, viewer, "POST", protocol.PathAPIKeys, `{"name":"x","owner":"pam"}`); st != 403 {
			t.Errorf("vera creates a key for pam: %d %s", st, b)
		}
		if st, b := tm.api(t, viewer, "POST", protocol.PathAPIKeys+"/spare/revoke", ""); st != 403 {
			t.Errorf("vera revokes pam's key: %d %s", st, b)
		}
	})
	t.Run("a task that uses a connector needs connector access", func(t *testing.T) {
		body := `{"type":"shell","shell":{"script":"true"},"org":"o1","project":"p1","connector":"conn"}`
		st, b := tm.api(t, runner, "POST", protocol.PathTasks, body)
		if st != 403 || !strings.Contains(b, "connector:access") || !strings.Contains(b, `connector \"conn\"`) || !strings.Contains(b, "project o1/p1") {
			t.Errorf("runner without connector access: %d %s", st, b)
		}
		tm.mustAPI(t, member, "POST", protocol.PathTasks, body, 201)
		if st, b := tm.api(t, member, "POST", protocol.PathTasks, strings.Replace(body, "p1", "p2", 1)); st != 403 || !strings.Contains(b, "task:run") {
			t.Errorf("project member runs in another project: %d %s", st, b)
		}
	})
	t.Run("a delegate admin without secret access cannot run a task that uses a secret", func(t *testing.T) {
		tm.mustAPI(t, admin, "POST", protocol.PathSecrets, `{"name":"DEPLOY_KEY","org":"o1","value":"org-value"}`, 201)
		tm.mustAPI(t, admin, "POST", protocol.PathSecrets, `{"name":"P2_ONLY","org":"o1","project":"p2","value":"p2-value"}`, 201)
		// A delegate admin who may also run tasks in p1 (the built-in role
		// alone runs none): a plain task runs, one that uses a secret not.
		dela := tm.userKey(t, "dela", access.RoleDelegateAdmin, p1)
		tm.mustAPI(t, admin, "POST", protocol.PathBindings, `{"role":"runner","subject_kind":"user","subject":"dela","org":"o1","project":"p1"}`, 201)
		tm.mustAPI(t, dela, "POST", protocol.PathTasks, `{"type":"shell","shell":{"script":"true"},"org":"o1","project":"p1"}`, 201)
		uses := `{"type":"shell","shell":{"script":"deploy --key ${secrets.DEPLOY_KEY}"},"org":"o1","project":"p1"}`
		st, b := tm.api(t, dela, "POST", protocol.PathTasks, uses)
		if st != 403 || !strings.Contains(b, "secret:access") || !strings.Contains(b, `secret \"DEPLOY_KEY\"`) || !strings.Contains(b, "org o1") {
			t.Errorf("delegate admin without secret access: %d %s", st, b)
		}
		// In an env value, an HTTP header, a container's script or command
		// just the same.
		for _, body := range []string{
			`{"type":"shell","shell":{"script":"true"},"env":{"K":"${secrets.DEPLOY_KEY}"},"org":"o1","project":"p1"}`,
			`{"type":"http","http":{"url":"http://127.0.0.1:1/","headers":{"Authorization":"Bearer ${secrets.DEPLOY_KEY}"}},"org":"o1","project":"p1"}`,
			`{"type":"container","container":{"image":"img","script":"deploy --key ${secrets.DEPLOY_KEY}"},"org":"o1","project":"p1"}`,
			`{"type":"container","container":{"image":"img","command":["deploy","--key=${secrets.DEPLOY_KEY}"]},"org":"o1","project":"p1"}`,
			`{"type":"container","container":{"image":"img"},"secret_env":{"K":"${secrets.DEPLOY_KEY}"},"org":"o1","project":"p1"}`,
		} {
			if st, b := tm.api(t, dela, "POST", protocol.PathTasks, body); st != 403 || !strings.Contains(b, "secret:access") {
				t.Errorf("%s: %d %s", body, st, b)
			}
		}
		// secret:access bound at the secret's org lets the task run.
		tm.mustAPI(t, admin, "POST", protocol.PathRoles, `{"name":"secret-user","permissions":["secret:access"]}`, 201)
		tm.mustAPI(t, admin, "POST", protocol.PathBindings, `{"role":"secret-user","subject_kind":"user","subject":"dela","org":"o1"}`, 201)
		tm.mustAPI(t, dela, "POST", protocol.PathTasks, uses, 201)
		// Another project's secret is not the task's to use, and an unknown
		// name is refused with the scopes looked in.
		st, b = tm.api(t, dela, "POST", protocol.PathTasks, `{"type":"shell","shell":{"script":"echo ${secrets.P2_ONLY}"},"org":"o1","project":"p1"}`)
		if st != 400 || !strings.Contains(b, "unknown secret P2_ONLY") || !strings.Contains(b, "looked in project o1/p1, then org o1, then the account") {
			t.Errorf("a p1 task using p2's secret: %d %s", st, b)
		}
		st, b = tm.api(t, dela, "POST", protocol.PathTasks, `{"type":"shell","shell":{"script":"echo ${secrets.bad-name}"},"org":"o1","project":"p1"}`)
		if st != 400 || !strings.Contains(b, "script: malformed secret reference") {
			t.Errorf("malformed reference: %d %s", st, b)
		}
		// A viewer lists the names at the scopes it views; no answer
		// carries a value.
		tm.mustAPI(t, member, "POST", protocol.PathSecrets, `{"name":"P1_ONLY","org":"o1","project":"p1","value":"p1-value"}`, 201)
		list := tm.mustAPI(t, viewer, "GET", protocol.PathSecrets, "", 200)
		all := tm.mustAPI(t, admin, "GET", protocol.PathSecrets, "", 200)
		get := tm.mustAPI(t, member, "GET", protocol.PathSecrets+"/P1_ONLY?org=o1&project=p1", "", 200)
		for _, answer := range []string{list, all, get} {
			if strings.Contains(answer, "-value") || strings.Contains(answer, `"value"`) {
				t.Errorf("an answer carries a secret value: %s", answer)
			}
		}
		if !strings.Contains(list, "P1_ONLY") || strings.Contains(list, "P2_ONLY") || strings.Contains(list, "DEPLOY_KEY") {
			t.Errorf("a viewer of p1 lists %s; want p1's P1_ONLY alone", list)
		}
		if !strings.Contains(all, "P2_ONLY") || !strings.Contains(all, "DEPLOY_KEY") {
			t.Errorf("the admin lists %s", all)
		}
		if st, b := tm.api(t, member, "GET", protocol.PathSecrets+"/DEPLOY_KEY?org=o1", ""); st != 403 || !strings.Contains(b, "secret:view") {
			t.Errorf("a project admin reads the org's secret's metadata: %d %s", st, b)
		}
	})
	t.Run("a disabled user is refused at once", func(t *testing.T) {
		tm.mustAPI(t, member, "GET", protocol.PathWhoAmI, "", 200)
		tm.mustAPI(t, admin, "PATCH", protocol.PathUsers+"/pam", `{"disabled":true}`, 200)
		if st, b := tm.api(t, member, "GET", protocol.PathWhoAmI, ""); st != 401 || !strings.Contains(b, "disabled") {
			t.Errorf("disabled user: %d %s", st, b)
		}
		tm.mustAPI(t, admin, "PATCH", protocol.PathUsers+"/pam", `{"disabled":false}`, 200)
		tm.mustAPI(t, member, "GET", protocol.PathWhoAmI, "", 200)
	})
	t.Run("sessions", func(t *testing.T) {
		tm.mustAPI(t, admin, "PATCH", protocol.PathUsers+"/vera", `{"password":"correct horse"}`, 200)
		var s protocol.Session
		_ = json.Unmarshal([]byte(tm.mustAPI(t, "", "POST", protocol.PathSessions, `{"user":"vera","password":"correct horse"}`, 201)), &s)
		var who protocol.WhoAmI
		_ = json.Unmarshal([]byte(tm.mustAPI(t, s.Token, "GET", protocol.PathWhoAmI, "", 200)), &who)
		if who.Principal != "vera" || !who.Session || len(who.Bindings) != 1 || who.Bindings[0].Role != access.RoleViewer {
			t.Errorf("whoami with a session: %+v", who)
		}
		// A session creates a key for its user (legate login).
		tm.mustAPI(t, s.Token, "POST", protocol.PathAPIKeys, `{"name":"login"}`, 201)
		tm.mustAPI(t, s.Token, "DELETE", protocol.PathSessions, "", 204)
		if st, b := tm.api(t, s.Token, "GET", protocol.PathWhoAmI, ""); st != 401 {
			t.Errorf("revoked session: %d %s", st, b)
		}
		for i := range signInFailures {
			if st, b := tm.api(t, "", "POST", protocol.PathSessions, `{"user":"vera","password":"wrong horse"}`); st != 401 {
				t.Fatalf("wrong password %d: %d %s", i, st, b)
			}
		}
		if st, b := tm.api(t, "", "POST", protocol.PathSessions, `{"user":"vera","password":"correct horse"}`); st != 429 || !strings.Contains(b, "rate_limited") {
			t.Errorf("after %d failures: %d %s", signInFailures, st, b)
		}
	})
}

// TestDisableReachesTheOtherManager: two managers on one PostgreSQL
// database, with caches that would keep a policy for an hour: a user
// disabled (or unbound) through one is refused by the other at once, by
// broadcast.
func TestDisableReachesTheOtherManager(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	cfg := Config{APIKeyCacheTTL: time.Hour}
	tms := startTestManagers(t, dsn, cfg, cfg)
	a, b := tms[0], tms[1]
	a.mustAPI(t, a.admin.APIKey, "POST", protocol.PathOrgs, `{"name":"o1"}`, 201)
	a.mustAPI(t, a.admin.APIKey, "POST", protocol.PathTokens, `{"name":"t1","org":"o1"}`, 201)
	key := a.userKey(t, "dana", access.RoleViewer, access.Scope{Org: "o1"})
	b.mustAPI(t, key, "GET", protocol.PathTokens, "", 200) // B caches dana's policy
	eventually(t, 10*time.Second, "manager B listening", func() bool { return b.m.bus.Listening() })
	a.mustAPI(t, a.admin.APIKey, "PATCH", protocol.PathUsers+"/dana", `{"disabled":true}`, 200)
	eventually(t, 10*time.Second, "manager B refusing the disabled user", func() bool {
		st, _ := b.api(t, key, "GET", protocol.PathWhoAmI, "")
		return st == http.StatusUnauthorized
	})
	a.mustAPI(t, a.admin.APIKey, "PATCH", protocol.PathUsers+"/dana", `{"disabled":false}`, 200)
	eventually(t, 10*time.Second, "manager B accepting the enabled user", func() bool {
		st, _ := b.api(t, key, "GET", protocol.PathWhoAmI, "")
		return st == http.StatusOK
	})
	// An unbinding too: B stops showing dana o1's token.
	if got := b.mustAPI(t, key, "GET", protocol.PathTokens, "", 200); !strings.Contains(got, `"t1"`) {
		t.Fatalf("dana's tokens on B: %s", got)
	}
	a.mustAPI(t, a.admin.APIKey, "DELETE", protocol.PathBindings+"?role=viewer&subject_kind=user&subject=dana&org=o1", "", 204)
	eventually(t, 10*time.Second, "manager B applying the unbinding", func() bool {
		return !strings.Contains(b.mustAPI(t, key, "GET", protocol.PathTokens, "", 200), `"t1"`)
	})
}

// A caller who may view some tasks only gets full pages of them: the
// limit counts the tasks it may see, not those the store returned before
// the filter (newer tasks of another project used to fill the page and
// leave it empty).
func TestTaskListPagesCountVisibleTasks(t *testing.T) {
	tm := startTestManager(t, Config{})
	admin := tm.admin.APIKey
	tm.mustAPI(t, admin, "POST", protocol.PathOrgs, `{"name":"o1"}`, 201)
	for _, p := range []string{"p1", "p2"} {
		tm.mustAPI(t, admin, "POST", protocol.PathOrgs+"/o1/projects", fmt.Sprintf(`{"name":%q}`, p), 201)
	}
	submit := func(project string, n int) (ids []string) {
		for range n {
			var tk protocol.Task
			b := tm.mustAPI(t, admin, "POST", protocol.PathTasks, fmt.Sprintf(`{"type":"shell","shell":{"script":"true"},"org":"o1","project":%q}`, project), 201)
			if err := json.Unmarshal([]byte(b), &tk); err != nil {
				t.Fatal(err)
			}
			ids = append([]string{tk.ID}, ids...) // newest first
		}
		return ids
	}
	mine := submit("p1", 3)
	submit("p2", 5) // newer, and not the viewer's
	viewer := tm.userKey(t, "vic", access.RoleViewer, access.Scope{Org: "o1", Project: "p1"})
	list := func(key, query string) []string {
		var tl protocol.TaskList
		if err := json.Unmarshal([]byte(tm.mustAPI(t, key, "GET", protocol.PathTasks+query, "", 200)), &tl); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, tk := range tl.Tasks {
			ids = append(ids, tk.ID)
		}
		return ids
	}
	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"?limit=2", mine[:2]},
		{"?limit=3", mine},
		{"?limit=10", mine},
		{"", mine},
		{"?limit=2&status=queued", mine[:2]},
	} {
		if diff := cmp.Diff(tt.want, list(viewer, tt.query)); diff != "" {
			t.Errorf("viewer of o1/p1 lists %s (-want +got):\n%s", tt.query, diff)
		}
	}
	if got := list(admin, "?limit=2"); len(got) != 2 || slices.Contains(mine, got[0]) {
		t.Errorf("the admin's newest 2 tasks: %v, want 2 of p2", got)
	}
	nobody := tm.userKey(t, "nobody", "", access.Account)
	if got := list(nobody, "?limit=5"); len(got) != 0 {
		t.Errorf("a user without bindings lists %v", got)
	}
}

// readEnvFile reads the KEY=VALUE lines of an admin.env.
func readEnvFile(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			out[k] = v
		}
	}
	return out, nil
}

// The user admin disabled and stripped of its role by another account
// admin stays so across a manager start (Bootstrap does not undo it, and
// AdminDisabled lets the start warn); ResetAdmin, which legate manager
// reset-admin runs on the store, gives it back: enabled, account-admin
// again, a working key in admin.env.
func TestResetAdminRestoresTheFirstAdministrator(t *testing.T) {
	tm := startTestManager(t, Config{APIKeyCacheTTL: 50 * time.Millisecond})
	ctx := context.Background()
	first := tm.admin
	dir := filepath.Dir(first.EnvFile)
	root := tm.userKey(t, "root", access.RoleAccountAdmin, access.Account)
	tm.mustAPI(t, root, "PATCH", protocol.PathUsers+"/admin", `{"disabled":true}`, 200)
	tm.mustAPI(t, root, "DELETE", protocol.PathBindings+"?role=account-admin&subject_kind=user&subject=admin", "", 204)
	if st, b := tm.api(t, first.APIKey, "GET", protocol.PathWhoAmI, ""); st != 401 || !strings.Contains(b, "user admin is disabled") {
		t.Fatalf("the disabled admin's key: %d %s", st, b)
	}
	works := func(key string) {
		t.Helper()
		eventually(t, 10*time.Second, "the admin's key accepted as account admin", func() bool {
			st, _ := tm.api(t, key, "GET", protocol.PathUsers+"/root", "")
			return st == 200
		})
	}
	resetAdmin := func(url string, want ...string) identity.Admin {
		t.Helper()
		a, did, err := identity.ResetAdmin(ctx, tm.st, dir, url, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, did); diff != "" {
			t.Errorf("ResetAdmin did (-want +got):\n%s", diff)
		}
		env, err := readEnvFile(first.EnvFile)
		if err != nil || env["LEGATE_API_KEY"] != a.APIKey || env["LEGATE_ACCOUNT_ID"] != first.AccountID {
			t.Errorf("admin.env after ResetAdmin: %v %v; want its key %s", env, err, a.KeyName)
		}
		if fi, err := os.Stat(first.EnvFile); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("admin.env mode: %v %v", fi, err)
		}
		return a
	}

	// A start keeps admin disabled, with the same key in admin.env.
	again, err := identity.Bootstrap(ctx, tm.st, dir, tm.url, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if off, err := identity.AdminDisabled(ctx, tm.st, first.AccountID); !off || err != nil || again.APIKey != first.APIKey {
		t.Errorf("after a start: admin disabled %v (%v), same key %v; want it left disabled with its key", off, err, again.APIKey == first.APIKey)
	}
	if st, _ := tm.api(t, first.APIKey, "GET", protocol.PathWhoAmI, ""); st != 401 {
		t.Errorf("a start re-enabled the admin: whoami %d", st)
	}

	// The key in admin.env works again, as account admin; LEGATE_URL kept.
	a := resetAdmin("", "enabled the user admin", "bound account-admin to the user admin at account scope",
		`the key "admin" in `+first.EnvFile+" works again")
	if a.APIKey != first.APIKey || a.URL != tm.url {
		t.Errorf("ResetAdmin wrote key %s and URL %q; want the first key and %q", a.KeyName, a.URL, tm.url)
	}
	if off, _ := identity.AdminDisabled(ctx, tm.st, first.AccountID); off {
		t.Error("admin still disabled")
	}
	works(first.APIKey)

	// Nothing to restore: it says the key works; a URL given is written.
	if a = resetAdmin("http://example.invalid:1", `the key "admin" in `+first.EnvFile+" works again"); a.URL != "http://example.invalid:1" {
		t.Errorf("URL written: %q", a.URL)
	}

	// admin's key revoked: a new one.
	tm.mustAPI(t, root, "POST", protocol.PathAPIKeys+"/admin/revoke", "", 200)
	a = resetAdmin("", `wrote the new API key "admin-2" of the user admin to `+first.EnvFile+
		` (the API key "admin" in `+first.EnvFile+" was revoked)")
	works(a.APIKey)

	// admin deleted (its keys revoked with it): created again, new key.
	tm.mustAPI(t, root, "DELETE", protocol.PathUsers+"/admin", "", 204)
	a = resetAdmin("", "created the user admin, account-admin at account scope (it had been deleted)",
		`wrote the new API key "admin-3" of the user admin to `+first.EnvFile+` (the API key "admin-2" in `+first.EnvFile+" was revoked)")
	works(a.APIKey)

	// A database without an account says what to do.
	empty, err := store.Open(ctx, filepath.Join(t.TempDir(), "legate.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer empty.Close()
	if _, _, err := identity.ResetAdmin(ctx, empty, t.TempDir(), "", time.Now()); err == nil || !strings.Contains(err.Error(), "start a manager") {
		t.Errorf("ResetAdmin on an empty database: %v", err)
	}
}

// Connectors have no scope of their own: a task at any scope may use one
// (with connector:access there). So whoever may view connectors at some
// scope — a project member — sees them all and each of them; a role
// without connector:view anywhere sees none.
func TestProjectMemberSeesConnectors(t *testing.T) {
	tm := startTestManager(t, Config{})
	admin := tm.admin.APIKey
	tm.mustAPI(t, admin, "POST", protocol.PathOrgs, `{"name":"o1"}`, 201)
	tm.mustAPI(t, admin, "POST", protocol.PathOrgs+"/o1/projects", `{"name":"p1"}`, 201)
	tm.mustAPI(t, admin, "POST", protocol.PathConnectors, `{"name":"github","url":"http://127.0.0.1:1"}`, 201)
	tm.mustAPI(t, admin, "POST", protocol.PathRoles, `{"name":"runner","permissions":["task:run","task:view"]}`, 201)
	p1 := access.Scope{Org: "o1", Project: "p1"}
	member := tm.userKey(t, "pam", access.RoleProjectAdmin, p1)
	viewer := tm.userKey(t, "vera", access.RoleViewer, access.Scope{Org: "o1"})
	runner := tm.userKey(t, "rune", "runner", p1)
	names := func(key string) []string {
		var l protocol.ConnectorList
		if err := json.Unmarshal([]byte(tm.mustAPI(t, key, "GET", protocol.PathConnectors, "", 200)), &l); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range l.Connectors {
			out = append(out, c.Name)
		}
		return out
	}
	for _, tt := range []struct {
		who, key string
		sees     bool
	}{{"a project admin of o1/p1", member, true}, {"a viewer of o1", viewer, true}, {"a runner without connector:view", runner, false}} {
		var want []string
		if tt.sees {
			want = []string{"github"}
		}
		if diff := cmp.Diff(want, names(tt.key)); diff != "" {
			t.Errorf("%s lists connectors (-want +got):\n%s", tt.who, diff)
		}
		st, b := tm.api(t, tt.key, "GET", protocol.PathConnectors+"/github", "")
		if tt.sees && st != 200 {
			t.Errorf("%s gets the connector: %d %s", tt.who, st, b)
		}
		if !tt.sees && (st != 403 || !strings.Contains(b, "connector:view")) {
			t.Errorf("%s gets the connector: %d %s; want 403 naming connector:view", tt.who, st, b)
		}
	}
	// What the member sees, the member may use in its project, and only there.
	tm.mustAPI(t, member, "POST", protocol.PathTasks, `{"type":"shell","shell":{"script":"true"},"org":"o1","project":"p1","connector":"github"}`, 201)
	// Changing connectors stays an account matter.
	if st, b := tm.api(t, member, "DELETE", protocol.PathConnectors+"/github", ""); st != 403 || !strings.Contains(b, "connector:delete") {
		t.Errorf("the member deletes the connector: %d %s", st, b)
	}
}

// TestTasksRecordWhoSubmittedThem: a task keeps who submitted it (the
// task list is the record of who ran what; the audit log does not repeat
// it), whatever key or session was used.
func TestTasksRecordWhoSubmittedThem(t *testing.T) {
	tm := startTestManager(t, Config{})
	key := tm.userKey(t, "carol", access.RoleAccountAdmin, access.Account)
	for _, tc := range []struct{ key, want string }{
		{tm.admin.APIKey, "user admin"},
		{key, "user carol"},
	} {
		var task protocol.Task
		if err := json.Unmarshal([]byte(tm.mustAPI(t, tc.key, "POST", protocol.PathTasks, `{"type":"shell","shell":{"script":"true"}}`, 201)), &task); err != nil {
			t.Fatal(err)
		}
		if task.CreatedBy != tc.want {
			t.Errorf("submit answer: created_by %q, want %q", task.CreatedBy, tc.want)
		}
		var got protocol.Task
		if err := json.Unmarshal([]byte(tm.mustAPI(t, tm.admin.APIKey, "GET", protocol.PathTasks+"/"+task.ID, "", 200)), &got); err != nil {
			t.Fatal(err)
		}
		if got.CreatedBy != tc.want {
			t.Errorf("task get: created_by %q, want %q", got.CreatedBy, tc.want)
		}
	}
}
