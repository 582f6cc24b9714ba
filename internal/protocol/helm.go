package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// TaskHelm installs or upgrades a Helm chart as a release and waits for
// it (a HelmSpec), on the delegate, with the helm 3 binary it has.
const TaskHelm = "helm"

// HelmSpec is the payload of a helm task (TaskSpec.Helm): which chart, as
// which release in which namespace, with which values; how long helm may
// wait for the release's resources to be ready; and whether a failed
// upgrade is rolled back.
type HelmSpec struct {
	// Release is the release's name. Required.
	Release string `json:"release"`
	// Namespace is the release's namespace. Required.
	Namespace string `json:"namespace"`
	// Repo is the URL of the chart repository (http:// or https://) that
	// holds Chart; empty when Chart is an OCI reference or an archive's
	// URL.
	Repo string `json:"repo,omitempty"`
	// Chart is the chart's name in Repo; without Repo, an OCI reference
	// (oci://registry/path/chart) or the URL of a chart archive
	// (https://host/path/chart-1.2.3.tgz). Required.
	Chart string `json:"chart"`
	// Version is the chart version (or constraint, "^1.2") to install;
	// empty means the newest. Not for an archive's URL.
	Version string `json:"version,omitempty"`
	// Values are the release's values: a JSON object, written to a values
	// file (never the command line).
	Values json.RawMessage `json:"values,omitempty"`
	// TimeoutMS bounds helm's wait for the release (its --timeout) and a
	// rollback's, each; 0 means DefaultHelmTimeoutMS.
	TimeoutMS int64 `json:"timeout_ms,omitempty"`
	// Rollback is RollbackAuto (a failed upgrade is rolled back to the
	// revision deployed before; a failed first install is uninstalled) or
	// RollbackNone ("" too: the release stays failed).
	Rollback string `json:"rollback,omitempty"`
	// Cluster, when set, is the API server the task deploys to and the
	// credentials it uses there, in place of the delegate's own.
	Cluster *KubeCluster `json:"cluster,omitempty"`
	// ChartPath, in place of Chart, is the chart in Workspace: a chart's
	// directory, or a chart archive (.tgz). Since v4.
	ChartPath string `json:"chart_path,omitempty"`
	// Workspace is the stage workspace ChartPath is in; set by the
	// manager alone (see DeployWorkspace).
	Workspace *DeployWorkspace `json:"workspace,omitempty"`
}

// Limits of a helm task's payload.
const (
	// MaxHelmReleaseName bounds Release: helm's own limit.
	MaxHelmReleaseName = 53
	// MaxHelmRefBytes bounds Repo and Chart.
	MaxHelmRefBytes = 2048
	// MaxHelmVersionBytes bounds Version.
	MaxHelmVersionBytes = 128
	// MaxHelmValuesBytes bounds Values: 1 MiB (a release's whole
	// manifest is at most that in its Secret).
	MaxHelmValuesBytes = 1 << 20
	// DefaultHelmTimeoutMS is the wait when TimeoutMS is 0: 5 minutes,
	// helm's own default.
	DefaultHelmTimeoutMS = 5 * 60 * 1000
	// MaxHelmTimeoutMS bounds TimeoutMS: 24 hours.
	MaxHelmTimeoutMS = 24 * 60 * 60 * 1000
)

// Validate checks a helm task's payload (nil: none) and normalizes
// Rollback ("" → none) and Values (null → none). Every text that goes on helm's command line is
// refused when it could read as an option (a leading '-') or holds
// spaces or control characters; URLs with credentials are refused, as
// nothing secret goes on a command line.
func (h *HelmSpec) Validate() error {
	if h == nil {
		return errors.New(`a helm task needs a "helm" section with a release, a namespace and a chart`)
	}
	if err := checkHelmRelease(h.Release); err != nil {
		return err
	}
	if err := CheckKubernetesName("helm namespace", h.Namespace); err != nil {
		return err
	}
	if err := h.checkChart(); err != nil {
		return err
	}
	if h.Version != "" {
		if err := checkHelmArg("helm chart version", h.Version, MaxHelmVersionBytes); err != nil {
			return err
		}
	}
	if len(h.Values) > MaxHelmValuesBytes {
		return fmt.Errorf("helm values are %d bytes: at most %d", len(h.Values), MaxHelmValuesBytes)
	}
	if v := bytes.TrimSpace(h.Values); len(v) == 0 || string(v) == "null" {
		h.Values = nil
	}
	if len(h.Values) > 0 {
		var m map[string]json.RawMessage
		if v := bytes.TrimSpace(h.Values); !bytes.HasPrefix(v, []byte("{")) || json.Unmarshal(v, &m) != nil {
			return errors.New(`helm values must be a mapping (a JSON object: {"image": {"tag": "1.2"}})`)
		}
	}
	if err := h.Cluster.Validate(); err != nil {
		return err
	}
	if h.TimeoutMS < 0 || h.TimeoutMS > MaxHelmTimeoutMS {
		return fmt.Errorf("helm timeout_ms must be between 0 (the default, %d) and %d", DefaultHelmTimeoutMS, MaxHelmTimeoutMS)
	}
	switch h.Rollback {
	case "":
		h.Rollback = RollbackNone
	case RollbackAuto, RollbackNone:
	default:
		return fmt.Errorf("helm rollback %q is invalid: use auto (roll a failed upgrade back; uninstall a failed first install) or none", h.Rollback)
	}
	return nil
}

