package executor

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// verifyType watches metrics on a Prometheus for a while and decides
// whether a deployment is healthy (protocol.VerifySpec). It runs in the
// delegate's own process: it is a few HTTP requests per interval, and
// holds at most one answer (MaxPromAnswerBytes) and MaxVerifyPoints points
// per series at a time.
//
// Every interval it asks for each metric's series (and its baseline's)
// from the start to now, at a step of the interval, and writes a progress
// line. A point that breaks a threshold fails the verification at once:
// no later point can mend it. A baseline is judged by the means at the
// end. A metric with fewer than MinPoints points is no data, a failure.
type verifyType struct{}

func (verifyType) New(spec protocol.TaskSpec, opts Options) (Execution, error) {
	if spec.Verify == nil {
		return nil, errors.New(`verify task has no "verify" section`)
	}
	v := *spec.Verify
	v.Metrics = append([]protocol.VerifyMetric(nil), v.Metrics...)
	if v.Provider != nil {
		p := *v.Provider
		v.Provider = &p
	}
	if err := v.Validate(); err != nil {
		return nil, err
	}
	client, err := providerClient(opts.HTTPClient, v.Provider)
	if err != nil {
		return nil, err
	}
	base, _ := url.Parse(v.Provider.URL) // Validate parsed it
	interval := time.Duration(v.IntervalMS) * time.Millisecond
	pc := &promClient{base: base, client: client, bearer: v.Provider.BearerToken, username: v.Provider.Username,
		password: v.Provider.Password, timeout: min(max(interval, 10*time.Second), time.Minute)}
	return &verifyRun{spec: v, prom: pc, interval: interval, duration: time.Duration(v.DurationMS) * time.Millisecond}, nil
}

// providerClient is the delegate's task client (its proxy and CAs) with
// the provider's CA trusted too.
func providerClient(c *http.Client, p *protocol.MetricsProvider) (*http.Client, error) {
	if c == nil {
		c = &http.Client{Transport: defaultTransport()}
	}
	if p.CAPEM == "" {
		return c, nil
	}
	var t *http.Transport
	switch rt := c.Transport.(type) {
	case nil:
		t = defaultTransport()
	case *http.Transport:
		t = rt.Clone()
	default:
		return nil, errors.New("provider ca_pem: this delegate's HTTP client cannot take another CA")
	}
	var roots *x509.CertPool
	if t.TLSClientConfig != nil && t.TLSClientConfig.RootCAs != nil {
		roots = t.TLSClientConfig.RootCAs.Clone()
	} else if sys, err := x509.SystemCertPool(); err == nil {
		roots = sys
	} else {
		roots = x509.NewCertPool()
	}
	if !roots.AppendCertsFromPEM([]byte(p.CAPEM)) {
		return nil, errors.New("provider ca_pem holds no certificate that parses: give the PEM of the CA that signs the provider's certificate")
	}
	if t.TLSClientConfig == nil {
		t.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	} else {
		t.TLSClientConfig = t.TLSClientConfig.Clone()
	}
	t.TLSClientConfig.RootCAs = roots
	return &http.Client{Transport: t, CheckRedirect: c.CheckRedirect, Timeout: c.Timeout}, nil
}

// verifyRun is one run of a verify task, from one goroutine; Interrupt
// cancels it.
type verifyRun struct {
	spec               protocol.VerifySpec
	prom               *promClient
	interval, duration time.Duration

	out    io.Writer
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
	// Set by the goroutine before done is closed.
	o       Outcome
	aborted bool
}

func (r *verifyRun) Start(ctx context.Context, out io.Writer) error {
	r.ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	r.out = out
	r.done = make(chan struct{})
	go r.run()
	return nil
}

func (r *verifyRun) Done() <-chan struct{} { return r.done }
func (r *verifyRun) Interrupt()            { r.cancel() }
func (r *verifyRun) Terminate()            { r.cancel() }

func (r *verifyRun) Finish(stop *Stop) Outcome {
	if !r.aborted {
		return r.o
	}
	if stop == nil {
		stop = &Stop{}
	}
	io.WriteString(r.out, stop.Notice("verification stopped"))
	return stop.Outcome()
}

func (r *verifyRun) Cleanup() {
	if r.cancel != nil {
		r.cancel()
	}
	if t, ok := r.prom.client.Transport.(*http.Transport); ok {
		t.CloseIdleConnections()
	}
}

