package check

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startRegistry runs Debian's docker-registry (the registry API v2;
// scripts/registry-ensure installs it as root) on a free port of
// 127.0.0.1, storing in a directory of the test's own, until the test
// ends. It returns the registry's host:port; it skips the test when no
// registry can be installed, except under CI=true.
func startRegistry(t *testing.T) string {
	t.Helper()
	if out, err := exec.Command("bash", filepath.Join(repoRoot, "scripts/registry-ensure")).CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the push test must run in CI: scripts/registry-ensure: %v\n%s", err, out)
		}
		t.Skipf("no image registry to push to (scripts/registry-ensure installs Debian's docker-registry as root): %v\n%s", err, out)
	}
	dir := t.TempDir()
	addr := "127.0.0.1:" + freePort(t)
	conf := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(conf, []byte("version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: "+
		filepath.Join(dir, "data")+"\nhttp:\n  addr: "+addr+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("docker-registry", "serve", conf)
	out, done := startProcess(t, cmd, "the registry", 30*time.Second)
	eventually(t, time.Minute, "the registry's API", func() bool {
		select {
		case <-done:
			t.Fatalf("the registry exited:\n%s", out.String())
		default:
		}
		code, _ := registryGet("http://" + addr + "/v2/")
		return code == http.StatusOK
	})
	return addr
}

// registryGet asks the registry API, as a puller does (manifests in the
// Docker v2 and OCI formats).
func registryGet(u string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Accept", "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestImagePushToARegistry: scripts/image --push REGISTRY/NAME:TAG builds
// legate's image (both binaries) and pushes it to a real registry on
// loopback; the registry serves it, and an image pulled back from there
// runs both legate and legate-delegate of this build.
func TestImagePushToARegistry(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the image is not built and pushed")
	}
	needImage(t) // podman, the base image and this run's binaries
	registry := startRegistry(t)
	tag, err := imageInputsHash()
	if err != nil {
		t.Fatal(err)
	}
	repo := registry + "/specs-url/legate"
	ref := repo + ":" + tag
	local := uniqueName("localhost/specs-url-push")
	t.Cleanup(func() {
		for _, img := range []string{ref, local + ":" + tag, local + ":dev"} {
			_, _ = podman("rmi", "--force", img)
		}
	})
	cmd := exec.Command("bash", filepath.Join(repoRoot, "scripts/image"), "--engine", "podman",
		"--binary", legateBinary, "--delegate-binary", delegateBinary, "--name", local, "--version", tag, "--push", ref)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("scripts/image --push: %v\n%s", err, stderr.String())
	}
	if got := strings.TrimSpace(stdout.String()); got != ref {
		t.Errorf("scripts/image --push printed %q, want the pushed reference %s", got, ref)
	}
	if !strings.Contains(stderr.String(), "--delegate-image "+ref) {
		t.Errorf("scripts/image --push does not say how to use the image:\n%s", stderr.String())
	}

	// The registry serves it.
	if code, body := registryGet("http://" + registry + "/v2/specs-url/legate/tags/list"); code != 200 || !strings.Contains(body, `"`+tag+`"`) {
		t.Fatalf("the registry's tags: HTTP %d %s", code, body)
	}
	if code, body := registryGet("http://" + registry + "/v2/specs-url/legate/manifests/" + tag); code != 200 {
		t.Fatalf("the registry's manifest of %s: HTTP %d %s", tag, code, body)
	}

	// Pulled back from the registry alone (the local copy removed), it
	// runs this build's legate and legate-delegate.
	if out, err := podman("rmi", "--force", ref); err != nil {
		t.Fatalf("podman rmi %s: %v\n%s", ref, err, out)
	}
	if out, err := podman("pull", "--tls-verify=false", ref); err != nil {
		t.Fatalf("podman pull %s: %v\n%s", ref, err, out)
	}
	want, err := exec.Command(legateBinary, "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, entry := range []string{"/usr/local/bin/legate", "/usr/local/bin/legate-delegate"} {
		args := append(append([]string{}, podmanRun...), "--rm", "--entrypoint", entry, ref, "--version")
		got, err := podman(args...)
		// (podman's own complaints may precede it: no systemd for the
		// image's health check here.)
		if err != nil || !strings.HasSuffix(strings.TrimSpace(got), strings.TrimSpace(string(want))) {
			t.Errorf("%s --version in the pulled image: %v\n%s\nwant:\n%s", entry, err, got, want)
		}
	}
}
