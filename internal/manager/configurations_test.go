package manager

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/store"
)

func TestApplicableConfiguration(t *testing.T) {
	cs := []store.Configuration{ // ordered by name, as the store lists them
		{Name: "a-linux", Selectors: []string{"linux"}},
		{Name: "all"},
		{Name: "b-linux", Selectors: []string{"linux"}},
		{Name: "by-host", Selectors: []string{"host-7"}},
		{Name: "gpu-linux", Selectors: []string{"gpu", "linux"}},
	}
	scoped := []store.Configuration{
		{Name: "a-acct", Selectors: []string{"linux"}},
		{Name: "b-web", Selectors: []string{"linux"}, Org: "eng", Project: "web"},
		{Name: "c-eng", Selectors: []string{"linux"}, Org: "eng"},
		{Name: "d-ops", Selectors: []string{"linux"}, Org: "ops"},
		{Name: "e-web-any", Org: "eng", Project: "web"},
		{Name: "f-api-gpu", Selectors: []string{"gpu", "linux"}, Org: "eng", Project: "api"},
	}
	tests := []struct {
		name       string
		tags       []string
		dname      string
		host       string
		org, proj  string
		want       string
		configured []store.Configuration
	}{
		{"most selectors wins", []string{"linux", "gpu"}, "d", "h", "", "", "gpu-linux", cs},
		{"tie: first by name", []string{"LINUX "}, "d", "h", "", "", "a-linux", cs},
		{"no selectors: every delegate", nil, "d", "h", "", "", "all", cs},
		{"implicit hostname", nil, "d", "HOST-7", "", "", "by-host", cs},
		{"implicit name", nil, "gpu", "h", "", "", "all", cs}, // "gpu" alone does not satisfy gpu-linux
		{"none match", []string{"linux"}, "d", "h", "", "", "", []store.Configuration{{Name: "x", Selectors: []string{"windows"}}}},
		{"none at all", nil, "d", "h", "", "", "", nil},
		// Scope: a delegate gets only configurations its token's scope
		// covers (the rule of tasks); on a tie, the one of the scope
		// closest to its own (the widest).
		{"account delegate: tie goes to its own scope", []string{"linux"}, "d", "h", "", "", "a-acct", scoped},
		{"account delegate: most selectors first, any scope", []string{"linux", "gpu"}, "d", "h", "", "", "f-api-gpu", scoped},
		{"org delegate: its org's, not the account's or another org's", []string{"linux"}, "d", "h", "eng", "", "c-eng", scoped},
		{"other org delegate", []string{"linux"}, "d", "h", "ops", "", "d-ops", scoped},
		{"project delegate: the project's own", []string{"linux"}, "d", "h", "eng", "web", "b-web", scoped},
		{"project delegate: not a sibling project's", []string{"linux", "gpu"}, "d", "h", "eng", "web", "b-web", scoped},
		{"project delegate: not the account's nor the org's", []string{"linux"}, "d", "h", "eng", "api", "", scoped},
		{"project delegate: its project's with most selectors", []string{"linux", "gpu"}, "d", "h", "eng", "api", "f-api-gpu", scoped},
		{"project delegate without tags", nil, "d", "h", "eng", "web", "e-web-any", scoped},
		{"project delegate of another org", []string{"linux"}, "d", "h", "ops", "x", "", scoped},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			target := configTarget{tags: protocol.NormalizeSelectors(tt.tags), name: tt.dname, hostname: tt.host, org: tt.org, project: tt.proj}
			if c := applicableConfiguration(tt.configured, target); c != nil {
				got = c.Name
			}
			if got != tt.want {
				t.Errorf("applies %q, want %q", got, tt.want)
			}
		})
	}
}

