package webui

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"/tasks?status=queued":    "/tasks?status=queued",
		"/tasks/t_1?notice=a%20b": "/tasks/t_1?notice=a%20b",
		"":                        "/delegates",
		"https://evil.example":    "/delegates",
		"//evil.example/x":        "/delegates",
		"/\\evil.example":         "/delegates",
		"/\t/evil.example":        "/delegates",
		"/\n/evil.example":        "/delegates",
		" //evil.example":         "/delegates",
		"/%2F/evil.example":       "/delegates",
		"/%5Cevil.example":        "/delegates",
		"/%09/evil.example":       "/delegates",
		"/%zz":                    "/delegates",
		"/api/v1/tasks":           "/delegates",
		"/%61pi/v1/tasks":         "/delegates",
		"tasks":                   "/delegates",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

// asBrowser is what a browser makes of a Location: tabs and line breaks
// dropped anywhere, control characters and spaces trimmed, backslashes
// read as slashes (the WHATWG URL parser's rules for http URLs).
func asBrowser(loc string) string {
	loc = strings.Map(func(r rune) rune {
		switch r {
		case '\t', '\n', '\r':
			return -1
		case '\\':
			return '/'
		}
		return r
	}, loc)
	return strings.TrimFunc(loc, func(r rune) bool { return r <= ' ' })
}

// FuzzSafeNext: whatever the sign-in form's next field holds, the
// redirect stays on this site's pages, as a browser reads it and once
// percent-decoded, and http.Redirect writes it as it is.
func FuzzSafeNext(f *testing.F) {
	for _, s := range []string{"/delegates", "//x", "/\\x", "http://x", "/tasks/t_1?notice=a", "/\t/x", "/%2F/x", " //x", "/%5C/x"} {
		f.Add(s)
	}
	base, _ := url.Parse("https://legate.example/signin")
	f.Fuzz(func(t *testing.T, s string) {
		got := safeNext(s)
		if got != s && got != "/delegates" {
			t.Fatalf("safeNext(%q) = %q: neither it nor the default", s, got)
		}
		for _, form := range []string{got, asBrowser(got)} {
			dec, err := url.PathUnescape(form)
			if err != nil {
				t.Fatalf("safeNext(%q) = %q does not decode: %v", s, got, err)
			}
			if u, err := base.Parse(form); err != nil || u.Host != base.Host {
				t.Fatalf("safeNext(%q) = %q leaves the site (%q: %v %v)", s, got, form, u, err)
			}
			for _, p := range []string{form, dec, asBrowser(dec)} {
				if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || strings.HasPrefix(p, "/api/") {
					t.Fatalf("safeNext(%q) = %q leaves the site's pages (%q)", s, got, p)
				}
			}
		}
		w := httptest.NewRecorder()
		http.Redirect(w, httptest.NewRequest("GET", "/signin", nil), got, http.StatusSeeOther)
		if loc := w.Header().Get("Location"); asBrowser(loc) != loc || !strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, "//") {
			t.Fatalf("safeNext(%q) = %q is written as Location %q", s, got, loc)
		}
	})
}

func TestAgo(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for d, want := range map[time.Duration]string{
		0: "just now", 12 * time.Second: "12s ago", 3 * time.Minute: "3m ago", 5 * time.Hour: "5h ago", 72 * time.Hour: "3d ago",
	} {
		if got := ago(now, now.Add(-d)); got != want {
			t.Errorf("ago(%s) = %q, want %q", d, got, want)
		}
	}
}

// TestEventsKeepOneEventPerSend: data with newlines (and carriage
// returns, which would end a line in the browser's parser) stays one
// event.
func TestEventsKeepOneEventPerSend(t *testing.T) {
	rec := httptest.NewRecorder()
	u := New(Config{})
	ev, ok := u.startEvents(rec)
	if !ok {
		t.Fatal("no stream")
	}
	if err := ev.send("delegates", "<p>a</p>\n<p>b\rc</p>"); err != nil {
		t.Fatal(err)
	}
	want := "event: delegates\ndata: <p>a</p>\ndata: <p>bc</p>\n\n"
	if got := rec.Body.String(); got != want {
		t.Errorf("stream %q, want %q", got, want)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("content type %q", ct)
	}
}

func TestSameOrigin(t *testing.T) {
	for _, tc := range []struct {
		origin, site string
		want         bool
	}{
		{"", "", true},
		{"http://legate.test", "same-origin", true},
		{"null", "same-origin", true},
		{"null", "cross-site", false},
		{"https://evil.example", "", false},
		{"", "same-site", false},
	} {
		r := httptest.NewRequest("POST", "http://legate.test/signout", nil)
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		if tc.site != "" {
			r.Header.Set("Sec-Fetch-Site", tc.site)
		}
		if got := sameOrigin(r); got != tc.want {
			t.Errorf("Origin %q, Sec-Fetch-Site %q: %v, want %v", tc.origin, tc.site, got, tc.want)
		}
	}
}
