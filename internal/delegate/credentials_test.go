package delegate_test

import (
	"encoding/base64"
	"net/url"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/config"
	"github.com/legate-dev/legate/internal/mask"
	"github.com/legate-dev/legate/internal/protocol"
)

// TestDelegateCredentialsAreMasked: a task or a configuration script that
// knows the delegate's token or proxy password and prints it, plain or
// encoded, gets it masked in the output that leaves the delegate and in the
// delegate's log.
func TestDelegateCredentialsAreMasked(t *testing.T) {
	t.Parallel()
	const proxyPass = "pr0xy-pa55-w0rd"
	const R = mask.Replacement
	tm := startManager(t, testConfig())
	ag := startAgent(t, tm, agentOpts{tags: []string{"masked"}, configure: func(cfg *config.Delegate, _ string) {
		// The manager is on loopback, which is never proxied.
		u := &url.URL{Scheme: "http", Host: "192.0.2.1:3128", User: url.UserPassword("bob", proxyPass)}
		cfg.Proxy.HTTP, cfg.Proxy.HTTPS = u, u
	}})
	tm.waitConnected(t, ag.hostname, protocol.ConnWebSocket)

	basic := base64.StdEncoding.EncodeToString([]byte("bob:" + proxyPass))
	task := tm.submitScript(t, "echo token="+ag.token+"\n"+
		"printf '%s' 'bob:"+proxyPass+"' | base64\n"+
		`echo '{"pw":"`+proxyPass+`"}'`+"\n")
	out, _, final := tm.logs(t, task.ID, true)
	if final.Status != protocol.StatusSucceeded {
		t.Fatalf("task %s: %s", final.Status, final.Error)
	}
	// "bob:" takes 4 bytes: the 6th base64 character mixes ':' and the
	// password, the rest is the password's.
	if want := "token=" + R + "\n" + basic[:6] + R + "\n" + `{"pw":"` + R + `"}` + "\n"; out != want {
		t.Errorf("task output %q, want %q", out, want)
	}

	tm.createConfiguration(t, "leaky", "echo configured with "+ag.token, "masked")
	res := tm.waitConfigured(t, ag.hostname, "leaky", 1)
	if want := "configured with " + R + "\n"; res.Output != want {
		t.Errorf("configuration output %q, want %q", res.Output, want)
	}
	if logs := ag.logs.String(); strings.Contains(logs, ag.token) || strings.Contains(logs, proxyPass) {
		t.Errorf("the delegate's log shows its token or proxy password:\n%s", logs)
	}
}
