package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/buildinfo"
)

// delegateBinaryName is the delegate-only binary (go build -tags
// delegate): the delegate without the manager, the web UI and the admin
// commands, which idles in much less memory than the full binary (BENCHMARKS.md).
const delegateBinaryName = "legate-delegate"

// envDelegateBinary chooses the binary `legate delegate` runs as: unset
// (or "auto") for legate-delegate next to this binary when it is the same
// build, "off" for this binary always.
const envDelegateBinary = "LEGATE_DELEGATE_BINARY"

// delegateBinaryTimeout bounds asking legate-delegate its version.
const delegateBinaryTimeout = 10 * time.Second

// delegateBinary returns the delegate-only binary that `legate delegate`
// should run as: legate-delegate in the directory of self (this binary),
// when it is there and is the same build (its --version prints what this
// binary's does). It returns "" to go on as this binary, with why when
// that deserves a warning: a legate-delegate is there but is another
// build, or cannot be run. setting is LEGATE_DELEGATE_BINARY.
func delegateBinary(ctx context.Context, self, setting string) (path, why string, err error) {
	switch setting {
	case "", "auto":
	case "off":
		return "", "", nil
	default:
		return "", "", fmt.Errorf("%s=%q: use off to run the delegate as this binary, or leave it unset to run it as %s when that lies next to this binary and is the same build", envDelegateBinary, setting, delegateBinaryName)
	}
	if delegateOnly || self == "" {
		return "", "", nil
	}
	path = filepath.Join(filepath.Dir(self), delegateBinaryName)
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", "", nil
	case err != nil:
		return "", fmt.Sprintf("running the delegate as %s, not as %s: %v", self, path, err), nil
	case !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0:
		return "", fmt.Sprintf("running the delegate as %s, not as %s: that is not an executable file", self, path), nil
	}
	ctx, cancel := context.WithTimeout(ctx, delegateBinaryTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Env = []string{} // none of this process's credentials
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Sprintf("running the delegate as %s, not as %s: %s --version: %v %s", self, path, path, err, bytes.TrimSpace(stderr.Bytes())), nil
	}
	if want := buildinfo.Read(version).String(); out.String() != want {
		return "", fmt.Sprintf("running the delegate as %s, not as %s: that is another build (%q, this is %q); replace it with the legate-delegate of this release, or remove it", self, path, firstLine(out.String()), firstLine(want)), nil
	}
	return path, "", nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
