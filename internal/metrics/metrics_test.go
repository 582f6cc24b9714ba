package metrics

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/promtest"
)

// text returns what the registry writes, failing the test on an error.
func text(t testing.TB, r *Registry) string {
	t.Helper()
	var b bytes.Buffer
	if err := r.WriteText(context.Background(), &b); err != nil {
		t.Fatalf("WriteText: %v", err)
	}
	return b.String()
}

// parse parses the text format with promtest's parser, which is stricter
// than Prometheus's and reads what it accepts as Prometheus's does: the
// e2e module's promformat tests check that against Prometheus's own parser,
// on this package's output among others (Prometheus's libraries stay out
// of legate's go.mod).
func parse(t testing.TB, s string) promtest.Families {
	t.Helper()
	fams, err := promtest.Parse(strings.NewReader(s))
	if err != nil {
		t.Fatalf("the parser refuses our output: %v\n%s", err, s)
	}
	return fams
}

// flatten turns parsed families into "name{l="v",…}" → value, with a
// histogram as its _bucket, _sum and _count series, and records each
// family's type and help.
func flatten(fams promtest.Families) (values map[string]float64, meta map[string]string) {
	values, meta = map[string]float64{}, map[string]string{}
	series := func(name string, lps []promtest.Label, extra ...string) string {
		var ls []string
		for _, lp := range lps {
			ls = append(ls, fmt.Sprintf("%s=%q", lp.Name, lp.Value))
		}
		for i := 0; i < len(extra); i += 2 {
			ls = append(ls, fmt.Sprintf("%s=%q", extra[i], extra[i+1]))
		}
		sort.Strings(ls)
		return name + "{" + strings.Join(ls, ",") + "}"
	}
	for name, f := range fams {
		meta[name] = f.Type + " " + f.Help
		for _, m := range f.Series {
			switch f.Type {
			case promtest.TypeCounter, promtest.TypeGauge:
				values[series(name, m.Labels)] = m.Value
			case promtest.TypeHistogram:
				for _, b := range m.Buckets {
					le := strconv.FormatFloat(b.UpperBound, 'f', -1, 64)
					if math.IsInf(b.UpperBound, +1) {
						le = "+Inf"
					}
					values[series(name+"_bucket", m.Labels, "le", le)] = float64(b.CumulativeCount)
				}
				values[series(name+"_sum", m.Labels)] = m.Sum
				values[series(name+"_count", m.Labels)] = float64(m.Count)
			default:
				values[series(name, m.Labels)] = math.NaN()
			}
		}
	}
	return values, meta
}

