package manager

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

// TestAuditListByAction: GET PathAudit's action filter, through the
// client: an action keeps it and those beneath it; ending with "." or
// "*", a prefix; anything else is refused with a clear error.
func TestAuditListByAction(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	if _, err := admin.CreateToken(ctx, "ci"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.RevokeToken(ctx, "ci"); err != nil {
		t.Fatal(err)
	}
	task, err := admin.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "true"}, Selectors: []string{"nobody"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CancelTask(ctx, task.ID); err != nil {
		t.Fatal(err)
	}
	actions := func(q client.AuditQuery) []string {
		t.Helper()
		l, err := admin.ListAudit(ctx, q)
		if err != nil {
			t.Fatalf("%+v: %v", q, err)
		}
		out := []string{}
		for _, e := range l.Events {
			out = append(out, e.Action)
		}
		return out
	}
	for _, tc := range []struct {
		action string
		want   []string
	}{
		{"token", []string{"token.revoke", "token.create"}},
		{"token.revoke", []string{"token.revoke"}},
		{"token.", []string{"token.revoke", "token.create"}},
		{"tok*", []string{"token.revoke", "token.create"}},
		{"tok", []string{}},
		{"task.", []string{"task.cancel"}},
		{"task.cancel", []string{"task.cancel"}},
	} {
		if diff := cmp.Diff(tc.want, actions(client.AuditQuery{Action: tc.action})); diff != "" {
			t.Errorf("action=%s (-want +got):\n%s", tc.action, diff)
		}
	}
	// Pages of a filtered list follow the cursor.
	first, err := admin.ListAudit(ctx, client.AuditQuery{Action: "token", Limit: 1})
	if err != nil || len(first.Events) != 1 || first.Next == "" {
		t.Fatalf("first page: %+v, %v", first, err)
	}
	second, err := admin.ListAudit(ctx, client.AuditQuery{Action: "token", Limit: 1, After: first.Next})
	if err != nil || len(second.Events) != 1 || second.Events[0].Action != "token.create" || second.Next != "" {
		t.Fatalf("second page: %+v, %v", second, err)
	}
	for _, bad := range []string{"Token", "*", "token create", "token;drop", "token%"} {
		st, body := tm.api(t, tm.admin.APIKey, "GET", protocol.PathAudit+"?action="+url.QueryEscape(bad), "")
		if st != http.StatusBadRequest || !strings.Contains(body, "lowercase letters") {
			t.Errorf("action=%q: %d %s", bad, st, body)
		}
	}
}
