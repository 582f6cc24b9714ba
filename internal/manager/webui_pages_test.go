package manager

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/protocol"
)

// Tests of the web UI's pipelines, runs, deployments and settings pages
// against a real manager (see webui_test.go for the browser helper).

// openEvents opens an event stream of the UI as the browser.
func (b *browser) openEvents(ctx context.Context, path string) *bufio.Reader {
	b.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", b.tm.url+path, nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	b.t.Cleanup(func() { resp.Body.Close() })
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		b.t.Fatalf("event stream %s: %d %q", path, resp.StatusCode, ct)
	}
	return bufio.NewReader(resp.Body)
}

// waitNamed reads events until one called name satisfies ok; it returns
// its data.
func waitNamed(t *testing.T, r *bufio.Reader, name string, ok func(string) bool) string {
	t.Helper()
	for {
		n, data := readEvent(t, r)
		if n == name && ok(data) {
			return data
		}
		if n == "signedout" {
			t.Fatal("signed out")
		}
	}
}

func mustContain(t *testing.T, what, page string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(page, w) {
			t.Fatalf("%s lacks %q:\n%s", what, w, page)
		}
	}
}

func TestUIPipelineRunPageIsLiveAndDeploymentsShowIt(t *testing.T) {
	f := newRunFixture(t, Config{DeploymentsPerHour: 5})
	tm := f.tm
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	run := f.start(t, map[string]string{"version": "2.7"})
	compile := f.stepTask(t, run.ID, "build", "compile")

	b := newBrowserSignedIn(t, tm)
	_, page := b.get("/delegates")
	mustContain(t, "the admin's navigation", page, `href="/pipelines"`, `href="/runs"`, `href="/deployments"`, `href="/settings"`)
	_, page = b.get("/pipelines")
	mustContain(t, "the pipelines page", page, `href="/pipelines/ship"`, `data-pipeline="ship"`)
	resp, page := b.get("/pipelines/ship")
	if resp.StatusCode != 200 {
		t.Fatalf("pipeline page: %d\n%s", resp.StatusCode, page)
	}
	mustContain(t, "the pipeline page", page, "delegateSelectors: [builder]", `href="/runs/`+run.ID+`"`)
	_, page = b.get("/runs?status=running")
	mustContain(t, "the runs page", page, `data-run="`+run.ID+`"`)
	_, page = b.get("/runs?status=succeeded")
	if strings.Contains(page, run.ID) {
		t.Errorf("the succeeded runs list a running one:\n%s", page)
	}
	_, page = b.get("/runs/" + run.ID)
	mustContain(t, "the run page", page, `data-step="compile" data-status="running"`, `href="/tasks/`+compile+`"`,
		`id="run-cancel-form"`, `data-stream="/tasks/`+compile+`/output"`, "version=2.7")

	// The run page's stream follows the run as the manager advances it.
	ev := b.openEvents(ctx, "/runs/"+run.ID+"/events")
	waitNamed(t, ev, "run", func(d string) bool { return strings.Contains(d, `data-step="compile" data-status="running"`) })
	f.finish(t, compile, protocol.StatusSucceeded, map[string]string{"artifact": "a.tgz"})
	waitNamed(t, ev, "run", func(d string) bool {
		return strings.Contains(d, `data-step="compile" data-status="succeeded"`) && strings.Contains(d, `data-step="push" data-status="running"`) &&
			strings.Contains(d, "d1 (h1)")
	})
	push := f.stepTask(t, run.ID, "deploy", "push")

	// The deployment shows while it runs, with the limits' usage.
	_, page = b.get("/deployments")
	mustContain(t, "the deployments page", page, "web", "prod", "<code>2.7</code>", `class="state s-running"`, "1 of 5 used", `href="/runs/`+run.ID+`"`)
	_, page = b.get("/deployments?environment=staging")
	if strings.Contains(page, "data-deployment=") {
		t.Errorf("a filter on another environment shows the deployment:\n%s", page)
	}

	f.finish(t, push, protocol.StatusSucceeded, nil)
	waitNamed(t, ev, "end", func(d string) bool { return d == protocol.RunSucceeded })
	_, page = b.get("/runs/" + run.ID)
	if strings.Contains(page, "run-cancel-form") || strings.Contains(page, "data-events=") {
		t.Errorf("an ended run offers a cancel or a live stream:\n%s", page)
	}
	_, page = b.get("/deployments")
	mustContain(t, "the deployments page after the run", page, `class="state s-succeeded"`)
}

