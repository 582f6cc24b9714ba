package protocol

import (
	"encoding/json"
	"fmt"
)

// TaskVerify watches a deployment's metrics on a metrics provider
// (Prometheus) for a while and decides whether it is healthy (a
// VerifySpec), on the delegate, which sits next to the monitoring system.
// A failed verification fails the task, and its stage's deployment.
const TaskVerify = "verify"

// Provider types (MetricsProvider.Type, and Connector.Type of a
// verification provider's connector).
const (
	ProviderPrometheus = "prometheus"
)

// VerifySpec is the payload of a verify task (TaskSpec.Verify).
type VerifySpec struct {
	// Provider is where the metrics are; a connector of type
	// ProviderPrometheus fills it in for a task that names it.
	Provider *MetricsProvider `json:"provider"`
	// Metrics are what is watched, each decided on its own; the
	// verification passes when every metric passes.
	Metrics []VerifyMetric `json:"metrics"`
	// DurationMS is how long the metrics are watched; IntervalMS the
	// resolution of the range queries and how often a progress line is
	// written. 0: the defaults.
	DurationMS int64 `json:"duration_ms,omitempty"`
	IntervalMS int64 `json:"interval_ms,omitempty"`
	// MinPoints is the fewest data points a metric's series must have for
	// a verdict; fewer is the verdict VerifyNoData, a failure. 0: the
	// default.
	MinPoints int `json:"min_points,omitempty"`
}

// MetricsProvider is a metrics system the delegate queries, with its
// credentials (secret values as ${secrets.NAME} references, bound and
// resolved as a task's secrets are).
type MetricsProvider struct {
	// Type is ProviderPrometheus.
	Type string `json:"type"`
	// URL is the provider's base URL (Prometheus: where /api/v1/query_range is).
	URL string `json:"url"`
	// CAPEM is the PEM of CAs that sign the provider's certificate;
	// empty: the delegate's own (system roots, its CA settings).
	CAPEM string `json:"ca_pem,omitempty"`
	// BearerToken, or Username and Password, authenticate; all optional.
	BearerToken string `json:"bearer_token,omitempty"`
	Username    string `json:"username,omitempty"`
	Password    string `json:"password,omitempty"`
}

// VerifyMetric is one metric of a verification: a query for the new
// version, and how its values are judged: against a threshold, against a
// baseline query (canary against the stable version), or both.
type VerifyMetric struct {
	// Name names it in output and records (e.g. error_rate).
	Name string `json:"name"`
	// Query is the PromQL of the new version's series: it must yield one
	// series (an aggregation).
	Query string `json:"query"`
	// Threshold, when set, is a bound every data point must hold.
	Threshold *Threshold `json:"threshold,omitempty"`
	// Baseline, when set, is the PromQL of the version compared against;
	// the new version fails when its mean is worse than the baseline's by
	// more than Tolerance (a fraction: 0.1 is 10%), "worse" meaning higher
	// unless HigherIsBetter.
	Baseline       string  `json:"baseline,omitempty"`
	Tolerance      float64 `json:"tolerance,omitempty"`
	HigherIsBetter bool    `json:"higher_is_better,omitempty"`
}

// Threshold is "value OP bound": every data point of the series must
// hold it (Op is one of "<", "<=", ">", ">=").
type Threshold struct {
	Op    string  `json:"op"`
	Value float64 `json:"value"`
}

// Verdicts of a verification and of each metric.
const (
	VerifyPassed = "passed"
	VerifyFailed = "failed"
	// VerifyNoData: fewer data points than MinPoints; a failure.
	VerifyNoData = "no_data"
)

// OutputVerifyRecord is the output of a verify task that holds its
// VerifyRecord as JSON; the manager keeps it with the deployment of the
// step's stage. A failed verification also reports OutputDeployStatus
// DeployFailed.
const OutputVerifyRecord = "verify_record"

// Limits of a verify task.
const (
	MaxVerifyMetrics        = 8
	MaxVerifyQueryBytes     = 4 << 10
	DefaultVerifyDurationMS = 5 * 60 * 1000
	MaxVerifyDurationMS     = 24 * 60 * 60 * 1000
	DefaultVerifyIntervalMS = 30 * 1000
	MinVerifyIntervalMS     = 1000
	DefaultVerifyMinPoints  = 3
	// MaxVerifyPoints bounds the data points of one series a record
	// keeps (the record is an output: MaxOutputBytes holds for all).
	MaxVerifyPoints = 120
	// MaxVerifyRecordBytes bounds a VerifyRecord's JSON.
	MaxVerifyRecordBytes = 48 << 10
)

// VerifyRecord is what a verification saw and decided.
type VerifyRecord struct {
	// Verdict is VerifyPassed, VerifyFailed or VerifyNoData; Reason says
	// why in one line ("error_rate: 0.12 at 12:03:30 is not < 0.01").
	Verdict  string `json:"verdict"`
	Reason   string `json:"reason,omitempty"`
	Provider string `json:"provider"` // its URL
	// Start and the interval of the data points, Unix milliseconds.
	StartMS    int64                `json:"start_ms"`
	IntervalMS int64                `json:"interval_ms"`
	Metrics    []VerifyMetricResult `json:"metrics"`
}

// VerifyMetricResult is one metric's series and verdict.
type VerifyMetricResult struct {
	Name      string     `json:"name"`
	Query     string     `json:"query"`
	Threshold *Threshold `json:"threshold,omitempty"`
	Baseline  string     `json:"baseline,omitempty"`
	Tolerance float64    `json:"tolerance,omitempty"`
	Verdict   string     `json:"verdict"`
	Reason    string     `json:"reason,omitempty"`
	// Points and BaselinePoints are [offset from StartMS in ms, value]
	// pairs, at most MaxVerifyPoints each (the latest kept).
	Points         [][2]float64 `json:"points,omitempty"`
	BaselinePoints [][2]float64 `json:"baseline_points,omitempty"`
}

// ParseVerifyRecord decodes an OutputVerifyRecord value.
func ParseVerifyRecord(s string) (VerifyRecord, error) {
	var r VerifyRecord
	if len(s) > MaxVerifyRecordBytes {
		return r, fmt.Errorf("verify record is %d bytes: at most %d", len(s), MaxVerifyRecordBytes)
	}
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		return r, fmt.Errorf("verify record: %w", err)
	}
	switch r.Verdict {
	case VerifyPassed, VerifyFailed, VerifyNoData:
	default:
		return r, fmt.Errorf("verify record has verdict %q: want passed, failed or no_data", r.Verdict)
	}
	if len(r.Metrics) > MaxVerifyMetrics {
		return r, fmt.Errorf("verify record has %d metrics: at most %d", len(r.Metrics), MaxVerifyMetrics)
	}
	for _, m := range r.Metrics {
		if len(m.Points) > MaxVerifyPoints || len(m.BaselinePoints) > MaxVerifyPoints {
			return r, fmt.Errorf("verify record metric %q has more than %d points", m.Name, MaxVerifyPoints)
		}
	}
	return r, nil
}
