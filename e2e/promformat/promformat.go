// Package promformat reads the Prometheus text format with Prometheus's
// own parser (prometheus/common's expfmt) into internal/promtest's types,
// and checks that promtest's parser reads a text as Prometheus's does.
//
// legate's metrics tests (internal/metrics, and every test that scrapes a
// manager or a delegate with promtest) read the text format with promtest,
// which uses the standard library only; this package's tests hold promtest
// and legate's metrics to the reference. It lives in the e2e module so that
// Prometheus's libraries stay out of legate's go.mod.
package promformat

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/legate-dev/legate/internal/promtest"
)

// Parse reads text with Prometheus's parser.
func Parse(text string) (promtest.Families, error) {
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	out := promtest.Families{}
	for name, f := range fams {
		fam := &promtest.Family{Name: f.GetName(), Help: f.GetHelp(), Type: f.GetType().String()}
		for _, m := range f.GetMetric() {
			s := promtest.Series{}
			for _, lp := range m.GetLabel() {
				s.Labels = append(s.Labels, promtest.Label{Name: lp.GetName(), Value: lp.GetValue()})
			}
			switch f.GetType() {
			case dto.MetricType_COUNTER:
				s.Value = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				s.Value = m.GetGauge().GetValue()
			case dto.MetricType_UNTYPED:
				s.Value = m.GetUntyped().GetValue()
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					s.Buckets = append(s.Buckets, promtest.Bucket{UpperBound: b.GetUpperBound(), CumulativeCount: b.GetCumulativeCount()})
				}
				s.Count, s.Sum = h.GetSampleCount(), h.GetSampleSum()
			default:
				return nil, fmt.Errorf("%s: a %s, which promtest does not read", name, f.GetType())
			}
			fam.Series = append(fam.Series, s)
		}
		out[name] = fam
	}
	return out, nil
}

// Check reads text with both parsers and returns what they read. It fails
// when either refuses text, or when they read it differently.
func Check(text string) (promtest.Families, error) {
	ours, err := promtest.Parse(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("promtest's parser refuses the text: %w", err)
	}
	theirs, err := Parse(text)
	if err != nil {
		return nil, fmt.Errorf("the Prometheus parser refuses what promtest's accepts: %w", err)
	}
	if diff := cmp.Diff(theirs, ours, cmpopts.EquateEmpty(), cmpopts.EquateNaNs()); diff != "" {
		return nil, errors.New("promtest's parser reads the text otherwise than Prometheus's (-Prometheus +promtest):\n" + diff)
	}
	return ours, nil
}
