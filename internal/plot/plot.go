// Package plot draws line charts as SVG: the curves of legate's benchmarks
// (pickup against connected delegates, throughput against delegates,
// memory over a soak) that BENCHMARKS.md shows next to its tables. It uses
// the standard library only, and the same chart always gives the same
// bytes, so a plot file changes only when a figure does.
//
// A chart is accessible as an image: it has a title and a description
// listing every point, and its series differ by dash pattern and marker
// as well as by color (the Okabe–Ito palette, distinct for color-blind
// readers).
package plot

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Point is one reading. Lo and Hi, when Ranged, are the smallest and
// largest of the runs whose median Y is: drawn as an error bar.
type Point struct {
	X, Y   float64
	Lo, Hi float64
	Ranged bool
}

// Series is one line of a chart.
type Series struct {
	Name   string
	Points []Point
}

// Chart is a line chart.
type Chart struct {
	Title          string
	XLabel, YLabel string
	// LogX spaces the x axis by powers of ten (every X must be > 0).
	LogX   bool
	Series []Series
	// Width and Height in pixels; 0 means 720 × 400.
	Width, Height int
	// Lines are horizontal reference lines (a threshold), drawn across
	// the plot with their name, and within the y axis.
	Lines []Line
	// ID, when set, prefixes the ids of the chart's title and description
	// so that several charts can sit in one HTML page.
	ID string
}

// Line is a horizontal reference line at Y.
type Line struct {
	Name string
	Y    float64
}

// Limits of what a chart may hold: enough for any benchmark, small enough
// that a bad input cannot make a huge file.
const (
	MaxSeries = 12
	MaxPoints = 10000
)

var (
	palette = []string{"#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9"}
	dashes  = []string{"", "6 3", "2 3", "8 3 2 3"}
)

// SVG renders the chart. It refuses a chart with no point, with more than
// MaxSeries series or MaxPoints points, with a value that is not finite,
// with Lo > Y or Hi < Y, or with LogX and an X that is not positive.
func (c Chart) SVG() ([]byte, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	w, h := c.Width, c.Height
	if w <= 0 {
		w = 720
	}
	if h <= 0 {
		h = 400
	}
	legendRows := (len(c.Series) + 2) / 3
	const left, right, top = 72, 24, 44
	bottom := 56 + 20*legendRows
	pw, ph := float64(w-left-right), float64(h-top-bottom)
	if pw < 100 || ph < 80 {
		return nil, fmt.Errorf("a %d × %d chart is too small for its axes and legend", w, h)
	}

	xlo, xhi, ylo, yhi := c.bounds()
	var xt []tick
	var xpos func(float64) float64
	if c.LogX {
		lo, hi := math.Floor(math.Log10(xlo)), math.Ceil(math.Log10(xhi))
		if hi == lo {
			hi++
		}
		for e := lo; e <= hi; e++ {
			xt = append(xt, tick{v: math.Pow(10, e), label: number(math.Pow(10, e))})
		}
		xpos = func(x float64) float64 { return left + (math.Log10(x)-lo)/(hi-lo)*pw }
	} else {
		var lo, hi float64
		xt, lo, hi = ticks(xlo, xhi)
		xpos = func(x float64) float64 { return left + (x-lo)/(hi-lo)*pw }
	}
	yt, ymin, ymax := ticks(ylo, yhi)
	ypos := func(y float64) float64 { return top + ph - (y-ymin)/(ymax-ymin)*ph }

	var b strings.Builder
	tid, did := "t", "d"
	if c.ID != "" {
		tid, did = esc(c.ID)+"-t", esc(c.ID)+"-d"
	}
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-labelledby="%s %s" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h, tid, did)
	fmt.Fprintf(&b, "<title id=\"%s\">%s</title>\n<desc id=\"%s\">%s</desc>\n", tid, esc(c.Title), did, esc(c.describe()))
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15" font-weight="bold" fill="#1a1a1a">%s</text>`+"\n", left, esc(c.Title))
	// Grid and tick labels.
	for _, t := range yt {
		y := ypos(t.v)
		fmt.Fprintf(&b, `<line x1="%d" y1="%s" x2="%s" y2="%s" stroke="#e0e0e0"/>`+"\n", left, f(y), f(left+pw), f(y))
		fmt.Fprintf(&b, `<text x="%d" y="%s" text-anchor="end" fill="#333333">%s</text>`+"\n", left-6, f(y+4), esc(t.label))
	}
	for _, t := range xt {
		x := xpos(t.v)
		fmt.Fprintf(&b, `<line x1="%s" y1="%d" x2="%s" y2="%s" stroke="#e0e0e0"/>`+"\n", f(x), top, f(x), f(top+ph))
		fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="middle" fill="#333333">%s</text>`+"\n", f(x), f(top+ph+16), esc(t.label))
	}
	// Axes and their labels.
	fmt.Fprintf(&b, `<path d="M%d %dV%sH%s" fill="none" stroke="#333333"/>`+"\n", left, top, f(top+ph), f(left+pw))
	fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="middle" fill="#1a1a1a">%s</text>`+"\n", f(left+pw/2), f(top+ph+36), esc(c.XLabel))
	fmt.Fprintf(&b, `<text transform="translate(16 %s) rotate(-90)" text-anchor="middle" fill="#1a1a1a">%s</text>`+"\n", f(top+ph/2), esc(c.YLabel))
	// Reference lines, under the series.
	for _, l := range c.Lines {
		y := ypos(l.Y)
		fmt.Fprintf(&b, `<g class="refline" data-name="%s" data-y="%s"><line x1="%d" y1="%s" x2="%s" y2="%s" stroke="#B00020" stroke-width="1.5" stroke-dasharray="4 4"/>`,
			esc(l.Name), esc(number(l.Y)), left, f(y), f(left+pw), f(y))
		fmt.Fprintf(&b, `<text x="%s" y="%s" text-anchor="end" fill="#B00020">%s</text></g>`+"\n", f(left+pw-4), f(y-4), esc(l.Name))
	}
	// Series: error bars, line, markers.
	for i, s := range c.Series {
		color, dash := palette[i%len(palette)], dashes[i%len(dashes)]
		fmt.Fprintf(&b, `<g class="series" data-name="%s" stroke="%s" fill="%s">`+"\n", esc(s.Name), color, color)
		for _, p := range s.Points {
			if p.Ranged && p.Hi > p.Lo {
				x := xpos(p.X)
				fmt.Fprintf(&b, `<path d="M%s %sV%sM%s %sH%sM%s %sH%s" fill="none" stroke-width="1"/>`+"\n",
					f(x), f(ypos(p.Lo)), f(ypos(p.Hi)), f(x-3), f(ypos(p.Lo)), f(x+3), f(x-3), f(ypos(p.Hi)), f(x+3))
			}
		}
		var pts []string
		for _, p := range s.Points {
			pts = append(pts, f(xpos(p.X))+","+f(ypos(p.Y)))
		}
		dashAttr := ""
		if dash != "" {
			dashAttr = ` stroke-dasharray="` + dash + `"`
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), dashAttr)
		for _, p := range s.Points {
			b.WriteString(marker(i, xpos(p.X), ypos(p.Y)) + "\n")
		}
		b.WriteString("</g>\n")
	}
	c.legend(&b, left, top, pw, ph)
	b.WriteString("</svg>\n")
	return []byte(b.String()), nil
}

