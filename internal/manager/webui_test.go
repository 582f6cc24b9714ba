package manager

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/pgtest"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// Tests of the web UI (package webui) against a real manager on SQLite:
// the UI calls the API in-process, so these check that its pages and
// forms keep the API's rules, and its own defences (CSRF, cookies,
// headers, sign-in links).

// browser is an HTTP client with cookies that does not follow redirects.
type browser struct {
	t   *testing.T
	tm  *testManager
	hc  *http.Client
	url *url.URL
}

func newBrowser(t *testing.T, tm *testManager) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(tm.url)
	return &browser{t: t, tm: tm, url: u, hc: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// do makes a request as a browser on the UI's pages would: same-origin
// headers on a POST unless headers say otherwise.
func (b *browser) do(method, path string, form url.Values, headers map[string]string) (*http.Response, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.tm.url+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", b.tm.url)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	bs, _ := io.ReadAll(resp.Body)
	return resp, string(bs)
}

func (b *browser) get(path string) (*http.Response, string) { return b.do("GET", path, nil, nil) }

func (b *browser) cookie(name string) string {
	for _, c := range b.hc.Jar.Cookies(b.url) {
		if c.Name == name {
			return c.Value
		}
	}
	return ""
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// csrf returns the CSRF token of the page at path.
func (b *browser) csrf(path string) string {
	b.t.Helper()
	_, page := b.get(path)
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		b.t.Fatalf("no CSRF field on %s:\n%s", path, page)
	}
	return m[1]
}

// signInLink asks for a sign-in link with key and returns its path.
func signInLink(t *testing.T, tm *testManager, key string) string {
	t.Helper()
	var l protocol.SignInLink
	if err := json.Unmarshal([]byte(tm.mustAPI(t, key, "POST", protocol.PathSignInLinks, "", 201)), &l); err != nil {
		t.Fatal(err)
	}
	return l.Path
}

var linkTokenField = regexp.MustCompile(`name="token" value="([^"]+)"`)

// useLink opens a sign-in link's page and submits its form, as a person
// who clicks Sign in does; it returns the form's answer.
func (b *browser) useLink(link string) (*http.Response, string) {
	b.t.Helper()
	resp, page := b.get(link)
	csrf, token := csrfField.FindStringSubmatch(page), linkTokenField.FindStringSubmatch(page)
	if resp.StatusCode != 200 || csrf == nil || token == nil {
		b.t.Fatalf("the sign-in link's page: %d\n%s", resp.StatusCode, page)
	}
	return b.do("POST", protocol.PathUISignIn, url.Values{"csrf": {csrf[1]}, "token": {token[1]}}, nil)
}

// linkToken is the token of a sign-in link's path.
func linkToken(t *testing.T, link string) string {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil || u.Query().Get("token") == "" {
		t.Fatalf("sign-in link %q", link)
	}
	return u.Query().Get("token")
}

// signIn signs the browser in with a link of key's user.
func (b *browser) signIn(key string) {
	b.t.Helper()
	resp, page := b.useLink(signInLink(b.t, b.tm, key))
	if resp.StatusCode != http.StatusSeeOther || b.cookie("legate_session") == "" {
		b.t.Fatalf("sign in with a link: %d, cookie %q\n%s", resp.StatusCode, b.cookie("legate_session"), page)
	}
}

func TestUIHeadersAndCookies(t *testing.T) {
	tm := startTestManager(t, Config{})
	b := newBrowser(t, tm)
	resp, _ := b.get("/signin")
	want := map[string]string{
		"Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; object-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
		"X-Content-Type-Options":  "nosniff",
		"Referrer-Policy":         "no-referrer",
		"X-Frame-Options":         "DENY",
	}
	for k, v := range want {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
	link := signInLink(t, tm, tm.admin.APIKey)
	resp, _ = b.useLink(link)
	var session *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "legate_session" {
			session = c
		}
	}
	if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Secure {
		t.Fatalf("session cookie over plain HTTP: %+v", session)
	}
	if resp, _ := b.get("/delegates"); resp.Header.Get("Content-Security-Policy") != want["Content-Security-Policy"] {
		t.Errorf("signed-in page (%d) CSP: %q", resp.StatusCode, resp.Header.Get("Content-Security-Policy"))
	}
	// Static files too, and the API keeps its JSON 404.
	if resp, body := b.get("/static/ui.js"); resp.StatusCode != 200 || resp.Header.Get("Content-Security-Policy") == "" || !strings.Contains(body, "EventSource") {
		t.Errorf("ui.js: %d %q", resp.StatusCode, resp.Header)
	}
	if resp, body := b.get("/api/v1/nothing"); resp.StatusCode != 404 || !strings.Contains(body, `"not_found"`) {
		t.Errorf("an unknown API path: %d %s", resp.StatusCode, body)
	}
}

func TestUISignInLinkIsSingleUseAndExpires(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	tm := startTestManager(t, Config{Now: clock.Now, HeartbeatInterval: time.Hour})
	b := newBrowser(t, tm)
	link := signInLink(t, tm, tm.admin.APIKey)
	// Opening the link (as a link previewer does) does not use it.
	for range 2 {
		if resp, page := newBrowser(t, tm).get(link); resp.StatusCode != 200 || !strings.Contains(page, `id="use-link"`) {
			t.Fatalf("the link's page: %d\n%s", resp.StatusCode, page)
		}
	}
	// Its form without the page's CSRF token is refused, and does not use it either.
	if resp, page := newBrowser(t, tm).do("POST", protocol.PathUISignIn, url.Values{"token": {linkToken(t, link)}, "csrf": {"00"}}, nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("the link's form without its CSRF token: %d\n%s", resp.StatusCode, page)
	}
	if resp, page := b.useLink(link); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/delegates" {
		t.Fatalf("first use: %d %q\n%s", resp.StatusCode, resp.Header.Get("Location"), page)
	}
	if resp, page := b.get("/delegates"); resp.StatusCode != 200 || !strings.Contains(page, "Signed in as <strong>admin</strong>") {
		t.Fatalf("delegates after the link: %d\n%s", resp.StatusCode, page)
	}
	other := newBrowser(t, tm)
	if resp, page := other.useLink(link); resp.StatusCode != 401 || !strings.Contains(page, "used already or expired") || other.cookie("legate_session") != "" {
		t.Errorf("second use: %d, cookie %q\n%s", resp.StatusCode, other.cookie("legate_session"), page)
	}
	late := signInLink(t, tm, tm.admin.APIKey)
	clock.Add(signInLinkTTL)
	if resp, page := other.useLink(late); resp.StatusCode != 401 || !strings.Contains(page, "used already or expired") {
		t.Errorf("a link past its TTL: %d\n%s", resp.StatusCode, page)
	}
	// The first browser's session ends after sessionTTL.
	clock.Add(sessionTTL)
	resp, _ := b.get("/delegates")
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/signin") {
		t.Errorf("delegates after the session expired: %d, Location %q", resp.StatusCode, loc)
	}
	if resp, _ := b.do("GET", "/delegates/events", nil, map[string]string{"Accept": "text/event-stream"}); resp.StatusCode != 401 {
		t.Errorf("event stream after the session expired: %d", resp.StatusCode)
	}
}

