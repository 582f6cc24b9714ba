package protocol

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCheckPayload(t *testing.T) {
	t.Parallel()
	shell := &ShellSpec{Script: "echo hi"}
	get := func(url string) *HTTPSpec { return &HTTPSpec{URL: url} }
	image := &ContainerSpec{Image: "alpine:3.20"}
	tests := []struct {
		name string
		in   TaskSpec
		want TaskSpec // when err is ""
		err  string
	}{
		{"shell", TaskSpec{Type: TaskShell, Shell: shell, HTTP: get("http://x/"), Container: image}, TaskSpec{Type: TaskShell, Shell: shell}, ""},
		{"untyped shell", TaskSpec{Shell: shell}, TaskSpec{Type: TaskShell, Shell: shell}, ""},
		{"untyped, nothing", TaskSpec{}, TaskSpec{}, "a shell task needs a non-empty script"},
		{"blank script", TaskSpec{Type: TaskShell, Shell: &ShellSpec{Script: " \n\t"}}, TaskSpec{}, "a shell task needs a non-empty script"},
		{"script too long", TaskSpec{Type: TaskShell, Shell: &ShellSpec{Script: strings.Repeat("x", MaxShellScript+1)}}, TaskSpec{}, "script is larger than 1 MiB"},
		{"longest script", TaskSpec{Type: TaskShell, Shell: &ShellSpec{Script: strings.Repeat("x", MaxShellScript)}},
			TaskSpec{Type: TaskShell, Shell: &ShellSpec{Script: strings.Repeat("x", MaxShellScript)}}, ""},

		{"untyped http", TaskSpec{HTTP: get("https://x/"), Shell: shell}, TaskSpec{Type: TaskHTTP, HTTP: &HTTPSpec{Method: "GET", URL: "https://x/"}}, ""},
		{"method upper case", TaskSpec{Type: TaskHTTP, HTTP: &HTTPSpec{Method: "post", URL: "http://x/", ExpectStatus: 201}},
			TaskSpec{Type: TaskHTTP, HTTP: &HTTPSpec{Method: "POST", URL: "http://x/", ExpectStatus: 201}}, ""},
		{"http without section", TaskSpec{Type: TaskHTTP}, TaskSpec{}, "an http task needs an http section with a url"},
		{"ftp", TaskSpec{Type: TaskHTTP, HTTP: get("ftp://x/")}, TaskSpec{}, "http url must be an absolute http:// or https:// URL"},
		{"relative", TaskSpec{Type: TaskHTTP, HTTP: get("/x")}, TaskSpec{}, "http url must be an absolute http:// or https:// URL"},
		{"unparsable", TaskSpec{Type: TaskHTTP, HTTP: get("http://[::1")}, TaskSpec{}, "http url must be an absolute http:// or https:// URL"},
		{"bad method", TaskSpec{Type: TaskHTTP, HTTP: &HTTPSpec{Method: "GE T", URL: "http://x/"}}, TaskSpec{}, `http method "GE T" is invalid: use a method such as GET or POST`},
		{"long method", TaskSpec{Type: TaskHTTP, HTTP: &HTTPSpec{Method: strings.Repeat("A", 33), URL: "http://x/"}}, TaskSpec{},
			`http method "` + strings.Repeat("A", 33) + `" is invalid: use a method such as GET or POST`},
		{"control in url", TaskSpec{Type: TaskHTTP, HTTP: get("http://x/\u202e")}, TaskSpec{},
			"http url contains the control or formatting character U+202E at byte 9; use printable text only"},
		{"url too long", TaskSpec{Type: TaskHTTP, HTTP: get("http://x/" + strings.Repeat("a", MaxHTTPURL))}, TaskSpec{},
			"http url is too long (8201 bytes; at most 8192)"},
		{"expect 42", TaskSpec{Type: TaskHTTP, HTTP: &HTTPSpec{URL: "http://x/", ExpectStatus: 42}}, TaskSpec{}, "expect_status must be between 100 and 599"},

		{"untyped container", TaskSpec{Container: image, HTTP: nil}, TaskSpec{Type: TaskContainer, Container: image}, ""},
		{"container and shell untyped", TaskSpec{Container: image, Shell: shell}, TaskSpec{Type: TaskShell, Shell: shell}, ""},
		{"container", TaskSpec{Type: TaskContainer, Container: image, Shell: shell}, TaskSpec{Type: TaskContainer, Container: image}, ""},
		{"container without section", TaskSpec{Type: TaskContainer}, TaskSpec{}, `a container task needs a "container" section with an image`},

		{"unknown", TaskSpec{Type: "docker", Shell: shell}, TaskSpec{}, `unknown task type "docker" (use shell, http, container, kubernetes, helm or verify)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := tt.in
			if s.HTTP != nil {
				h := *s.HTTP
				s.HTTP = &h
			}
			err := s.CheckPayload()
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("error %v, want %s", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, s); diff != "" {
				t.Errorf("normalized (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTaskTypes(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, typ := range TaskTypes() {
		if seen[typ] || typ == "" {
			t.Errorf("task type %q empty or twice", typ)
		}
		seen[typ] = true
		// Every type has a case in CheckPayload.
		s := TaskSpec{Type: typ}
		if err := s.CheckPayload(); err == nil || strings.HasPrefix(err.Error(), "unknown task type") {
			t.Errorf("CheckPayload of an empty %s task: %v, want its payload refused", typ, err)
		}
	}
}
