package manager

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/assign"
	"github.com/legate-dev/legate/internal/protocol"
)

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
		return &liveView{c: c, l: live(tm, resp.InstanceID)}
	}
	cur := register("new", protocol.Version)
	old := register("old", 2)
	if got := cur.l().Configuring; got != "base v1" {
		t.Errorf("fresh v%d registration: configuring %q, want %q", protocol.Version, got, "base v1")
	}
	if got := old.l().Configuring; got != "" {
		t.Errorf("v2 registration: configuring %q, want none", got)
	}
	if _, err := cur.c.Heartbeat(ctx, protocol.Heartbeat{Seq: 1}); err != nil {
		t.Fatal(err)
	}
	if got := cur.l().Configuring; got != "" {
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

// maxConfigurationOutput is what dispatch keeps of a configuration's
// output (configurations.go).
const maxConfigurationOutput = protocol.ConfigurationOutputExcerpt + 256

type liveView struct {
	c interface {
		Heartbeat(context.Context, protocol.Heartbeat) (protocol.HeartbeatResponse, error)
	}
	l func() assign.Delegate
}

// live returns a function that reads the live view of the instance on
// tm's dispatch (the offers' view of it).
func live(tm *testManager, id string) func() assign.Delegate {
	return func() assign.Delegate {
		d, _, _ := tm.m.dispatch.Live(id)
		return d
	}
}
