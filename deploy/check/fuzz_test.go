package check

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/manifest"
	"github.com/legate-dev/legate/internal/protocol"
)

// FuzzManifestDecodes renders random names, tags, descriptions and env
// values for every kind: whatever the generator accepts must still decode
// strictly, and give the delegate exactly the asked environment (so the
// YAML, JSON, shell and systemd quoting round-trip).
func FuzzManifestDecodes(f *testing.F) {
	f.Add(0, "prod", "a,b", "desc", "INIT_SCRIPT", "echo \"$HOME\" 'x'\n`y` \\")
	f.Add(1, "x", "yes,no,null,~,- a,: b", "#c", "NO", "1.0")
	f.Add(2, "a.b_c", "\u00e9,\u2603", "", "X", "$$ ${X} '")
	f.Add(3, "ecs_1", "", "x", "Y", "\"}]")
	f.Add(5, "host-1", "t", "\\", "Z", "%s %q")
	f.Add(10, "ecs-host.1", "t", "", "Z", "v")
	f.Add(11, "Fargate-Host", "", "", "Z", "v")
	f.Add(7, "k8s", "a", "", "Z", "v")
	f.Fuzz(func(t *testing.T, kind int, name, tags, desc, envName, envValue string) {
		kinds := manifest.Kinds()
		p := params(kinds[(kind%len(kinds)+len(kinds))%len(kinds)])
		p.Name, p.Description = name, desc
		p.Tags = nil
		if tags != "" {
			p.Tags = strings.Split(tags, ",")
		}
		p.Env = []protocol.EnvVar{{Name: envName, Value: envValue}}
		// Past the kinds, the same kinds with the options: the name as
		// the ECS hostname, a size, root.
		if (kind/len(kinds))%2 != 0 {
			p.RunAsRoot, p.Size = true, manifest.Sizes()[(len(name)+len(tags))%len(manifest.Sizes())]
			if p.Kind == manifest.KindECS || p.Kind == manifest.KindFargate {
				p.Hostname = name
			}
		}
		out, err := manifest.Generate(p)
		if err != nil {
			return // refused with an error: nothing to decode
		}
		checkArtifact(t, p, out)
		got, err := envOf(p.Kind, out)
		if err != nil {
			t.Fatalf("envOf: %v\n%s", err, out)
		}
		// The generator trims tags and drops empty ones.
		var kept []string
		for _, tg := range p.Tags {
			if tg = strings.TrimSpace(tg); tg != "" {
				kept = append(kept, tg)
			}
		}
		p.Tags = kept
		typ := map[string]string{manifest.KindKubernetes: "KUBERNETES", manifest.KindHelm: "KUBERNETES", manifest.KindSystemd: "SHELL"}[p.Kind]
		if typ == "" {
			typ = "DOCKER"
		}
		if d := cmp.Diff(wantEnv(p, typ), got); d != "" {
			t.Fatalf("environment (-want +got):\n%s\n%s", d, out)
		}
	})
}
