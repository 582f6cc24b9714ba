package manager

import (
	"bytes"
	"context"
	"html"
	"net/url"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/cli"
)

// runLegate runs the legate CLI in this process against tm with the
// admin key, as a user would from a shell.
func runLegate(ctx context.Context, tm *testManager, args ...string) (stdout, stderr string, err error) {
	root := &cobra.Command{Use: "legate", SilenceUsage: true, SilenceErrors: true}
	cli.AddCommands(root, cli.BuildInfo{Version: "v1.4.0"})
	cli.Finish(root)
	root.SetArgs(append(args, "--url", tm.url, "--api-key", tm.admin.APIKey))
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(&bytes.Buffer{})
	err = root.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// specOf is the spec a New delegate page shows, as text.
func specOf(t *testing.T, page string) string {
	t.Helper()
	i := strings.Index(page, `id="manifest"`)
	if i < 0 {
		t.Fatalf("no spec on the page:\n%s", page)
	}
	spec := page[i:]
	spec = spec[strings.Index(spec, ">")+1 : strings.Index(spec, "</pre>")]
	return html.UnescapeString(spec)
}

// TestSpecsUseTheManagersURLAndImage: a manager started with a public URL
// and a delegate image gives them to every spec that does not ask for
// others, in the CLI (legate manifest) and in the web UI's New delegate
// page alike: for the same input both print the same bytes.
func TestSpecsUseTheManagersURLAndImage(t *testing.T) {
	const public, image = "http://legate.example.com:7460", "registry.example.com/legate:v1.4.0"
	tm := startTestManager(t, Config{Version: "v1.4.0", PublicURL: public, DelegateImage: image})
	b := newBrowserSignedIn(t, tm)
	_, page := b.get("/delegates/new")
	mustContain(t, "the form", page, `id="manager_url" name="manager_url" type="url" value="`+public+`"`,
		`id="image" name="image" type="text" value="`+image+`"`, `id="allow_loopback"`, "the manager's public URL")
	if strings.Contains(page, `id="no-image"`) {
		t.Errorf("the form says there is no image although the manager has one:\n%s", page)
	}

	// The UI's spec and the CLI's, for the same delegate: identical.
	form := url.Values{"csrf": {b.csrf("/delegates/new")}, "kind": {"kubernetes"}, "name": {"k8s-edge"}, "token_secret": {"edge-token"}}
	resp, page := b.do("POST", "/delegates/new", form, nil)
	if resp.StatusCode != 200 {
		t.Fatalf("a kubernetes spec: %d\n%s", resp.StatusCode, page)
	}
	ui := specOf(t, page)
	out, stderr, err := runLegate(t.Context(), tm, "manifest", "kubernetes", "--name", "k8s-edge", "--token-secret", "edge-token")
	if err != nil {
		t.Fatalf("legate manifest kubernetes: %v\n%s", err, stderr)
	}
	if out != ui {
		t.Errorf("the CLI's spec and the UI's differ:\nCLI:\n%s\nUI:\n%s", out, ui)
	}
	for _, want := range []string{`value: "` + public + `"`, `image: "` + image + `"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the spec lacks %s:\n%s", want, out)
		}
	}
	// legate version says what the specs will use.
	out, stderr, err = runLegate(t.Context(), tm, "version")
	if err != nil || !strings.Contains(out, "delegate image: "+image) || !strings.Contains(out, "public URL: "+public) {
		t.Errorf("legate version: %v\n%s%s", err, out, stderr)
	}
}

// TestSpecsRefuseLoopbackAndNoImage: a manager without --public-url
// (its URL is loopback) and without --delegate-image: the New delegate
// page says how to publish the image; a container spec without an image
// is refused with that fix, in the UI and the CLI; a loopback URL is
// refused with the flags to set, and accepted for a same-host trial
// (allow loopback: the docker spec then runs on the host's network).
func TestSpecsRefuseLoopbackAndNoImage(t *testing.T) {
	tm := startTestManager(t, Config{Version: "v1.4.0"})
	b := newBrowserSignedIn(t, tm)
	_, page := b.get("/delegates/new")
	mustContain(t, "the form", page, `id="no-image"`, "The manager names no image for delegates", "--delegate-image", "scripts/image --push")

	const image = "registry.example.com/legate:v1.4.0"
	for _, tc := range []struct {
		name   string
		form   url.Values
		args   []string
		status int
		want   string
	}{
		{"no image", url.Values{"manager_url": {"http://10.1.2.3:7460"}}, []string{"--manager-url", "http://10.1.2.3:7460"}, 400, "no delegate image: publish legate's image"},
		{"loopback", url.Values{"image": {image}}, []string{"--image", image}, 400, "--public-url"},
		{"allow loopback", url.Values{"image": {image}, "allow_loopback": {"on"}}, []string{"--image", image, "--allow-loopback"}, 200, "--network host"},
		{"manager URL", url.Values{"image": {image}, "manager_url": {"http://10.1.2.3:7460"}}, []string{"--image", image, "--manager-url", "http://10.1.2.3:7460"}, 200, "MANAGER_HOST_AND_PORT=http://10.1.2.3:7460"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			form := tc.form
			form.Set("csrf", b.csrf("/delegates/new"))
			form.Set("kind", "docker")
			form.Set("name", "edge")
			resp, page := b.do("POST", "/delegates/new", form, nil)
			if resp.StatusCode != tc.status || !strings.Contains(html.UnescapeString(page), tc.want) {
				t.Errorf("UI: HTTP %d, want %d with %q:\n%s", resp.StatusCode, tc.status, tc.want, page)
			}
			out, stderr, err := runLegate(t.Context(), tm, append([]string{"manifest", "docker", "--token", "tok_1", "--name", "edge"}, tc.args...)...)
			if tc.status == 200 && (err != nil || !strings.Contains(out, tc.want)) {
				t.Errorf("CLI: %v, want %q in:\n%s%s", err, tc.want, out, stderr)
			}
			if tc.status != 200 && (err == nil || !strings.Contains(err.Error()+stderr, tc.want)) {
				t.Errorf("CLI: error %v, want one with %q:\n%s%s", err, tc.want, out, stderr)
			}
		})
	}
	// --new-token checks the spec with the manager's defaults first: a
	// refused spec leaves no token behind.
	before, err := tm.client(t, tm.admin.APIKey).ListTokens(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := runLegate(t.Context(), tm, "manifest", "docker", "--new-token", "refused", "--image", image); err == nil || !strings.Contains(stderr, "--public-url") {
		t.Errorf("--new-token with the manager's loopback URL: %v\n%s", err, stderr)
	}
	if after, err := tm.client(t, tm.admin.APIKey).ListTokens(t.Context()); err != nil || len(after.Tokens) != len(before.Tokens) {
		t.Errorf("a refused spec left a token: %d tokens before, %+v after (%v)", len(before.Tokens), after, err)
	}
}

// TestVersionSaysTheManagerHasNoImage: legate version says a manager
// without --delegate-image has none, and what to do.
func TestVersionSaysTheManagerHasNoImage(t *testing.T) {
	tm := startTestManager(t, Config{Version: "v1.4.0", PublicURL: "http://legate.example.com:7460"})
	out, stderr, err := runLegate(t.Context(), tm, "version")
	if err != nil || !strings.Contains(out, "public URL: http://legate.example.com:7460\n") ||
		!strings.Contains(out, "delegate image: none (legate manifest needs --image: publish the image and start the manager with --delegate-image") {
		t.Errorf("legate version: %v\n%s%s", err, out, stderr)
	}
}