func TestUIRunCancelAndAViewersForgedOne(t *testing.T) {
	f := newRunFixture(t, Config{})
	tm := f.tm
	run := f.start(t, nil)
	f.stepTask(t, run.ID, "build", "compile")

	viewer := tm.userKey(t, "vera", access.RoleViewer, access.Account)
	v := newBrowser(t, tm)
	v.signIn(viewer)
	_, page := v.get("/runs/" + run.ID)
	mustContain(t, "the viewer's run page", page, `data-step="compile"`)
	if strings.Contains(page, "run-cancel-form") {
		t.Fatalf("the viewer is offered a cancel:\n%s", page)
	}
	resp, page := v.do("POST", "/runs/"+run.ID+"/cancel", url.Values{"csrf": {v.csrf("/runs")}}, nil)
	if resp.StatusCode != 403 || !strings.Contains(page, "vera") {
		t.Fatalf("forged cancel: %d\n%s", resp.StatusCode, page)
	}
	// A POST without the CSRF token is refused before the API.
	a := newBrowserSignedIn(t, tm)
	if resp, _ := a.do("POST", "/runs/"+run.ID+"/cancel", url.Values{}, nil); resp.StatusCode != 403 {
		t.Fatalf("a cancel without CSRF: %d", resp.StatusCode)
	}
	if got, err := tm.client(t, tm.admin.APIKey).GetRun(context.Background(), run.ID); err != nil || got.Status != protocol.RunRunning || got.CancelRequested {
		t.Fatalf("after forged cancels the run is %+v, %v", got, err)
	}
	resp, _ = a.do("POST", "/runs/"+run.ID+"/cancel", url.Values{"csrf": {a.csrf("/runs")}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("cancel: %d", resp.StatusCode)
	}
	_, page = a.get(resp.Header.Get("Location"))
	mustContain(t, "the cancelled run's page", page, "Run cancelled", `data-status="cancelled"`)
}

func TestUISettingsPages(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	const secretValue = "hunter2-value-never-shown"
	if _, err := admin.CreateSecret(ctx, protocol.CreateSecretRequest{Name: "DB_PASS", Value: secretValue}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateConnector(ctx, protocol.CreateConnectorRequest{Name: "git", URL: "https://git.example.com", Selectors: []string{"net"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateConfiguration(ctx, protocol.CreateConfigurationRequest{Name: "tools", Script: "apt-get install -y jq", Selectors: []string{"net"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateToken(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	viewer := tm.userKey(t, "vera", access.RoleViewer, access.Account)

	b := newBrowserSignedIn(t, tm)
	_, page := b.get("/settings")
	for _, s := range []string{"tokens", "apikeys", "users", "roles", "bindings", "secrets", "connectors", "configurations", "audit"} {
		mustContain(t, "the admin's settings", page, `href="/settings/`+s+`"`)
	}
	pages := map[string][]string{
		"tokens":         {`data-token="old"`, `action="/settings/tokens/revoke"`, `name="name" value="old"`, `id="create-token"`},
		"apikeys":        {`data-apikey="`},
		"users":          {`data-user="vera"`, "viewer"},
		"roles":          {`data-role="viewer"`, "pipeline:view"},
		"bindings":       {"vera", "viewer"},
		"secrets":        {`data-secret="DB_PASS"`},
		"connectors":     {`data-connector="git"`, "https://git.example.com"},
		"configurations": {`data-configuration="tools"`, "apt-get install -y jq"},
		"audit":          {`data-action="secret.create"`, `data-action="token.create"`},
	}
	for s, wants := range pages {
		resp, page := b.get("/settings/" + s)
		if resp.StatusCode != 200 {
			t.Fatalf("/settings/%s: %d\n%s", s, resp.StatusCode, page)
		}
		mustContain(t, "/settings/"+s, page, wants...)
		if strings.Contains(page, secretValue) {
			t.Fatalf("/settings/%s shows the secret's value", s)
		}
	}
	// The audit log filtered by action and by actor.
	_, page = b.get("/settings/audit?action=secret")
	if !strings.Contains(page, `data-action="secret.create"`) || strings.Contains(page, `data-action="token.create"`) {
		t.Errorf("audit filtered by action secret:\n%s", page)
	}
	_, page = b.get("/settings/audit?actor=nobody")
	if strings.Contains(page, "data-action=") {
		t.Errorf("audit filtered by an actor who did nothing:\n%s", page)
	}

	// Create a token: its value shows once; revoke it.
	csrf := b.csrf("/settings/tokens")
	resp, page := b.do("POST", "/settings/tokens", url.Values{"csrf": {csrf}, "name": {"fresh"}}, nil)
	m := regexp.MustCompile(`id="new-token-value" tabindex="0">([^<]+)<`).FindStringSubmatch(page)
	if resp.StatusCode != 200 || m == nil {
		t.Fatalf("create a token: %d\n%s", resp.StatusCode, page)
	}
	_, page = b.get("/settings/tokens")
	if strings.Contains(page, m[1]) {
		t.Fatal("the token list shows a token's value")
	}
	// A revoke asks first; only the confirmation's form revokes.
	resp, page = b.do("POST", "/settings/tokens/revoke", url.Values{"csrf": {csrf}, "name": {"fresh"}}, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `id="confirm-form"`) || !strings.Contains(page, `name="confirm" value="yes"`) {
		t.Fatalf("revoke, the confirmation: %d\n%s", resp.StatusCode, page)
	}
	resp, _ = b.do("POST", "/settings/tokens/revoke", url.Values{"csrf": {csrf}, "name": {"fresh"}, "confirm": {"yes"}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke: %d", resp.StatusCode)
	}
	_, page = b.get(resp.Header.Get("Location"))
	mustContain(t, "the tokens after a revoke", page, `Token fresh revoked`)
	if strings.Contains(page, `name="name" value="fresh"`) {
		t.Error("a revoked token is offered a revoke")
	}

	// A viewer: no audit log, no actions; forged ones are refused.
	v := newBrowser(t, tm)
	v.signIn(viewer)
	_, page = v.get("/settings")
	if strings.Contains(page, `href="/settings/audit"`) || !strings.Contains(page, `href="/settings/secrets"`) {
		t.Errorf("the viewer's settings:\n%s", page)
	}
	if resp, _ := v.get("/settings/audit"); resp.StatusCode != 403 {
		t.Errorf("the viewer's audit log: %d", resp.StatusCode)
	}
	_, page = v.get("/settings/tokens")
	if strings.Contains(page, "/revoke") || strings.Contains(page, "create-token") {
		t.Errorf("the viewer is offered token actions:\n%s", page)
	}
	vcsrf := v.csrf("/settings")
	for path, form := range map[string]url.Values{
		"/settings/tokens/old/revoke": {"csrf": {vcsrf}, "confirm": {"yes"}},
		"/settings/tokens":            {"csrf": {vcsrf}, "name": {"forged"}},
	} {
		if resp, page := v.do("POST", path, form, nil); resp.StatusCode != 403 || !strings.Contains(page, "vera") {
			t.Errorf("forged %s: %d\n%s", path, resp.StatusCode, page)
		}
	}
	l, err := admin.ListTokens(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range l.Tokens {
		if tok.Name == "forged" || tok.Name == "old" && tok.Status != protocol.TokenActive {
			t.Errorf("after forged requests: %+v", tok)
		}
	}
	for _, s := range []string{"secrets", "configurations"} {
		if _, page := v.get("/settings/" + s); strings.Contains(page, secretValue) {
			t.Errorf("the viewer's /settings/%s shows the secret's value", s)
		}
	}
}

// perPageForTest is the UI's page size of settings lists, runs and the
// audit log.
const perPageForTest = 25

func TestUIPagination(t *testing.T) {
	f := newRunFixture(t, Config{})
	tm := f.tm
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	for i := range 30 {
		if _, err := admin.CreateToken(ctx, fmt.Sprintf("tok-%02d", i)); err != nil {
			t.Fatal(err)
		}
	}
	var runs []string
	for range perPageForTest + 2 {
		runs = append(runs, f.start(t, nil).ID)
	}
	b := newBrowserSignedIn(t, tm)
	rows := regexp.MustCompile(`data-token="`)
	_, page := b.get("/settings/tokens")
	if n := len(rows.FindAllString(page, -1)); n != perPageForTest || !strings.Contains(page, `href="/settings/tokens?p=2"`) {
		t.Fatalf("first page of 31 tokens: %d rows\n%s", n, page)
	}
	_, page = b.get("/settings/tokens?p=2")
	if n := len(rows.FindAllString(page, -1)); n != 31-perPageForTest || strings.Contains(page, "p=3") || !strings.Contains(page, `rel="prev"`) {
		t.Fatalf("second page of 31 tokens: %d rows\n%s", n, page)
	}
	// The audit log's pages follow the API's cursor.
	_, page = b.get("/settings/audit?action=token.create")
	if n := strings.Count(page, `data-action="token.create"`); n != perPageForTest {
		t.Fatalf("first audit page: %d events\n%s", n, page)
	}
	next := regexp.MustCompile(`href="(/settings/audit\?[^"]+)" rel="next"`).FindStringSubmatch(page)
	if next == nil {
		t.Fatalf("no next audit page:\n%s", page)
	}
	_, page = b.get(strings.ReplaceAll(next[1], "&amp;", "&"))
	if n := strings.Count(page, `data-action="token.create"`); n != 31-perPageForTest {
		t.Fatalf("second audit page: %d events\n%s", n, page)
	}
	// Runs, newest first, a page at a time by the API's cursor.
	runRows := regexp.MustCompile(`data-run="(r_[^"]+)"`)
	olderLink := regexp.MustCompile(`href="([^"]+)" rel="next">Older runs`)
	_, page = b.get("/runs")
	got := runRows.FindAllStringSubmatch(page, -1)
	older := olderLink.FindStringSubmatch(page)
	if len(got) != perPageForTest || got[0][1] != runs[len(runs)-1] || older == nil || strings.Contains(page, "Newest runs") {
		t.Fatalf("first page of runs: %d\n%s", len(got), page)
	}
	_, page = b.get(strings.ReplaceAll(older[1], "&amp;", "&"))
	got = runRows.FindAllStringSubmatch(page, -1)
	if len(got) != 2 || got[1][1] != runs[0] || olderLink.MatchString(page) || !strings.Contains(page, `href="/runs">Newest runs`) {
		t.Fatalf("second page of runs: %v\n%s", got, page)
	}
	_, page = b.get("/pipelines/ship")
	older = olderLink.FindStringSubmatch(page)
	if older == nil || !strings.HasPrefix(older[1], "/pipelines/ship?page=") {
		t.Fatalf("the pipeline's first page of runs has no link to older runs:\n%s", page)
	}
	_, page = b.get(strings.ReplaceAll(older[1], "&amp;", "&"))
	if got = runRows.FindAllStringSubmatch(page, -1); len(got) != 2 {
		t.Fatalf("second page of the pipeline's runs: %v", got)
	}
	// Filtered by status in the store: every run here is still running or
	// has ended, and the filter keeps only one kind.
	_, page = b.get("/runs?status=cancelled")
	if got = runRows.FindAllStringSubmatch(page, -1); len(got) != 0 {
		t.Fatalf("cancelled runs: %v", got)
	}
}
