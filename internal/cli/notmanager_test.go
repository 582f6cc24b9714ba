package cli

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestNotAManagerURL: a URL that names a web server, not a manager, gives
// one line that says so with the status and the content type, never the
// server's HTML page — for a list, a task run and a login.
func TestNotAManagerURL(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, "<!DOCTYPE HTML>\n<html>\n<head><title>Error response</title></head>\n<body><h1>404 Not Found</h1></body>\n</html>\n")
	}))
	t.Cleanup(srv.Close)
	env := map[string]string{EnvURL: srv.URL, EnvAPIKey: testKey}
	tests := []struct {
		args  []string
		stdin string
		op    string
	}{
		{[]string{"task", "list"}, "", "list tasks"},
		{[]string{"user", "list"}, "", "list users"},
		{[]string{"task", "run", "--script", "echo hi"}, "", "submit task"},
		{[]string{"login", "--user", "alice"}, "pw\n", "sign in"},
		{[]string{"login", "--with-token"}, "lgk_x\n", "check the key: who am I"},
	}
	for _, tt := range tests {
		r := runCLI(t.Context(), env, tt.stdin, tt.args...)
		want := "legate: " + tt.op + ": " + srv.URL + " does not look like a legate manager (HTTP 404, text/html): check LEGATE_URL or --url\n"
		if exitCodeOf(t, r.err) != ExitFailure || !strings.HasSuffix(r.stderr, want) || strings.Contains(r.stderr, "<") {
			t.Errorf("%v: err %v, stderr %q, want it to end with %q", tt.args, r.err, r.stderr, want)
		}
	}
}
