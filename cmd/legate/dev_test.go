//go:build !delegate

package main

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/identity"
)

func TestIsGoRunBinary(t *testing.T) {
	hash := strings.Repeat("0f", 32)
	for _, tc := range []struct {
		exe  string
		want bool
	}{
		{"/tmp/go-build1094029455/b001/exe/legate", true},
		{"/root/.cache/go-build/0f/" + hash + "-d/legate", true},
		{"/custom/gocache/0f/" + hash + "-d/legate", true},
		{"/root/.cache/go-build/1a/" + hash + "-d/legate", false}, // the directory is not the hash's
		{"/root/.cache/go-build/0f/" + hash[:62] + "-d/legate", false},
		{"/usr/local/bin/legate", false},
		{"/home/me/legate/legate", false},
		{"/home/me/exe/legate", false},
	} {
		if got := isGoRunBinary(tc.exe); got != tc.want {
			t.Errorf("isGoRunBinary(%s) = %v, want %v", tc.exe, got, tc.want)
		}
	}
}

func TestCLICommand(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "bin", "legate")
	clone := filepath.Join(dir, "clone")
	for _, d := range []string{filepath.Dir(exe), filepath.Join(clone, "cmd", "legate")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other-legate")
	if err := os.WriteFile(other, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	found := func(p string) func(string) (string, error) {
		return func(string) (string, error) { return p, nil }
	}
	notFound := func(string) (string, error) { return "", errors.New("not found") }
	goRun := "/tmp/go-build123/b001/exe/legate"
	for _, tc := range []struct {
		name, exe, cwd string
		look           func(string) (string, error)
		want           string
	}{
		{"on PATH", exe, dir, found(exe), "legate"},
		{"on PATH through a symlink", exe, dir, found(link), "legate"},
		{"another legate on PATH", exe, dir, found(other), exe},
		{"not on PATH", exe, dir, notFound, exe},
		{"go run in the clone", goRun, clone, found(other), "go run ./cmd/legate"},
		{"go run elsewhere", goRun, dir, notFound, goRun},
		{"a path to quote", "/opt/my tools/legate", dir, notFound, "'/opt/my tools/legate'"},
	} {
		if got := cliCommand(tc.exe, tc.cwd, tc.look); got != tc.want {
			t.Errorf("%s: cliCommand = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/home/me/.legate-dev/admin.env": "/home/me/.legate-dev/admin.env",
		"/home/my dir/admin.env":         "'/home/my dir/admin.env'",
		"/it's/here":                     `'/it'\''s/here'`,
		"":                               "''",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDevBanner(t *testing.T) {
	admin := identity.Admin{URL: "http://127.0.0.1:7460", AccountID: "ACC", APIKey: "lgk_key", EnvFile: "/home/me/tour/.legate-dev/admin.env"}
	got := devBanner(admin, ".legate-dev", 0, "legate")
	for _, want := range []string{
		"set -a; . /home/me/tour/.legate-dev/admin.env; set +a\n",
		"  legate delegates list\n",
		"  legate task run --script 'echo hello from $(hostname); uname -a'\n",
		"metrics     http://127.0.0.1:7460/metrics (manager)\n",
		"  legate ui --open ",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("banner lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "go run") || strings.Contains(got, "(delegate)") {
		t.Errorf("banner of an installed binary without a delegate port:\n%s", got)
	}
	got = devBanner(admin, ".legate-dev", 3461, "go run ./cmd/legate")
	for _, want := range []string{
		"  go run ./cmd/legate delegates list\n",
		"go install ./cmd/legate",
		"http://127.0.0.1:3461/metrics and /readyz (delegate)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("banner lacks %q:\n%s", want, got)
		}
	}
}

// TestListenFallback: legate dev without --listen moves to a free port
// when its default one is taken; with --listen it fails.
func TestListenFallback(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ln, err := listen(taken.Addr().String(), true, log)
	if err != nil {
		t.Fatalf("with fallback: %v", err)
	}
	defer ln.Close()
	if ln.Addr().String() == taken.Addr().String() || !strings.HasPrefix(ln.Addr().String(), "127.0.0.1:") {
		t.Errorf("fallback listens on %s, next to %s", ln.Addr(), taken.Addr())
	}
	if _, err := listen(taken.Addr().String(), false, log); err == nil || !strings.Contains(err.Error(), "listen on "+taken.Addr().String()) {
		t.Errorf("without fallback: %v", err)
	}
}
