package metrics

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ContentType is the media type of the text exposition format 0.0.4.
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// gathered is one family with its series at a scrape.
type gathered struct {
	f      *family
	series []series
}

// gather reads every family. A collector that fails is left out, and its
// error returned with the rest.
func (r *Registry) gather(ctx context.Context) ([]gathered, error) {
	r.mu.Lock()
	fams := slices.Clone(r.fams)
	collectors := slices.Clone(r.collectors)
	r.mu.Unlock()

	out := make([]gathered, 0, len(fams))
	for _, f := range fams {
		g := gathered{f: f}
		f.read(func(s series) { g.series = append(g.series, s) })
		out = append(out, g)
	}
	var errs []error
	for _, c := range collectors {
		s := &Scrape{fams: map[string]*family{}, series: map[string][]series{}}
		for _, f := range c.fams {
			s.fams[f.name] = f
		}
		err := c.fn(ctx, s)
		if err == nil {
			err = s.err
		}
		if err != nil {
			names := make([]string, len(c.fams))
			for i, f := range c.fams {
				names[i] = f.name
			}
			errs = append(errs, fmt.Errorf("collect %s: %w", strings.Join(names, ", "), err))
			continue
		}
		for _, f := range c.fams {
			out = append(out, gathered{f: f, series: s.series[f.name]})
		}
	}
	slices.SortFunc(out, func(a, b gathered) int { return strings.Compare(a.f.name, b.f.name) })
	return out, errors.Join(errs...)
}

// WriteText writes every family that has a series, sorted by name, each
// family's series sorted by label values, in the text exposition format
// 0.0.4. The families of a collector that fails are left out: the rest is
// written, and the collector's error returned (joined with a write error,
// if any).
func (r *Registry) WriteText(ctx context.Context, w io.Writer) error {
	fams, gatherErr := r.gather(ctx)
	bw := bufio.NewWriter(w)
	for _, g := range fams {
		writeFamily(bw, g)
	}
	if err := bw.Flush(); err != nil {
		return errors.Join(gatherErr, fmt.Errorf("write metrics: %w", err))
	}
	return gatherErr
}

func writeFamily(w *bufio.Writer, g gathered) {
	if len(g.series) == 0 {
		return
	}
	f := g.f
	slices.SortFunc(g.series, func(a, b series) int { return slices.Compare(a.values, b.values) })
	w.WriteString("# HELP ")
	w.WriteString(f.name)
	w.WriteByte(' ')
	writeEscaped(w, f.help, false)
	w.WriteString("\n# TYPE ")
	w.WriteString(f.name)
	w.WriteByte(' ')
	w.WriteString(f.typ.String())
	w.WriteByte('\n')
	for _, s := range g.series {
		if f.typ != TypeHistogram {
			writeSample(w, f.name, "", f.labels, s.values, "", 0, s.value)
			continue
		}
		var cum uint64
		for i, n := range s.buckets {
			cum += n
			le := math.Inf(+1)
			if i < len(f.upper) {
				le = f.upper[i]
			}
			writeSample(w, f.name, "_bucket", f.labels, s.values, "le", le, float64(cum))
		}
		writeSample(w, f.name, "_sum", f.labels, s.values, "", 0, s.sum)
		writeSample(w, f.name, "_count", f.labels, s.values, "", 0, float64(s.count))
	}
}

// writeSample writes one line: name+suffix, the labels (and le when le is
// given), the value.
func writeSample(w *bufio.Writer, name, suffix string, labels, values []string, le string, leValue, v float64) {
	w.WriteString(name)
	w.WriteString(suffix)
	if len(labels) > 0 || le != "" {
		w.WriteByte('{')
		for i, l := range labels {
			if i > 0 {
				w.WriteByte(',')
			}
			w.WriteString(l)
			w.WriteString(`="`)
			writeEscaped(w, values[i], true)
			w.WriteByte('"')
		}
		if le != "" {
			if len(labels) > 0 {
				w.WriteByte(',')
			}
			w.WriteString(le)
			w.WriteString(`="`)
			w.WriteString(formatFloat(leValue))
			w.WriteByte('"')
		}
		w.WriteByte('}')
	}
	w.WriteByte(' ')
	w.WriteString(formatFloat(v))
	w.WriteByte('\n')
}

// writeEscaped writes s escaped as the text format wants: a backslash and
// a newline always, a double quote in a label value. Invalid UTF-8 is
// replaced (Prometheus rejects it).
func writeEscaped(w *bufio.Writer, s string, quote bool) {
	s = strings.ToValidUTF8(s, "\uFFFD")
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			w.WriteString(`\\`)
		case c == '\n':
			w.WriteString(`\n`)
		case c == '"' && quote:
			w.WriteString(`\"`)
		default:
			w.WriteByte(c)
		}
	}
}

// formatFloat formats a value as the Prometheus client does.
func formatFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, +1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// Handler serves the registry in the text format. Collectors get the
// request's context, limited to timeout (no limit when it is 0). A
// collector that fails is logged on log and left out; the rest is served.
func (r *Registry) Handler(log *slog.Logger, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx := req.Context()
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, timeout)
			defer cancel()
		}
		var buf bytes.Buffer
		if err := r.WriteText(ctx, &buf); err != nil {
			log.Warn("metrics: scrape incomplete", "err", err)
		}
		w.Header().Set("Content-Type", ContentType)
		w.Header().Set("Content-Length", strconv.Itoa(buf.Len()))
		_, _ = w.Write(buf.Bytes())
	})
}