// metricState is what a verification knows of one metric so far.
type metricState struct {
	m                protocol.VerifyMetric
	points, baseline [][2]float64 // the latest MaxVerifyPoints, offsets from the start
	count, baseCount int
	sum, baseSum     float64
	breach           string // the first point that broke the threshold
	lastErr          string
	verdict, reason  string
}

// run is the verification's goroutine.
func (r *verifyRun) run() {
	defer close(r.done)
	start := time.Now().Truncate(time.Second)
	deadline := start.Add(r.duration)
	states := make([]*metricState, len(r.spec.Metrics))
	for i, m := range r.spec.Metrics {
		states[i] = &metricState{m: m}
	}
	fmt.Fprintf(r.out, "verifying %d metric(s) on %s for %s, every %s (at least %d points each)\n",
		len(states), r.prom.base.Redacted(), r.duration, r.interval, r.spec.MinPoints)
	tick := time.NewTicker(r.interval)
	defer tick.Stop()
	answered := false
	for round := 0; ; round++ {
		end := time.Now()
		if end.After(deadline) {
			end = deadline
		}
		failedMetric, stop := r.round(start, end, states, &answered)
		if stop != nil {
			r.o = *stop
			return
		}
		if failedMetric != nil || !end.Before(deadline) {
			r.finish(start, states, failedMetric)
			return
		}
		wait := tick.C
		var last <-chan time.Time
		if d := time.Until(deadline); d < r.interval {
			t := time.NewTimer(d)
			defer t.Stop()
			last, wait = t.C, nil
		}
		select {
		case <-r.ctx.Done():
			r.aborted = true
			return
		case <-wait:
		case <-last:
		}
	}
}

// round queries every metric once and writes its progress lines. It
// returns the metric whose threshold broke, or an outcome that ends the
// task now (a bad query, an unreachable provider, a stop).
func (r *verifyRun) round(start, end time.Time, states []*metricState, answered *bool) (*metricState, *Outcome) {
	for _, s := range states {
		err := r.query(start, end, s)
		if r.ctx.Err() != nil {
			r.aborted = true
			o := Outcome{}
			return nil, &o
		}
		if err != nil {
			var pe *promError
			var ue *url.Error
			switch {
			case errors.As(err, &pe) && pe.Transient(), errors.As(err, &ue) && *answered:
				s.lastErr = err.Error()
				fmt.Fprintf(r.out, "%s: the query failed (%v); trying again in %s\n", s.m.Name, err, r.interval)
				continue
			case errors.As(err, &ue):
				// Never reached at all: the provider is not reachable from
				// where this delegate sits; another delegate may be.
				fmt.Fprintf(r.out, "%s: the provider is not reachable: %v\n", s.m.Name, err)
				o := faulted(fmt.Sprintf("verification provider %s is not reachable from this delegate: %v", r.prom.base.Redacted(), ue.Err))
				return nil, &o
			}
			fmt.Fprintf(r.out, "%s: %v\n", s.m.Name, err)
			o := failed(fmt.Sprintf("verification failed: %s: %v", s.m.Name, err))
			return nil, &o
		}
		*answered = true
		fmt.Fprintf(r.out, "%s, %s of %s\n", s.progress(r.spec.MinPoints), end.Sub(start).Truncate(time.Second), r.duration)
		if s.breach != "" {
			return s, nil
		}
	}
	return nil, nil
}

// query asks for one metric's series (and its baseline's) and takes them
// into s.
func (r *verifyRun) query(start, end time.Time, s *metricState) error {
	pts, err := r.series(start, end, s.m.Query, "query")
	if err != nil {
		return err
	}
	s.count, s.sum, s.points = len(pts), 0, lastPoints(pts, start)
	for _, p := range pts {
		s.sum += p[1]
		if s.breach == "" && s.m.Threshold != nil && !s.m.Threshold.Holds(p[1]) {
			at := time.UnixMilli(int64(p[0])).UTC().Format("15:04:05")
			s.breach = fmt.Sprintf("%s: %s at %s is not %s", s.m.Name, fmtValue(p[1]), at, s.m.Threshold)
		}
	}
	if s.m.Baseline == "" {
		return nil
	}
	base, err := r.series(start, end, s.m.Baseline, "baseline")
	if err != nil {
		return err
	}
	s.baseCount, s.baseSum, s.baseline = len(base), 0, lastPoints(base, start)
	for _, p := range base {
		s.baseSum += p[1]
	}
	return nil
}