func TestConfigurationAPI(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	api := tm.client(t, tm.admin.APIKey)

	bad := []struct {
		what string
		req  protocol.CreateConfigurationRequest
		want string
	}{
		{"bad name", protocol.CreateConfigurationRequest{Name: "-x", Script: "true"}, "configuration name"},
		{"empty script", protocol.CreateConfigurationRequest{Name: "x", Script: " \n"}, "script is empty"},
		{"huge script", protocol.CreateConfigurationRequest{Name: "x", Script: strings.Repeat("#", protocol.MaxConfigurationScript+1)}, "at most 65536"},
		{"selector with comma", protocol.CreateConfigurationRequest{Name: "x", Script: "true", Selectors: []string{"a,b"}}, "selector"},
	}
	for _, b := range bad {
		_, err := api.CreateConfiguration(ctx, b.req)
		wantCode(t, b.what, err, protocol.CodeBadRequest)
		if !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: error %q does not say %q", b.what, err, b.want)
		}
	}

	c, err := api.CreateConfiguration(ctx, protocol.CreateConfigurationRequest{Name: "tools", Script: "echo 1", Selectors: []string{" Linux", "linux"}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Version != 1 || !cmp.Equal(c.Selectors, []string{"linux"}) {
		t.Errorf("created %+v", c)
	}
	_, err = api.CreateConfiguration(ctx, protocol.CreateConfigurationRequest{Name: "tools", Script: "echo 2"})
	wantCode(t, "duplicate", err, protocol.CodeConflict)
	_, err = api.UpdateConfiguration(ctx, "tools", protocol.UpdateConfigurationRequest{})
	wantCode(t, "empty update", err, protocol.CodeBadRequest)
	_, err = api.UpdateConfiguration(ctx, "nope", protocol.UpdateConfigurationRequest{Selectors: &[]string{}})
	wantCode(t, "update unknown", err, protocol.CodeNotFound)
	_, err = api.GetConfiguration(ctx, "nope")
	wantCode(t, "get unknown", err, protocol.CodeNotFound)
	wantCode(t, "delete unknown", api.DeleteConfiguration(ctx, "nope"), protocol.CodeNotFound)

	// Another account sees none of it.
	other := tm.client(t, tm.newAccount(t, "acc-other"))
	if l, err := other.ListConfigurations(ctx); err != nil || len(l.Configurations) != 0 {
		t.Errorf("other account lists %+v, %v", l, err)
	}
	_, err = other.GetConfiguration(ctx, "tools")
	wantCode(t, "other account get", err, protocol.CodeNotFound)
}

// A registered delegate gets its configuration in the registration answer,
// a change arrives as an event on its channel, and its report shows in
// describe; a delegate the change does not concern gets no event.
func TestConfigurationReachesDelegates(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	api := tm.client(t, tm.admin.APIKey)
	tok, err := api.CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.CreateConfiguration(ctx, protocol.CreateConfigurationRequest{Name: "tools", Script: "echo 1", Selectors: []string{"linux"}}); err != nil {
		t.Fatal(err)
	}
	linux, resp := tm.registerFake(t, tm.admin.AccountID, tok.Value, "build", "host-a", "linux")
	want := &protocol.AppliedConfiguration{Name: "tools", Version: 1, Script: "echo 1"}
	if diff := cmp.Diff(want, resp.Configuration); diff != "" {
		t.Errorf("registration answer (-want +got):\n%s", diff)
	}
	plain, resp := tm.registerFake(t, tm.admin.AccountID, tok.Value, "build", "host-b")
	if resp.Configuration != nil {
		t.Errorf("non-matching delegate got %+v", resp.Configuration)
	}

	script := "echo 2"
	if _, err := api.UpdateConfiguration(ctx, "tools", protocol.UpdateConfigurationRequest{Script: &script}); err != nil {
		t.Fatal(err)
	}
	ev, err := linux.Poll(ctx, 5*time.Second)
	if err != nil || len(ev.Events) != 1 || ev.Events[0].Kind != protocol.EventConfigurationChanged {
		t.Fatalf("events after the update: %+v, %v", ev, err)
	}
	got, err := linux.DelegateConfiguration(ctx)
	want.Version, want.Script = 2, "echo 2"
	if diff := cmp.Diff(want, got.Configuration); err != nil || diff != "" {
		t.Errorf("fetched configuration, error %v (-want +got):\n%s", err, diff)
	}
	if ev, err := plain.Poll(ctx, 0); err != nil || len(ev.Events) != 0 {
		t.Errorf("the non-matching delegate got events %+v, %v", ev, err)
	}

	exit := 7
	now := time.Now().UTC().Truncate(time.Microsecond)
	long := strings.Repeat("x", 3*protocol.ConfigurationOutputExcerpt)
	if err := linux.ReportConfiguration(ctx, protocol.ConfigurationResult{Name: "tools", Version: 2, ExitCode: &exit,
		Error: "exit status 7", Output: long, OutputBytes: 100, StartedAt: now, FinishedAt: now}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "report without a name", linux.ReportConfiguration(ctx, protocol.ConfigurationResult{Version: 1}), protocol.CodeBadRequest)
	d, err := api.DescribeDelegate(ctx, "build")
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range d.Instances {
		switch in.Hostname {
		case "host-a":
			r := in.ConfigurationResult
			if r == nil || r.Version != 2 || *r.ExitCode != 7 || r.Error != "exit status 7" {
				t.Fatalf("host-a result %+v", r)
			}
			// The excerpt is capped; the size says how much there was.
			if len(r.Output) != maxConfigurationOutput || r.OutputBytes != int64(len(long)) {
				t.Errorf("host-a output: %d bytes kept of %d, want %d of %d", len(r.Output), r.OutputBytes, maxConfigurationOutput, len(long))
			}
			if in.ConfigurationApplies == nil || in.ConfigurationApplies.Version != 2 || in.Configuration != "tools" {
				t.Errorf("host-a applies %+v, configuration %q", in.ConfigurationApplies, in.Configuration)
			}
		case "host-b":
			if in.ConfigurationResult != nil || in.ConfigurationApplies != nil {
				t.Errorf("host-b shows a configuration: %+v", in)
			}
		}
	}

	// Deleting it changes what applies to host-a: another event.
	if err := api.DeleteConfiguration(ctx, "tools"); err != nil {
		t.Fatal(err)
	}
	ev, err = linux.Poll(ctx, 5*time.Second)
	if err != nil || len(ev.Events) != 1 || ev.Events[0].Kind != protocol.EventConfigurationChanged {
		t.Fatalf("events after the delete: %+v, %v", ev, err)
	}
	if got, err := linux.DelegateConfiguration(ctx); err != nil || got.Configuration != nil {
		t.Errorf("after the delete: %+v, %v", got, err)
	}
}

// A fresh registration that hands out a configuration marks the delegate
// configuring (it takes no task) until its heartbeat says it is done; an
// older delegate, which does not run configurations, is not marked.
func TestFreshRegistrationWithConfigurationIsConfiguring(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	api := tm.client(t, tm.admin.APIKey)
	tok, err := api.CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.CreateConfiguration(ctx, protocol.CreateConfigurationRequest{Name: "base", Script: "true"}); err != nil {
		t.Fatal(err)
	}
	register := func(host string, version int) *liveView {
		c := tm.client(t, "")
		resp, err := c.Register(ctx, protocol.RegisterRequest{ProtocolVersion: version, AccountID: tm.admin.AccountID, Token: tok.Value,
			Name: "d", Hostname: host, IP: "127.0.0.1", FreshStart: true, Description: "desc " + host})
		if err != nil {
			t.Fatal(err)
		}
		c.SetSecret(resp.Session)
		return &liveView{c: c, l: tm.m.hub.get(resp.InstanceID)}
	}
	cur := register("new", protocol.Version)
	old := register("old", 2)
	if got := delegateView(cur.l).Configuring; got != "base v1" {
		t.Errorf("fresh v%d registration: configuring %q, want %q", protocol.Version, got, "base v1")
	}
	if got := delegateView(old.l).Configuring; got != "" {
		t.Errorf("v2 registration: configuring %q, want none", got)
	}
	if _, err := cur.c.Heartbeat(ctx, protocol.Heartbeat{Seq: 1}); err != nil {
		t.Fatal(err)
	}
	if got := delegateView(cur.l).Configuring; got != "" {
		t.Errorf("after a heartbeat without configuring: %q", got)
	}
	list, err := api.ListDelegates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range list.Delegates {
		if d.Description != "desc "+d.Hostname {
			t.Errorf("%s: description %q", d.Hostname, d.Description)
		}
	}
}

type liveView struct {
	c interface {
		Heartbeat(context.Context, protocol.Heartbeat) (protocol.HeartbeatResponse, error)
	}
	l *live
}
