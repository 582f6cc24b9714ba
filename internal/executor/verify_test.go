package executor

import (
	"context"
	"encoding/pem"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/promserver"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/proxytest"
)

// lockedBuffer is a task's output, read after Run returned.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// verifySpec watches metrics for 5s at 1s, at least 3 points each.
func verifySpec(url string, metrics ...protocol.VerifyMetric) protocol.TaskSpec {
	return protocol.TaskSpec{Type: protocol.TaskVerify, Verify: &protocol.VerifySpec{
		Provider:   &protocol.MetricsProvider{Type: protocol.ProviderPrometheus, URL: url},
		Metrics:    metrics,
		DurationMS: 5000, IntervalMS: 1000, MinPoints: 3,
	}}
}

func runVerify(t *testing.T, spec protocol.TaskSpec) (Outcome, protocol.VerifyRecord, string) {
	t.Helper()
	var out lockedBuffer
	o := Run(context.Background(), spec, Options{}, &out)
	var rec protocol.VerifyRecord
	if s, ok := o.Outputs[protocol.OutputVerifyRecord]; ok {
		var err error
		if rec, err = protocol.ParseVerifyRecord(s); err != nil {
			t.Fatalf("record: %v\n%s", err, s)
		}
	}
	return o, rec, out.String()
}