// checkChart checks where the chart comes from: a name in a repository,
// an OCI reference, or an archive's URL.
func (h *HelmSpec) checkChart() error {
	if h.Workspace != nil || h.ChartPath != "" {
		return h.checkChartPath()
	}
	if h.Chart == "" {
		return errors.New("a helm task needs a chart: a name with a repo, an oci:// reference, or the https:// URL of a chart archive")
	}
	if err := checkHelmArg("helm chart", h.Chart, MaxHelmRefBytes); err != nil {
		return err
	}
	if h.Repo != "" {
		if err := checkHelmURL("helm repo", h.Repo, "http", "https"); err != nil {
			return err
		}
		if strings.ContainsAny(h.Chart, "/:") {
			return fmt.Errorf("helm chart %q: with a repo, give the chart's name in it (web, not a path or URL)", h.Chart)
		}
		return nil
	}
	switch scheme, _, _ := strings.Cut(h.Chart, "://"); scheme {
	case "oci":
		return checkHelmURL("helm chart", h.Chart, "oci")
	case "http", "https":
		if h.Version != "" {
			return errors.New("helm version does not apply to a chart archive's URL: the archive is one version (drop version, or give repo and the chart's name)")
		}
		return checkHelmURL("helm chart", h.Chart, "http", "https")
	}
	return fmt.Errorf("helm chart %q: give repo with the chart's name, an oci:// reference, or the https:// URL of a chart archive", h.Chart)
}

// checkHelmRelease checks a release's name as helm does: at most 53
// lower-case letters, digits, '-' and '.', starting and ending with a
// letter or digit.
func checkHelmRelease(s string) error {
	ok := s != "" && len(s) <= MaxHelmReleaseName && isAlnumLower(s[0]) && isAlnumLower(s[len(s)-1])
	for i := 0; ok && i < len(s); i++ {
		ok = isAlnumLower(s[i]) || s[i] == '-' || s[i] == '.'
	}
	if !ok {
		return fmt.Errorf("helm release %q is invalid: use 1-%d lower-case letters, digits, '-' or '.', starting and ending with a letter or digit", s, MaxHelmReleaseName)
	}
	return nil
}

func isAlnumLower(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// checkHelmArg checks a text that goes on helm's command line: printable,
// no spaces, not read as an option.
func checkHelmArg(what, s string, max int) error {
	if err := checkText(what, s, max); err != nil {
		return err
	}
	if strings.HasPrefix(s, "-") {
		return fmt.Errorf("%s %q must not start with '-'", what, s)
	}
	if strings.ContainsAny(s, " \t") {
		return fmt.Errorf("%s %q must not hold spaces", what, s)
	}
	return nil
}

// checkHelmURL checks a URL of one of schemes without credentials.
func checkHelmURL(what, s string, schemes ...string) error {
	if err := checkHelmArg(what, s, MaxHelmRefBytes); err != nil {
		return err
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%s %q is not a URL: use %s://HOST/PATH", what, s, schemes[len(schemes)-1])
	}
	known := false
	for _, sc := range schemes {
		known = known || u.Scheme == sc
	}
	if !known {
		return fmt.Errorf("%s %q: use a %s URL", what, s, orList(schemes))
	}
	if u.User != nil {
		return fmt.Errorf("%s %q holds credentials: repositories that need them are not supported, and nothing secret goes on helm's command line", what, s)
	}
	return nil
}

// checkChartPath checks a chart taken from a pipeline stage's workspace.
func (h *HelmSpec) checkChartPath() error {
	switch {
	case h.Workspace == nil:
		return errors.New("a helm chart_path is a path in a pipeline stage's workspace: only a pipeline step that names its workspace has one (give repo and chart, an oci:// reference or an archive's URL)")
	case h.ChartPath == "":
		return errors.New("a helm workspace needs chart_path: the chart's directory or .tgz archive in it")
	case h.Chart != "" || h.Repo != "" || h.Version != "":
		return errors.New("helm chart_path takes the chart from the workspace: leave out chart, repo and version (the chart's own Chart.yaml says its version)")
	}
	if err := CheckWorkspacePath("helm chart_path", h.ChartPath); err != nil {
		return err
	}
	return h.Workspace.validate("helm workspace")
}