// legend writes the series' legend, three to a row, under the x axis
// label of a plot area of pw × ph at left, top.
func (c Chart) legend(b *strings.Builder, left int, top, pw, ph float64) {
	for i, s := range c.Series {
		x := float64(left) + float64(i%3)*pw/3
		y := top + ph + 56 + float64(i/3)*20
		color, dash := palette[i%len(palette)], dashes[i%len(dashes)]
		dashAttr := ""
		if dash != "" {
			dashAttr = ` stroke-dasharray="` + dash + `"`
		}
		fmt.Fprintf(b, `<g stroke="%s" fill="%s"><line x1="%s" y1="%s" x2="%s" y2="%s" stroke-width="2"%s/>%s</g>`+"\n",
			color, color, f(x), f(y-4), f(x+28), f(y-4), dashAttr, marker(i, x+14, y-4))
		fmt.Fprintf(b, `<text x="%s" y="%s" fill="#1a1a1a">%s</text>`+"\n", f(x+34), f(y), esc(s.Name))
	}
}

func (c Chart) check() error {
	if len(c.Series) == 0 {
		return errors.New("a chart needs at least one series")
	}
	if len(c.Series) > MaxSeries {
		return fmt.Errorf("%d series: at most %d", len(c.Series), MaxSeries)
	}
	n := 0
	for _, s := range c.Series {
		if len(s.Points) == 0 {
			return fmt.Errorf("series %q has no point", s.Name)
		}
		n += len(s.Points)
		for _, p := range s.Points {
			for _, v := range []float64{p.X, p.Y, p.Lo, p.Hi} {
				if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > 1e15 || (v != 0 && math.Abs(v) < 1e-9) {
					return fmt.Errorf("series %q: %v is not a number a chart can show", s.Name, v)
				}
			}
			if p.Ranged && (p.Lo > p.Y || p.Hi < p.Y) {
				return fmt.Errorf("series %q at x=%s: the range %s..%s does not hold the value %s", s.Name, number(p.X), number(p.Lo), number(p.Hi), number(p.Y))
			}
			if c.LogX && p.X <= 0 {
				return fmt.Errorf("series %q: x=%s on a logarithmic axis (every x must be above 0)", s.Name, number(p.X))
			}
		}
	}
	if n > MaxPoints {
		return fmt.Errorf("%d points: at most %d", n, MaxPoints)
	}
	if len(c.Lines) > MaxSeries {
		return fmt.Errorf("%d reference lines: at most %d", len(c.Lines), MaxSeries)
	}
	for _, l := range c.Lines {
		if math.IsNaN(l.Y) || math.IsInf(l.Y, 0) || math.Abs(l.Y) > 1e15 || (l.Y != 0 && math.Abs(l.Y) < 1e-9) {
			return fmt.Errorf("line %q: %v is not a number a chart can show", l.Name, l.Y)
		}
	}
	return nil
}

