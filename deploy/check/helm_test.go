package check

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"sigs.k8s.io/yaml"
)

const (
	delegateChart = "../helm/legate-delegate"
	managerChart  = "../helm/legate-manager"
)

// renderChart renders the chart at dir with values (merged over its
// values.yaml) as `helm install --namespace ns` would, with the Helm Go
// SDK, and returns the manifests in a stable order, NOTES.txt left out.
func renderChart(dir string, values map[string]any, ns string) (string, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return "", fmt.Errorf("load %s: %w", dir, err)
	}
	opts := chartutil.ReleaseOptions{Name: "test", Namespace: ns, Revision: 1, IsInstall: true}
	vals, err := chartutil.ToRenderValues(ch, values, opts, chartutil.DefaultCapabilities)
	if err != nil {
		return "", fmt.Errorf("values: %w", err)
	}
	files, err := engine.Render(ch, vals)
	if err != nil {
		return "", err
	}
	names := make([]string, 0, len(files))
	for n := range files {
		if strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		if strings.TrimSpace(files[n]) == "" {
			continue
		}
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", filepath.ToSlash(n), files[n])
	}
	return b.String(), nil
}

// renderDelegateValues renders the delegate chart with a values file (the
// output of legate manifest helm), in the namespace its helm install
// command names.
func renderDelegateValues(valuesYAML string) (string, error) {
	var vals map[string]any
	if err := yaml.UnmarshalStrict([]byte(valuesYAML), &vals); err != nil {
		return "", fmt.Errorf("values file: %w", err)
	}
	ns := "default"
	for _, l := range strings.Split(valuesYAML, "\n") {
		if i := strings.Index(l, "--namespace "); i >= 0 && strings.HasPrefix(l, "#") {
			ns = strings.Fields(l[i+len("--namespace "):])[0]
		}
	}
	return renderChart(delegateChart, vals, ns)
}
