package plot

import (
	"bytes"
	"encoding/binary"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// wellFormed parses svg as XML and returns the polylines' point lists,
// in document order.
func wellFormed(t testing.TB, svg []byte) [][]string {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(svg))
	var lines [][]string
	root := ""
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v\n%s", err, svg)
		}
		if se, ok := tok.(xml.StartElement); ok {
			if root == "" {
				root = se.Name.Local
			}
			if se.Name.Local == "polyline" {
				for _, a := range se.Attr {
					if a.Name.Local == "points" {
						lines = append(lines, strings.Fields(a.Value))
					}
				}
			}
		}
	}
	if root != "svg" {
		t.Fatalf("root element %q, want svg", root)
	}
	if bytes.Contains(svg, []byte("NaN")) || bytes.Contains(svg, []byte("Inf")) {
		t.Fatalf("a coordinate or label is not a number:\n%s", svg)
	}
	return lines
}

func xy(t *testing.T, p string) (float64, float64) {
	t.Helper()
	xs, ys, ok := strings.Cut(p, ",")
	x, err1 := strconv.ParseFloat(xs, 64)
	y, err2 := strconv.ParseFloat(ys, 64)
	if !ok || err1 != nil || err2 != nil {
		t.Fatalf("point %q", p)
	}
	return x, y
}

// TestLinearChartPlacesPointsOnItsAxes: with a 720 × 400 chart, one series
// and the default margins (left 72, right 24, top 44, bottom 56 + 20 for
// the legend row), x 0..10 and y 0..100 fill the plot area corner to corner,
// and a point in the middle is in the middle.
func TestLinearChartPlacesPointsOnItsAxes(t *testing.T) {
	c := Chart{Title: "t", XLabel: "x", YLabel: "y", Series: []Series{{Name: "s", Points: []Point{{X: 0, Y: 0}, {X: 5, Y: 50}, {X: 10, Y: 100}}}}}
	svg, err := c.SVG()
	if err != nil {
		t.Fatal(err)
	}
	lines := wellFormed(t, svg)
	if len(lines) != 1 || len(lines[0]) != 3 {
		t.Fatalf("polylines %v", lines)
	}
	const left, right, top, bottom = 72.0, 720.0 - 24, 44.0, 400.0 - 76
	var got [][2]float64
	for _, p := range lines[0] {
		x, y := xy(t, p)
		got = append(got, [2]float64{x, y})
	}
	want := [][2]float64{{left, bottom}, {(left + right) / 2, (top + bottom) / 2}, {right, top}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("points (-want +got):\n%s", diff)
	}
	for _, label := range []string{">0<", ">100<", ">10<"} {
		if !bytes.Contains(svg, []byte(label)) {
			t.Errorf("no tick label %s", label)
		}
	}
}

// TestLogChartSpacesDecadesEvenly: on a logarithmic x axis 1, 10, 100 and
// 1,000 are equally far apart, and the ticks are the powers of ten.
func TestLogChartSpacesDecadesEvenly(t *testing.T) {
	c := Chart{Title: "pickup", XLabel: "delegates", YLabel: "ms", LogX: true,
		Series: []Series{{Name: "p50", Points: []Point{{X: 1, Y: 1}, {X: 10, Y: 1}, {X: 100, Y: 2}, {X: 1000, Y: 2}}}}}
	svg, err := c.SVG()
	if err != nil {
		t.Fatal(err)
	}
	lines := wellFormed(t, svg)
	var xs []float64
	for _, p := range lines[0] {
		x, _ := xy(t, p)
		xs = append(xs, x)
	}
	for i := 2; i < len(xs); i++ {
		if d1, d2 := xs[i-1]-xs[i-2], xs[i]-xs[i-1]; math.Abs(d1-d2) > 0.2 {
			t.Errorf("decades %v apart, then %v", d1, d2)
		}
	}
	for _, label := range []string{">1<", ">10<", ">100<", ">1,000<"} {
		if !bytes.Contains(svg, []byte(label)) {
			t.Errorf("no tick label %s", label)
		}
	}
}

// TestChartIsAccessibleAndEscaped: the title and a description that lists
// every point are in the SVG; names with XML's special characters are
// escaped; the same chart renders to the same bytes; error bars are drawn
// only for points with a range.
func TestChartIsAccessibleAndEscaped(t *testing.T) {
	c := Chart{Title: `RSS <MB> & "more"`, XLabel: "minutes", YLabel: "MB", Series: []Series{
		{Name: "manager <rss>", Points: []Point{{X: 0, Y: 20, Lo: 18, Hi: 22, Ranged: true}, {X: 60, Y: 21}}},
		{Name: "bench & co", Points: []Point{{X: 0, Y: 40}, {X: 60, Y: 41}}},
	}}
	svg, err := c.SVG()
	if err != nil {
		t.Fatal(err)
	}
	wellFormed(t, svg)
	for _, want := range []string{`<title id="t">RSS &lt;MB&gt; &amp; &quot;more&quot;</title>`, "manager &lt;rss&gt;: 0 → 20; 60 → 21.", "bench &amp; co: 0 → 40; 60 → 41.", `aria-labelledby="t d"`} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("no %s in\n%s", want, svg)
		}
	}
	again, _ := c.SVG()
	if !bytes.Equal(svg, again) {
		t.Error("two renders of one chart differ")
	}
	if n := len(regexp.MustCompile(`stroke-width="1"`).FindAll(svg, -1)); n != 1 {
		t.Errorf("%d error bars, want 1 (one point has a range)", n)
	}
}

