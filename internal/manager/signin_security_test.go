package manager

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/protocol"
)

// browserTarget is where a browser on base goes with this Location: it
// drops tabs and line breaks anywhere, leading and trailing control
// characters and spaces, and reads a backslash as a slash (the WHATWG URL
// parser's rules for http URLs).
func browserTarget(t *testing.T, base, loc string) *url.URL {
	t.Helper()
	loc = strings.Map(func(r rune) rune {
		switch r {
		case '\t', '\n', '\r':
			return -1
		case '\\':
			return '/'
		}
		return r
	}, loc)
	loc = strings.TrimFunc(loc, func(r rune) bool { return r <= ' ' })
	b, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u, err := b.Parse(loc)
	if err != nil {
		t.Fatalf("Location %q: %v", loc, err)
	}
	return u
}

// roundTrip makes b's request without the client's redirect handling,
// which refuses to parse a Location a browser would follow: the answer is
// returned as it came.
func (b *browser) roundTrip(method, path string, form url.Values) *http.Response {
	b.t.Helper()
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	req, err := http.NewRequest(method, b.tm.url+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", b.tm.url)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	for _, c := range b.hc.Jar.Cookies(b.url) {
		req.AddCookie(c)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		b.t.Errorf("%s %s: %v", method, path, err)
		return nil
	}
	resp.Body.Close()
	return resp
}

// TestSignInRedirectStaysOnSite: the sign-in page's next (on the page of
// a signed-in user, and in the form's POST) never sends the browser to
// another site, however it is disguised.
func TestSignInRedirectStaysOnSite(t *testing.T) {
	tm := startTestManager(t, Config{})
	tm.mustAPI(t, tm.admin.APIKey, "POST", protocol.PathUsers, `{"name":"vera","password":"correct horse battery"}`, 201)
	site, _ := url.Parse(tm.url)
	nexts := []string{
		"/\t/evil.example", "/\n/evil.example", "/\r\n/evil.example", " //evil.example", "\t//evil.example",
		"/\\evil.example", "\\\\evil.example", "/\\/evil.example", "//evil.example", "///evil.example",
		"https://evil.example/", "https:evil.example", "/%2F%2Fevil.example", "/%5Cevil.example", "/%09/evil.example",
		"/.//evil.example", "/..//evil.example", "/\x00/evil.example", "/\x7f/evil.example", "\x01//evil.example",
	}
	check := func(what, next string, resp *http.Response) {
		t.Helper()
		if resp == nil {
			return
		}
		if resp.StatusCode != http.StatusSeeOther {
			t.Errorf("%s, next %q: %d; want 303", what, next, resp.StatusCode)
			return
		}
		loc := resp.Header.Get("Location")
		if u := browserTarget(t, tm.url, loc); u.Host != site.Host || u.Scheme != site.Scheme {
			t.Errorf("%s, next %q: Location %q takes the browser to %s", what, next, loc, u)
		}
	}
	b := newBrowser(t, tm)
	b.signIn(tm.admin.APIKey)
	for _, next := range nexts {
		resp := b.roundTrip("GET", "/signin?next="+url.QueryEscape(next), nil)
		check("the sign-in page, signed in", next, resp)
	}
	for _, next := range nexts {
		fresh := newBrowser(t, tm)
		form := url.Values{"user": {"vera"}, "password": {"correct horse battery"}, "csrf": {fresh.csrf("/signin")}, "next": {next}}
		resp := fresh.roundTrip("POST", "/signin", form)
		check("the sign-in form", next, resp)
	}
	// An honest next, the one the UI itself sends, is kept.
	resp := b.roundTrip("GET", "/signin?next="+url.QueryEscape("/tasks?status=queued&page=2"), nil)
	if loc := resp.Header.Get("Location"); loc != "/tasks?status=queued&page=2" {
		t.Errorf("an honest next: Location %q", loc)
	}
}
