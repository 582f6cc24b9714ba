package manager

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

// delegateFixture: registered delegates (connected) alpha (two
// instances, linux), beta (project o1/p1, gpu) and gamma; delta is stored
// only (not connected); omega stopped (deregistered).
func delegateFixture(t *testing.T, cfg Config) *testManager {
	t.Helper()
	tm := startTestManager(t, cfg)
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	if _, err := admin.CreateOrg(ctx, "o1"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateProject(ctx, "o1", "p1"); err != nil {
		t.Fatal(err)
	}
	tok, err := admin.CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	ptok, err := admin.CreateScopedToken(ctx, protocol.CreateTokenRequest{Name: "tp", Org: "o1", Project: "p1"})
	if err != nil {
		t.Fatal(err)
	}
	tm.registerFake(t, tm.admin.AccountID, tok.Value, "alpha", "h1", "linux")
	tm.registerFake(t, tm.admin.AccountID, tok.Value, "alpha", "h2", "linux")
	tm.registerFake(t, tm.admin.AccountID, ptok.Value, "beta", "h1", "gpu")
	tm.registerFake(t, tm.admin.AccountID, tok.Value, "gamma", "h1")
	omega, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "omega", "h1")
	if err := omega.Deregister(ctx); err != nil {
		t.Fatal(err)
	}
	tokens, err := tm.st.ListTokens(ctx, tm.admin.AccountID)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if _, err := tm.st.UpsertInstance(ctx, store.Instance{ID: "d_delta", AccountID: tm.admin.AccountID, IdentityKey: "delta|h1",
		Name: "delta", Hostname: "h1", Version: "test", TokenID: tokens[0].ID, RegisteredAt: now, LastHeartbeat: &now}); err != nil {
		t.Fatal(err)
	}
	return tm
}

// hosts lists a delegate page as NAME/HOSTNAME.
func hosts(l protocol.DelegateList) []string {
	var out []string
	for _, d := range l.Delegates {
		out = append(out, d.Name+"/"+d.Hostname)
	}
	return out
}

func TestDelegatesAPIPagesAndFilters(t *testing.T) {
	tm := delegateFixture(t, Config{})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	yes, no := true, false
	for _, tt := range []struct {
		name     string
		q        protocol.DelegateQuery
		want     []string
		wantNext string
	}{
		{"every one, as before", protocol.DelegateQuery{}, []string{"alpha/h1", "alpha/h2", "beta/h1", "delta/h1", "gamma/h1"}, ""},
		{"deregistered too", protocol.DelegateQuery{All: true, Name: "omega"}, []string{"omega/h1"}, ""},
		{"a page of two delegates", protocol.DelegateQuery{Limit: 2}, []string{"alpha/h1", "alpha/h2", "beta/h1"}, "beta"},
		{"the next page", protocol.DelegateQuery{Limit: 2, Page: "beta"}, []string{"delta/h1", "gamma/h1"}, ""},
		{"the last page exactly", protocol.DelegateQuery{Limit: 4}, []string{"alpha/h1", "alpha/h2", "beta/h1", "delta/h1", "gamma/h1"}, ""},
		{"name", protocol.DelegateQuery{Name: "PH"}, []string{"alpha/h1", "alpha/h2"}, ""},
		{"tag", protocol.DelegateQuery{Tag: "gpu"}, []string{"beta/h1"}, ""},
		{"scope", protocol.DelegateQuery{Org: "o1", Project: "p1"}, []string{"beta/h1"}, ""},
		{"connected", protocol.DelegateQuery{Connected: &yes, Limit: 1, Page: "beta"}, []string{"gamma/h1"}, ""},
		{"not connected", protocol.DelegateQuery{Connected: &no}, []string{"delta/h1"}, ""},
		{"connected, paged", protocol.DelegateQuery{Connected: &yes, Limit: 2}, []string{"alpha/h1", "alpha/h2", "beta/h1"}, "beta"},
		{"approval", protocol.DelegateQuery{Approval: protocol.ApprovalPending}, nil, ""},
	} {
		got, err := admin.ListDelegatesPage(ctx, tt.q)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if diff := cmp.Diff(tt.want, hosts(got)); diff != "" || got.Next != tt.wantNext {
			t.Errorf("%s: next %q, want %q (-want +got):\n%s", tt.name, got.Next, tt.wantNext, diff)
		}
	}
	// A viewer bound to a project lists every delegate (delegate:view is
	// granted to all) and, with scope, only its project's.
	viewer := tm.client(t, tm.userKey(t, "pat", access.RoleViewer, access.Scope{Org: "o1", Project: "p1"}))
	got, err := viewer.ListDelegatesPage(ctx, protocol.DelegateQuery{Org: "o1", Project: "p1", Limit: 10})
	if err != nil || !cmp.Equal(hosts(got), []string{"beta/h1"}) {
		t.Errorf("the project viewer's scoped listing: %v, %v", hosts(got), err)
	}
	for q, want := range map[string]string{
		"limit=0":                         `query parameter limit="0": use a number of delegates from 1 to 1000`,
		"limit=5000":                      "from 1 to 1000",
		"connected=maybe":                 `connected="maybe": use true or false`,
		"scope=o1/":                       `scope="o1/": use ORG or ORG/PROJECT`,
		"approval=later":                  "use pending, approved or rejected",
		"page=" + strings.Repeat("x", 64): "page: at most 63 characters",
	} {
		st, body := tm.api(t, tm.admin.APIKey, "GET", protocol.PathDelegates+"?"+q, "")
		if st != 400 || !strings.Contains(body, strings.ReplaceAll(want, `"`, `\"`)) || !strings.Contains(body, string(protocol.CodeBadRequest)) {
			t.Errorf("?%s: %d %s, want 400 with %q", q, st, body, want)
		}
	}
}

