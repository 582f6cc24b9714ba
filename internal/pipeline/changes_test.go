package pipeline

import (
	"slices"
	"strings"
	"testing"
)

func TestChanges(t *testing.T) {
	const base = `name: web
description: the web app
inputs:
  region: eu
  tag:
stages:
  - name: build
    steps:
      - name: compile
        shell: make
      - parallel:
          - name: unit
            shell: make test
          - name: lint
            shell: make lint
  - name: deploy
    environment: prod
    steps:
      - name: rollout
        shell: ./deploy.sh
`
	for _, c := range []struct {
		name, src string
		want      []string
	}{
		{"same", base, nil},
		{"comments and quoting", "# a comment\n" + replace(base, "shell: make\n", "shell: \"make\" # build it\n"), []string{"comments or layout only"}},
		{"description", replace(base, "the web app", "the site"), []string{"description changed"}},
		{"inputs", replace(base, "  region: eu\n", "  region: us\n  zone: a\n"), []string{"inputs: added zone; changed region"}},
		{"a step in a parallel group", replace(base, "make lint", "make vet"), []string{"stage build: steps changed lint"}},
		{"a stage added, a field changed", replace(base, "environment: prod", "environment: staging") + "  - name: verify\n    steps:\n      - name: smoke\n        shell: curl x\n",
			[]string{"stage deploy: environment changed", "stage verify added"}},
		{"a step removed", replace(base, "      - name: compile\n        shell: make\n", ""), []string{"stage build: steps removed compile"}},
		{"priority added", base + "priority: high\n", []string{"priority added"}},
	} {
		if _, err := Parse([]byte(c.src)); err != nil {
			t.Fatalf("%s: the file does not parse: %v", c.name, err)
		}
		if got := Changes([]byte(base), []byte(c.src)); !slices.Equal(got, c.want) {
			t.Errorf("%s: Changes = %q, want %q", c.name, got, c.want)
		}
	}
}

func replace(s, old, new string) string {
	if !strings.Contains(s, old) {
		panic("no " + old)
	}
	return strings.Replace(s, old, new, 1)
}
