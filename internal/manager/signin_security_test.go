package manager

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

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

// TestPasswordChangeEndsSignIns: setting a user's password (by an
// administrator) ends the user's sign-in sessions, those of the API and
// of the web UI, and its unused sign-in links; a user who sets their own
// password with a session keeps that session, and only it.
func TestPasswordChangeEndsSignIns(t *testing.T) {
	tm := startTestManager(t, Config{})
	admin := tm.admin.APIKey
	tm.mustAPI(t, admin, "POST", protocol.PathUsers, `{"name":"vera","password":"correct horse battery"}`, 201)
	tm.mustAPI(t, admin, "POST", protocol.PathBindings, `{"role":"viewer","subject_kind":"user","subject":"vera"}`, 201)
	signIn := func(user, password string) string {
		t.Helper()
		var s protocol.Session
		if err := json.Unmarshal([]byte(tm.mustAPI(t, "", "POST", protocol.PathSessions,
			fmt.Sprintf(`{"user":%q,"password":%q}`, user, password), 201)), &s); err != nil {
			t.Fatal(err)
		}
		return s.Token
	}
	session := signIn("vera", "correct horse battery")
	link := signInLink(t, tm, session)
	ui := newBrowser(t, tm)
	form := url.Values{"user": {"vera"}, "password": {"correct horse battery"}, "csrf": {ui.csrf("/signin")}}
	if resp, page := ui.do("POST", "/signin", form, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("web UI sign-in: %d\n%s", resp.StatusCode, page)
	}
	if resp, _ := ui.get("/delegates"); resp.StatusCode != 200 {
		t.Fatalf("the web UI's page before the change: %d", resp.StatusCode)
	}

	tm.mustAPI(t, admin, "PATCH", protocol.PathUsers+"/vera", `{"password":"a new horse battery"}`, 200)
	if st, body := tm.api(t, session, "GET", protocol.PathWhoAmI, ""); st != http.StatusUnauthorized {
		t.Errorf("the API session after the password changed: %d %s; want 401", st, body)
	}
	if resp, _ := ui.get("/delegates"); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/signin") {
		t.Errorf("the web UI's session after the password changed: %d %q; want the sign-in page", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, page := newBrowser(t, tm).useLink(link); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("an unused sign-in link after the password changed: %d\n%s", resp.StatusCode, page)
	}
	if st, body := tm.api(t, "", "POST", protocol.PathSessions, `{"user":"vera","password":"correct horse battery"}`); st != http.StatusUnauthorized {
		t.Errorf("the old password: %d %s", st, body)
	}
	tm.mustAPI(t, signIn("vera", "a new horse battery"), "GET", protocol.PathWhoAmI, "", 200)

	// The administrator sets its own password with one of its sessions:
	// that session goes on, the other ends.
	tm.mustAPI(t, admin, "PATCH", protocol.PathUsers+"/admin", `{"password":"first admin password"}`, 200)
	mine, other := signIn("admin", "first admin password"), signIn("admin", "first admin password")
	tm.mustAPI(t, mine, "PATCH", protocol.PathUsers+"/admin", `{"password":"second admin password"}`, 200)
	tm.mustAPI(t, mine, "GET", protocol.PathWhoAmI, "", 200)
	if st, body := tm.api(t, other, "GET", protocol.PathWhoAmI, ""); st != http.StatusUnauthorized {
		t.Errorf("the administrator's other session after its password changed: %d %s; want 401", st, body)
	}
	// Its API key is not a sign-in: it goes on.
	tm.mustAPI(t, admin, "GET", protocol.PathWhoAmI, "", 200)
}

// selfSigned returns a TLS certificate for 127.0.0.1 and a pool that
// trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "legate test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

// TestSecureCookiesAndHSTS: behind a TLS-terminating proxy (plain HTTP to
// the manager, an https public URL) and when the manager serves TLS
// itself, the web UI's cookies are Secure and every answer, of the API
// and of the web UI, carries Strict-Transport-Security; with a plain
// http URL, neither.
func TestSecureCookiesAndHSTS(t *testing.T) {
	const hsts = "max-age=31536000"
	cert, pool := selfSigned(t)
	for _, tc := range []struct {
		what   string
		cfg    Config
		scheme string
		secure bool
	}{
		{"behind a TLS-terminating proxy", Config{PublicURL: "https://legate.example.com"}, "http", true},
		{"serving TLS", Config{TLS: &tls.Config{Certificates: []tls.Certificate{cert}}}, "https", true},
		{"plain HTTP", Config{PublicURL: "http://legate.example.com"}, "http", false},
	} {
		t.Run(tc.what, func(t *testing.T) {
			tm := startTestManager(t, tc.cfg)
			tm.url = strings.Replace(tm.url, "http://", tc.scheme+"://", 1)
			b := newBrowser(t, tm)
			b.url, _ = url.Parse(tm.url)
			b.hc.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
			t.Cleanup(b.hc.CloseIdleConnections)
			wantHSTS := ""
			if tc.secure {
				wantHSTS = hsts
			}
			for _, path := range []string{protocol.PathHealth, "/signin", "/api/v1/nowhere", "/nowhere"} {
				if resp, _ := b.get(path); resp.Header.Get("Strict-Transport-Security") != wantHSTS {
					t.Errorf("GET %s: Strict-Transport-Security %q; want %q", path, resp.Header.Get("Strict-Transport-Security"), wantHSTS)
				}
			}
			resp, _ := b.get("/signin")
			cookies := resp.Cookies()
			req, _ := http.NewRequest("POST", tm.url+protocol.PathSignInLinks, nil)
			req.Header.Set("Authorization", "Bearer "+tm.admin.APIKey)
			lresp, err := b.hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var link protocol.SignInLink
			err = json.NewDecoder(lresp.Body).Decode(&link)
			lresp.Body.Close()
			if err != nil || lresp.StatusCode != http.StatusCreated {
				t.Fatalf("a sign-in link: %d %v", lresp.StatusCode, err)
			}
			resp, page := b.useLink(link.Path)
			if resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("sign in with a link: %d\n%s", resp.StatusCode, page)
			}
			cookies = append(cookies, resp.Cookies()...)
			resp, _ = b.do("POST", "/signout", url.Values{"csrf": {b.csrf("/delegates")}}, nil)
			cookies = append(cookies, resp.Cookies()...)
			names := map[string]int{}
			for _, c := range cookies {
				names[c.Name]++
				if c.Secure != tc.secure {
					t.Errorf("cookie %s (max-age %d): Secure %v; want %v", c.Name, c.MaxAge, c.Secure, tc.secure)
				}
			}
			if names["legate_session"] < 2 || names["legate_signin"] < 2 {
				t.Errorf("cookies set and cleared: %v; want the session's and the sign-in form's", names)
			}
		})
	}
}