// TestVerifyAgainstARealPrometheus: a real Prometheus scrapes a test
// service whose error rate and latency the test sets per version.
func TestVerifyAgainstARealPrometheus(t *testing.T) {
	target := promserver.NewTarget(t)
	target.Set(`app_error_rate{version="good"}`, 0.001)
	target.Set(`app_error_rate{version="bad"}`, 0.2)
	target.Set(`app_latency_seconds{version="stable"}`, 0.2)
	target.Set(`app_latency_seconds{version="canary_ok"}`, 0.21)
	target.Set(`app_latency_seconds{version="canary_slow"}`, 0.4)
	prom := promserver.Start(t, "app", target.Addr)
	prom.WaitFor(t, `app_latency_seconds{version="stable"}`)
	lt := func(v float64) *protocol.Threshold { return &protocol.Threshold{Op: "<", Value: v} }
	q := func(m, v string) string { return `max(` + m + `{version="` + v + `"})` }

	t.Run("good", func(t *testing.T) {
		t.Parallel()
		o, rec, out := runVerify(t, verifySpec(prom.URL, protocol.VerifyMetric{Name: "error_rate", Query: q("app_error_rate", "good"), Threshold: lt(0.01)}))
		if o.Status != protocol.StatusSucceeded || rec.Verdict != protocol.VerifyPassed || len(rec.Metrics) != 1 ||
			len(rec.Metrics[0].Points) < 3 || rec.Metrics[0].Points[0][1] != 0.001 || o.Outputs[protocol.OutputDeployStatus] != "" {
			t.Fatalf("outcome %+v\nrecord %+v\n%s", o, rec, out)
		}
		if !strings.Contains(out, "error_rate: 0.001 (< 0.01) ok — ") || !strings.Contains(out, "of 5s") || !strings.Contains(out, "verification passed") {
			t.Fatalf("progress lines:\n%s", out)
		}
	})
	t.Run("bad", func(t *testing.T) {
		t.Parallel()
		o, rec, out := runVerify(t, verifySpec(prom.URL,
			protocol.VerifyMetric{Name: "error_rate", Query: q("app_error_rate", "bad"), Threshold: lt(0.01)},
			protocol.VerifyMetric{Name: "latency", Query: q("app_latency_seconds", "stable"), Threshold: lt(1)}))
		if o.Status != protocol.StatusFailed || !strings.HasPrefix(o.Error, "verification failed: error_rate: 0.2 at ") ||
			!strings.HasSuffix(o.Error, " is not < 0.01") || o.DelegateFault ||
			o.Outputs[protocol.OutputDeployStatus] != protocol.DeployFailed || rec.Verdict != protocol.VerifyFailed ||
			rec.Metrics[0].Verdict != protocol.VerifyFailed || !strings.HasPrefix(rec.Metrics[1].Reason, "undecided") {
			t.Fatalf("outcome %+v\nrecord %+v\n%s", o, rec, out)
		}
		// It failed at the first point that broke the threshold, not at
		// the end of its window: the FAILED line is before the window's
		// end and no interval's progress follows it. (Whether the first
		// interval already has a point depends on Prometheus's scrapes.)
		_, after, found := strings.Cut(out, "error_rate: 0.2 (< 0.01) FAILED")
		failedLine, rest, _ := strings.Cut(after, "\n")
		if !found || strings.Contains(failedLine, "5s of 5s") || strings.Contains(rest, " of 5s") {
			t.Fatalf("did not fail early:\n%s", out)
		}
	})
	t.Run("no data", func(t *testing.T) {
		t.Parallel()
		o, rec, out := runVerify(t, verifySpec(prom.URL, protocol.VerifyMetric{Name: "error_rate", Query: q("app_error_rate", "nothing"), Threshold: lt(0.01)}))
		if o.Status != protocol.StatusFailed || o.Error != "verification failed: error_rate: no data: the query returned 0 points, at least 3 needed" ||
			rec.Verdict != protocol.VerifyNoData || o.Outputs[protocol.OutputDeployStatus] != protocol.DeployFailed {
			t.Fatalf("outcome %+v\nrecord %+v\n%s", o, rec, out)
		}
	})
	canary := func(version string) protocol.TaskSpec {
		return verifySpec(prom.URL, protocol.VerifyMetric{Name: "latency", Query: q("app_latency_seconds", version),
			Baseline: q("app_latency_seconds", "stable"), Tolerance: 0.1})
	}
	t.Run("canary within the tolerance", func(t *testing.T) {
		t.Parallel()
		o, rec, out := runVerify(t, canary("canary_ok"))
		if o.Status != protocol.StatusSucceeded || rec.Verdict != protocol.VerifyPassed || len(rec.Metrics[0].BaselinePoints) < 3 ||
			!strings.Contains(out, "latency: mean 0.21 vs baseline 0.2 (+5%, tolerance 10%) ok — ") {
			t.Fatalf("outcome %+v\nrecord %+v\n%s", o, rec, out)
		}
	})
	t.Run("canary worse than the baseline", func(t *testing.T) {
		t.Parallel()
		o, rec, out := runVerify(t, canary("canary_slow"))
		if o.Status != protocol.StatusFailed || rec.Verdict != protocol.VerifyFailed ||
			o.Error != "verification failed: latency: mean 0.4 is worse than the baseline's 0.2 by +100%, more than the tolerance 10%" {
			t.Fatalf("outcome %+v\nrecord %+v\n%s", o, rec, out)
		}
	})
	t.Run("bad query", func(t *testing.T) {
		t.Parallel()
		o, _, out := runVerify(t, verifySpec(prom.URL, protocol.VerifyMetric{Name: "error_rate", Query: "max(app_error_rate{", Threshold: lt(0.01)}))
		if o.Status != protocol.StatusFailed || o.DelegateFault || !strings.Contains(o.Error, "verification failed: error_rate: Prometheus answered 400 (bad_data):") ||
			!strings.Contains(o.Error, "parse error") {
			t.Fatalf("outcome %+v\n%s", o, out)
		}
	})
	t.Run("several series", func(t *testing.T) {
		t.Parallel()
		o, _, out := runVerify(t, verifySpec(prom.URL, protocol.VerifyMetric{Name: "error_rate", Query: "app_error_rate", Threshold: lt(0.01)}))
		if o.Status != protocol.StatusFailed || !strings.Contains(o.Error, "the query yields 2 series, not one: aggregate it") {
			t.Fatalf("outcome %+v\n%s", o, out)
		}
	})
}