func TestUIDelegatesPageFiltersAndPages(t *testing.T) {
	tm := delegateFixture(t, Config{})
	ctx := context.Background()
	tokens, err := tm.st.ListTokens(ctx, tm.admin.AccountID)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i := range 55 {
		if _, err := tm.st.UpsertInstance(ctx, store.Instance{ID: fmt.Sprintf("d_zz%02d", i), AccountID: tm.admin.AccountID,
			IdentityKey: fmt.Sprintf("zz|%d", i), Name: fmt.Sprintf("zz-%02d", i), Hostname: "h", Version: "test",
			TokenID: tokens[0].ID, RegisteredAt: now, LastHeartbeat: &now}); err != nil {
			t.Fatal(err)
		}
	}
	b := newBrowserSignedIn(t, tm)
	_, page := b.get("/delegates")
	// The instance that deregistered (omega) stays, Not connected.
	mustContain(t, "the first page", page, "50 delegates on this page", `data-delegate="alpha"`, `data-delegate="omega"`, `data-delegate="zz-44"`,
		`href="/delegates?page=zz-44" rel="next"`)
	if strings.Contains(page, `data-delegate="zz-45"`) || strings.Contains(page, `rel="first"`) {
		t.Errorf("the first page shows the next:\n%s", page)
	}
	_, omega, _ := strings.Cut(page, `data-delegate="omega"`)
	omega, _, _ = strings.Cut(omega, "data-delegate=")
	if !strings.Contains(omega, "state disconnected") || !strings.Contains(omega, "(stopped)") {
		t.Errorf("the stopped omega is not shown Not connected:\n%s", page)
	}
	_, page = b.get("/delegates?page=zz-44")
	mustContain(t, "the next page", page, "10 delegates on this page", `data-delegate="zz-45"`, `data-delegate="zz-54"`,
		`href="/delegates?" rel="first"`, `data-events="/delegates/events?page=zz-44"`)
	if strings.Contains(page, `rel="next"`) || strings.Contains(page, `data-delegate="alpha"`) {
		t.Errorf("the last page:\n%s", page)
	}
	_, page = b.get("/delegates?name=alp&status=connected")
	mustContain(t, "a filtered page", page, "1 delegate, 2 of 2 instances connected (filtered)", `data-delegate="alpha"`,
		`value="alp"`, `<option value="connected" selected>`, `href="/delegates">Clear</a>`)
	_, page = b.get("/delegates?tag=gpu")
	mustContain(t, "the page of a tag", page, `data-delegate="beta"`, "1 delegate,")
	_, page = b.get("/delegates?status=not_connected&name=zz-0")
	mustContain(t, "the not connected", page, "10 delegates, 0 of 10 instances connected")
	// A filter the API refuses: its reason, as a 400.
	resp, page := b.get("/delegates?name=" + url.QueryEscape(strings.Repeat("n", 64)))
	if resp.StatusCode != 400 || !strings.Contains(page, "name: at most 63 characters") {
		t.Errorf("a name too long: %d\n%s", resp.StatusCode, page)
	}
}

