package client

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

// htmlServer is a web server that is not a manager: every answer is an
// HTML page with the given status, without the manager's header.
func htmlServer(t *testing.T, status int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "<!DOCTYPE html>\n<html><head><title>"+http.StatusText(status)+"</title></head>\n<body><h1>nginx</h1></body></html>\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestNotAManager: an answer from something that is not a manager (a web
// server's or a proxy's HTML page, without the manager's header) is one
// line that names the URL, the status and the content type, never the
// page; error answers keep the code of their status.
func TestNotAManager(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status   int
		wantCode protocol.Code
	}{
		{http.StatusNotFound, protocol.CodeBadRequest},
		{http.StatusBadGateway, protocol.CodeUnavailable}, // a proxy's manager may come back: still retried
		{http.StatusOK, ""},                               // a site that serves its page for every path
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.status), func(t *testing.T) {
			t.Parallel()
			srv := htmlServer(t, tt.status)
			c, err := New(srv.URL+"/", nil)
			if err != nil {
				t.Fatal(err)
			}
			c.SetSecret("s3cret")
			check := func(what string, err error) {
				t.Helper()
				var nm *NotManagerError
				if !errors.As(err, &nm) {
					t.Fatalf("%s: error %v (%T), want a *NotManagerError", what, err, err)
				}
				want := srv.URL + " does not look like a legate manager (HTTP " + strconv.Itoa(tt.status) + ", text/html)"
				if msg := err.Error(); !strings.Contains(msg, want) || strings.Contains(msg, "<") || strings.Contains(msg, "\n") {
					t.Errorf("%s: error %q, want one line with %q and no HTML", what, msg, want)
				}
				if tt.wantCode != "" && !IsCode(err, tt.wantCode) {
					t.Errorf("%s: error %v, want code %s", what, err, tt.wantCode)
				}
			}
			_, err = c.ListTasks(t.Context(), "", 0)
			check("list tasks", err)
			_, err = c.SubmitTask(t.Context(), protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "true"}})
			check("submit task", err)
			err = c.Admin(t.Context(), "sign in", http.MethodPost, protocol.PathSessions, protocol.CreateSessionRequest{User: "a", Password: "b"}, &protocol.Session{})
			check("sign in", err)
			_, err = c.StreamLogs(t.Context(), "t_1", true, func(protocol.LogStreamLine) error { return nil })
			check("stream logs", err)
		})
	}
}

// TestManagerAtAWrongPath: a manager's own HTML page (its web UI's 404 for
// a path under it that is not the API) says that a manager answered, so
// the URL's path is what is wrong.
func TestManagerAtAWrongPath(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(protocol.HeaderProtocolVersion, strconv.Itoa(protocol.Version))
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, "<!doctype html>\n<title>Not Found · legate</title>\n")
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL+"/legate", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ListTasks(t.Context(), "", 0)
	var nm *NotManagerError
	want := srv.URL + "/legate does not look like a legate manager's API (HTTP 404, text/html): a manager answered"
	if !errors.As(err, &nm) || !nm.Manager || !strings.HasSuffix(err.Error(), want) || !IsCode(err, protocol.CodeBadRequest) {
		t.Errorf("error %v, want a *NotManagerError ending %q", err, want)
	}
}
