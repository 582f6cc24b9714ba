package manager

import (
	"context"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

// TestAdminCreateRefusesControlCharacters sends, through every admin call
// that creates or changes something users later read in listings, text
// with an escape sequence or a bidi override, as an attacker with an API
// key (or a careless script) would: each is refused with a 400 that says
// why, and nothing is stored.
func TestAdminCreateRefusesControlCharacters(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	c := tm.client(t, tm.admin.APIKey)
	if _, err := c.CreateConfiguration(ctx, protocol.CreateConfigurationRequest{Name: "conf", Script: "true"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateOrg(ctx, "eng"); err != nil {
		t.Fatal(err)
	}
	const esc, bidi = "\x1b[2J\x1b]0;pwned\x07", "\u202e"
	shell := func(s protocol.TaskSpec) protocol.TaskSpec {
		s.Type, s.Shell = protocol.TaskShell, &protocol.ShellSpec{Script: "true"}
		return s
	}
	tests := []struct {
		name string
		call func(*client.Client) error
	}{
		{"org name", func(c *client.Client) error { _, err := c.CreateOrg(ctx, "org"+esc); return err }},
		{"project name", func(c *client.Client) error { _, err := c.CreateProject(ctx, "eng", "web"+bidi); return err }},
		{"token name", func(c *client.Client) error { _, err := c.CreateToken(ctx, "tok"+esc); return err }},
		{"API key name", func(c *client.Client) error { _, err := c.CreateAPIKey(ctx, "key"+bidi); return err }},
		{"connector name", func(c *client.Client) error {
			_, err := c.CreateConnector(ctx, protocol.CreateConnectorRequest{Name: "c" + esc, URL: "https://x"})
			return err
		}},
		{"connector type", func(c *client.Client) error {
			_, err := c.CreateConnector(ctx, protocol.CreateConnectorRequest{Name: "c", URL: "https://x", Type: "k8s" + esc})
			return err
		}},
		{"connector selector", func(c *client.Client) error {
			_, err := c.CreateConnector(ctx, protocol.CreateConnectorRequest{Name: "c", URL: "https://x", Selectors: []string{"east" + esc}})
			return err
		}},
		{"connector url", func(c *client.Client) error {
			_, err := c.CreateConnector(ctx, protocol.CreateConnectorRequest{Name: "c", URL: "https://x/" + bidi + "gpj.exe"})
			return err
		}},
		{"connector type too long", func(c *client.Client) error {
			_, err := c.CreateConnector(ctx, protocol.CreateConnectorRequest{Name: "c", URL: "https://x", Type: strings.Repeat("t", 101)})
			return err
		}},
		{"configuration name", func(c *client.Client) error {
			_, err := c.CreateConfiguration(ctx, protocol.CreateConfigurationRequest{Name: "x" + esc, Script: "true"})
			return err
		}},
		{"configuration selector", func(c *client.Client) error {
			_, err := c.CreateConfiguration(ctx, protocol.CreateConfigurationRequest{Name: "x", Script: "true", Selectors: []string{"linux" + esc}})
			return err
		}},
		{"configuration selector update", func(c *client.Client) error {
			_, err := c.UpdateConfiguration(ctx, "conf", protocol.UpdateConfigurationRequest{Selectors: &[]string{"linux" + bidi}})
			return err
		}},
		{"task selector", func(c *client.Client) error {
			_, err := c.SubmitTask(ctx, shell(protocol.TaskSpec{Selectors: []string{"linux" + esc}}))
			return err
		}},
		{"task capability", func(c *client.Client) error {
			_, err := c.SubmitTask(ctx, shell(protocol.TaskSpec{Capabilities: []string{"binary:kubectl" + esc}}))
			return err
		}},
		{"http task method", func(c *client.Client) error {
			_, err := c.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskHTTP, HTTP: &protocol.HTTPSpec{Method: "GET" + esc, URL: "https://x"}})
			return err
		}},
		{"http task url", func(c *client.Client) error {
			_, err := c.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskHTTP, HTTP: &protocol.HTTPSpec{URL: "https://x/" + bidi}})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call(c)
			wantCode(t, tt.name, err, protocol.CodeBadRequest)
			if protocol.HasControl(err.Error()) {
				t.Errorf("the refusal quotes the control characters raw: %q", err.Error())
			}
		})
	}
	// Nothing of it was stored.
	cs, _ := c.ListConnectors(ctx)
	confs, _ := c.ListConfigurations(ctx)
	tasks, _ := c.ListTasks(ctx, "", 0)
	if len(cs.Connectors) != 0 || len(tasks.Tasks) != 0 || len(confs.Configurations) != 1 || len(confs.Configurations[0].Selectors) != 0 {
		t.Errorf("stored: %+v %+v %+v", cs, confs, tasks)
	}
	// Printable text still works.
	// (Surrounding white space is trimmed, as before.)
	if _, err := c.CreateConnector(ctx, protocol.CreateConnectorRequest{Name: "c", URL: "https://x/zürich\n", Type: "Kubernetes (east) – prod",
		Selectors: []string{"east", "東京", " west\n"}}); err != nil {
		t.Errorf("printable connector refused: %v", err)
	}
	if _, err := c.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskHTTP, HTTP: &protocol.HTTPSpec{Method: "m-search", URL: "https://x"},
		Selectors: []string{"linux\t"}}); err != nil {
		t.Errorf("http task with method M-SEARCH refused: %v", err)
	}
}