func TestUIPasswordSignInAndOut(t *testing.T) {
	tm := startTestManager(t, Config{})
	tm.mustAPI(t, tm.admin.APIKey, "POST", protocol.PathUsers, `{"name":"vera","password":"correct horse battery"}`, 201)
	b := newBrowser(t, tm)
	csrf := b.csrf("/signin")
	form := url.Values{"user": {"vera"}, "password": {"wrong horse battery"}, "csrf": {csrf}, "next": {"/tasks"}}
	if resp, page := b.do("POST", "/signin", form, nil); resp.StatusCode != 401 || !strings.Contains(page, "wrong user name or password") {
		t.Errorf("wrong password: %d\n%s", resp.StatusCode, page)
	}
	form.Set("csrf", b.csrf("/signin"))
	form.Set("password", "correct horse battery")
	resp, page := b.do("POST", "/signin", form, nil)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/tasks" || b.cookie("legate_session") == "" {
		t.Fatalf("sign in: %d %q\n%s", resp.StatusCode, resp.Header.Get("Location"), page)
	}
	session := b.cookie("legate_session")
	// The sign-in form needs its own CSRF token.
	fresh := newBrowser(t, tm)
	if resp, _ := fresh.do("POST", "/signin", url.Values{"user": {"vera"}, "password": {"correct horse battery"}}, nil); resp.StatusCode != 403 || fresh.cookie("legate_session") != "" {
		t.Errorf("sign-in without the form's token: %d", resp.StatusCode)
	}
	// Sign out: the session is revoked on the server, not only forgotten.
	resp, _ = b.do("POST", "/signout", url.Values{"csrf": {b.csrf("/tasks")}}, nil)
	if resp.StatusCode != http.StatusSeeOther || b.cookie("legate_session") != "" {
		t.Errorf("sign out: %d, cookie %q", resp.StatusCode, b.cookie("legate_session"))
	}
	if st, body := tm.api(t, session, "GET", protocol.PathWhoAmI, ""); st != 401 {
		t.Errorf("the session after sign-out: %d %s", st, body)
	}
}

