package promformat

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"

	"github.com/prometheus/common/model"

	"github.com/legate-dev/legate/internal/metrics"
	"github.com/legate-dev/legate/internal/promtest"
)

// text returns what the registry writes, failing the test on an error.
func text(t testing.TB, r *metrics.Registry) string {
	t.Helper()
	var b bytes.Buffer
	if err := r.WriteText(context.Background(), &b); err != nil {
		t.Fatalf("WriteText: %v", err)
	}
	return b.String()
}

// check is Check that fails the test.
func check(t testing.TB, text string) promtest.Families {
	t.Helper()
	fams, err := Check(text)
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	return fams
}

// registry has a family of each kind legate writes, with awkward label
// values and help texts (internal/metrics' TestRoundTrip checks the values
// promtest reads from it).
func registry() *metrics.Registry {
	r := metrics.NewRegistry()
	const awkward = "back\\slash \"quoted\"\nnew line, ünïcode"
	c := r.NewCounterVec(metrics.Opts{Name: "jobs_total", Help: "Jobs done.\nSecond \\ line.", ConstLabels: metrics.Labels{"host": "h1"}}, "kind", "zone")
	c.With("a", "z1").Add(3.5)
	c.With(awkward, "z2").Inc()
	c.With("", "z3")
	g := r.NewGaugeVec(metrics.Opts{Name: "temperature", Help: " Temp. \"quoted\""}, "room", "le")
	g.With("kitchen", "1").Set(-3.25)
	g.With("hall", "+Inf").Set(math.Inf(-1))
	r.NewGauge(metrics.Opts{Name: "big", Help: ""}).Set(1e21)
	r.NewGauge(metrics.Opts{Name: "not_a_number", Help: "NaN."}).Set(math.NaN())
	r.NewGaugeFunc(metrics.Opts{Name: "answer", Help: "Computed.", ConstLabels: metrics.Labels{"by": "func"}}, func() float64 { return 42 })
	h := r.NewHistogramVec(metrics.Opts{Name: "latency_seconds", Help: "Latency."}, []float64{0.005, 0.1, 1}, "op")
	for _, v := range []float64{0.001, 0.005, 0.05, 0.5, 3, 7} {
		h.With("get").Observe(v)
		h.With(awkward).Observe(v / 3)
	}
	r.NewHistogram(metrics.Opts{Name: "empty_seconds", Help: "Nothing observed."}, []float64{1, math.Inf(+1)})
	r.NewHistogram(metrics.Opts{Name: "x_count", Help: "A name with a histogram's suffix."}, []float64{-1, 0}).Observe(-2)
	r.NewCounter(metrics.Opts{Name: "x", Help: "Not a histogram."}).Inc()
	r.Collect(func(ctx context.Context, s *metrics.Scrape) error {
		s.Add("collected", 7, "one")
		s.Add("collected_total", 9)
		return nil
	}, metrics.Desc{Opts: metrics.Opts{Name: "collected", Help: "At scrape."}, Type: metrics.TypeGauge, Labels: []string{"n"}},
		metrics.Desc{Opts: metrics.Opts{Name: "collected_total", Help: "At scrape too."}, Type: metrics.TypeCounter})
	r.AddProcessMetrics()
	return r
}

// TestLegateMetricsReadTheSame: Prometheus's parser accepts what legate's
// registry writes, and reads it as promtest does.
func TestLegateMetricsReadTheSame(t *testing.T) {
	fams := check(t, text(t, registry()))
	for _, name := range []string{"jobs_total", "temperature", "big", "not_a_number", "answer", "latency_seconds",
		"empty_seconds", "x_count", "x", "collected", "collected_total", "go_goroutines", "process_start_time_seconds"} {
		if fams[name] == nil {
			t.Errorf("no family %s: %v", name, fams.Names())
		}
	}
	if n := len(fams["latency_seconds"].Series); n != 2 {
		t.Errorf("latency_seconds has %d series, want 2", n)
	}
}

// TestPinnedTextReadsTheSame: the text internal/metrics' TestExactText pins.
func TestPinnedTextReadsTheSame(t *testing.T) {
	check(t, pinned)
}

