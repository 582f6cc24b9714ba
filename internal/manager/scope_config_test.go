package manager

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

// A configuration runs code as the delegate's user: it may reach only the
// delegates its own scope covers. A project delegate-admin (who may not
// run tasks) writes a configuration for its project; account and org
// delegates never get it, cannot report a result for it, and describe
// shows that it does not apply to them.
func TestProjectConfigurationNeverReachesWiderDelegates(t *testing.T) {
	w := newScopedWorld(t, Config{})
	ctx := context.Background()
	web := access.Scope{Org: "eng", Project: "web"}
	dela := w.tm.client(t, w.tm.userKey(t, "dela", access.RoleDelegateAdmin, web))
	if _, err := dela.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "id"},
		Org: "eng", Project: "web"}); err == nil {
		t.Fatal("a delegate-admin ran a task; the premise of this test is that it may not")
	}
	daemon := "nohup sh -c 'while :; do cat /proc/*/environ; sleep 1; done' &"
	if _, err := dela.CreateConfiguration(ctx, protocol.CreateConfigurationRequest{Name: "web-daemon", Script: daemon,
		Org: "eng", Project: "web"}); err != nil {
		t.Fatal(err)
	}
	_, err := dela.CreateConfiguration(ctx, protocol.CreateConfigurationRequest{Name: "acct-daemon", Script: daemon})
	wantCode(t, "a project delegate-admin writes an account configuration", err, protocol.CodeForbidden)

	acct, resp := w.tm.registerFake(t, w.tm.admin.AccountID, w.acctTok, "shared", "acct-host", "linux")
	if resp.Configuration != nil {
		t.Errorf("the account delegate got the project's configuration at registration: %+v", resp.Configuration)
	}
	eng, resp := w.tm.registerFake(t, w.tm.admin.AccountID, w.engTok, "eng-shared", "eng-host", "linux")
	if resp.Configuration != nil {
		t.Errorf("the org delegate got the project's configuration at registration: %+v", resp.Configuration)
	}
	_, resp = w.tm.registerFake(t, w.tm.admin.AccountID, w.webTok, "web-del", "web-host", "linux")
	if resp.Configuration == nil || resp.Configuration.Name != "web-daemon" {
		t.Errorf("the project's own delegate: %+v", resp.Configuration)
	}
	for name, c := range map[string]*client.Client{"account": acct, "org": eng} {
		got, err := c.DelegateConfiguration(ctx)
		if err != nil || got.Configuration != nil {
			t.Errorf("the %s delegate fetched %+v, %v", name, got.Configuration, err)
		}
		now := time.Now()
		err = c.ReportConfiguration(ctx, protocol.ConfigurationResult{Name: "web-daemon", Version: 1, ExitCode: new(int),
			Output: "ran", StartedAt: now, FinishedAt: now})
		wantCode(t, "the "+name+" delegate reports a result for the project's configuration", err, protocol.CodeNotFound)
	}
	d, err := w.api.DescribeDelegate(ctx, "shared")
	if err != nil || len(d.Instances) != 1 || d.Instances[0].ConfigurationApplies != nil {
		t.Errorf("describe the account delegate: %+v, %v", d, err)
	}

	// An account configuration still reaches the account delegate (an
	// event tells it), and a project delegate too unless one of its own
	// project is as specific.
	if _, err := w.api.CreateConfiguration(ctx, protocol.CreateConfigurationRequest{Name: "acct-tools", Script: "true"}); err != nil {
		t.Fatal(err)
	}
	if ev, err := acct.Poll(ctx, 0); err != nil || !slices.ContainsFunc(ev.Events, func(e protocol.Event) bool {
		return e.Kind == protocol.EventConfigurationChanged
	}) {
		t.Errorf("the account delegate's events after an account configuration: %+v, %v", ev, err)
	}
	if got, err := acct.DelegateConfiguration(ctx); err != nil || got.Configuration == nil || got.Configuration.Name != "acct-tools" {
		t.Errorf("the account delegate fetched %+v, %v", got.Configuration, err)
	}
	d, err = w.api.DescribeDelegate(ctx, "web-del")
	if err != nil || len(d.Instances) != 1 || d.Instances[0].ConfigurationApplies == nil ||
		d.Instances[0].ConfigurationApplies.Name != "web-daemon" {
		t.Errorf("describe the project delegate: %+v, %v", d, err)
	}
}

