package protocol

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
)

// Limits of a verify task's text (VerifySpec.Validate).
const (
	// MaxVerifyNameBytes bounds a metric's name.
	MaxVerifyNameBytes = 64
	// MaxProviderURLBytes bounds a provider's URL.
	MaxProviderURLBytes = 2048
	// MaxProviderCABytes bounds a provider's CA PEM.
	MaxProviderCABytes = 64 << 10
	// MaxVerifyTolerance bounds a baseline's tolerance (100 = 10000%).
	MaxVerifyTolerance = 100
)

// ThresholdOps are the operators of a Threshold.
func ThresholdOps() []string { return []string{"<", "<=", ">", ">="} }

// Holds reports whether v holds the threshold ("v OP value").
func (t Threshold) Holds(v float64) bool {
	switch t.Op {
	case "<":
		return v < t.Value
	case "<=":
		return v <= t.Value
	case ">":
		return v > t.Value
	case ">=":
		return v >= t.Value
	}
	return false
}

func (t Threshold) String() string {
	return t.Op + " " + strconv.FormatFloat(t.Value, 'g', -1, 64)
}

// ParseThreshold reads a threshold's text form, "< 0.01" (an operator of
// ThresholdOps and a finite number, space optional).
func ParseThreshold(s string) (Threshold, error) {
	s = strings.TrimSpace(s)
	var t Threshold
	for _, op := range []string{"<=", ">=", "<", ">"} {
		if strings.HasPrefix(s, op) {
			t.Op = op
			break
		}
	}
	if t.Op == "" {
		return t, fmt.Errorf("threshold %q: write an operator and a number, e.g. \"< 0.01\" (operators: %s)", s, orList(ThresholdOps()))
	}
	num := strings.TrimSpace(s[len(t.Op):])
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return t, fmt.Errorf("threshold %q: %q is not a finite number: write e.g. \"%s 0.01\"", s, num, t.Op)
	}
	t.Value = v
	return t, nil
}

// Validate checks a verify task's payload (nil: none) and fills in its
// defaults (duration, interval, minimum points). The provider must be a
// Prometheus with an http:// or https:// URL; each metric needs a name, a
// query, and a threshold, a baseline, or both.
func (v *VerifySpec) Validate() error {
	if v == nil {
		return errors.New("a verify task needs a verify section with a provider and metrics")
	}
	if err := v.Provider.Validate(); err != nil {
		return err
	}
	if err := v.checkTimes(); err != nil {
		return err
	}
	switch {
	case len(v.Metrics) == 0:
		return errors.New("a verify task needs at least one metric (a name, a query, and a threshold or a baseline)")
	case len(v.Metrics) > MaxVerifyMetrics:
		return fmt.Errorf("a verify task has %d metrics: at most %d", len(v.Metrics), MaxVerifyMetrics)
	}
	seen := map[string]bool{}
	for i := range v.Metrics {
		m := &v.Metrics[i]
		if err := m.validate(); err != nil {
			return fmt.Errorf("verify metric %d (%q): %w", i+1, m.Name, err)
		}
		if seen[m.Name] {
			return fmt.Errorf("verify metric %q is given twice: give each metric its own name", m.Name)
		}
		seen[m.Name] = true
	}
	return nil
}

// checkTimes checks and defaults duration, interval and minimum points.
func (v *VerifySpec) checkTimes() error {
	if v.DurationMS == 0 {
		v.DurationMS = DefaultVerifyDurationMS
	}
	if v.IntervalMS == 0 {
		v.IntervalMS = DefaultVerifyIntervalMS
	}
	if v.MinPoints == 0 {
		v.MinPoints = DefaultVerifyMinPoints
	}
	switch {
	case v.DurationMS < 0 || v.DurationMS > MaxVerifyDurationMS:
		return fmt.Errorf("verify duration %dms: between 1ms and %dms (24h)", v.DurationMS, int64(MaxVerifyDurationMS))
	case v.IntervalMS < MinVerifyIntervalMS:
		return fmt.Errorf("verify interval %dms: at least %dms (1s)", v.IntervalMS, MinVerifyIntervalMS)
	case v.IntervalMS > v.DurationMS:
		return fmt.Errorf("verify interval %dms is longer than its duration %dms: give an interval shorter than the duration", v.IntervalMS, v.DurationMS)
	case v.MinPoints < 0 || v.MinPoints > MaxVerifyPoints:
		return fmt.Errorf("verify min_points %d: between 1 and %d", v.MinPoints, MaxVerifyPoints)
	}
	return nil
}

