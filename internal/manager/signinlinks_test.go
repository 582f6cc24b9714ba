package manager

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/protocol"
)

func TestSignInLinks(t *testing.T) {
	tm := startTestManager(t, Config{})
	admin := tm.admin.APIKey
	member := tm.userKey(t, "pam", access.RoleViewer, access.Account)
	var l protocol.SignInLink
	_ = json.Unmarshal([]byte(tm.mustAPI(t, member, "POST", protocol.PathSignInLinks, "", 201)), &l)
	token := strings.TrimPrefix(l.Path, protocol.PathUISignIn+"?token=")
	if l.User != "pam" || !strings.HasPrefix(token, "lgl_") {
		t.Fatalf("link %+v", l)
	}
	body := fmt.Sprintf(`{"link":%q}`, token)
	var s protocol.Session
	_ = json.Unmarshal([]byte(tm.mustAPI(t, "", "POST", protocol.PathSessions, body, 201)), &s)
	var who protocol.WhoAmI
	_ = json.Unmarshal([]byte(tm.mustAPI(t, s.Token, "GET", protocol.PathWhoAmI, "", 200)), &who)
	if who.Principal != "pam" || !who.Session {
		t.Errorf("whoami with a link's session: %+v", who)
	}
	if st, b := tm.api(t, "", "POST", protocol.PathSessions, body); st != 401 || !strings.Contains(b, "used already") {
		t.Errorf("a link used twice: %d %s", st, b)
	}
	if st, b := tm.api(t, "", "POST", protocol.PathSessions, `{"link":"lgl_0000"}`); st != 401 {
		t.Errorf("an unknown link: %d %s", st, b)
	}
	// Only users get links.
	tm.mustAPI(t, admin, "POST", protocol.PathUsers, `{"name":"linkbot","kind":"service_account"}`, 201)
	var k protocol.APIKey
	_ = json.Unmarshal([]byte(tm.mustAPI(t, admin, "POST", protocol.PathAPIKeys, `{"name":"bk","owner":"linkbot"}`, 201)), &k)
	if st, b := tm.api(t, k.Value, "POST", protocol.PathSignInLinks, ""); st != 400 || !strings.Contains(b, "for users") {
		t.Errorf("a service account's link: %d %s", st, b)
	}
}

// TestSignInLinkExpires: a link unused for signInLinkTTL is refused, and
// so is a session past sessionTTL.
func TestSignInLinkExpires(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	tm := startTestManager(t, Config{Now: clock.Now, HeartbeatInterval: time.Hour})
	var l protocol.SignInLink
	_ = json.Unmarshal([]byte(tm.mustAPI(t, tm.admin.APIKey, "POST", protocol.PathSignInLinks, "", 201)), &l)
	if want := clock.Now().Add(signInLinkTTL); !l.ExpiresAt.Equal(want.UTC()) {
		t.Errorf("link expires at %s, want %s", l.ExpiresAt, want)
	}
	token := strings.TrimPrefix(l.Path, protocol.PathUISignIn+"?token=")
	clock.Add(signInLinkTTL)
	if st, b := tm.api(t, "", "POST", protocol.PathSessions, fmt.Sprintf(`{"link":%q}`, token)); st != 401 || !strings.Contains(b, "expired") {
		t.Errorf("an expired link: %d %s", st, b)
	}
	_ = json.Unmarshal([]byte(tm.mustAPI(t, tm.admin.APIKey, "POST", protocol.PathSignInLinks, "", 201)), &l)
	token = strings.TrimPrefix(l.Path, protocol.PathUISignIn+"?token=")
	var s protocol.Session
	_ = json.Unmarshal([]byte(tm.mustAPI(t, "", "POST", protocol.PathSessions, fmt.Sprintf(`{"link":%q}`, token), 201)), &s)
	tm.mustAPI(t, s.Token, "GET", protocol.PathWhoAmI, "", 200)
	clock.Add(sessionTTL)
	if st, b := tm.api(t, s.Token, "GET", protocol.PathWhoAmI, ""); st != 401 || !strings.Contains(b, "expired") {
		t.Errorf("a session past its TTL: %d %s", st, b)
	}
}
