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
// generator prints for the caller's account, the URL the request came in
// at and the release image of the manager's version (the CLI uses this
// route, so CLI and API output are the same by construction).
func TestManifestRouteIsTheGenerator(t *testing.T) {
	tm := startTestManager(t, Config{Version: "v1.4.0"})
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
			want.AccountID, want.ManagerURL = tm.admin.AccountID, tm.url
			if kind != manifest.KindSystemd {
				want.Image = manifest.DefaultImage("v1.4.0")
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
