package webui

import (
	"slices"
	"testing"
)

// TestDeploysOf: a definition deploys through its deployment stages (an
// environment or a service) and its kubernetes and helm steps, also in a
// parallel group; a build-only one deploys nothing; one the page cannot
// read counts as deploying, so that the re-run asks.
func TestDeploysOf(t *testing.T) {
	const deploying = `name: ship
stages:
  - name: build
    steps:
      - name: compile
        shell: make
  - name: release
    steps:
      - parallel:
          - name: chart
            helm: {chart: ./chart, release: web}
          - name: manifests
            kubernetes: {manifests: [k8s/]}
  - name: prod
    environment: prod
    service: web
    steps:
      - name: smoke
        shell: ./smoke
`
	want := []string{"step chart of stage release is a helm step", "step manifests of stage release is a kubernetes step",
		"stage prod deploys service web to environment prod"}
	if got := deploysOf(deploying); !slices.Equal(got, want) {
		t.Errorf("a deploying definition: %q, want %q", got, want)
	}
	if got := deploysOf("name: b\nstages:\n  - name: build\n    steps:\n      - name: c\n        shell: make\n"); len(got) != 0 {
		t.Errorf("a build-only definition deploys %q", got)
	}
	if got := deploysOf("stages: [\n"); len(got) != 1 {
		t.Errorf("an unreadable definition: %q, want it counted as deploying", got)
	}
}