func TestUIFormsNeedTheSessionsCSRFToken(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	tok, err := admin.CreateScopedToken(ctx, protocol.CreateTokenRequest{Name: "t-a", RequireApproval: true})
	if err != nil {
		t.Fatal(err)
	}
	tm.registerFake(t, tm.admin.AccountID, tok.Value, "waiting", "host-w")
	b := newBrowser(t, tm)
	b.signIn(tm.admin.APIKey)
	if _, page := b.get("/delegates"); !strings.Contains(page, `action="/delegates/waiting/approve"`) {
		t.Fatalf("the admin sees no approve button:\n%s", page)
	}
	for _, tc := range []struct {
		what    string
		form    url.Values
		headers map[string]string
	}{
		{"no token", url.Values{}, nil},
		{"a wrong token", url.Values{"csrf": {strings.Repeat("0", 64)}}, nil},
		{"another session's token", url.Values{"csrf": {newBrowserSignedIn(t, tm).csrf("/delegates")}}, nil},
		{"a cross-site origin", url.Values{"csrf": {b.csrf("/delegates")}}, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}},
	} {
		resp, page := b.do("POST", "/delegates/waiting/approve", tc.form, tc.headers)
		if resp.StatusCode != 403 {
			t.Errorf("%s: %d\n%s", tc.what, resp.StatusCode, page)
		}
	}
	if got := tm.approvals(t)["host-w"]; got != protocol.ApprovalPending {
		t.Fatalf("after refused forms the delegate is %q", got)
	}
	resp, _ := b.do("POST", "/delegates/waiting/approve", url.Values{"csrf": {b.csrf("/delegates")}}, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("approve with the token: %d", resp.StatusCode)
	}
	if got := tm.approvals(t)["host-w"]; got != protocol.ApprovalApproved {
		t.Errorf("after approval the delegate is %q", got)
	}
}

func newBrowserSignedIn(t *testing.T, tm *testManager) *browser {
	t.Helper()
	b := newBrowser(t, tm)
	b.signIn(tm.admin.APIKey)
	return b
}

func TestUIViewerSeesNoActionsAndForgedOnesAreRefused(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	tok, err := admin.CreateScopedToken(ctx, protocol.CreateTokenRequest{Name: "t-a", RequireApproval: true})
	if err != nil {
		t.Fatal(err)
	}
	tm.registerFake(t, tm.admin.AccountID, tok.Value, "waiting", "host-w")
	task, err := admin.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "sleep 100"}, Selectors: []string{"nobody"}})
	if err != nil {
		t.Fatal(err)
	}
	viewer := tm.userKey(t, "vera", access.RoleViewer, access.Account)
	b := newBrowser(t, tm)
	b.signIn(viewer)
	_, page := b.get("/delegates")
	if !strings.Contains(page, "waiting") || !strings.Contains(page, "Pending approval") {
		t.Fatalf("the viewer does not see the delegate:\n%s", page)
	}
	for _, action := range []string{"approve", "reject", "delete"} {
		if strings.Contains(page, "/delegates/waiting/"+action) {
			t.Errorf("the viewer is offered %s", action)
		}
	}
	_, page = b.get("/tasks/" + task.ID)
	if !strings.Contains(page, task.ID) || strings.Contains(page, "/cancel") {
		t.Errorf("the viewer's task page (a cancel form is not for viewers):\n%s", page)
	}
	// Forged requests, with the viewer's valid CSRF token: the API refuses.
	csrf := b.csrf("/delegates")
	for _, path := range []string{"/delegates/waiting/approve", "/delegates/waiting/delete", "/tasks/" + task.ID + "/cancel"} {
		// confirm: the delete confirmation's field.
		resp, page := b.do("POST", path, url.Values{"csrf": {csrf}, "confirm": {"waiting"}}, nil)
		if resp.StatusCode != 403 || !strings.Contains(page, "vera") {
			t.Errorf("forged %s: %d\n%s", path, resp.StatusCode, page)
		}
	}
	if got := tm.approvals(t)["host-w"]; got != protocol.ApprovalPending {
		t.Errorf("after forged requests the delegate is %q", got)
	}
	if got, err := admin.GetTask(ctx, task.ID); err != nil || got.Status != protocol.StatusQueued {
		t.Errorf("after a forged cancel the task is %+v, %v", got.Status, err)
	}
}

// readEvent reads the next server-sent event: its name and data.
func readEvent(t *testing.T, r *bufio.Reader) (string, string) {
	t.Helper()
	var name string
	var data []string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("read the event stream: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "" && name != "":
			return name, strings.Join(data, "\n")
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		}
	}
}

