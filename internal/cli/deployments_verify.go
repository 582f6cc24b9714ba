package cli

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// printVerifications writes what a deployment's verify steps saw and
// decided: per verification its verdict and reason, per metric its
// threshold, baseline and tolerance, the number of data points, their
// minimum, mean, maximum and last value, and its verdict.
func (a *app) printVerifications(w io.Writer, vs []protocol.DeploymentVerification) error {
	for _, v := range vs {
		fmt.Fprintln(w)
		t := newTable(w, "Verification:", v.Step+": "+v.Verdict)
		if v.Reason != "" {
			t.row("Reason:", v.Reason)
		}
		t.row("Provider:", v.Provider)
		if v.StartMS > 0 {
			start := time.UnixMilli(v.StartMS)
			t.row("From:", a.timestamp(&start)+", every "+(time.Duration(v.IntervalMS)*time.Millisecond).String())
		}
		if err := t.flush(); err != nil {
			return err
		}
		if len(v.Metrics) == 0 {
			continue
		}
		mt := newTable(w, "METRIC", "VERDICT", "THRESHOLD", "BASELINE", "TOLERANCE", "POINTS", "MIN", "MEAN", "MAX", "LAST")
		for _, m := range v.Metrics {
			th, base, tol := "-", "-", "-"
			if m.Threshold != nil {
				th = m.Threshold.Op + " " + num(m.Threshold.Value)
			}
			if m.Baseline != "" {
				base = "-"
				if s, ok := seriesStats(m.BaselinePoints); ok {
					base = "mean " + num(s.mean)
				}
				tol = num(m.Tolerance*100) + "%"
			}
			row := []string{m.Name, m.Verdict, th, base, tol, strconv.Itoa(len(m.Points))}
			if s, ok := seriesStats(m.Points); ok {
				row = append(row, num(s.min), num(s.mean), num(s.max), num(s.last))
			} else {
				row = append(row, "-", "-", "-", "-")
			}
			mt.row(row...)
		}
		if err := mt.flush(); err != nil {
			return err
		}
		for _, m := range v.Metrics {
			if m.Reason != "" && m.Reason != v.Reason {
				if _, err := fmt.Fprintf(w, "  %s: %s\n", escape(m.Name), escape(m.Reason)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// stats are a series' minimum, mean, maximum and last value.
type stats struct{ min, mean, max, last float64 }

// seriesStats summarizes [offset, value] points; false for none.
func seriesStats(pts [][2]float64) (stats, bool) {
	if len(pts) == 0 {
		return stats{}, false
	}
	s := stats{min: pts[0][1], max: pts[0][1], last: pts[len(pts)-1][1]}
	sum := 0.0
	for _, p := range pts {
		s.min, s.max = min(s.min, p[1]), max(s.max, p[1])
		sum += p[1]
	}
	s.mean = sum / float64(len(pts))
	return s, true
}

// num formats a metric's value in at most 4 significant digits.
func num(v float64) string { return strconv.FormatFloat(v, 'g', 4, 64) }