// TestRoundTrip: what WriteText writes, the parser reads back with every
// value, label (escapes included) and bucket intact.
func TestRoundTrip(t *testing.T) {
	r := NewRegistry()
	const awkward = "back\\slash \"quoted\"\nnew line, ünïcode"
	c := r.NewCounterVec(Opts{Name: "jobs_total", Help: "Jobs done.\nSecond \\ line.", ConstLabels: Labels{"host": "h1"}}, "kind", "zone")
	c.With("a", "z1").Inc()
	c.With("a", "z1").Add(2.5)
	c.With(awkward, "z2").Inc()
	c.With("", "z3") // a series at 0
	g := r.NewGaugeVec(Opts{Name: "temperature", Help: "Temp."}, "room")
	g.With("kitchen").Set(-3.25)
	g.With("hall").Inc()
	g.With("hall").Inc()
	g.With("hall").Dec()
	r.NewGauge(Opts{Name: "big", Help: "Big."}).Set(1e21)
	r.NewGaugeFunc(Opts{Name: "answer", Help: "Computed.", ConstLabels: Labels{"by": "func"}}, func() float64 { return 42 })
	h := r.NewHistogramVec(Opts{Name: "latency_seconds", Help: "Latency."}, []float64{0.005, 0.1, 1}, "op")
	var sum float64
	for _, v := range []float64{0.001, 0.005, 0.05, 0.5, 3, 7} {
		h.With("get").Observe(v)
		sum += v
	}
	r.NewHistogram(Opts{Name: "empty_seconds", Help: "Nothing observed."}, []float64{1, math.Inf(+1)})
	r.NewCounterVec(Opts{Name: "unused_total", Help: "No series: not written."}, "x")
	r.Collect(func(ctx context.Context, s *Scrape) error {
		s.Add("collected", 7, "one")
		s.Add("collected", 8, "two")
		s.Add("collected_total", 9)
		return nil
	}, Desc{Opts: Opts{Name: "collected", Help: "At scrape."}, Type: TypeGauge, Labels: []string{"n"}},
		Desc{Opts: Opts{Name: "collected_total", Help: "At scrape too."}, Type: TypeCounter})

	values, meta := flatten(parse(t, text(t, r)))
	wantValues := map[string]float64{
		`jobs_total{host="h1",kind="a",zone="z1"}`:                                3.5,
		`jobs_total{host="h1",kind=` + fmt.Sprintf("%q", awkward) + `,zone="z2"}`: 1,
		`jobs_total{host="h1",kind="",zone="z3"}`:                                 0,
		`temperature{room="kitchen"}`:                                             -3.25,
		`temperature{room="hall"}`:                                                1,
		`big{}`:                                                                   1e21,
		`answer{by="func"}`:                                                       42,
		`latency_seconds_bucket{le="0.005",op="get"}`:                             2,
		`latency_seconds_bucket{le="0.1",op="get"}`:                               3,
		`latency_seconds_bucket{le="1",op="get"}`:                                 4,
		`latency_seconds_bucket{le="+Inf",op="get"}`:                              6,
		`latency_seconds_sum{op="get"}`:                                           sum,
		`latency_seconds_count{op="get"}`:                                         6,
		`empty_seconds_bucket{le="1"}`:                                            0,
		`empty_seconds_bucket{le="+Inf"}`:                                         0,
		`empty_seconds_sum{}`:                                                     0,
		`empty_seconds_count{}`:                                                   0,
		`collected{n="one"}`:                                                      7,
		`collected{n="two"}`:                                                      8,
		`collected_total{}`:                                                       9,
	}
	if diff := cmp.Diff(wantValues, values); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
	wantMeta := map[string]string{
		"jobs_total":      "COUNTER Jobs done.\nSecond \\ line.",
		"temperature":     "GAUGE Temp.",
		"big":             "GAUGE Big.",
		"answer":          "GAUGE Computed.",
		"latency_seconds": "HISTOGRAM Latency.",
		"empty_seconds":   "HISTOGRAM Nothing observed.",
		"collected":       "GAUGE At scrape.",
		"collected_total": "COUNTER At scrape too.",
	}
	if diff := cmp.Diff(wantMeta, meta); diff != "" {
		t.Errorf("types and help (-want +got):\n%s", diff)
	}
}