func TestUIDelegatesUpdateLive(t *testing.T) {
	// Renders closer together than the liveness window: the delegate
	// shows connected before it shows gone.
	tm := startTestManager(t, Config{HeartbeatInterval: 200 * time.Millisecond, UIDelegateUpdateEvery: 10 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tok, err := tm.client(t, tm.admin.APIKey).CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowserSignedIn(t, tm)
	req, _ := http.NewRequestWithContext(ctx, "GET", tm.url+"/delegates/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := b.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("event stream: %d %q", resp.StatusCode, ct)
	}
	r := bufio.NewReader(resp.Body)
	if name, data := readEvent(t, r); name != "delegates" || !strings.Contains(data, "0 delegates") {
		t.Fatalf("first event %s: %s", name, data)
	}
	// A delegate registers: the list comes again with it, connected. It
	// heartbeats until the page showed it so (however slow the machine).
	dc, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "builder", "host-live", "linux")
	stop := keepHeartbeating(ctx, dc)
	waitEvent(t, r, func(data string) bool {
		return strings.Contains(data, `data-hostname="host-live"`) && strings.Contains(data, ">Connected<")
	})
	// It stops heartbeating: past the liveness window it is not connected,
	// without anyone asking.
	stop()
	waitEvent(t, r, func(data string) bool {
		return strings.Contains(data, `data-hostname="host-live"`) && strings.Contains(data, ">Not connected<")
	})
}

// keepHeartbeating heartbeats as the delegate of c every 50 ms, as a live
// delegate would, until the returned stop is called (it returns once the
// heartbeats stopped).
func keepHeartbeating(ctx context.Context, c *client.Client) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for seq := int64(1); ; seq++ {
			_, _ = c.Heartbeat(ctx, protocol.Heartbeat{Seq: seq, Capacity: -1})
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

// waitEvent reads delegate events until one satisfies ok.
func waitEvent(t *testing.T, r *bufio.Reader, ok func(string) bool) {
	t.Helper()
	for {
		name, data := readEvent(t, r)
		if name == "delegates" && ok(data) {
			return
		}
		if name == "signedout" {
			t.Fatal("signed out")
		}
	}
}

func TestUITaskPageExplainsAQueuedTask(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	task, err := admin.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "echo <b>hi</b>"}, Selectors: []string{"gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowserSignedIn(t, tm)
	_, page := b.get("/tasks?selector=gpu")
	if !strings.Contains(page, "/tasks/"+task.ID) || strings.Contains(page, "<b>hi</b>") || !strings.Contains(page, "&lt;b&gt;hi&lt;/b&gt;") {
		t.Errorf("tasks filtered by selector (the script escaped):\n%s", page)
	}
	if _, page := b.get("/tasks?selector=cpu"); strings.Contains(page, "/tasks/"+task.ID) {
		t.Errorf("a task that does not match the filter is listed")
	}
	_, page = b.get("/tasks/" + task.ID)
	// No delegate is known that could run it: the page says what becomes
	// of it, as legate task explain does.
	for _, want := range []string{"Why it waits", "explain-summary", "explain-outlook", "no known delegate can run this", `action="/tasks/` + task.ID + `/cancel"`, "Created"} {
		if !strings.Contains(page, want) {
			t.Errorf("task page lacks %q:\n%s", want, page)
		}
	}
	if resp, page := b.get("/tasks/nope"); resp.StatusCode != 404 || !strings.Contains(page, "nope") {
		t.Errorf("unknown task: %d\n%s", resp.StatusCode, page)
	}
}

func TestUINewDelegate(t *testing.T) {
	tm := startTestManager(t, Config{DelegateImage: "registry.example.com/legate:v1"})
	b := newBrowserSignedIn(t, tm)
	// The Kubernetes spec is a StatefulSet (one per delegate, its pods
	// the delegate's instances): the form must not call it a Deployment.
	if _, page := b.get("/delegates/new"); !strings.Contains(page, "a StatefulSet with its namespace") || strings.Contains(page, "a Deployment") {
		t.Errorf("the form's Kubernetes choice does not name the StatefulSet:\n%s", page)
	}
	csrf := b.csrf("/delegates/new")
	form := url.Values{"csrf": {csrf}, "kind": {"docker"}, "name": {"edge"}, "tags": {"arm64, lab"}, "manager_url": {"http://manager.example:7460"}}
	resp, page := b.do("POST", "/delegates/new", form, nil)
	if resp.StatusCode != 200 || !strings.Contains(page, `id="manifest"`) || !strings.Contains(page, "MANAGER_HOST_AND_PORT=http://manager.example:7460") ||
		!strings.Contains(page, "DELEGATE_TAGS=arm64,lab") || !strings.Contains(page, `data-events="/delegates/events?name=edge"`) {
		t.Fatalf("a docker spec: %d\n%s", resp.StatusCode, page)
	}
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("the page with a token may be cached: %q", resp.Header.Get("Cache-Control"))
	}
	var tl protocol.TokenList
	_ = json.Unmarshal([]byte(tm.mustAPI(t, tm.admin.APIKey, "GET", protocol.PathTokens, "", 200)), &tl)
	if len(tl.Tokens) != 1 || !strings.HasPrefix(tl.Tokens[0].Name, "edge-") {
		t.Fatalf("tokens after the spec: %+v", tl.Tokens)
	}
	// A spec the manager refuses (ECS needs a region) leaves no usable
	// token behind, and says why.
	form.Set("kind", "ecs")
	form.Set("csrf", b.csrf("/delegates/new"))
	resp, page = b.do("POST", "/delegates/new", form, nil)
	if resp.StatusCode != 400 || !strings.Contains(page, "region") || strings.Contains(page, `id="manifest"`) {
		t.Errorf("an ECS spec without a region: %d\n%s", resp.StatusCode, page)
	}
	_ = json.Unmarshal([]byte(tm.mustAPI(t, tm.admin.APIKey, "GET", protocol.PathTokens, "", 200)), &tl)
	active := 0
	for _, tok := range tl.Tokens {
		if tok.RevokedAt == nil {
			active++
		}
	}
	if active != 1 {
		t.Errorf("active tokens after a refused spec: %+v", tl.Tokens)
	}
	// A viewer gets no token.
	v := newBrowser(t, tm)
	v.signIn(tm.userKey(t, "vera", access.RoleViewer, access.Account))
	form.Set("kind", "docker")
	form.Set("csrf", v.csrf("/delegates/new"))
	if resp, page := v.do("POST", "/delegates/new", form, nil); resp.StatusCode != 403 || strings.Contains(page, `id="manifest"`) {
		t.Errorf("a viewer's new delegate: %d\n%s", resp.StatusCode, page)
	}
}

// TestUINewDelegateOptions: the New delegate page asks for the spec's
// options as legate manifest does: automatic upgrades by default (the
// watcher runs the delegate), self-managed, a size, root, and the ECS
// hostname; an unknown size is refused with the list.
func TestUINewDelegateOptions(t *testing.T) {
	tm := startTestManager(t, Config{DelegateImage: "registry.example.com/legate:v1.2.3"})
	b := newBrowserSignedIn(t, tm)
	if _, page := b.get("/delegates/new"); !strings.Contains(page, `<option value="auto" selected>`) || !strings.Contains(page, `<option value="large">`) ||
		!strings.Contains(page, `id="run_as_root"`) || !strings.Contains(page, `id="hostname"`) {
		t.Fatalf("the form lacks the options:\n%s", page)
	}
	for _, tc := range []struct {
		name      string
		form      url.Values
		status    int
		want, not []string
	}{
		{"default", url.Values{"kind": {"docker"}}, 200, []string{" watcher --dir /var/lib/legate\n"}, []string{"--user 0"}},
		{"self-managed, root, size", url.Values{"kind": {"docker"}, "upgrade": {"self-managed"}, "run_as_root": {"on"}, "size": {"small"}}, 200,
			[]string{"--user 0 \\", "--cpus 1 \\", "--memory 1024m \\", "DELEGATE_TASK_CAPACITY=4", " delegate\n"}, []string{"watcher"}},
		{"ecs hostname", url.Values{"kind": {"ecs"}, "region": {"eu-west-1"}, "hostname": {"ecs-host-1"}}, 200, []string{`&#34;hostname&#34;: &#34;ecs-host-1&#34;`}, nil},
		{"docker ignores the hostname", url.Values{"kind": {"docker"}, "hostname": {"h"}}, 200, []string{"watcher"}, []string{"DELEGATE_HOSTNAME"}},
		{"unknown size", url.Values{"kind": {"docker"}, "size": {"huge"}}, 400, []string{"size &#34;huge&#34;: use one of laptop, small, medium, large"}, []string{`id="manifest"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			form := tc.form
			form.Set("csrf", b.csrf("/delegates/new"))
			form.Set("name", "opt")
			form.Set("manager_url", "http://manager.example:7460")
			resp, page := b.do("POST", "/delegates/new", form, nil)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d:\n%s", resp.StatusCode, tc.status, page)
			}
			for _, w := range tc.want {
				if !strings.Contains(page, w) {
					t.Errorf("the page lacks %q:\n%s", w, page)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(page, n) {
					t.Errorf("the page has %q:\n%s", n, page)
				}
			}
		})
	}
}

// TestUITaskOutputStream: the task page's output stream carries the
// output as the API serves it, the head/tail cap's marker flagged, and
// ends with the task's final status.
func TestUITaskOutputStream(t *testing.T) {
	tm := startTestManager(t, Config{LogCap: store.LogCap{Head: 100, Tail: 100}})
	ctx := context.Background()
	a := tm.client(t, tm.admin.APIKey)
	tok, _ := a.CreateToken(ctx, "t")
	d, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "d", "h")
	task, _ := a.SubmitTask(ctx, protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "true"}})
	acq, err := d.Acquire(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowserSignedIn(t, tm)
	req, _ := http.NewRequestWithContext(ctx, "GET", tm.url+"/tasks/"+task.ID+"/output", nil)
	resp, err := b.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	// Output sent while the page follows arrives as it is sent.
	if err := d.SendLogs(ctx, task.ID, protocol.LogsRequest{Epoch: acq.Epoch, Chunks: []protocol.LogChunk{{Seq: 1, Data: "line 001 <b>\n"}}}); err != nil {
		t.Fatal(err)
	}
	// With its first output, the task's status and timeline (the page's
	// timeline follows without a reload).
	if name, data := readEvent(t, r); name != "task" || !strings.Contains(data, `"status":"running"`) || !strings.Contains(data, `{"label":"Acquired","at":"`) {
		t.Fatalf("first event %s: %s", name, data)
	}
	if name, data := readEvent(t, r); name != "output" || data != `{"data":"line 001 \u003cb\u003e\n"}` {
		t.Fatalf("second event %s: %s", name, data)
	}
	for i := 2; i <= 50; i++ {
		line := fmt.Sprintf("line %03d ----------\n", i)
		if err := d.SendLogs(ctx, task.ID, protocol.LogsRequest{Epoch: acq.Epoch, Chunks: []protocol.LogChunk{{Seq: int64(i), Data: line}}}); err != nil {
			t.Fatal(err)
		}
	}
	one := 1
	if _, err := d.Result(ctx, task.ID, protocol.ResultRequest{Epoch: acq.Epoch, Status: protocol.StatusFailed, ExitCode: &one, LastSeq: 50}); err != nil {
		t.Fatal(err)
	}
	// The live page sees every chunk as it came, the task's final state,
	// then the end.
	var state string
	for {
		name, data := readEvent(t, r)
		if name == "task" {
			state = data
		}
		if name == "end" {
			if !strings.Contains(state, `"status":"failed"`) || !strings.Contains(state, `{"label":"Finished","at":"`) {
				t.Errorf("the task's state before the end: %s", state)
			}
			if data != `{"status":"failed","exit_code":1,"error":""}` {
				t.Errorf("end event: %s", data)
			}
			break
		}
	}
	// A page opened afterwards gets what the manager kept: the head, the
	// cap's marker (flagged) and the tail.
	req, _ = http.NewRequestWithContext(ctx, "GET", tm.url+"/tasks/"+task.ID+"/output", nil)
	resp2, err := b.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	r = bufio.NewReader(resp2.Body)
	var markers int
	var text strings.Builder
	for {
		name, data := readEvent(t, r)
		if name == "output" {
			var c struct {
				Data   string
				Marker bool
			}
			_ = json.Unmarshal([]byte(data), &c)
			text.WriteString(c.Data)
			if c.Marker {
				if !strings.Contains(c.Data, "bytes of output omitted") {
					t.Errorf("a marker that is not the cap's: %s", data)
				}
				markers++
			}
		}
		if name == "end" {
			break
		}
	}
	if !strings.Contains(text.String(), "line 001") || !strings.Contains(text.String(), "line 050") || strings.Contains(text.String(), "line 025") {
		t.Errorf("stored output:\n%s", text.String())
	}
	if markers != 1 {
		t.Errorf("%d cap markers, want 1", markers)
	}
}

// TestUIDelegatesUpdateLiveAcrossManagers: two managers on one
// PostgreSQL database; the Delegates page served by one updates when a
// delegate connects to the other, and when it goes silent there.
func TestUIDelegatesUpdateLiveAcrossManagers(t *testing.T) {
	dsn := pgtest.NewDatabase(t)
	cfg := Config{HeartbeatInterval: 200 * time.Millisecond, UIDelegateUpdateEvery: 10 * time.Millisecond}
	tms := startTestManagers(t, dsn, cfg, cfg)
	a, b := tms[0], tms[1]
	eventually(t, 10*time.Second, "both managers listening", func() bool { return a.m.bus.Listening() && b.m.bus.Listening() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tok, err := a.client(t, a.admin.APIKey).CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	br := newBrowserSignedIn(t, a)
	req, _ := http.NewRequestWithContext(ctx, "GET", a.url+"/delegates/events", nil)
	resp, err := br.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if name, _ := readEvent(t, r); name != "delegates" {
		t.Fatalf("first event %s", name)
	}
	dc, _ := b.registerFake(t, b.admin.AccountID, tok.Value, "remote", "host-on-b")
	stop := keepHeartbeating(ctx, dc)
	waitEvent(t, r, func(data string) bool {
		return strings.Contains(data, `data-hostname="host-on-b"`) && strings.Contains(data, ">Connected<")
	})
	stop()
	waitEvent(t, r, func(data string) bool {
		return strings.Contains(data, `data-hostname="host-on-b"`) && strings.Contains(data, ">Not connected<")
	})
}

func TestUIDelegateDetail(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	tok, _ := admin.CreateToken(ctx, "t")
	tm.registerFake(t, tm.admin.AccountID, tok.Value, "builder", "host-1", "linux")
	task, err := admin.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "nvidia-smi"}, Selectors: []string{"gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowserSignedIn(t, tm)
	if _, page := b.get("/delegates"); !strings.Contains(page, `href="/delegates/builder"`) {
		t.Errorf("the list does not link the delegate's page:\n%s", page)
	}
	resp, page := b.get("/delegates/builder")
	if resp.StatusCode != 200 {
		t.Fatalf("detail: %d\n%s", resp.StatusCode, page)
	}
	for _, want := range []string{`data-hostname="host-1"`, ">Connected<", "linux", `href="/tasks/` + task.ID + `"`, "gpu", `href="/delegates/builder/delete"`} {
		if !strings.Contains(page, want) {
			t.Errorf("detail lacks %q:\n%s", want, page)
		}
	}
	if resp, page := b.get("/delegates/nobody"); resp.StatusCode != 404 || !strings.Contains(page, "nobody") {
		t.Errorf("an unknown delegate: %d\n%s", resp.StatusCode, page)
	}
	v := newBrowser(t, tm)
	v.signIn(tm.userKey(t, "vera", access.RoleViewer, access.Account))
	if _, page := v.get("/delegates/builder"); !strings.Contains(page, `data-hostname="host-1"`) || strings.Contains(page, "/delegates/builder/delete") {
		t.Errorf("the viewer's detail page:\n%s", page)
	}
}

// TestListTasksPages: the API's task listing pages with a cursor and
// filters by delegate.
func TestListTasksPages(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	var ids []string // newest first
	for i := range 5 {
		task, err := admin.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: fmt.Sprint("echo ", i)}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append([]string{task.ID}, ids...)
	}
	var got []string
	page := ""
	for range 10 {
		list, err := admin.ListTasksPage(ctx, client.TaskQuery{Limit: 2, Page: page})
		if err != nil {
			t.Fatal(err)
		}
		for _, task := range list.Tasks {
			got = append(got, task.ID)
		}
		if list.Next == "" {
			break
		}
		page = list.Next
	}
	if strings.Join(got, " ") != strings.Join(ids, " ") {
		t.Errorf("pages of 2: %v, want %v", got, ids)
	}
	if st, b := tm.api(t, tm.admin.APIKey, "GET", protocol.PathTasks+"?page=t_nope", ""); st != 400 || !strings.Contains(b, "t_nope") {
		t.Errorf("an unknown cursor: %d %s", st, b)
	}
	// By delegate: the task the delegate took.
	tok, _ := admin.CreateToken(ctx, "t")
	d, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "Runner", "runner-host")
	if _, err := d.Acquire(ctx, ids[4]); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"runner", "RUNNER-HOST"} {
		list, err := admin.ListTasksPage(ctx, client.TaskQuery{Delegate: name})
		if err != nil || len(list.Tasks) != 1 || list.Tasks[0].ID != ids[4] || list.Next != "" {
			t.Errorf("tasks of delegate %s: %+v, %v", name, list, err)
		}
	}
}

// TestUITasksPages: the Tasks page pages through all tasks, and through
// those of a selector.
func TestUITasksPages(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	for i := range 120 {
		sel := "odd"
		if i%2 == 0 {
			sel = "even"
		}
		if _, err := admin.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "true"}, Selectors: []string{sel}}); err != nil {
			t.Fatal(err)
		}
	}
	b := newBrowserSignedIn(t, tm)
	rows := regexp.MustCompile(`<tr data-task="`)
	older := regexp.MustCompile(`href="(/tasks\?[^"]*)" rel="next"`)
	walk := func(path string) []int {
		var counts []int
		for path != "" {
			_, page := b.get(path)
			counts = append(counts, len(rows.FindAllString(page, -1)))
			m := older.FindStringSubmatch(page)
			path = ""
			if m != nil {
				path = strings.ReplaceAll(m[1], "&amp;", "&")
			}
			if len(counts) > 10 {
				t.Fatalf("no end of pages: %v", counts)
			}
		}
		return counts
	}
	if got := walk("/tasks"); fmt.Sprint(got) != "[50 50 20]" {
		t.Errorf("pages of all tasks: %v", got)
	}
	if got := walk("/tasks?selector=odd"); fmt.Sprint(got) != "[50 10]" {
		t.Errorf("pages of the selector odd: %v", got)
	}
}

