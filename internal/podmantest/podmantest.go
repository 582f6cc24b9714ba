// Package podmantest starts podman's Docker-compatible API service
// (`podman system service`) for a test, on a unix socket of the test's
// own, configured as this machine needs. Tests only: the container
// backends' tests and the end-to-end tests use it.
package podmantest

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Service starts `podman system service` on a unix socket of its own
// (socket-activated: the socket listens before podman starts, so nothing
// waits for it to appear), with runc when the machine has it and explicit
// ulimits, and returns the socket's path; it is stopped when the test
// ends. Without podman, or without image when image is not empty, the
// test is skipped — and fails under CI=true, where scripts/podman-ensure
// installs both.
func Service(tb testing.TB, image string) string {
	tb.Helper()
	unusable := func(why string) {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("no podman service can be started: %s (CI installs podman with scripts/podman-ensure)", why)
		}
		tb.Skipf("no podman service can be started: %s (run scripts/podman-ensure)", why)
	}
	podman, err := exec.LookPath("podman")
	if err != nil {
		unusable(err.Error())
	}
	if image != "" {
		if out, err := exec.Command(podman, "image", "exists", image).CombinedOutput(); err != nil {
			unusable("image " + image + " missing: " + strings.TrimSpace(string(out)))
		}
	}
	// A short directory: a socket's path is at most 107 bytes.
	dir, err := os.MkdirTemp("", "podmantest")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	conf := "[containers]\ndefault_ulimits = [\"nofile=1024:1024\", \"nproc=1024:1024\"]\n"
	if _, err := os.Stat("/usr/sbin/runc"); err == nil {
		conf += "[engine]\nruntime = \"runc\"\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "containers.conf"), []byte(conf), 0o644); err != nil {
		tb.Fatal(err)
	}
	sock := filepath.Join(dir, "api.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		tb.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	f, err := l.File()
	l.Close()
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	// LISTEN_PID must be podman's own PID: the shell execs into it.
	cmd := exec.Command("/bin/sh", "-c", `LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" system service --time=0`, podman)
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+filepath.Join(dir, "containers.conf"))
	cmd.ExtraFiles = []*os.File{f} // fd 3
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		unusable(err.Error())
	}
	tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if tb.Failed() {
			tb.Logf("podman system service:\n%s", log.String())
		}
	})
	return sock
}