// A configuration's output is shown only to callers who may view the
// configuration: others see that it ran and how it ended, not what it
// printed.
func TestConfigurationOutputFollowsConfigurationView(t *testing.T) {
	w := newScopedWorld(t, Config{})
	ctx := context.Background()
	secret := "docker login -p hunter2-s3cret registry.example.com"
	for _, c := range []protocol.CreateConfigurationRequest{
		{Name: "login", Script: "echo login"},
		{Name: "web-login", Script: "echo web", Org: "eng", Project: "web"},
	} {
		if _, err := w.api.CreateConfiguration(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	report := func(c *client.Client, name string) {
		t.Helper()
		now := time.Now()
		if err := c.ReportConfiguration(ctx, protocol.ConfigurationResult{Name: name, Version: 1, ExitCode: new(int),
			Output: secret + "\n", OutputBytes: int64(len(secret) + 1), StartedAt: now, FinishedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	acct, _ := w.tm.registerFake(t, w.tm.admin.AccountID, w.acctTok, "shared", "acct-host")
	report(acct, "login")
	webDel, _ := w.tm.registerFake(t, w.tm.admin.AccountID, w.webTok, "web-del", "web-host")
	report(webDel, "web-login")

	nobody := w.tm.userKey(t, "nobody", "", access.Scope{})
	webAdmin := w.tm.userKey(t, "webadmin", access.RoleProjectAdmin, access.Scope{Org: "eng", Project: "web"})
	apiAdmin := w.tm.userKey(t, "apiadmin", access.RoleDelegateAdmin, access.Scope{Org: "eng", Project: "api"})
	for _, c := range []struct {
		who      string
		key      string
		delegate string
		sees     bool
	}{
		{"the account admin", w.tm.admin.APIKey, "shared", true},
		{"the account admin", w.tm.admin.APIKey, "web-del", true},
		{"a user with no role", nobody, "shared", false},
		{"a user with no role", nobody, "web-del", false},
		{"the project admin", webAdmin, "web-del", true},
		{"the project admin", webAdmin, "shared", false},
		{"another project's delegate-admin", apiAdmin, "web-del", false},
	} {
		d, err := w.tm.client(t, c.key).DescribeDelegate(ctx, c.delegate)
		if err != nil || len(d.Instances) != 1 || d.Instances[0].ConfigurationResult == nil {
			t.Fatalf("%s describes %s: %+v, %v", c.who, c.delegate, d, err)
		}
		res := d.Instances[0].ConfigurationResult
		if res.ExitCode == nil || *res.ExitCode != 0 || res.Version != 1 {
			t.Errorf("%s describes %s: the run's status is missing: %+v", c.who, c.delegate, res)
		}
		if got := strings.Contains(res.Output, "hunter2"); got != c.sees || res.OutputWithheld == c.sees {
			t.Errorf("%s describes %s: output %q withheld %v, want shown %v", c.who, c.delegate, res.Output, res.OutputWithheld, c.sees)
		}
		// The web UI's page of the delegate calls the same API as the
		// caller.
		b := newBrowser(t, w.tm)
		b.signIn(c.key)
		resp, page := b.get("/delegates/" + c.delegate)
		if resp.StatusCode != 200 || strings.Contains(page, "hunter2") != c.sees {
			t.Errorf("%s opens the page of %s: status %d, shows the output: %v, want %v", c.who, c.delegate, resp.StatusCode,
				strings.Contains(page, "hunter2"), c.sees)
		}
	}
}

// Writing a configuration whose selectors match only delegates it cannot
// reach (an account delegate, for a project's configuration) is allowed
// (delegates of its scope may register later), and the answer explains
// why it reaches none of them.
func TestConfigurationWriteExplainsWhatItCannotReach(t *testing.T) {
	w := newScopedWorld(t, Config{})
	ctx := context.Background()
	w.tm.registerFake(t, w.tm.admin.AccountID, w.acctTok, "shared", "acct-host", "gpu")
	webAdmin := w.tm.client(t, w.tm.userKey(t, "webadmin", access.RoleProjectAdmin, access.Scope{Org: "eng", Project: "web"}))
	c, err := webAdmin.CreateConfiguration(ctx, protocol.CreateConfigurationRequest{Name: "grab", Script: "true",
		Selectors: []string{"shared"}, Org: "eng", Project: "web"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1 delegate", "shared", "project eng/web"} {
		if !strings.Contains(c.Notice, want) {
			t.Errorf("the answer's notice %q does not say %q", c.Notice, want)
		}
	}
	sel := []string{"gpu"}
	c, err = webAdmin.UpdateConfiguration(ctx, "grab", protocol.UpdateConfigurationRequest{Selectors: &sel})
	if err != nil || !strings.Contains(c.Notice, "shared") {
		t.Errorf("update: notice %q, %v", c.Notice, err)
	}
	// Once a delegate of its scope matches, there is nothing to explain.
	w.tm.registerFake(t, w.tm.admin.AccountID, w.webTok, "web-del", "web-host", "gpu")
	script := "echo again"
	if c, err = webAdmin.UpdateConfiguration(ctx, "grab", protocol.UpdateConfigurationRequest{Script: &script}); err != nil || c.Notice != "" {
		t.Errorf("update with a delegate of its scope: notice %q, %v", c.Notice, err)
	}
	if got, err := webAdmin.GetConfiguration(ctx, "grab"); err != nil || got.Notice != "" {
		t.Errorf("get: notice %q, %v", got.Notice, err)
	}
}
