package k8stest

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// A Chart is a Helm chart's files by their path in it ("Chart.yaml",
// "values.yaml", "templates/deployment.yaml").
type Chart map[string]string

// WebChart is a chart "web" of version and appVersion: one Deployment
// named after the release, with values image, replicas (2) and
// neverReady (its pods carry kwok's never-ready label, so a helm --wait
// on them times out).
func WebChart(version, appVersion string) Chart {
	return Chart{
		"Chart.yaml":  "apiVersion: v2\nname: web\nversion: " + version + "\nappVersion: \"" + appVersion + "\"\n",
		"values.yaml": "image: web:1\nreplicas: 2\nneverReady: false\n",
		"templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}
spec:
  replicas: {{ .Values.replicas }}
  selector:
    matchLabels: {app: {{ .Release.Name }}}
  template:
    metadata:
      labels:
        app: {{ .Release.Name }}
        {{- if .Values.neverReady }}
        kwok.local/never-ready: "true"
        {{- end }}
    spec:
      containers:
        - name: web
          image: {{ .Values.image | quote }}
`,
	}
}

// ServeCharts packages charts with the cluster's helm, indexes them, and
// serves them as a chart repository over loopback HTTP until the test
// ends; it returns the repository's URL.
func (c *Cluster) ServeCharts(tb testing.TB, charts ...Chart) string {
	tb.Helper()
	repo := tb.TempDir()
	srv := httptest.NewServer(http.FileServer(http.Dir(repo)))
	tb.Cleanup(srv.Close)
	for _, ch := range charts {
		src := tb.TempDir()
		for name, text := range ch {
			p := filepath.Join(src, filepath.FromSlash(name))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				tb.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
				tb.Fatal(err)
			}
		}
		c.Helm(tb, "package", src, "--destination", repo)
	}
	c.Helm(tb, "repo", "index", repo, "--url", srv.URL)
	return srv.URL
}