// bounds returns the data's extent, error bars included; the y axis
// starts at 0 unless a value is below it.
func (c Chart) bounds() (xlo, xhi, ylo, yhi float64) {
	xlo, xhi, ylo, yhi = math.Inf(1), math.Inf(-1), 0, math.Inf(-1)
	for _, s := range c.Series {
		for _, p := range s.Points {
			xlo, xhi = math.Min(xlo, p.X), math.Max(xhi, p.X)
			lo, hi := p.Y, p.Y
			if p.Ranged {
				lo, hi = p.Lo, p.Hi
			}
			ylo, yhi = math.Min(ylo, lo), math.Max(yhi, hi)
		}
	}
	for _, l := range c.Lines {
		ylo, yhi = math.Min(ylo, l.Y), math.Max(yhi, l.Y)
	}
	return xlo, xhi, ylo, yhi
}

// describe lists every point for readers who cannot see the chart.
func (c Chart) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s against %s.", c.YLabel, c.XLabel)
	for _, s := range c.Series {
		fmt.Fprintf(&b, " %s:", s.Name)
		for i, p := range s.Points {
			if i > 0 {
				b.WriteString(";")
			}
			fmt.Fprintf(&b, " %s → %s", number(p.X), number(p.Y))
		}
		b.WriteString(".")
	}
	for _, l := range c.Lines {
		fmt.Fprintf(&b, " %s at %s.", l.Name, number(l.Y))
	}
	return b.String()
}

type tick struct {
	v     float64
	label string
}

// ticks returns about five evenly spaced round values covering lo..hi and
// the axis range they span.
func ticks(lo, hi float64) ([]tick, float64, float64) {
	if hi-lo <= math.Max(math.Abs(hi), math.Abs(lo))*1e-9 {
		// One value (or values too close to tell apart): a range around it.
		d := math.Max(math.Abs(lo)/2, 1)
		lo, hi = lo-d, hi+d
		if lo < 0 && hi-d >= 0 {
			lo = 0
		}
	}
	step := niceStep((hi - lo) / 5)
	start, end := math.Floor(lo/step)*step, math.Ceil(hi/step)*step
	var out []tick
	for i := 0; ; i++ {
		v := start + float64(i)*step
		if v > end+step/2 || i > 20 {
			break
		}
		out = append(out, tick{v: v, label: number(roundTo(v, step))})
	}
	return out, start, end
}

// niceStep rounds a raw step up to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	switch m := raw / p; {
	case m <= 1:
		return p
	case m <= 2:
		return 2 * p
	case m <= 5:
		return 5 * p
	}
	return 10 * p
}

func roundTo(v, step float64) float64 {
	d := math.Max(0, -math.Floor(math.Log10(step)))
	k := math.Pow(10, d)
	return math.Round(v*k) / k
}

// number formats v for a label: no needless decimals, thousands grouped.
func number(v float64) string {
	if v == 0 {
		return "0"
	}
	s := strconv.FormatFloat(v, 'f', -1, 64)
	if math.Abs(v) < 1000 {
		if len(s) > 8 {
			s = strconv.FormatFloat(v, 'g', 4, 64)
		}
		return s
	}
	neg := v < 0
	whole, frac, _ := strings.Cut(strings.TrimPrefix(s, "-"), ".")
	var g strings.Builder
	for i, r := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			g.WriteByte(',')
		}
		g.WriteRune(r)
	}
	out := g.String()
	if frac != "" && len(frac) <= 3 {
		out += "." + frac
	}
	if neg {
		out = "-" + out
	}
	return out
}

// marker draws series i's marker at x, y: a circle, square, triangle or
// diamond, so that series differ without color.
func marker(i int, x, y float64) string {
	switch i % 4 {
	case 1:
		return fmt.Sprintf(`<rect x="%s" y="%s" width="7" height="7"/>`, f(x-3.5), f(y-3.5))
	case 2:
		return fmt.Sprintf(`<path d="M%s %sL%s %sL%s %sZ"/>`, f(x), f(y-4.5), f(x+4.5), f(y+3.5), f(x-4.5), f(y+3.5))
	case 3:
		return fmt.Sprintf(`<path d="M%s %sL%s %sL%s %sL%s %sZ"/>`, f(x), f(y-5), f(x+5), f(y), f(x), f(y+5), f(x-5), f(y))
	}
	return fmt.Sprintf(`<circle cx="%s" cy="%s" r="3.5"/>`, f(x), f(y))
}

// f formats a coordinate with one decimal.
func f(v float64) string { return strconv.FormatFloat(math.Round(v*10)/10, 'f', -1, 64) }

var escaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;")

// esc escapes text for SVG (XML), dropping characters XML cannot hold.
func esc(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' || (r >= 0x20 && r <= 0xD7FF) || (r >= 0xE000 && r <= 0xFFFD) || (r >= 0x10000 && r <= 0x10FFFF) {
			return r
		}
		return -1
	}, strings.ToValidUTF8(s, ""))
	return escaper.Replace(s)
}
