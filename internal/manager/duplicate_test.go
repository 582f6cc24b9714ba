package manager

import (
	"context"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestDuplicateIdentityOnDelegatePage: two processes with one identity
// (two clusters' legate-delegate-0): the second supersedes the first once,
// as a restart would; the first coming back proves there are two, keeps
// the identity, and the second is refused (duplicate_identity) with a
// message naming both; the delegate's page in the web UI says so.
func TestDuplicateIdentityOnDelegatePage(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	admin := tm.client(t, tm.admin.APIKey)
	tok, err := admin.CreateToken(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	register := func(process, ip string) error {
		_, err := tm.client(t, "").Register(ctx, protocol.RegisterRequest{
			ProtocolVersion: protocol.Version, AccountID: tm.admin.AccountID, Token: tok.Value, Name: "dup",
			Hostname: "legate-delegate-0", IP: ip, Version: "test", TaskTypes: protocol.TaskTypes(),
			IdentityByHostname: true, ProcessID: process,
		})
		return err
	}
	for _, step := range []struct{ process, ip string }{{"first", "10.1.0.7"}, {"second", "10.2.0.9"}, {"first", "10.1.0.7"}} {
		if err := register(step.process, step.ip); err != nil {
			t.Fatalf("register %s: %v", step.process, err)
		}
	}
	err = register("second", "10.2.0.9")
	wantCode(t, "the second again", err, protocol.CodeDuplicateIdentity)
	for _, want := range []string{"10.1.0.7", "10.2.0.9", "legate-delegate-0", "DELEGATE_NAME"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not name %q: %v", want, err)
		}
	}
	b := newBrowserSignedIn(t, tm)
	_, page := b.get("/delegates/dup")
	if !strings.Contains(page, "two delegate processes use one identity") || !strings.Contains(page, "10.2.0.9") {
		t.Errorf("the delegate's page does not show the duplicate:\n%s", page)
	}
	// A new process (a restart) still takes over at once.
	if err := register("restarted", "10.1.0.7"); err != nil {
		t.Errorf("a restart refused: %v", err)
	}
}
