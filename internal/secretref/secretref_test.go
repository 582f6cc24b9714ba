package secretref

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/legate-dev/legate/internal/protocol"
)

func TestExpand(t *testing.T) {
	values := map[string]string{"A": "alpha", "DB_PASSWORD": "s3cr3t", "x1": "one"}
	for _, tc := range []struct {
		in, want string
		names    []string
		err      string
	}{
		{in: "", want: ""},
		{in: "no references $HOME ${HOME} $$", want: "no references $HOME ${HOME} $$"},
		{in: "${secrets.A}", want: "alpha", names: []string{"A"}},
		{in: "pw=${secrets.DB_PASSWORD};a=${secrets.A}${secrets.A}", want: "pw=s3cr3t;a=alphaalpha", names: []string{"DB_PASSWORD", "A"}},
		{in: "$${secrets.A}", want: "${secrets.A}"},
		{in: "$$${secrets.A}", want: "$${secrets.A}"},
		{in: "$${secrets.${secrets.x1}", want: "${secrets.one", names: []string{"x1"}},
		{in: "echo $$ ${secrets.x1}", want: "echo $$ one", names: []string{"x1"}},
		{in: "$${secrets.not-a-name}", want: "${secrets.not-a-name}"},
		{in: "${secrets.}", err: `malformed secret reference "${secrets.}"`},
		{in: "${secrets.A", err: `malformed secret reference "${secrets.A"`},
		{in: "x ${secrets.bad-name} y", err: `malformed secret reference "${secrets.bad-name} y"`},
		{in: "${secrets.A }", err: "malformed"},
		{in: "${secrets." + strings.Repeat("n", MaxNameLen) + "}", want: "", names: []string{strings.Repeat("n", MaxNameLen)}},
		{in: "${secrets." + strings.Repeat("n", MaxNameLen+1) + "}", err: "malformed"},
	} {
		names, err := Names(tc.in)
		got, err2 := Expand(tc.in, func(n string) string { return values[n] })
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || err2 == nil {
				t.Errorf("%q: errors %v, %v; want %q", tc.in, err, err2, tc.err)
			}
			continue
		}
		if err != nil || err2 != nil {
			t.Errorf("%q: %v, %v", tc.in, err, err2)
			continue
		}
		if got != tc.want {
			t.Errorf("Expand(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if diff := cmp.Diff(tc.names, names); diff != "" {
			t.Errorf("Names(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestValidName(t *testing.T) {
	for _, ok := range []string{"A", "db_password", "_", "9lives", strings.Repeat("x", MaxNameLen)} {
		if err := ValidName(ok); err != nil {
			t.Errorf("ValidName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "a-b", "a.b", "a b", "é", strings.Repeat("x", MaxNameLen+1)} {
		if err := ValidName(bad); err == nil {
			t.Errorf("ValidName(%q) = nil", bad)
		}
	}
	if err := ValidName("db-pass"); err == nil || !strings.Contains(err.Error(), "letters, digits and underscores") {
		t.Errorf("error %v does not say what a name is made of", err)
	}
}

func TestResolveSpec(t *testing.T) {
	spec := protocol.TaskSpec{
		Type:      protocol.TaskShell,
		Shell:     &protocol.ShellSpec{Script: "echo ${secrets.TOKEN} $${secrets.TOKEN}"},
		Env:       map[string]string{"PW": "${secrets.PW}", "PLAIN": "x"},
		SecretEnv: map[string]string{"S": "pre-${secrets.PW}"},
		HTTP: &protocol.HTTPSpec{URL: "https://h/?k=${secrets.TOKEN}", Body: "{${secrets.PW}}",
			Headers: map[string]string{"Authorization": "Bearer ${secrets.TOKEN}"}},
	}
	names, err := SpecNames(spec)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"PW", "TOKEN"}, names); diff != "" {
		t.Errorf("SpecNames (-want +got):\n%s", diff)
	}
	if !Uses(spec) || Uses(protocol.TaskSpec{Shell: &protocol.ShellSpec{Script: "echo"}}) {
		t.Error("Uses is wrong")
	}
	got, mask, err := ResolveSpec(spec, map[string]string{"PW": "pw!", "TOKEN": "tok"})
	if err != nil {
		t.Fatal(err)
	}
	want := protocol.TaskSpec{
		Type:      protocol.TaskShell,
		Shell:     &protocol.ShellSpec{Script: "echo tok ${secrets.TOKEN}"},
		Env:       map[string]string{"PW": "pw!", "PLAIN": "x"},
		SecretEnv: map[string]string{"S": "pre-pw!"},
		HTTP: &protocol.HTTPSpec{URL: "https://h/?k=tok", Body: "{pw!}",
			Headers: map[string]string{"Authorization": "Bearer tok"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ResolveSpec (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"pw!", "tok"}, mask); diff != "" {
		t.Errorf("mask (-want +got):\n%s", diff)
	}
	if spec.Shell.Script != "echo ${secrets.TOKEN} $${secrets.TOKEN}" || spec.Env["PW"] != "${secrets.PW}" ||
		spec.HTTP.Headers["Authorization"] != "Bearer ${secrets.TOKEN}" {
		t.Error("ResolveSpec changed its input")
	}
	if _, _, err := ResolveSpec(spec, map[string]string{"PW": "x"}); err == nil || !strings.Contains(err.Error(), "no value for secret TOKEN") {
		t.Errorf("missing value: %v", err)
	}
	ctr := protocol.TaskSpec{Type: protocol.TaskContainer, Container: &protocol.ContainerSpec{Image: "img",
		Script: "login ${secrets.REG}", Command: []string{"run", "--token=${secrets.TOKEN}", "$${secrets.X}"}}}
	names, err = SpecNames(ctr)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"REG", "TOKEN"}, names); diff != "" {
		t.Errorf("SpecNames of a container task (-want +got):\n%s", diff)
	}
	got, mask, err = ResolveSpec(ctr, map[string]string{"REG": "r3g", "TOKEN": "tok"})
	if err != nil {
		t.Fatal(err)
	}
	wantCtr := protocol.ContainerSpec{Image: "img", Script: "login r3g", Command: []string{"run", "--token=tok", "${secrets.X}"}}
	if diff := cmp.Diff(&wantCtr, got.Container); diff != "" {
		t.Errorf("ResolveSpec of a container task (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"r3g", "tok"}, mask); diff != "" {
		t.Errorf("container mask (-want +got):\n%s", diff)
	}
	if ctr.Container.Script != "login ${secrets.REG}" || ctr.Container.Command[1] != "--token=${secrets.TOKEN}" {
		t.Error("ResolveSpec changed its container input")
	}
	if _, err := SpecNames(protocol.TaskSpec{Container: &protocol.ContainerSpec{Command: []string{"a", "${secrets.}"}}}); err == nil ||
		!strings.HasPrefix(err.Error(), "container.command[1]: malformed") {
		t.Errorf("malformed in a container command: %v", err)
	}
	bad := protocol.TaskSpec{Env: map[string]string{"K": "${secrets.a-b}"}}
	if _, err := SpecNames(bad); err == nil || !strings.HasPrefix(err.Error(), "env K: malformed") {
		t.Errorf("malformed: %v", err)
	}
}

// FuzzExpand checks the scanner on any text: it never panics, Names and
// Expand agree on whether the text is well formed, a text without
// "${secrets." comes back unchanged, and expanding with values that are
// the references themselves, escaped, gives back text whose names are
// the same.
func FuzzExpand(f *testing.F) {
	for _, s := range []string{"", "${secrets.A}", "$${secrets.A}", "$$${secrets.B}x", "${secrets.", "${secrets.a-b}", "a${secrets.A}b${secrets.C}", "$", "}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		names, nerr := Names(s)
		out, eerr := Expand(s, func(n string) string { return "<" + n + ">" })
		if (nerr == nil) != (eerr == nil) {
			t.Fatalf("Names error %v, Expand error %v", nerr, eerr)
		}
		if !strings.Contains(s, open) && out != s {
			t.Fatalf("Expand(%q) = %q without a reference", s, out)
		}
		if nerr != nil {
			return
		}
		for _, n := range names {
			if ValidName(n) != nil {
				t.Fatalf("Names(%q) gave invalid name %q", s, n)
			}
			if !strings.Contains(out, "<"+n+">") {
				t.Fatalf("Expand(%q) = %q lacks the value of %s", s, out, n)
			}
		}
		if utf8.ValidString(s) && !utf8.ValidString(out) {
			t.Fatalf("Expand made invalid UTF-8 of %q", s)
		}
	})
}

// TestStrayReferences: "${secrets." where references are not resolved is
// an error that shows where; the resolved texts may hold them.
func TestStrayReferences(t *testing.T) {
	ok := protocol.TaskSpec{Type: protocol.TaskContainer, Container: &protocol.ContainerSpec{Image: "img", Script: "echo ${secrets.A}",
		Command: []string{"${secrets.B}"}}, Env: map[string]string{"E": "${secrets.C}"}, SecretEnv: map[string]string{"S": "${secrets.D}"}}
	if names, err := SpecNames(ok); err != nil || len(names) != 4 {
		t.Errorf("references where they resolve: %v, %v", names, err)
	}
	for name, spec := range map[string]protocol.TaskSpec{
		"image":       {Type: protocol.TaskContainer, Container: &protocol.ContainerSpec{Image: "reg/${secrets.A}:1"}},
		"working_dir": {Type: protocol.TaskContainer, Container: &protocol.ContainerSpec{Image: "i", WorkingDir: "/${secrets.A}"}},
		"volume":      {Type: protocol.TaskContainer, Container: &protocol.ContainerSpec{Image: "i", Volumes: []protocol.Volume{{Name: "v", MountPath: "/m/${secrets.A}"}}}},
		"selector":    {Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "x"}, Selectors: []string{"${secrets.A}"}},
		"env key":     {Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "x"}, Env: map[string]string{"${secrets.A}": "v"}},
		"http method": {Type: protocol.TaskHTTP, HTTP: &protocol.HTTPSpec{Method: "${secrets.A}", URL: "http://h"}},
		"escaped":     {Type: protocol.TaskContainer, Container: &protocol.ContainerSpec{Image: "$${secrets.A}"}},
	} {
		if _, err := SpecNames(spec); err == nil || !strings.Contains(err.Error(), "cannot be referenced here") || !strings.Contains(err.Error(), "${secrets.A") {
			t.Errorf("%s: %v; want the stray reference refused, shown", name, err)
		}
	}
}

// TestStrayKubernetes: a stored secret is never resolved into manifests
// (the manager would put a value into objects it cannot mask).
func TestStrayKubernetes(t *testing.T) {
	t.Parallel()
	spec := protocol.TaskSpec{Type: protocol.TaskKubernetes, Kubernetes: &protocol.KubernetesSpec{Namespace: "web",
		Manifests: []string{"apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {p: ${secrets.DB}}\n"}}}
	if _, err := SpecNames(spec); err == nil || !strings.Contains(err.Error(), "cannot be referenced here") {
		t.Fatalf("SpecNames = %v, want the reference refused", err)
	}
	if Uses(spec) {
		t.Fatal("a manifest's text counts as a place references are resolved")
	}
}