// TestVerifyUnreachableProvider: a provider nothing listens on is the
// delegate's fault (another delegate may reach it).
func TestVerifyUnreachableProvider(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	o, _, out := runVerify(t, verifySpec("http://"+addr, protocol.VerifyMetric{Name: "e", Query: "up", Threshold: &protocol.Threshold{Op: "<", Value: 1}}))
	if o.Status != protocol.StatusFailed || !o.DelegateFault || !strings.Contains(o.Error, "is not reachable from this delegate") {
		t.Fatalf("outcome %+v\n%s", o, out)
	}
}

// TestVerifyProviderTLSAndAuth: the provider's CA is trusted and its
// bearer token or basic auth sent; a refused login fails clearly.
func TestVerifyProviderTLSAndAuth(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, p, basic := r.BasicAuth()
		if r.URL.Path != "/prom/api/v1/query_range" || !(r.Header.Get("Authorization") == "Bearer tok" || basic && u == "u" && p == "pw") {
			w.WriteHeader(http.StatusUnauthorized)
			io.WriteString(w, "Unauthorized")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"0.5"],[2,"NaN"],[3,"0.5"],[4,"0.5"]]}]}}`)
	}))
	t.Cleanup(srv.Close)
	ca := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	m := protocol.VerifyMetric{Name: "e", Query: "up", Threshold: &protocol.Threshold{Op: "<", Value: 1}}
	for _, c := range []struct {
		name      string
		p         protocol.MetricsProvider
		want, err string
	}{
		{"bearer", protocol.MetricsProvider{CAPEM: ca, BearerToken: "tok"}, protocol.StatusSucceeded, ""},
		{"basic", protocol.MetricsProvider{CAPEM: ca, Username: "u", Password: "pw"}, protocol.StatusSucceeded, ""},
		{"wrong token", protocol.MetricsProvider{CAPEM: ca, BearerToken: "nope"}, protocol.StatusFailed, "the provider refused the credentials"},
		{"no CA", protocol.MetricsProvider{BearerToken: "tok"}, protocol.StatusFailed, "certificate"},
	} {
		spec := verifySpec(srv.URL+"/prom", m)
		spec.Verify.DurationMS = 1000
		c.p.Type, c.p.URL = protocol.ProviderPrometheus, srv.URL+"/prom"
		spec.Verify.Provider = &c.p
		o, rec, out := runVerify(t, spec)
		if o.Status != c.want || !strings.Contains(o.Error, c.err) {
			t.Errorf("%s: outcome %+v\n%s", c.name, o, out)
		}
		if c.want == protocol.StatusSucceeded && len(rec.Metrics[0].Points) != 3 {
			t.Errorf("%s: a NaN point is left out: %+v", c.name, rec)
		}
	}
}

// FuzzDecodeQueryRange decodes arbitrary answers: no panic, and a decoded
// series holds finite values only.
func FuzzDecodeQueryRange(f *testing.F) {
	f.Add(200, `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"a":"b"},"values":[[1700000000.5,"0.1"],[1700000001,"NaN"],[1,"+Inf"]]}]}}`)
	f.Add(400, `{"status":"error","errorType":"bad_data","error":"parse error"}`)
	f.Add(503, `Service Unavailable`)
	f.Add(200, `{"status":"success","data":{"resultType":"vector","result":[]}}`)
	f.Add(200, `{"status":"success","data":{"resultType":"matrix","result":[{"values":[["x",1]]}]}}`)
	f.Fuzz(func(t *testing.T, code int, body string) {
		series, err := decodeQueryRange(code, []byte(body))
		if err != nil {
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("error is not one line: %q", err)
			}
			return
		}
		for _, s := range series {
			for _, p := range s.Points {
				if p[1] != p[1] || p[1]-p[1] != 0 || p[0]-p[0] != 0 {
					t.Fatalf("non-finite point %v", p)
				}
			}
		}
	})
}

func TestRecordTextBounded(t *testing.T) {
	rec := protocol.VerifyRecord{Verdict: protocol.VerifyFailed}
	for i := 0; i < protocol.MaxVerifyMetrics; i++ {
		m := protocol.VerifyMetricResult{Name: "m", Query: strings.Repeat("q", protocol.MaxVerifyQueryBytes), Baseline: strings.Repeat("b", protocol.MaxVerifyQueryBytes)}
		for j := 0; j < protocol.MaxVerifyPoints; j++ {
			m.Points = append(m.Points, [2]float64{float64(j * 1000), 0.123456789})
			m.BaselinePoints = append(m.BaselinePoints, [2]float64{float64(j * 1000), 0.123456789})
		}
		rec.Metrics = append(rec.Metrics, m)
	}
	s := recordText(rec)
	back, err := protocol.ParseVerifyRecord(s)
	if err != nil || len(s) > protocol.MaxVerifyRecordBytes || back.Verdict != protocol.VerifyFailed {
		t.Fatalf("%d bytes: %v", len(s), err)
	}
	if pts := back.Metrics[0].Points; len(pts) > 0 && pts[len(pts)-1][0] != float64((protocol.MaxVerifyPoints-1)*1000) {
		t.Fatalf("the latest points are not kept: %v", pts[len(pts)-1])
	}
}

// TestVerifyStopped: a verification is cancelled or times out as any
// task, without a verdict.
func TestVerifyStopped(t *testing.T) {
	queried := make(chan struct{}, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queried <- struct{}{}
		io.WriteString(w, `{"status":"success","data":{"resultType":"matrix","result":[]}}`)
	}))
	t.Cleanup(srv.Close)
	spec := verifySpec(srv.URL, protocol.VerifyMetric{Name: "e", Query: "up", Threshold: &protocol.Threshold{Op: "<", Value: 1}})
	spec.Verify.DurationMS = 3600 * 1000

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-queried
		cancel()
	}()
	var out lockedBuffer
	o := Run(ctx, spec, Options{}, &out)
	if o.Status != protocol.StatusCancelled || o.Outputs != nil || !strings.Contains(out.String(), "task cancelled; verification stopped") {
		t.Fatalf("cancelled: %+v\n%s", o, out.String())
	}
	o = Run(context.Background(), spec, Options{Timeout: 1500 * time.Millisecond}, &out)
	if o.Status != protocol.StatusTimedOut || o.Outputs != nil {
		t.Fatalf("timed out: %+v\n%s", o, out.String())
	}
}

// TestVerifyThroughTheDelegatesProxy: the queries go through the
// delegate's task client (its proxy): a provider name only the proxy
// resolves is reached.
func TestVerifyThroughTheDelegatesProxy(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"0"],[2,"0"],[3,"0"]]}]}}`)
	}))
	t.Cleanup(srv.Close)
	p := proxytest.Start(t, "", "")
	p.Alias("prometheus.internal", "127.0.0.1")
	base := "http://prometheus.internal:" + strings.TrimPrefix(srv.URL, "http://127.0.0.1:")
	tr := defaultTransport()
	tr.Proxy = http.ProxyURL(p.URL)
	spec := verifySpec(base, protocol.VerifyMetric{Name: "e", Query: "up", Threshold: &protocol.Threshold{Op: "<", Value: 1}})
	spec.Verify.DurationMS = 1000
	var out lockedBuffer
	o := Run(context.Background(), spec, Options{HTTPClient: &http.Client{Transport: tr}}, &out)
	if o.Status != protocol.StatusSucceeded {
		t.Fatalf("%+v\n%s", o, out.String())
	}
	if f := p.Forwards(); len(f) == 0 || !strings.HasPrefix(f[0], base+"/api/v1/query_range") {
		t.Fatalf("forwarded: %v", f)
	}
}
