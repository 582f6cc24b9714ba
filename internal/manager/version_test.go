package manager

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestProtocolVersions: a manager serves clients of every protocol version
// from protocol.MinVersion on, newer than its own included, and tells each
// its own version (in the registration answer, and in a header on every
// response, refusals included); older or malformed versions are refused
// with unsupported_version.
func TestProtocolVersions(t *testing.T) {
	tm := startTestManager(t, Config{})
	ctx := context.Background()
	tok, err := tm.client(t, tm.admin.APIKey).CreateToken(ctx, "versions")
	if err != nil {
		t.Fatal(err)
	}
	own := strconv.Itoa(protocol.Version)
	for _, tt := range []struct {
		header string // sent as protocol.HeaderProtocolVersion ("" none)
		want   int    // status
	}{
		{"", http.StatusOK},
		{strconv.Itoa(protocol.MinVersion), http.StatusOK},
		{own, http.StatusOK},
		{strconv.Itoa(protocol.Version + 1), http.StatusOK},
		{strconv.Itoa(protocol.Version + 100), http.StatusOK},
		{strconv.Itoa(protocol.MinVersion - 1), http.StatusBadRequest},
		{"four", http.StatusBadRequest},
	} {
		req, err := http.NewRequestWithContext(ctx, "GET", tm.url+protocol.PathWhoAmI, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tm.admin.APIKey)
		if tt.header != "" {
			req.Header.Set(protocol.HeaderProtocolVersion, tt.header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body protocol.ErrorBody
		if resp.StatusCode != http.StatusOK {
			_ = json.NewDecoder(resp.Body).Decode(&body)
		}
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("version %q: HTTP %d, want %d", tt.header, resp.StatusCode, tt.want)
		}
		if tt.want != http.StatusOK && body.Error.Code != protocol.CodeVersion {
			t.Errorf("version %q: refused with %q, want %q", tt.header, body.Error.Code, protocol.CodeVersion)
		}
		if got := resp.Header.Get(protocol.HeaderProtocolVersion); got != own {
			t.Errorf("version %q: answered with version %q, want the manager's, %s", tt.header, got, own)
		}
	}

	for _, tt := range []struct {
		version int
		ok      bool
	}{
		{protocol.MinVersion, true},
		{protocol.Version + 1, true},
		{-1, false},
	} {
		resp, err := tm.client(t, "").Register(ctx, protocol.RegisterRequest{
			ProtocolVersion: tt.version, AccountID: tm.admin.AccountID, Token: tok.Value,
			Name: "versions", Hostname: "host-v" + strconv.Itoa(tt.version+10), IP: "127.0.0.1",
		})
		switch {
		case !tt.ok:
			wantCode(t, "register with version "+strconv.Itoa(tt.version), err, protocol.CodeVersion)
		case err != nil:
			t.Errorf("register with version %d: %v", tt.version, err)
		case resp.ProtocolVersion != protocol.Version:
			t.Errorf("register with version %d: answered with version %d, want the manager's, %d", tt.version, resp.ProtocolVersion, protocol.Version)
		}
	}
}