// TestExactText pins the format: HELP and TYPE lines, sorted families and
// series, sorted labels with le last, cumulative buckets, escapes.
func TestExactText(t *testing.T) {
	r := NewRegistry()
	h := r.NewHistogramVec(Opts{Name: "b_seconds", Help: "H \\ help\nnext", ConstLabels: Labels{"z": "1"}}, []float64{0.25, 1}, "a")
	h.With("x").Observe(0.25)
	h.With("x").Observe(2)
	c := r.NewCounterVec(Opts{Name: "a_total", Help: `A "quoted" help.`}, "v")
	c.With("b").Inc()
	c.With("a\\\"\n").Add(2)
	r.NewGauge(Opts{Name: "c", Help: "C."}).Set(0.5)
	want := `# HELP a_total A "quoted" help.
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
	if diff := cmp.Diff(want, text(t, r)); diff != "" {
		t.Errorf("text (-want +got):\n%s", diff)
	}
	if text(t, r) != want {
		t.Error("a second scrape differs from the first")
	}
}

func TestFormatFloat(t *testing.T) {
	for _, c := range []struct {
		in   float64
		want string
	}{
		{0, "0"}, {1, "1"}, {-1, "-1"}, {0.1, "0.1"}, {1e21, "1e+21"}, {123456789, "1.23456789e+08"},
		{math.Inf(+1), "+Inf"}, {math.Inf(-1), "-Inf"}, {math.NaN(), "NaN"},
	} {
		if got := formatFloat(c.in); got != c.want {
			t.Errorf("formatFloat(%v) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestHandler: the content type of the format, and a failing collector
// left out (and logged) while the rest is served.
func TestHandler(t *testing.T) {
	r := NewRegistry()
	r.NewCounter(Opts{Name: "ok_total", Help: "Fine."}).Inc()
	r.Collect(func(ctx context.Context, s *Scrape) error {
		s.Add("broken", 1)
		return errors.New("store does not answer")
	}, Desc{Opts: Opts{Name: "broken", Help: "Fails."}, Type: TypeGauge})
	r.Collect(func(ctx context.Context, s *Scrape) error {
		s.Add("misused", 1, "extra label value")
		return nil
	}, Desc{Opts: Opts{Name: "misused", Help: "Wrong label count."}, Type: TypeGauge})
	var logs bytes.Buffer
	srv := httptest.NewServer(r.Handler(slog.New(slog.NewTextHandler(&logs, nil)), time.Second))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Errorf("status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain; version=0.0.4; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	fams := parse(t, string(body))
	if fams["ok_total"] == nil || fams["broken"] != nil || fams["misused"] != nil {
		t.Errorf("families served: %s", body)
	}
	for _, want := range []string{"store does not answer", "misused takes 0 label values, got 1"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, logs.String())
		}
	}
}

// TestProcessMetrics: the Go runtime and process series are there, with
// the names the Prometheus client uses.
func TestProcessMetrics(t *testing.T) {
	r := NewRegistry()
	r.AddProcessMetrics()
	values, meta := flatten(parse(t, text(t, r)))
	for _, name := range []string{"go_goroutines", "go_threads", "go_memstats_heap_alloc_bytes", "go_memstats_sys_bytes",
		"process_cpu_seconds_total", "process_resident_memory_bytes", "process_virtual_memory_bytes",
		"process_open_fds", "process_max_fds", "process_start_time_seconds"} {
		if v := values[name+"{}"]; !(v > 0) {
			t.Errorf("%s = %v, want > 0", name, v)
		}
	}
	if !strings.HasPrefix(meta["process_cpu_seconds_total"], "COUNTER") {
		t.Errorf("process_cpu_seconds_total: %s", meta["process_cpu_seconds_total"])
	}
	if start := values["process_start_time_seconds{}"]; start > float64(time.Now().Unix()+1) {
		t.Errorf("process start %v is after now", start)
	}
	if values[`go_info{version="`+runtime.Version()+`"}`] != 1 {
		t.Errorf("go_info missing: %v", values)
	}
}

// TestConcurrentUpdates: updates from many goroutines, while scraping,
// all count.
func TestConcurrentUpdates(t *testing.T) {
	r := NewRegistry()
	c := r.NewCounterVec(Opts{Name: "n_total", Help: "N."}, "w")
	g := r.NewGauge(Opts{Name: "g", Help: "G."})
	h := r.NewHistogram(Opts{Name: "h", Help: "H."}, []float64{1})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for range 500 {
				c.With(fmt.Sprint(w % 2)).Inc()
				g.Add(1)
				h.Observe(0.5)
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			_ = r.WriteText(context.Background(), io.Discard)
		}
	})
	wg.Wait()
	values, _ := flatten(parse(t, text(t, r)))
	want := map[string]float64{
		`n_total{w="0"}`: 2000, `n_total{w="1"}`: 2000, `g{}`: 4000,
		`h_bucket{le="1"}`: 4000, `h_bucket{le="+Inf"}`: 4000, `h_sum{}`: 2000, `h_count{}`: 4000,
	}
	if diff := cmp.Diff(want, values); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestMisusePanics: programming errors panic at construction or use.
func TestMisusePanics(t *testing.T) {
	for _, c := range []struct {
		name string
		f    func(r *Registry)
	}{
		{"empty name", func(r *Registry) { r.NewCounter(Opts{}) }},
		{"bad name", func(r *Registry) { r.NewCounter(Opts{Name: "1abc"}) }},
		{"name with a dash", func(r *Registry) { r.NewGauge(Opts{Name: "a-b"}) }},
		{"twice", func(r *Registry) { r.NewGauge(Opts{Name: "a"}); r.NewCounter(Opts{Name: "a"}) }},
		{"bad label", func(r *Registry) { r.NewCounterVec(Opts{Name: "a"}, "a:b") }},
		{"reserved label", func(r *Registry) { r.NewCounterVec(Opts{Name: "a"}, "__x") }},
		{"label twice", func(r *Registry) { r.NewCounterVec(Opts{Name: "a", ConstLabels: Labels{"x": "1"}}, "x") }},
		{"le on a histogram", func(r *Registry) { r.NewHistogramVec(Opts{Name: "a"}, []float64{1}, "le") }},
		{"buckets out of order", func(r *Registry) { r.NewHistogram(Opts{Name: "a"}, []float64{1, 1}) }},
		{"NaN bucket", func(r *Registry) { r.NewHistogram(Opts{Name: "a"}, []float64{math.NaN()}) }},
		{"too few label values", func(r *Registry) { r.NewCounterVec(Opts{Name: "a"}, "x", "y").With("1") }},
		{"too many label values", func(r *Registry) { r.NewGaugeVec(Opts{Name: "a"}).With("1") }},
		{"two values for one label", func(r *Registry) {
			v := r.NewCounterVec(Opts{Name: "a"}, "x")
			v.With("1:a1:b")
			v.With("a", "b")
		}},
		{"counter down", func(r *Registry) { r.NewCounter(Opts{Name: "a"}).Add(-1) }},
		{"collected histogram", func(r *Registry) {
			r.Collect(nil, Desc{Opts: Opts{Name: "a"}, Type: TypeHistogram})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			c.f(NewRegistry())
		})
	}
}

// The grammar of legacy metric and label names, as Prometheus's data model
// states it (the e2e module's promformat tests check the constructors
// against Prometheus's own checks).
var (
	metricNameRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelNameRE  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// TestNamesAgreeWithPrometheus: the name checks accept what Prometheus
// accepts (legacy names), for a few hand-picked cases; the fuzz target
// tries many more.
func TestNamesAgreeWithPrometheus(t *testing.T) {
	for _, s := range []string{"", "a", "_", ":", "a:b", "a1", "1a", "__a", "a b", "ä", "a-b", "A_Z09"} {
		checkNames(t, s)
	}
}

func checkNames(t *testing.T, s string) {
	t.Helper()
	if got, want := validMetricName(s), metricNameRE.MatchString(s); got != want {
		t.Errorf("validMetricName(%q) = %v, Prometheus says %v", s, got, want)
	}
	want := labelNameRE.MatchString(s) && !strings.HasPrefix(s, "__")
	if got := validLabelName(s); got != want {
		t.Errorf("validLabelName(%q) = %v, want %v", s, got, want)
	}
}

// FuzzLabelValue: any label value and help text survive a round trip
// through the parser (invalid UTF-8 replaced).
func FuzzLabelValue(f *testing.F) {
	for _, s := range []string{"", "plain", `a\b`, `"q"`, "x\ny", "\\n", "\xff", "ü\\\"\n", "}", "le=\"1\""} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, value, help string) {
		checkNames(t, value)
		r := NewRegistry()
		r.NewCounterVec(Opts{Name: "x_total", Help: help, ConstLabels: Labels{"c": value}}, "v").With(value).Inc()
		fams := parse(t, text(t, r))
		fam := fams["x_total"]
		if fam == nil || len(fam.Series) != 1 {
			t.Fatalf("parsed: %v", fams)
		}
		want := strings.ToValidUTF8(value, "\uFFFD")
		for _, lp := range fam.Series[0].Labels {
			if lp.Value != want {
				t.Errorf("label %s = %q, want %q", lp.Name, lp.Value, want)
			}
		}
		// The parser keeps the help as written, less leading blanks, as
		// Prometheus's does.
		wantHelp := strings.TrimLeft(strings.ToValidUTF8(help, "\uFFFD"), " \t")
		if got := fam.Help; got != wantHelp {
			t.Errorf("help = %q, want %q", got, wantHelp)
		}
	})
}
