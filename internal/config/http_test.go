package config

import (
	"strings"
	"testing"
)

func TestHTTPPort(t *testing.T) {
	t.Parallel()
	base := map[string]string{"ACCOUNT_ID": "acct", "DELEGATE_TOKEN": "tok", "MANAGER_HOST_AND_PORT": "http://m:1"}
	tests := []struct {
		name    string
		value   string // "\x00unset" leaves the variable unset
		want    int
		wantErr bool
	}{
		{"unset is the default", "\x00unset", DefaultHTTPPort, false},
		{"empty is the default", "", DefaultHTTPPort, false},
		{"blank is the default", "  ", DefaultHTTPPort, false},
		{"zero turns it off", "0", 0, false},
		{"a port", "9100", 9100, false},
		{"trimmed", " 8080\n", 8080, false},
		{"leading zeros", "03460", 3460, false},
		{"lowest", "1", 1, false},
		{"highest", "65535", 65535, false},
		{"too high", "65536", 0, true},
		{"far too high", "99999999999999999999", 0, true},
		{"negative", "-1", 0, true},
		{"plus sign", "+80", 0, true},
		{"not a number", "http", 0, true},
		{"host and port", "127.0.0.1:3460", 0, true},
		{"placeholder", "<DELEGATE_HTTP_PORT>", 0, true},
		{"space inside", "34 60", 0, true},
		{"unicode digits", "３４６０", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := with(base, "DELEGATE_HTTP_PORT", tt.value)
			d, err := FromEnv(env(m))
			if tt.wantErr {
				if err == nil {
					t.Fatalf("DELEGATE_HTTP_PORT=%q: accepted as %d", tt.value, d.HTTPPort)
				}
				if msg := err.Error(); !strings.HasPrefix(msg, "DELEGATE_HTTP_PORT=") || strings.Contains(msg, "\n") {
					t.Errorf("error %q: want one line that starts with the variable", msg)
				}
				return
			}
			if err != nil {
				t.Fatalf("DELEGATE_HTTP_PORT=%q: %v", tt.value, err)
			}
			if d.HTTPPort != tt.want {
				t.Errorf("DELEGATE_HTTP_PORT=%q: HTTPPort = %d, want %d", tt.value, d.HTTPPort, tt.want)
			}
		})
	}
}

func FuzzHTTPPort(f *testing.F) {
	for _, s := range []string{"", "0", "3460", "65535", "65536", "-1", "1e3", "0x10", " 80 ", "\n", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		n, err := parseHTTPPort(envHTTPPort, strings.TrimSpace(v))
		if err != nil {
			if !strings.HasPrefix(err.Error(), envHTTPPort+"=") {
				t.Fatalf("error does not name the variable: %q", err)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("multi-line error: %q", err)
			}
			return
		}
		if n < 0 || n > 65535 {
			t.Fatalf("%q parsed as %d", v, n)
		}
	})
}