const pinned = `# HELP a_total A "quoted" help.
# TYPE a_total counter
a_total{v="a\\\"\n"} 2
a_total{v="b"} 1
# HELP b_seconds H \\ help\nnext
# TYPE b_seconds histogram
b_seconds_bucket{a="x",z="1",le="0.25"} 1
b_seconds_bucket{a="x",z="1",le="1"} 1
b_seconds_bucket{a="x",z="1",le="+Inf"} 2
b_seconds_sum{a="x",z="1"} 2.25
b_seconds_count{a="x",z="1"} 2
# HELP c C.
# TYPE c gauge
c 0.5
`

// TestNamesAgreeWithPrometheus: the constructors refuse exactly the
// metric and label names Prometheus's data model calls invalid (legacy
// names; label names starting with "__" are Prometheus's own).
func TestNamesAgreeWithPrometheus(t *testing.T) {
	for _, s := range []string{"", "a", "_", ":", "a:b", "a1", "1a", "__a", "a b", "ä", "a-b", "A_Z09", "le", "__name__"} {
		checkNames(t, s)
	}
}

func checkNames(t *testing.T, s string) {
	t.Helper()
	refused := func(f func(r *metrics.Registry)) (panicked bool) {
		defer func() { panicked = recover() != nil }()
		f(metrics.NewRegistry())
		return false
	}
	if got, want := refused(func(r *metrics.Registry) { r.NewGauge(metrics.Opts{Name: s}) }), !model.IsValidLegacyMetricName(s); got != want {
		t.Errorf("metric name %q: refused %v, Prometheus says invalid %v", s, got, want)
	}
	want := !model.LabelName(s).IsValidLegacy() || strings.HasPrefix(s, "__")
	if got := refused(func(r *metrics.Registry) { r.NewGaugeVec(metrics.Opts{Name: "a"}, s) }); got != want {
		t.Errorf("label name %q: refused %v, want %v", s, got, want)
	}
}

// FuzzLabelValueReadsTheSame: with any label value and help text (and
// any string as a name), Prometheus's parser accepts what the registry
// writes and reads it as promtest does.
func FuzzLabelValueReadsTheSame(f *testing.F) {
	for _, s := range []string{"", "plain", `a\b`, `"q"`, "x\ny", "\\n", "\xff", "ü\\\"\n", "}", "le=\"1\"", " \tlead"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, value, help string) {
		checkNames(t, value)
		r := metrics.NewRegistry()
		r.NewCounterVec(metrics.Opts{Name: "x_total", Help: help, ConstLabels: metrics.Labels{"c": value}}, "v").With(value).Inc()
		r.NewHistogramVec(metrics.Opts{Name: "x_seconds", Help: help}, []float64{1}, "v").With(value).Observe(0.5)
		fams := check(t, text(t, r))
		if fams["x_total"] == nil || fams["x_seconds"] == nil {
			t.Fatalf("families: %v", fams.Names())
		}
	})
}

// FuzzParsersAgree: whatever text promtest's parser accepts, Prometheus's
// accepts too and reads the same way (promtest's is the stricter).
func FuzzParsersAgree(f *testing.F) {
	f.Add(pinned)
	f.Add("")
	f.Add("x 1\n")
	f.Add("x{} -Inf\n")
	f.Add("x{a=\"\\\\\\n\\\"\",b=\"\"} NaN\n")
	f.Add("# HELP x  lead\\\\ing\n# TYPE x untyped\nx 1e-3\n")
	f.Add("# TYPE h histogram\nh_sum 1\nh_count 1\nh_bucket{le=\"+Inf\"} 1\n")
	f.Add(`# HELP a_total A "quoted" help \\ and\nnext.
# TYPE a_total counter
a_total{v="a\\\"\n",w=""} 2
a_total 1
# HELP h  Leading blanks go.
# TYPE h histogram
h_bucket{z="1",le="0.25"} 1
h_bucket{z="1",le="+Inf"} 2
h_sum{z="1"} 2.25
h_count{z="1"} 2
u{le="x"} NaN
# TYPE h2_count gauge
h2_count -Inf
# HELP empty No samples: left out.
`) // internal/promtest's TestParse
	f.Add("# TYPE h_count histogram\nh_count_bucket{le=\"1\"} 0\nh_count_bucket{le=\"+Inf\"} 0\nh_count_sum 0\nh_count_count 0\n")
	f.Fuzz(func(t *testing.T, text string) {
		if _, err := promtest.Parse(strings.NewReader(text)); err != nil {
			return
		}
		check(t, text)
	})
}
