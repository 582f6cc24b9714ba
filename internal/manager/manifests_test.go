package manager

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/manifest"
	"github.com/legate-dev/legate/internal/protocol"
)

// TestManifestRouteIsTheGenerator: the route answers exactly what the
// generator prints for the caller's account, the manager's public URL and
// its delegate image (the CLI uses this route, so CLI and API output are
// the same by construction).
func TestManifestRouteIsTheGenerator(t *testing.T) {
	const public, image = "https://legate.example.com", "registry.example.com/legate:v1.4.0"
	tm := startTestManager(t, Config{Version: "v1.4.0", PublicURL: public, DelegateImage: image})
	c := tm.client(t, tm.admin.APIKey)
	for _, kind := range manifest.Kinds() {
		t.Run(kind, func(t *testing.T) {
			req := protocol.ManifestRequest{Kind: kind, Token: "tok_1", Name: "d1", Tags: []string{"a", "b"},
				Env: []protocol.EnvVar{{Name: "INIT_SCRIPT", Value: "echo hi"}}}
			if kind == manifest.KindSystemd {
				req.Env = nil
			}
			if kind == manifest.KindECS || kind == manifest.KindFargate {
				req.Region, req.ExecutionRoleARN = "us-east-1", "arn:aws:iam::123456789012:role/r"
			}
			got, err := c.Manifest(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			want := req
			want.AccountID, want.ManagerURL = tm.admin.AccountID, public
			if kind != manifest.KindSystemd {
				want.Image = image
			}
			wantText, err := manifest.Generate(want)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(wantText, got); d != "" {
				t.Errorf("route vs generator (-generator +route):\n%s", d)
			}
		})
	}
	who, err := c.WhoAmI(t.Context())
	if err != nil || who.PublicURL != public || who.DelegateImage != image {
		t.Errorf("whoami: %+v, %v; want the public URL %s and the delegate image %s", who, err, public, image)
	}
}

// TestManifestRouteLoopbackAndNoImage: a manager without a delegate image
// refuses a container spec with the fix instead of naming an image no
// registry serves; a manager whose public URL is loopback (no
// --public-url) refuses every kind with the flags to set, unless the
// request allows loopback or gives its own manager URL.
func TestManifestRouteLoopbackAndNoImage(t *testing.T) {
	tm := startTestManager(t, Config{Version: "v1.4.0"})
	c := tm.client(t, tm.admin.APIKey)
	_, err := c.Manifest(t.Context(), protocol.ManifestRequest{Kind: "docker", Token: "t", ManagerURL: "https://legate.example.com"})
	wantCode(t, "no image", err, protocol.CodeBadRequest)
	if err == nil || !strings.Contains(err.Error(), "--delegate-image") || !strings.Contains(err.Error(), "scripts/image --push") {
		t.Errorf("no image: %v, want the fix", err)
	}
	for _, kind := range manifest.Kinds() {
		req := protocol.ManifestRequest{Kind: kind, Token: "t", Image: "registry.example.com/legate:v1"}
		switch kind {
		case manifest.KindSystemd:
			req.Image = ""
		case manifest.KindECS, manifest.KindFargate:
			req.Region, req.ExecutionRoleARN = "us-east-1", "arn:aws:iam::123456789012:role/r"
		}
		_, err := c.Manifest(t.Context(), req)
		wantCode(t, kind+" on loopback", err, protocol.CodeBadRequest)
		if err == nil || !strings.Contains(err.Error(), "--public-url") || !strings.Contains(err.Error(), "--allow-loopback") {
			t.Errorf("%s on loopback: %v, want the flags to set", kind, err)
		}
		req.AllowLoopback = true
		if out, err := c.Manifest(t.Context(), req); err != nil || !strings.Contains(out, tm.url) {
			t.Errorf("%s with allow_loopback: %v\n%s", kind, err, out)
		}
		req.AllowLoopback, req.ManagerURL = false, "http://10.1.2.3:7460"
		if out, err := c.Manifest(t.Context(), req); err != nil || !strings.Contains(out, req.ManagerURL) {
			t.Errorf("%s with its own manager URL: %v\n%s", kind, err, out)
		}
	}
}

func TestManifestRouteRefusals(t *testing.T) {
	tm := startTestManager(t, Config{})
	c := tm.client(t, tm.admin.APIKey)
	_, err := c.Manifest(t.Context(), protocol.ManifestRequest{Kind: "nomad", Token: "t"})
	wantCode(t, "unknown kind", err, protocol.CodeBadRequest)
	if err == nil || !strings.Contains(err.Error(), "use one of kubernetes, helm, docker, ecs, fargate, systemd") {
		t.Errorf("error %v does not list the kinds", err)
	}
	_, err = c.Manifest(t.Context(), protocol.ManifestRequest{Kind: "docker", Token: "t", AccountID: "SOMEONEELSE"})
	wantCode(t, "another account", err, protocol.CodeBadRequest)

	// An unknown field is refused, not dropped.
	resp, err := http.Post(tm.url+protocol.PathManifests, "application/json", bytes.NewBufferString(`{"kind":"docker","token":"t","replica":3}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without an API key: HTTP %d, want 401", resp.StatusCode)
	}
	r, _ := http.NewRequestWithContext(t.Context(), "POST", tm.url+protocol.PathManifests, bytes.NewBufferString(`{"kind":"docker","token":"t","replica":3}`))
	r.Header.Set("Authorization", "Bearer "+tm.admin.APIKey)
	r.Header.Set(protocol.HeaderProtocolVersion, "4")
	resp, err = http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(b.String(), `unknown field \"replica\"`) {
		t.Errorf("unknown field: HTTP %d %s, want 400 naming the field", resp.StatusCode, b.String())
	}
}
