package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestCLINotAManager: the legate binary pointed at something that is not
// a manager's API — a web server that answers HTML, or a real manager at
// a wrong path — says so in one line with the status and the content
// type, never the HTML page: for a list, a task run and a login.
func TestCLINotAManager(t *testing.T) {
	t.Parallel()
	c := startCluster(t)
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, "<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head>\n<body><h1>Not Found</h1></body></html>\n")
	}))
	t.Cleanup(web.Close)
	for _, tt := range []struct {
		name, url, want string
	}{
		{"web server", web.URL, web.URL + " does not look like a legate manager (HTTP 404, text/html): check LEGATE_URL or --url"},
		{"manager at a wrong path", c.url + "/legate", c.url + "/legate does not look like a legate manager's API (HTTP 404, text/html): a manager answered; check the path of LEGATE_URL or --url"},
	} {
		for _, args := range [][]string{{"task", "list"}, {"task", "run", "--script", "echo hi"}, {"login", "--user", "admin"}} {
			r := c.cliStdin("secret\n", []string{"LEGATE_URL=" + tt.url}, args...)
			lines := strings.Split(strings.TrimSpace(strings.TrimPrefix(r.stderr, "Password: ")), "\n")
			if r.code != 1 || len(lines) != 1 || !strings.HasSuffix(lines[0], tt.want) || strings.Contains(r.stderr, "<") {
				t.Errorf("%s: %v: exit %d, stderr %q, want one line ending %q", tt.name, args, r.code, r.stderr, tt.want)
			}
		}
	}
}
