//go:build !delegate

package main

import (
	"net"
	"strings"
	"testing"
	"time"
)

func TestPlainHTTPWarning(t *testing.T) {
	for _, tc := range []struct {
		addr      string
		tls       bool
		publicURL string
		warn      bool
	}{
		{"0.0.0.0:7460", false, "", true},
		{"[::]:7460", false, "", true},
		{"192.0.2.10:7460", false, "http://legate.example.com:7460", true},
		{"127.0.0.1:7460", false, "", false},
		{"[::1]:7460", false, "", false},
		{"0.0.0.0:7460", true, "", false},
		{"0.0.0.0:7460", false, "https://legate.example.com", false}, // a TLS-terminating proxy in front
	} {
		addr, err := net.ResolveTCPAddr("tcp", tc.addr)
		if err != nil {
			t.Fatal(err)
		}
		got := plainHTTPWarning(addr, tc.tls, tc.publicURL)
		if (got != "") != tc.warn {
			t.Errorf("plainHTTPWarning(%s, tls=%v, %q) = %q, want a warning: %v", tc.addr, tc.tls, tc.publicURL, got, tc.warn)
		}
		if got != "" && (!strings.Contains(got, "--tls-cert") || !strings.Contains(got, "proxy")) {
			t.Errorf("the warning does not say what to do: %q", got)
		}
	}
}

func TestManagerFlagsCheck(t *testing.T) {
	ok := managerFlags{heartbeat: 10 * time.Second, readTimeout: time.Second, writeTimeout: time.Second, idleTimeout: time.Second}
	if err := ok.check(); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		mod  func(*managerFlags)
		want string
	}{
		"heartbeat too short":      {func(f *managerFlags) { f.heartbeat = time.Millisecond }, "--heartbeat-interval 1ms: use 100ms to 10m0s"},
		"heartbeat that overflows": {func(f *managerFlags) { f.heartbeat = 1 << 62 }, "--heartbeat-interval"},
		"zero read timeout":        {func(f *managerFlags) { f.readTimeout = 0 }, "--read-timeout 0s"},
		"negative write timeout":   {func(f *managerFlags) { f.writeTimeout = -time.Second }, "--write-timeout -1s"},
		"zero idle timeout":        {func(f *managerFlags) { f.idleTimeout = 0 }, "--idle-timeout"},
		"negative connections":     {func(f *managerFlags) { f.maxConnections = -1 }, "--max-connections -1"},
		"admissions below -1":      {func(f *managerFlags) { f.admissions = -2 }, "--admissions -2: want a positive number, 0 (the default, 64) or -1 (no limit)"},
		"prune before the window":  {func(f *managerFlags) { f.pruneAfter = 30 * time.Second }, "--prune-delegates-after 30s: use 0 (never) or at least 1m0s"},
		"negative retention":       {func(f *managerFlags) { f.retention = -time.Hour }, "--retention -1h0m0s: use 0 (keep everything)"},
	} {
		f := ok
		tc.mod(&f)
		if err := f.check(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error with %q", name, err, tc.want)
		}
	}
}

// TestCheckLiveness: legate dev and legate manager refuse a heartbeat
// interval out of range and a pruning delay shorter than twice the
// liveness window, saying what to use.
func TestCheckLiveness(t *testing.T) {
	for _, tc := range []struct {
		heartbeat, prune time.Duration
		want             string // "" = accepted
	}{
		{10 * time.Second, 6 * time.Hour, ""},
		{10 * time.Second, 0, ""},
		{10 * time.Second, time.Minute, ""},
		{10 * time.Second, 59 * time.Second, "at least 1m0s"},
		{time.Millisecond, 0, "use 100ms to"},
		{time.Hour, 0, "use 100ms to"},
	} {
		err := managerFlags{heartbeat: tc.heartbeat, pruneAfter: tc.prune}.checkLiveness()
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("heartbeat %s, prune %s: %v; want %q", tc.heartbeat, tc.prune, err, tc.want)
		}
	}
}

// TestDelegateImageFlagAndEnv: --delegate-image wins over
// LEGATE_DELEGATE_IMAGE; neither means none; a value that is not an image
// reference stops the manager, naming where it came from.
func TestDelegateImageFlagAndEnv(t *testing.T) {
	for _, tc := range []struct {
		flag, env string
		envSet    bool
		want, err string
	}{
		{"", "", false, "", ""},
		{"registry.example.com/legate:v1", "other/legate:v2", true, "registry.example.com/legate:v1", ""},
		{"", " registry.example.com/legate:v2 ", true, "registry.example.com/legate:v2", ""},
		{"not an image", "", false, "", `--delegate-image: image "not an image"`},
		{"", "-x", true, "", `LEGATE_DELEGATE_IMAGE: image "-x"`},
	} {
		lookup := func(k string) (string, bool) {
			if k == "LEGATE_DELEGATE_IMAGE" && tc.envSet {
				return tc.env, true
			}
			return "", false
		}
		got, err := delegateImage(tc.flag, lookup)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("delegateImage(%q, env %q): %q, %v; want %q, error with %q", tc.flag, tc.env, got, err, tc.want, tc.err)
		}
	}
}
