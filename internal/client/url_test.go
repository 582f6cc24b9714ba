package client

import (
	"strings"
	"testing"
)

func TestParseManagerURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want string // "" = an error
		msg  string // the error contains this
	}{
		{in: "http://127.0.0.1:7460", want: "http://127.0.0.1:7460"},
		{in: " HTTPS://legate.example.com/pre/fix/ ", want: "https://legate.example.com/pre/fix"},
		{in: "http://[::1]:7460/", want: "http://[::1]:7460"},
		{in: "127.0.0.1:7460", want: "http://127.0.0.1:7460"},
		{in: "localhost:7460", want: "http://localhost:7460"},
		{in: "legate.internal:80/legate/", want: "http://legate.internal:80/legate"},
		{in: "[::1]:7460", want: "http://[::1]:7460"},
		{in: ":7460", want: "http://127.0.0.1:7460"},
		{in: "", msg: "empty: write the manager's URL, e.g. http://127.0.0.1:7460"},
		{in: "myhost", msg: `"myhost" has no scheme: write http://myhost:7460 (the manager's default port) or https://myhost`},
		{in: "10.0.0.5", msg: "write http://10.0.0.5:7460"},
		{in: "::1", msg: "write http://[::1]:7460"},
		{in: "http:/myhost:7460", msg: `"http:/myhost:7460": write http://myhost:7460`},
		{in: "https:myhost", msg: "write https://myhost"},
		{in: "ftp://host", msg: "the scheme must be http:// or https://: write http://host"},
		{in: "http://", msg: "has no host: write http://HOST:PORT, e.g. http://127.0.0.1:7460"},
		{in: "http://user:pw@host:1", msg: "must not contain credentials: write http://host:1"},
		{in: "http://host/?a=b", msg: "must not have a query or fragment: write http://host"},
		{in: "http://host:99999", msg: `port "99999" is not a number from 1 to 65535: write http://host:7460, for example`},
		{in: "http://host:", msg: `port ""`},
		{in: "host:http", msg: `port "http"`},
		{in: "host:0", msg: `port "0"`},
		{in: "http://host :1", msg: "spaces or control characters"},
		{in: "http://host%zz", msg: "is not a valid URL"},
		{in: "a@b:7460", msg: "is not a manager URL"},
	}
	for _, tt := range tests {
		got, err := ParseManagerURL(tt.in)
		switch {
		case tt.want != "" && (err != nil || got != tt.want):
			t.Errorf("ParseManagerURL(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		case tt.want == "" && (err == nil || !strings.Contains(err.Error(), tt.msg)):
			t.Errorf("ParseManagerURL(%q) = %q, %v; want an error with %q", tt.in, got, err, tt.msg)
		}
	}
}

// FuzzParseManagerURL: whatever is accepted, New accepts as it is, and
// parsing it again changes nothing.
func FuzzParseManagerURL(f *testing.F) {
	for _, s := range []string{"http://127.0.0.1:7460", "localhost:7460/x/", ":1", "[::1]:2", "myhost", "http:/x", "https://h/p?q", "a@b:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, err := ParseManagerURL(s)
		if err != nil {
			if !strings.Contains(err.Error(), "write") {
				t.Errorf("ParseManagerURL(%q): error %q does not say what to write", s, err)
			}
			return
		}
		c, err := New(u, nil)
		if err != nil {
			t.Fatalf("ParseManagerURL(%q) = %q, which New refuses: %v", s, u, err)
		}
		if c.BaseURL() != u {
			t.Errorf("ParseManagerURL(%q) = %q, New makes it %q", s, u, c.BaseURL())
		}
		if again, err := ParseManagerURL(u); err != nil || again != u {
			t.Errorf("ParseManagerURL(%q) = %q, then %q, %v", s, u, again, err)
		}
	})
}