func TestChartRefusesWhatItCannotDraw(t *testing.T) {
	one := []Series{{Name: "s", Points: []Point{{X: 1, Y: 1}}}}
	many := make([]Series, MaxSeries+1)
	for i := range many {
		many[i] = Series{Name: "s", Points: []Point{{X: 1, Y: 1}}}
	}
	for _, tt := range []struct {
		name string
		c    Chart
		want string
	}{
		{"no series", Chart{}, "at least one series"},
		{"empty series", Chart{Series: []Series{{Name: "e"}}}, `series "e" has no point`},
		{"NaN", Chart{Series: []Series{{Name: "n", Points: []Point{{X: 1, Y: math.NaN()}}}}}, "not a number a chart can show"},
		{"infinite", Chart{Series: []Series{{Name: "n", Points: []Point{{X: math.Inf(1), Y: 1}}}}}, "not a number a chart can show"},
		{"log of zero", Chart{LogX: true, Series: []Series{{Name: "z", Points: []Point{{X: 0, Y: 1}}}}}, "logarithmic axis"},
		{"range without the value", Chart{Series: []Series{{Name: "r", Points: []Point{{X: 1, Y: 5, Lo: 6, Hi: 7, Ranged: true}}}}}, "does not hold the value"},
		{"too many series", Chart{Series: many}, "at most 12"},
		{"too small", Chart{Series: one, Width: 120, Height: 90}, "too small"},
	} {
		if _, err := tt.c.SVG(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error saying %q", tt.name, err, tt.want)
		}
	}
}

func TestNumber(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 1: "1", 2.5: "2.5", 1000: "1,000", 10000: "10,000", 1234567.5: "1,234,567.5", -2000: "-2,000", 0.001: "0.001"} {
		if got := number(v); got != want {
			t.Errorf("number(%v) = %q, want %q", v, got, want)
		}
	}
}

// FuzzSVG: any values give an error or a well-formed SVG whose coordinates
// and labels are numbers.
func FuzzSVG(f *testing.F) {
	seed := func(vs ...float64) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
		return b
	}
	f.Add(seed(1, 2, 10, 20, 100, 5), false, "a")
	f.Add(seed(0, 0, 0, 0), false, "<&>")
	f.Add(seed(1, 1e-9, 1, 1e-9), true, "")
	f.Add(seed(1e15, -1e15, 3, 7), false, "x")
	f.Fuzz(func(t *testing.T, raw []byte, logX bool, name string) {
		var pts []Point
		for len(raw) >= 24 && len(pts) < 200 {
			x := math.Float64frombits(binary.LittleEndian.Uint64(raw))
			y := math.Float64frombits(binary.LittleEndian.Uint64(raw[8:]))
			d := math.Float64frombits(binary.LittleEndian.Uint64(raw[16:]))
			p := Point{X: x, Y: y}
			if d > 0 {
				p.Lo, p.Hi, p.Ranged = y-d, y+d, true
			}
			pts = append(pts, p)
			raw = raw[24:]
		}
		c := Chart{Title: name, XLabel: name, YLabel: name, LogX: logX, Series: []Series{{Name: name, Points: pts}, {Name: "b", Points: pts}}}
		svg, err := c.SVG()
		if err != nil {
			return
		}
		wellFormed(t, svg)
	})
}

// TestChartDrawsReferenceLines: a line at y=150 above the data stretches
// the y axis to hold it and is drawn across the plot area at its height,
// with its name in the description; a chart with an ID gives its title
// and description ids of their own; a line that is not a number is
// refused.
func TestChartDrawsReferenceLines(t *testing.T) {
	c := Chart{Title: "t", XLabel: "x", YLabel: "y", ID: "m1", Lines: []Line{{Name: "threshold < 150", Y: 150}},
		Series: []Series{{Name: "s", Points: []Point{{X: 0, Y: 0}, {X: 10, Y: 100}}}}}
	svg, err := c.SVG()
	if err != nil {
		t.Fatal(err)
	}
	wellFormed(t, svg)
	// y 0..150 over the plot's height (top 44, bottom 324): 150 is the top.
	want := `<g class="refline" data-name="threshold &lt; 150" data-y="150"><line x1="72" y1="44" x2="696" y2="44"`
	if !bytes.Contains(svg, []byte(want)) {
		t.Errorf("no reference line %s in\n%s", want, svg)
	}
	for _, s := range []string{`aria-labelledby="m1-t m1-d"`, `<title id="m1-t">`, `<desc id="m1-d">`, "threshold &lt; 150 at 150."} {
		if !bytes.Contains(svg, []byte(s)) {
			t.Errorf("no %s in\n%s", s, svg)
		}
	}
	c.Lines[0].Y = math.NaN()
	if _, err := c.SVG(); err == nil {
		t.Error("a line at NaN: no error")
	}
}