func TestUIFilteredDelegatesPageUpdatesLive(t *testing.T) {
	tm := delegateFixture(t, Config{UIDelegateUpdateEvery: 10 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tok, err := tm.client(t, tm.admin.APIKey).CreateToken(ctx, "t2")
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowserSignedIn(t, tm)
	r := b.openEvents(ctx, "/delegates/events?name=new&status=connected")
	waitNamed(t, r, "delegates", func(d string) bool { return strings.Contains(d, "0 delegates") })
	// Another delegate changes the account's delegates: the page renders
	// again, still without it; then the one it looks for.
	tm.registerFake(t, tm.admin.AccountID, tok.Value, "other", "h9")
	tm.registerFake(t, tm.admin.AccountID, tok.Value, "newcomer", "h7")
	data := waitNamed(t, r, "delegates", func(d string) bool { return strings.Contains(d, `data-delegate="newcomer"`) })
	if strings.Contains(data, `data-delegate="other"`) || strings.Contains(data, `data-delegate="alpha"`) {
		t.Errorf("the filtered stream shows what the filter leaves out:\n%s", data)
	}
	mustContain(t, "the filtered stream", data, "1 delegate, 1 of 1 instance connected (filtered)")
}

// TestUINewDelegateHintAndTokenSecret: the New delegate page shows the
// manager URL the spec will use (the one the browser reached, which a
// user behind a proxy changes), carries its hint delay and what to check,
// and can put the token in a Kubernetes Secret or a Secrets Manager
// secret instead of the spec.
func TestUINewDelegateHintAndTokenSecret(t *testing.T) {
	tm := startTestManager(t, Config{UINewDelegateHintAfter: 1500 * time.Millisecond, DelegateImage: "registry.example.com/legate:v1"})
	b := newBrowserSignedIn(t, tm)
	_, page := b.get("/delegates/new")
	mustContain(t, "the form", page, `id="manager_url" name="manager_url" type="url" value="`+tm.url+`"`,
		"the address this page was reached at ("+tm.url+")", `name="token_secret"`, `name="token_secret_arn"`)

	form := url.Values{"csrf": {b.csrf("/delegates/new")}, "kind": {"kubernetes"}, "name": {"k8s-edge"},
		"manager_url": {"https://legate.example.com"}, "token_secret": {"edge-token"}, "token_secret_arn": {"ignored for kubernetes"}}
	resp, page := b.do("POST", "/delegates/new", form, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("a kubernetes spec with a secret: %d\n%s", resp.StatusCode, page)
	}
	var tl protocol.TokenList
	if err := json.Unmarshal([]byte(tm.mustAPI(t, tm.admin.APIKey, "GET", protocol.PathTokens, "", 200)), &tl); err != nil || len(tl.Tokens) != 1 {
		t.Fatalf("tokens: %+v, %v", tl, err)
	}
	spec := page[strings.Index(page, `id="manifest"`):]
	spec = spec[:strings.Index(spec, "</pre>")]
	mustContain(t, "the spec", spec, "name: &#34;edge-token&#34;", "key: &#34;DELEGATE_TOKEN&#34;", "&#34;https://legate.example.com&#34;")
	const put = "kubectl create secret generic edge-token --namespace legate-delegate --from-literal=DELEGATE_TOKEN="
	mustContain(t, "the page", page, put)
	value := page[strings.Index(page, put)+len(put):]
	value = value[:strings.IndexAny(value, "\n<")]
	if len(value) < 16 || strings.Contains(spec, value) || strings.Contains(spec, "stringData") {
		t.Errorf("the spec holds the token %q although it is in a secret:\n%s", value, spec)
	}
	mustContain(t, "the page", page, `id="secret-command"`,
		`data-hint-after="1500"`, `id="wait-hint" class="card" hidden`, "<code>https://legate.example.com</code>, the manager URL in the spec",
		"the token <code>"+tl.Tokens[0].Name+"</code> is not revoked", `id="spec-manager-url">https://legate.example.com<`)

	form = url.Values{"csrf": {b.csrf("/delegates/new")}, "kind": {"fargate"}, "name": {"fg"}, "region": {"eu-west-1"}, "manager_url": {"https://legate.example.com"},
		"execution_role": {"arn:aws:iam::123456789012:role/exec"}, "token_secret_arn": {"arn:aws:secretsmanager:eu-west-1:123456789012:secret:legate"}}
	resp, page = b.do("POST", "/delegates/new", form, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("a fargate spec with a secret: %d\n%s", resp.StatusCode, page)
	}
	mustContain(t, "the fargate page", page, "aws secretsmanager put-secret-value --secret-id arn:aws:secretsmanager:eu-west-1:123456789012:secret:legate --secret-string ",
		"arn:aws:secretsmanager:eu-west-1:123456789012:secret:legate")
}

// TestHeartbeatPerfArrivesAndRenders: the figures of a heartbeat show in
// the API listing, the describe answer and the delegate's page; figures
// that make no sense are dropped.
func TestHeartbeatPerfArrivesAndRenders(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	tok, err := admin.CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	dc, _ := tm.registerFake(t, tm.admin.AccountID, tok.Value, "perfy", "h1")
	cpu, proc, mem, bad, rss := 12.5, 0.4, 41.0, 180.0, int64(24<<20)
	if _, err := dc.Heartbeat(ctx, protocol.Heartbeat{Seq: 1, Running: []protocol.RunningTask{}, Perf: &protocol.DelegatePerf{
		CPUPercent: &cpu, ProcessCPUPercent: &proc, MemoryPercent: &mem, RSSBytes: &rss, TasksRun: 3, TasksFailed: 1, AcquireMS: 2.5}}); err != nil {
		t.Fatal(err)
	}
	const want = "cpu 12.5% (delegate 0.4%), memory 41.0%, rss 24.0 MiB, 3 tasks run (1 failed), last acquire 2.5 ms"
	det, err := admin.DescribeDelegate(ctx, "perfy")
	if err != nil || len(det.Instances) != 1 || det.Instances[0].Perf == nil || det.Instances[0].Perf.Summary() != want {
		t.Fatalf("describe: %+v, %v", det, err)
	}
	b := newBrowserSignedIn(t, tm)
	_, page := b.get("/delegates/perfy")
	mustContain(t, "the delegate's page", page, `<dd class="perf">`+want+`</dd>`)

	if _, err := dc.Heartbeat(ctx, protocol.Heartbeat{Seq: 2, Running: []protocol.RunningTask{}, Perf: &protocol.DelegatePerf{
		CPUPercent: &bad, MemoryPercent: &mem, TasksRun: -4, TasksFailed: 9, AcquireMS: -1}}); err != nil {
		t.Fatal(err)
	}
	list, err := admin.ListDelegatesPage(ctx, protocol.DelegateQuery{Name: "perfy"})
	if err != nil || len(list.Delegates) != 1 || list.Delegates[0].Perf == nil {
		t.Fatalf("list: %+v, %v", list, err)
	}
	if got := list.Delegates[0].Perf.Summary(); got != "memory 41.0%, 0 tasks run" {
		t.Errorf("figures out of range kept: %q", got)
	}
}
