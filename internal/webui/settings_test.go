package webui

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestRefusalText: a refusal names the page's fields where the API's
// message names CLI flags, keeps whole commands as they are, and points
// to the Role bindings page for a missing permission.
func TestRefusalText(t *testing.T) {
	apiErr := func(status int, msg string) error {
		return &protocol.Error{Status: status, Code: protocol.CodeBadRequest, Message: msg}
	}
	for _, tc := range []struct {
		section string
		err     error
		want    string
		not     []string
	}{
		{"tokens", apiErr(400, "a project needs its org (--org)"), `a project needs its org (the field "Organization")`, []string{"--org"}},
		{"secrets", apiErr(400, `unknown project "web" in org "eng" (legate project create --org eng web)`),
			`(legate project create --org eng web)`, nil},
		{"users", apiErr(403, `user bob lacks the permission user:manage on the account; a role with user:manage bound at the account or above grants it (legate role bind ROLE --user bob ...)`),
			"Refused: user bob lacks the permission user:manage on the account; a role with user:manage bound at the account or above grants it (someone who manages users can bind you a role that has it under Settings → Role bindings)",
			[]string{"legate role bind", "--user"}},
		{"apikeys", apiErr(409, "… or revoke anyway with --force"), `revoke anyway with the field "Revoke it even if it is the account's last active key"`, nil},
		{"limits", errors.New("connection refused"), "connection refused", nil},
	} {
		got := refusalText(tc.section, tc.err)
		if !strings.Contains(got, tc.want) {
			t.Errorf("refusalText(%s, %v) = %q, want it to say %q", tc.section, tc.err, got, tc.want)
		}
		for _, n := range tc.not {
			if strings.Contains(got, n) {
				t.Errorf("refusalText(%s, %v) = %q names %q", tc.section, tc.err, got, n)
			}
		}
	}
}

func TestWhenAndWords(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	got := string(when(now, now.Add(-3*time.Minute)))
	want := `<time datetime="2026-11-28T11:57:00Z" title="2026-11-28 11:57:00 UTC" data-age>3m ago</time>`
	if got != want {
		t.Errorf("when = %s, want %s", got, want)
	}
	if got := strings.Join(words(" a, b\nc\t d ,"), "|"); got != "a|b|c|d" {
		t.Errorf("words = %q", got)
	}
	if got := words(" , "); len(got) != 0 {
		t.Errorf("words of nothing = %q, want none", got)
	}
}

// TestDestructiveActionsAsk: every action that deletes, revokes, disables,
// removes or resets has a confirmation step, and the others none (a
// create does not ask twice).
func TestDestructiveActionsAsk(t *testing.T) {
	u := &UI{}
	for key, a := range u.settingsActions() {
		verb := key[strings.Index(key, "/")+1:]
		destructive := verb == "delete" || verb == "revoke" || verb == "disable" || verb == "remove" || verb == "reset"
		if destructive != (a.confirm != nil) {
			t.Errorf("settings action %s: destructive %v, asks first %v", key, destructive, a.confirm != nil)
		}
		if sectionOf(key[:strings.Index(key, "/")]) == nil {
			t.Errorf("settings action %s is on no settings page", key)
		}
	}
}
