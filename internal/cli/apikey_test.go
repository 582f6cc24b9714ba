package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/protocol"
)

func TestAPIKeyCommands(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{})
	r := runCLI(t.Context(), m.env(), "", "apikey", "create", "ci")
	if r.err != nil {
		t.Fatalf("create: %v, stderr %q", r.err, r.stderr)
	}
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if got := lines[len(lines)-1]; got != "lgk_secret_ci" || len(lines) < 2 || !strings.Contains(lines[0], "LEGATE_API_KEY") {
		t.Errorf("create: stdout %q, want an explanation naming LEGATE_API_KEY and the key alone on the last line", r.stdout)
	}
	r = runCLI(t.Context(), m.env(), "", "apikey", "create", "ci")
	if code := exitCodeOf(t, r.err); code != 1 || !strings.Contains(r.stderr, "already exists") {
		t.Errorf("duplicate: exit %d, stderr %q", code, r.stderr)
	}

	if r = runCLI(t.Context(), m.env(), "", "apikey", "revoke", "ci"); r.err != nil || r.stdout != "Revoked API key \"ci\"; every manager refuses it now.\n" {
		t.Errorf("revoke: %v, stdout %q", r.err, r.stdout)
	}
	r = runCLI(t.Context(), m.env(), "", "apikey", "list")
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := "NAME   STATUS          OWNER  CREATED  CREATED-BY  LAST-USED  REVOKED\n" +
		"admin  active,current  admin  1h ago   -           0s ago     -\n" +
		"ci     revoked         admin  1m ago   admin       never      0s ago by admin\n"
	if d := cmp.Diff(want, r.stdout); d != "" {
		t.Errorf("list (-want +got):\n%s", d)
	}
	r = runCLI(t.Context(), m.env(), "", "apikeys", "ls", "--json")
	var list protocol.APIKeyList
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil || len(list.APIKeys) != 2 || !list.APIKeys[0].Current {
		t.Errorf("list --json: %v, %+v", err, list)
	}

	// The last key: refused with the manager's explanation, then forced.
	r = runCLI(t.Context(), m.env(), "", "apikey", "revoke", "admin")
	if code := exitCodeOf(t, r.err); code != 1 || !strings.Contains(r.stderr, "--force") {
		t.Errorf("revoke the last key: exit %d, stderr %q", code, r.stderr)
	}
	r = runCLI(t.Context(), m.env(), "", "apikey", "revoke", "admin", "--force", "--json")
	var k protocol.APIKey
	if err := json.Unmarshal([]byte(r.stdout), &k); r.err != nil || err != nil || k.Status != protocol.TokenRevoked {
		t.Errorf("forced revoke: %v %v %+v", r.err, err, k)
	}
	m.mu.Lock()
	reqs := m.revokeReqs
	m.mu.Unlock()
	if diff := cmp.Diff([]protocol.RevokeAPIKeyRequest{{}, {}, {Force: true}}, reqs); diff != "" {
		t.Errorf("revoke requests (-want +got):\n%s", diff)
	}
	r = runCLI(t.Context(), m.env(), "", "apikey", "revoke", "nope")
	if code := exitCodeOf(t, r.err); code != 1 || !strings.Contains(r.stderr, "not found") {
		t.Errorf("revoke unknown: exit %d, stderr %q", code, r.stderr)
	}
	r = runCLI(t.Context(), m.env(), "", "apikey", "--help")
	if r.err != nil || !strings.Contains(r.stdout, "--force") || !strings.Contains(r.stdout, "admin.env") {
		t.Errorf("help: %v\n%s", r.err, r.stdout)
	}
}

// apikey create --owner asks for a key of that user or service account and
// says whose key it printed.
func TestAPIKeyCreateOwner(t *testing.T) {
	t.Parallel()
	m := newFakeManager(t, outcomeSpec{})
	r := runCLI(t.Context(), m.env(), "", "apikey", "create", "deploy", "--owner", "ci-bot")
	if r.err != nil {
		t.Fatalf("create --owner: %v, stderr %q", r.err, r.stderr)
	}
	lines := strings.Split(strings.TrimRight(r.stdout, "\n"), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"deploy" for service account ci-bot`) || lines[1] != "lgk_secret_deploy" {
		t.Errorf("create --owner: stdout %q, want the owner named and the key alone on the last line", r.stdout)
	}
	r = runCLI(t.Context(), m.env(), "", "apikey", "create", "orphan", "--owner", "ghost")
	if code := exitCodeOf(t, r.err); code != 1 || !strings.Contains(r.stderr, `user "ghost" not found`) {
		t.Errorf("unknown owner: exit %d, stderr %q", code, r.stderr)
	}
	if r = runCLI(t.Context(), m.env(), "", "apikey", "create", "mine"); r.err != nil || !strings.Contains(r.stdout, `"mine" for user admin`) {
		t.Errorf("create without --owner: %v, stdout %q", r.err, r.stdout)
	}
	m.mu.Lock()
	reqs := m.keyReqs
	m.mu.Unlock()
	want := []protocol.CreateAPIKeyRequest{{Name: "deploy", Owner: "ci-bot"}, {Name: "orphan", Owner: "ghost"}, {Name: "mine"}}
	if d := cmp.Diff(want, reqs); d != "" {
		t.Errorf("create requests (-want +got):\n%s", d)
	}
	r = runCLI(t.Context(), m.env(), "", "apikey", "list")
	if r.err != nil || !strings.Contains(r.stdout, "deploy  active          ci-bot") {
		t.Errorf("list shows the owner: %v\n%s", r.err, r.stdout)
	}
}