// series runs one range query that must yield at most one series.
func (r *verifyRun) series(start, end time.Time, q, what string) ([][2]float64, error) {
	res, err := r.prom.queryRange(r.ctx, q, start, end, r.interval)
	if err != nil {
		return nil, err
	}
	switch len(res) {
	case 0:
		return nil, nil
	case 1:
		return res[0].Points, nil
	}
	return nil, fmt.Errorf("the %s yields %d series, not one: aggregate it to one (sum(...), avg(...) or max(...) by nothing)", what, len(res))
}

// lastPoints are the latest MaxVerifyPoints of pts, their times as
// offsets in ms from start.
func lastPoints(pts [][2]float64, start time.Time) [][2]float64 {
	if len(pts) > protocol.MaxVerifyPoints {
		pts = pts[len(pts)-protocol.MaxVerifyPoints:]
	}
	out := make([][2]float64, len(pts))
	for i, p := range pts {
		out[i] = [2]float64{p[0] - float64(start.UnixMilli()), p[1]}
	}
	return out
}

func fmtValue(v float64) string {
	return strings.TrimSuffix(fmt.Sprintf("%.4g", v), ".")
}

// progress is s's progress line, its verdict so far.
func (s *metricState) progress(minPoints int) string {
	var parts []string
	ok := func(b bool) string {
		if b {
			return "ok"
		}
		return "FAILED"
	}
	if t := s.m.Threshold; t != nil {
		if len(s.points) == 0 {
			parts = append(parts, fmt.Sprintf("no data yet (%s)", t))
		} else {
			parts = append(parts, fmt.Sprintf("%s (%s) %s", fmtValue(s.points[len(s.points)-1][1]), t, ok(s.breach == "")))
		}
	}
	if s.m.Baseline != "" {
		if s.count == 0 || s.baseCount == 0 {
			parts = append(parts, fmt.Sprintf("mean %s vs baseline %s: not enough data yet", meanText(s.sum, s.count), meanText(s.baseSum, s.baseCount)))
		} else {
			worse, diff := s.worse()
			parts = append(parts, fmt.Sprintf("mean %s vs baseline %s (%s, tolerance %s) %s", meanText(s.sum, s.count), meanText(s.baseSum, s.baseCount),
				diff, pct(s.m.Tolerance), ok(!worse)))
		}
	}
	return fmt.Sprintf("%s: %s — %d points", s.m.Name, strings.Join(parts, "; "), s.count)
}

func meanText(sum float64, n int) string {
	if n == 0 {
		return "-"
	}
	return fmtValue(sum / float64(n))
}

func pct(f float64) string { return strings.TrimSuffix(fmt.Sprintf("%.1f", f*100), ".0") + "%" }

// worse reports whether the new version's mean is worse than the
// baseline's by more than the tolerance, and the difference as text.
func (s *metricState) worse() (bool, string) {
	mean, base := s.sum/float64(s.count), s.baseSum/float64(s.baseCount)
	diff := "+" + fmtValue(mean-base)
	if base != 0 {
		d := (mean - base) / math.Abs(base)
		diff = pct(d)
		if d >= 0 {
			diff = "+" + diff
		}
	}
	bound := s.m.Tolerance * math.Abs(base)
	if s.m.HigherIsBetter {
		return mean < base-bound, diff
	}
	return mean > base+bound, diff
}