// validate checks one metric.
func (m *VerifyMetric) validate() error {
	switch {
	case m.Name == "":
		return errors.New("a metric needs a name (error_rate)")
	case len(m.Name) > MaxVerifyNameBytes:
		return fmt.Errorf("name is %d bytes: at most %d", len(m.Name), MaxVerifyNameBytes)
	}
	for _, c := range m.Name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return errors.New("a metric's name is letters, digits, '_', '-' and '.' (error_rate)")
		}
	}
	if err := checkQuery("query", m.Query); err != nil {
		return err
	}
	if m.Threshold == nil && m.Baseline == "" {
		return errors.New("a metric needs a threshold (\"< 0.01\"), a baseline query, or both")
	}
	if t := m.Threshold; t != nil {
		if !isThresholdOp(t.Op) {
			return fmt.Errorf("threshold operator %q: use %s", t.Op, orList(ThresholdOps()))
		}
		if math.IsNaN(t.Value) || math.IsInf(t.Value, 0) {
			return errors.New("threshold value must be a finite number")
		}
	}
	if m.Baseline != "" {
		if err := checkQuery("baseline", m.Baseline); err != nil {
			return err
		}
	}
	switch {
	case math.IsNaN(m.Tolerance) || m.Tolerance < 0 || m.Tolerance > MaxVerifyTolerance:
		return fmt.Errorf("tolerance must be a fraction between 0 and %d (0.1 is 10%%)", MaxVerifyTolerance)
	case m.Tolerance != 0 && m.Baseline == "":
		return errors.New("a tolerance applies to a baseline: give baseline: (the stable version's query) or leave tolerance out")
	case m.HigherIsBetter && m.Baseline == "":
		return errors.New("higher_is_better applies to a baseline: give baseline: or leave it out")
	}
	return nil
}

func isThresholdOp(op string) bool {
	for _, o := range ThresholdOps() {
		if op == o {
			return true
		}
	}
	return false
}

// checkQuery checks a PromQL text: not blank, at most
// MaxVerifyQueryBytes, printable but for line breaks and tabs (a query
// may span lines).
func checkQuery(what, q string) error {
	if strings.TrimSpace(q) == "" {
		return fmt.Errorf("%s is empty: give the PromQL of one series (sum(rate(http_requests_total{code=~\"5..\"}[1m])))", what)
	}
	return checkText(what, strings.NewReplacer("\n", " ", "\t", " ", "\r", " ").Replace(q), MaxVerifyQueryBytes)
}

// Validate checks a metrics provider (nil: none).
func (p *MetricsProvider) Validate() error {
	if p == nil {
		return errors.New("a verify task needs a provider: a connector of type prometheus, or provider: {type: prometheus, url: ...}")
	}
	if p.Type != ProviderPrometheus {
		return fmt.Errorf("provider type %q: use %s", p.Type, ProviderPrometheus)
	}
	if err := checkText("provider url", p.URL, MaxProviderURLBytes); err != nil {
		return err
	}
	u, err := url.Parse(p.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("provider url must be an absolute http:// or https:// URL (the Prometheus server's base URL, e.g. http://prometheus:9090)")
	}
	if u.User != nil {
		return errors.New("provider url must not hold credentials: give username and password (or a bearer token) from stored secrets")
	}
	if len(p.CAPEM) > MaxProviderCABytes {
		return fmt.Errorf("provider ca_pem is %d bytes: at most %d", len(p.CAPEM), MaxProviderCABytes)
	}
	if p.CAPEM != "" && !strings.Contains(p.CAPEM, "-----BEGIN CERTIFICATE-----") {
		return errors.New("provider ca_pem holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
	}
	if p.BearerToken != "" && (p.Username != "" || p.Password != "") {
		return errors.New("provider takes a bearer token or a username and password, not both")
	}
	if p.Password != "" && p.Username == "" {
		return errors.New("provider password needs a username")
	}
	for what, s := range map[string]string{"bearer_token": p.BearerToken, "username": p.Username, "password": p.Password} {
		if HasControl(s) || len(s) > 8192 {
			return fmt.Errorf("provider %s must be printable text of at most 8192 bytes", what)
		}
	}
	return nil
}
