package promtest

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParse(t *testing.T) {
	in := `# HELP a_total A "quoted" help \\ and\nnext.
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
`
	got, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := Families{
		"a_total": {Name: "a_total", Help: "A \"quoted\" help \\ and\nnext.", Type: TypeCounter, Series: []Series{
			{Labels: []Label{{"v", "a\\\"\n"}, {"w", ""}}, Value: 2},
			{Value: 1},
		}},
		"h": {Name: "h", Help: "Leading blanks go.", Type: TypeHistogram, Series: []Series{
			{Labels: []Label{{"z", "1"}}, Buckets: []Bucket{{0.25, 1}, {math.Inf(+1), 2}}, Sum: 2.25, Count: 2},
		}},
		"u":        {Name: "u", Type: TypeUntyped, Series: []Series{{Labels: []Label{{"le", "x"}}, Value: math.NaN()}}},
		"h2_count": {Name: "h2_count", Type: TypeGauge, Series: []Series{{Value: math.Inf(-1)}}},
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty(), cmpopts.EquateNaNs()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if v := got.Value(t, "a_total", "v", "a\\\"\n"); v != 2 {
		t.Errorf("Value = %v", v)
	}
	if n, sum := got.Histogram(t, "h", "z", "1"); n != 2 || sum != 2.25 {
		t.Errorf("Histogram = %d, %v", n, sum)
	}
}

// TestParseRefuses: what the parser refuses, each a text Prometheus's
// parser refuses too or one legate's registry never writes.
func TestParseRefuses(t *testing.T) {
	hist := "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3\nh_count 2\n"
	for _, c := range []struct{ name, in string }{
		{"no newline at the end", "x 1"},
		{"empty line", "x 1\n\ny 1\n"},
		{"invalid UTF-8", "x{a=\"\xff\"} 1\n"},
		{"a timestamp", "x 1 1700000000000\n"},
		{"two spaces", "x  1\n"},
		{"no space", "x{}1\n"},
		{"leading blank", " x 1\n"},
		{"a comment", "# just a comment\nx 1\n"},
		{"HELP without text", "# HELP x\nx 1\n"},
		{"a second HELP", "# HELP x a\n# HELP x b\nx 1\n"},
		{"a second TYPE", "# TYPE x gauge\n# TYPE x gauge\nx 1\n"},
		{"TYPE after samples", "x 1\n# TYPE x gauge\n"},
		{"HELP after samples", "x 1\n# HELP x late\n"},
		{"a summary", "# TYPE x summary\nx_sum 1\n"},
		{"an unknown type", "# TYPE x Gauge\nx 1\n"},
		{"an invalid escape in a label value", "x{a=\"\\t\"} 1\n"},
		{"a quote escaped in HELP", "# HELP x \\\"\nx 1\n"},
		{"an unclosed label value", "x{a=\"1} 1\n"},
		{"a trailing comma", "x{a=\"1\",} 1\n"},
		{"a label twice", "x{a=\"1\",a=\"2\"} 1\n"},
		{"a reserved label", "x{__name__=\"y\"} 1\n"},
		{"a label name with a colon", "x{a:b=\"1\"} 1\n"},
		{"a series twice", "x{a=\"1\"} 1\nx{a=\"1\"} 2\n"},
		{"a hex float", "x 0x1p3\n"},
		{"an underscore in a number", "x 1_000\n"},
		{"not a number", "x one\n"},
		{"a quoted metric name", "{\"x\"} 1\n"},
		{"a histogram without suffix", "# TYPE h histogram\nh 1\n"},
		{"le on _sum", strings.Replace(hist, "h_sum 3", "h_sum{le=\"1\"} 3", 1)},
		{"a bucket without le", strings.Replace(hist, "h_bucket{le=\"1\"} 1", "h_bucket 1", 1)},
		{"a bucket twice", strings.Replace(hist, "h_bucket{le=\"+Inf\"} 2", "h_bucket{le=\"1\"} 2", 1)},
		{"no +Inf bucket", strings.Replace(hist, "h_bucket{le=\"+Inf\"} 2\n", "", 1)},
		{"buckets out of order", "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_bucket{le=\"1\"} 1\nh_sum 3\nh_count 2\n"},
		{"counts decreasing", strings.Replace(hist, "h_bucket{le=\"1\"} 1", "h_bucket{le=\"1\"} 3", 1)},
		{"_count not the +Inf bucket", strings.Replace(hist, "h_count 2", "h_count 3", 1)},
		{"no _sum", strings.Replace(hist, "h_sum 3\n", "", 1)},
		{"a fractional count", strings.Replace(hist, "h_count 2", "h_count 2.5", 1)},
		{"a second _count", hist + "h_count 2\n"},
		{"TYPE of a histogram's series", "# TYPE h histogram\n# TYPE h_sum gauge\nh_sum 1\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if fams, err := Parse(strings.NewReader(c.in)); err == nil {
				t.Errorf("accepted %q: %v", c.in, fams.Names())
			}
		})
	}
	if _, err := Parse(strings.NewReader(hist)); err != nil {
		t.Errorf("the histogram the cases change: %v", err)
	}
}