// decide sets s's verdict at the end of the window.
func (s *metricState) decide(minPoints int) {
	switch {
	case s.breach != "":
		s.verdict, s.reason = protocol.VerifyFailed, s.breach
	case s.count < minPoints:
		s.verdict, s.reason = protocol.VerifyNoData, fmt.Sprintf("%s: no data: the query returned %s, at least %d needed", s.m.Name, plural(s.count, "point"), minPoints)
	case s.m.Baseline != "" && s.baseCount < minPoints:
		s.verdict, s.reason = protocol.VerifyNoData, fmt.Sprintf("%s: no data: the baseline returned %s, at least %d needed", s.m.Name, plural(s.baseCount, "point"), minPoints)
	default:
		s.verdict = protocol.VerifyPassed
		if s.m.Baseline != "" {
			if worse, diff := s.worse(); worse {
				s.verdict = protocol.VerifyFailed
				s.reason = fmt.Sprintf("%s: mean %s is worse than the baseline's %s by %s, more than the tolerance %s", s.m.Name,
					meanText(s.sum, s.count), meanText(s.baseSum, s.baseCount), diff, pct(s.m.Tolerance))
			}
		}
	}
	if s.verdict == protocol.VerifyNoData && s.lastErr != "" {
		s.reason += " (the last query failed: " + s.lastErr + ")"
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// finish decides the verdicts (failedMetric: the one whose threshold
// broke early; the others are then left undecided) and sets the outcome.
func (r *verifyRun) finish(start time.Time, states []*metricState, failedMetric *metricState) {
	rec := protocol.VerifyRecord{Provider: r.prom.base.Redacted(), StartMS: start.UnixMilli(), IntervalMS: r.spec.IntervalMS, Verdict: protocol.VerifyPassed}
	var reasons []string
	for _, s := range states {
		switch {
		case failedMetric == nil || s == failedMetric:
			s.decide(r.spec.MinPoints)
		default:
			s.reason = "undecided: the verification stopped early when " + failedMetric.m.Name + " failed"
		}
		switch s.verdict {
		case protocol.VerifyFailed:
			rec.Verdict = protocol.VerifyFailed
			reasons = append(reasons, s.reason)
		case protocol.VerifyNoData:
			if rec.Verdict == protocol.VerifyPassed {
				rec.Verdict = protocol.VerifyNoData
			}
			reasons = append(reasons, s.reason)
		}
		if s.verdict != "" {
			fmt.Fprintf(r.out, "%s: %s%s\n", s.m.Name, s.verdict, prefixed(": ", strings.TrimPrefix(s.reason, s.m.Name+": ")))
		}
		rec.Metrics = append(rec.Metrics, protocol.VerifyMetricResult{Name: s.m.Name, Query: s.m.Query, Threshold: s.m.Threshold,
			Baseline: s.m.Baseline, Tolerance: s.m.Tolerance, Verdict: s.verdict, Reason: s.reason, Points: s.points, BaselinePoints: s.baseline})
	}
	rec.Reason = strings.Join(reasons, "; ")
	outputs := map[string]string{protocol.OutputVerifyRecord: recordText(rec)}
	if rec.Verdict == protocol.VerifyPassed {
		fmt.Fprintln(r.out, "verification passed")
		r.o = succeeded()
		r.o.Outputs = outputs
		return
	}
	fmt.Fprintf(r.out, "verification failed: %s\n", rec.Reason)
	outputs[protocol.OutputDeployStatus] = protocol.DeployFailed
	r.o = failed("verification failed: " + rec.Reason)
	r.o.Outputs = outputs
}

func prefixed(p, s string) string {
	if s == "" {
		return ""
	}
	return p + s
}

// recordText is rec as JSON of at most protocol.MaxVerifyRecordBytes: the
// oldest points go first, then long texts are cut.
func recordText(rec protocol.VerifyRecord) string {
	for {
		b, err := json.Marshal(rec)
		if err != nil {
			return `{"verdict":"` + rec.Verdict + `","reason":"the record could not be written"}`
		}
		if len(b) <= protocol.MaxVerifyRecordBytes {
			return string(b)
		}
		if !dropOldest(rec.Metrics) {
			rec.Reason = cutText(rec.Reason, 1024)
			for i := range rec.Metrics {
				m := &rec.Metrics[i]
				m.Query, m.Baseline, m.Reason = cutText(m.Query, 512), cutText(m.Baseline, 512), cutText(m.Reason, 512)
			}
			b, _ = json.Marshal(rec)
			if len(b) > protocol.MaxVerifyRecordBytes {
				return `{"verdict":"` + rec.Verdict + `","reason":"the record is too large"}`
			}
			return string(b)
		}
	}
}

// dropOldest drops the oldest quarter (at least one) of the points of
// the longest series; false when there are none left.
func dropOldest(ms []protocol.VerifyMetricResult) bool {
	var longest *[][2]float64
	for i := range ms {
		for _, p := range []*[][2]float64{&ms[i].Points, &ms[i].BaselinePoints} {
			if longest == nil || len(*p) > len(*longest) {
				longest = p
			}
		}
	}
	if longest == nil || len(*longest) == 0 {
		return false
	}
	*longest = (*longest)[max(1, len(*longest)/4):]
	return true
}

func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
