package webui

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"

	"github.com/legate-dev/legate/internal/plot"
	"github.com/legate-dev/legate/internal/protocol"
)

// verificationView is one verification of a deployment with a chart per
// metric.
type verificationView struct {
	protocol.DeploymentVerification
	Metrics []metricView
}

// metricView is one metric of a verification: its numbers and its chart
// (empty when it has no data point to draw; ChartErr says why).
type metricView struct {
	protocol.VerifyMetricResult
	Threshold string
	Tolerance string
	Summary   string
	Chart     template.HTML
	ChartErr  string
}

// verificationViews draws each metric's series (and its baseline's) with
// its threshold as a line, in seconds from the verification's start.
func verificationViews(vs []protocol.DeploymentVerification) []verificationView {
	out := make([]verificationView, 0, len(vs))
	for i, v := range vs {
		vv := verificationView{DeploymentVerification: v}
		for j, m := range v.Metrics {
			mv := metricView{VerifyMetricResult: m}
			if m.Threshold != nil {
				mv.Threshold = m.Threshold.Op + " " + fnum(m.Threshold.Value)
			}
			if m.Baseline != "" {
				mv.Tolerance = fnum(m.Tolerance*100) + "%"
			}
			mv.Summary = seriesSummary(m.Points)
			mv.Chart, mv.ChartErr = metricChart(fmt.Sprintf("v%d-m%d", i, j), m)
			vv.Metrics = append(vv.Metrics, mv)
		}
		out = append(out, vv)
	}
	return out
}

// metricChart is the SVG of a metric's series, its baseline's and its
// threshold.
func metricChart(id string, m protocol.VerifyMetricResult) (template.HTML, string) {
	c := plot.Chart{ID: id, Title: m.Name + ": " + m.Verdict, XLabel: "seconds from the start", YLabel: m.Name, Width: 640, Height: 300}
	if s := chartSeries("new version", m.Points); len(s.Points) > 0 {
		c.Series = append(c.Series, s)
	}
	if s := chartSeries("baseline", m.BaselinePoints); len(s.Points) > 0 {
		c.Series = append(c.Series, s)
	}
	if len(c.Series) == 0 {
		return "", "no data points"
	}
	if m.Threshold != nil {
		c.Lines = []plot.Line{{Name: "threshold " + m.Threshold.Op + " " + fnum(m.Threshold.Value), Y: chartValue(m.Threshold.Value)}}
	}
	svg, err := c.SVG()
	if err != nil {
		return "", err.Error()
	}
	// The SVG is ours: every text in it is escaped by package plot.
	return template.HTML(svg), "" //nolint:gosec
}

// chartSeries is a series of [offset ms, value] points in seconds.
func chartSeries(name string, pts [][2]float64) plot.Series {
	s := plot.Series{Name: name}
	for _, p := range pts {
		if math.IsNaN(p[0]) || math.IsNaN(p[1]) || math.IsInf(p[0], 0) || math.IsInf(p[1], 0) || math.Abs(p[1]) > 1e15 {
			continue
		}
		s.Points = append(s.Points, plot.Point{X: chartValue(p[0] / 1000), Y: chartValue(p[1])})
	}
	return s
}

// chartValue is v as a chart can show it: a value too small to tell from
// zero is zero.
func chartValue(v float64) float64 {
	if math.Abs(v) < 1e-9 {
		return 0
	}
	return v
}

// seriesSummary is "N points, min … mean … max … last …".
func seriesSummary(pts [][2]float64) string {
	if len(pts) == 0 {
		return "no data points"
	}
	lo, hi, sum := pts[0][1], pts[0][1], 0.0
	for _, p := range pts {
		lo, hi, sum = min(lo, p[1]), max(hi, p[1]), sum+p[1]
	}
	return strings.Join([]string{strconv.Itoa(len(pts)) + " points", "min " + fnum(lo), "mean " + fnum(sum/float64(len(pts))),
		"max " + fnum(hi), "last " + fnum(pts[len(pts)-1][1])}, ", ")
}

func fnum(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }
