package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// Stat is one figure over the runs: the median of the per-run values, with
// the smallest and largest.
type Stat struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// statOf summarizes per-run values. No values give a zero Stat.
func statOf(vs []float64) Stat {
	if len(vs) == 0 {
		return Stat{}
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Stat{Median: round3(med), Min: round3(s[0]), Max: round3(s[len(s)-1])}
}

// round3 keeps three decimals, enough for milliseconds and megabytes.
func round3(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return math.Round(v*1000) / 1000
}

// percentile returns the p-quantile (0..1) of samples by the nearest-rank
// method; p=1 is the maximum.
func percentile(samples []time.Duration, p float64) time.Duration {
	if len(samples) == 0 {
		return 0
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	i = max(0, min(i, len(s)-1))
	return s[i]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// latencies is the p50, p99 and max of one run's samples, in milliseconds.
type latencies struct{ p50, p99, max float64 }

func latenciesOf(samples []time.Duration) latencies {
	return latencies{ms(percentile(samples, 0.5)), ms(percentile(samples, 0.99)), ms(percentile(samples, 1))}
}

// series collects one figure per run.
type series map[string][]float64

func (s series) add(name string, v float64) { s[name] = append(s[name], v) }

func (s series) stat(name string) Stat { return statOf(s[name]) }

// ratio is a/b rounded, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return round3(a / b)
}

// emit writes v as one JSON line.
func emit(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode summary: %w", err)
	}
	b = append(b, '\n')
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	return nil
}
