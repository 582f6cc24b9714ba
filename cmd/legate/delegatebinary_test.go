//go:build !delegate

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/legate-dev/legate/internal/buildinfo"
)

// TestDelegateBinary: `legate delegate` runs as legate-delegate only when
// that lies next to it and reports the same build; otherwise it stays, and
// says why when a legate-delegate was there.
func TestDelegateBinary(t *testing.T) {
	t.Setenv("DELEGATE_TOKEN", "must-not-reach-the-version-check")
	build := buildinfo.Read(version).String()
	// fake writes a legate-delegate that runs script (sh) into a new
	// directory, and returns the path of the legate binary beside it.
	fake := func(t *testing.T, mode os.FileMode, script string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "build.txt"), []byte(build), 0o644); err != nil {
			t.Fatal(err)
		}
		script = strings.ReplaceAll(script, "DIR", dir)
		if err := os.WriteFile(filepath.Join(dir, delegateBinaryName), []byte("#!/bin/sh\n"+script+"\n"), mode); err != nil {
			t.Fatal(err)
		}
		return filepath.Join(dir, "legate")
	}
	same := `[ "$1" = --version ] && [ -z "$DELEGATE_TOKEN" ] && exec cat DIR/build.txt; exit 9`
	for _, tt := range []struct {
		name, setting string
		self          string
		wantLite      bool
		wantWhy       string
	}{
		{"the same build next to it", "", fake(t, 0o755, same), true, ""},
		{"auto", "auto", fake(t, 0o755, same), true, ""},
		{"turned off", "off", fake(t, 0o755, same), false, ""},
		{"none next to it", "", filepath.Join(t.TempDir(), "legate"), false, ""},
		{"another build", "", fake(t, 0o755, `echo "legate v0.0.1-other"; echo "commit: x"`), false, `another build ("legate v0.0.1-other"`},
		{"not executable", "", fake(t, 0o644, same), false, "not an executable file"},
		{"a directory", "", func() string {
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, delegateBinaryName), 0o755); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(dir, "legate")
		}(), false, "not an executable file"},
		{"fails to answer", "", fake(t, 0o755, `echo broken >&2; exit 3`), false, "--version: exit status 3 broken"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			lite, why, err := delegateBinary(t.Context(), tt.self, tt.setting)
			if err != nil {
				t.Fatalf("error %v", err)
			}
			want := ""
			if tt.wantLite {
				want = filepath.Join(filepath.Dir(tt.self), delegateBinaryName)
			}
			if lite != want {
				t.Errorf("binary = %q, want %q", lite, want)
			}
			if (tt.wantWhy == "") != (why == "") || !strings.Contains(why, tt.wantWhy) {
				t.Errorf("why = %q, want one saying %q", why, tt.wantWhy)
			}
		})
	}
	_, _, err := delegateBinary(t.Context(), fake(t, 0o755, same), "legate-delegate")
	if err == nil || !strings.Contains(err.Error(), envDelegateBinary+`="legate-delegate": use off`) {
		t.Errorf("a bad %s: error %v, want one naming the setting and its values", envDelegateBinary, err)
	}
}