// TestUIDelegatesShowUpgradeState: the Delegates page shows an instance's
// upgrade state under its version, and whether a watcher
// upgrades it; a delegate's page holds and resumes its group's upgrades
// for those allowed (user:manage at the account), and only for them.
func TestUIDelegatesShowUpgradeState(t *testing.T) {
	tm := startTestManager(t, Config{Version: "v1.4.0", ReleaseDir: t.TempDir()})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	tok, err := admin.CreateToken(ctx, "up")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tm.client(t, "").Register(ctx, protocol.RegisterRequest{AccountID: tm.admin.AccountID, Token: tok.Value,
		Name: "build", Hostname: "h1", IP: "127.0.0.1", Version: "v1.3.5", Slot: "v1.3.5", Upgrade: protocol.UpgradeAuto}); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, tm)
	b.signIn(tm.admin.APIKey)
	resp, page := b.get("/delegates")
	if resp.StatusCode != 200 {
		t.Fatalf("delegates: %d\n%s", resp.StatusCode, page)
	}
	for _, want := range []string{"v1.3.5", `<small class="upgrade">upgrade available</small>`, "auto-upgrade on"} {
		if !strings.Contains(page, want) {
			t.Errorf("the Delegates page lacks %q:\n%s", want, page)
		}
	}
	// A viewer sees no hold button on the delegate's page, and a forged
	// hold is refused by the API.
	viewer := newBrowser(t, tm)
	viewer.signIn(tm.userKey(t, "vera", access.RoleViewer, access.Account))
	if _, page := viewer.get("/delegates/build"); !strings.Contains(page, "the group wants v1.4.0") || strings.Contains(page, "-upgrades") {
		t.Errorf("the viewer's delegate page (no hold or resume for viewers):\n%s", page)
	}
	// Refused in the page's words, not the CLI's.
	if resp, page := viewer.do("POST", "/delegates/build/hold-upgrades", url.Values{"csrf": {viewer.csrf("/delegates/build")}}, nil); resp.StatusCode != 403 ||
		!strings.Contains(page, "may not hold the upgrades of delegate build: that needs the permission user:manage at the account") ||
		!strings.Contains(page, "Settings → Role bindings") || strings.Contains(page, "role bind") {
		t.Errorf("a viewer's forged hold: %d\n%s", resp.StatusCode, page)
	}
	// The administrator holds the group from its page: the instance is
	// current (no state shown), the page offers to resume.
	_, page = b.get("/delegates/build")
	if !strings.Contains(page, `action="/delegates/build/hold-upgrades"`) {
		t.Fatalf("the administrator is not offered to hold upgrades:\n%s", page)
	}
	if resp, page := b.do("POST", "/delegates/build/hold-upgrades", url.Values{"csrf": {b.csrf("/delegates/build")}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("hold upgrades: %d\n%s", resp.StatusCode, page)
	}
	if _, page := b.get("/delegates"); strings.Contains(page, `class="upgrade"`) {
		t.Errorf("a held group still shows an upgrade state:\n%s", page)
	}
	if _, page := b.get("/delegates/build"); !strings.Contains(page, "Upgrades: held") || !strings.Contains(page, `action="/delegates/build/resume-upgrades"`) {
		t.Errorf("the held group's page:\n%s", page)
	}
	// Resumed, it wants the manager's version again.
	if resp, page := b.do("POST", "/delegates/build/resume-upgrades", url.Values{"csrf": {b.csrf("/delegates/build")}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("resume upgrades: %d\n%s", resp.StatusCode, page)
	}
	if _, page := b.get("/delegates"); !strings.Contains(page, `<small class="upgrade">upgrade available</small>`) {
		t.Errorf("after resuming, the group shows no upgrade available:\n%s", page)
	}
}

// TestUITasksByScope: the Tasks page and the API keep the tasks of an org
// (with its projects) or a project when asked, in the store, and refuse a
// scope that is not ORG or ORG/PROJECT with the reason.
func TestUITasksByScope(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	if _, err := admin.CreateOrg(ctx, "o1"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateProject(ctx, "o1", "p1"); err != nil {
		t.Fatal(err)
	}
	submit := func(org, project string) string {
		t.Helper()
		task, err := admin.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "true"}, Org: org, Project: project})
		if err != nil {
			t.Fatal(err)
		}
		return task.ID
	}
	inProject, atAccount := submit("o1", "p1"), submit("", "")
	list, err := admin.ListTasksPage(ctx, client.TaskQuery{Scope: "o1"})
	if err != nil || len(list.Tasks) != 1 || list.Tasks[0].ID != inProject {
		t.Errorf("the API's tasks of o1: %+v, %v", list.Tasks, err)
	}
	b := newBrowserSignedIn(t, tm)
	for query, want := range map[string][]string{"o1": {inProject}, "o1/p1": {inProject}, "o1/p2": nil, "": {inProject, atAccount}} {
		_, page := b.get("/tasks?scope=" + url.QueryEscape(query))
		for _, id := range []string{inProject, atAccount} {
			if listed, wanted := strings.Contains(page, `href="/tasks/`+id+`"`), slices.Contains(want, id); listed != wanted {
				t.Errorf("scope %q: task %s listed %v, want %v", query, id, listed, wanted)
			}
		}
		if query != "" && !strings.Contains(page, `value="`+query+`"`) {
			t.Errorf("scope %q: the form does not keep it", query)
		}
	}
	if resp, page := b.get("/tasks?scope=o1%2F"); resp.StatusCode != 400 || !strings.Contains(page, "use ORG or ORG/PROJECT") {
		t.Errorf("a bad scope: %d\n%s", resp.StatusCode, page)
	}
}
