// Package metrics keeps counters, gauges and histograms in a registry of
// their own and writes them in the Prometheus text exposition format 0.0.4.
//
// It is the small part of github.com/prometheus/client_golang that legate
// uses, in the standard library only: client_golang and its protobuf
// dependency grew every idle delegate's resident memory at package init
// (BENCHMARKS.md, delegate idle RSS), for features legate never used.
// There is no package-level state:
// every manager and every delegate agent has its own Registry (tests run
// several in one process).
//
// Constructors panic on programming errors (an invalid or duplicate name,
// the wrong number of label values), as regexp.MustCompile does; nothing
// that depends on input at run time can make them panic.
package metrics

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Labels are constant label pairs, name to value.
type Labels map[string]string

// Opts name and describe a metric family.
type Opts struct {
	Name string
	Help string
	// ConstLabels are added to every series of the family.
	ConstLabels Labels
}

// Type is the type of a metric family.
type Type int

// The types of metric families.
const (
	TypeCounter Type = iota
	TypeGauge
	TypeHistogram
)

func (t Type) String() string {
	switch t {
	case TypeCounter:
		return "counter"
	case TypeGauge:
		return "gauge"
	case TypeHistogram:
		return "histogram"
	}
	return "untyped"
}

// Registry holds metric families and writes them out. The zero value is
// not usable; call NewRegistry.
type Registry struct {
	mu         sync.Mutex
	names      map[string]bool
	fams       []*family    // families with state kept here
	collectors []*collector // families computed at scrape time
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{names: map[string]bool{}}
}

// family is the description of one metric family and how to read its
// series.
type family struct {
	name, help string
	typ        Type
	// labels are the names of every label of a series, sorted: constant
	// and variable ones.
	labels []string
	// tmpl has the constant labels' values at their place; slot[i] is the
	// place in labels of the i-th variable label.
	tmpl []string
	slot []int
	// upper are a histogram's bucket upper bounds, without +Inf.
	upper []float64
	// read appends the family's series (nil for a collected family).
	read func(add func(s series))
}

// series is one labelled series of a family: a value, or for a histogram
// its buckets (not cumulative; the +Inf bucket last), sum and count.
type series struct {
	values  []string // label values in the order of family.labels
	value   float64
	buckets []uint64
	sum     float64
	count   uint64
}

// newFamily validates and describes a family, and reserves its name.
func (r *Registry) newFamily(o Opts, typ Type, varLabels []string) *family {
	if !validMetricName(o.Name) {
		panic(fmt.Sprintf("metrics: invalid metric name %q", o.Name))
	}
	f := &family{name: o.Name, help: o.Help, typ: typ}
	seen := map[string]bool{}
	check := func(l string) {
		if !validLabelName(l) || (typ == TypeHistogram && l == "le") {
			panic(fmt.Sprintf("metrics: %s: invalid label name %q", o.Name, l))
		}
		if seen[l] {
			panic(fmt.Sprintf("metrics: %s: label %q twice", o.Name, l))
		}
		seen[l] = true
		f.labels = append(f.labels, l)
	}
	for l := range o.ConstLabels {
		check(l)
	}
	for _, l := range varLabels {
		check(l)
	}
	sort.Strings(f.labels)
	f.tmpl = make([]string, len(f.labels))
	for i, l := range f.labels {
		f.tmpl[i] = o.ConstLabels[l]
	}
	for _, l := range varLabels {
		f.slot = append(f.slot, slices.Index(f.labels, l))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.names[o.Name] {
		panic(fmt.Sprintf("metrics: %s registered twice", o.Name))
	}
	r.names[o.Name] = true
	return f
}

func (r *Registry) add(f *family) {
	r.mu.Lock()
	r.fams = append(r.fams, f)
	r.mu.Unlock()
}

// values returns the label values of a series, constant ones included.
func (f *family) values(varValues []string) []string {
	if len(varValues) != len(f.slot) {
		panic(fmt.Sprintf("metrics: %s takes %d label values, got %d", f.name, len(f.slot), len(varValues)))
	}
	v := slices.Clone(f.tmpl)
	for i, s := range f.slot {
		v[s] = varValues[i]
	}
	return v
}

// vec keeps the series of one family by label values.
type vec[T any] struct {
	f     *family
	mu    sync.RWMutex
	kids  map[string]*kid[T]
	newer func() *T
}

type kid[T any] struct {
	values []string
	m      *T
}

func newVec[T any](f *family, newer func() *T) *vec[T] {
	return &vec[T]{f: f, kids: map[string]*kid[T]{}, newer: newer}
}

// key joins label values so that different lists of the same length never
// share a key.
func key(values []string) string {
	if len(values) == 1 {
		return values[0]
	}
	var b strings.Builder
	for _, v := range values {
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	}
	return b.String()
}

func (v *vec[T]) with(values []string) *T {
	if len(values) != len(v.f.slot) {
		panic(fmt.Sprintf("metrics: %s takes %d label values, got %d", v.f.name, len(v.f.slot), len(values)))
	}
	k := key(values)
	v.mu.RLock()
	c := v.kids[k]
	v.mu.RUnlock()
	if c != nil {
		return c.m
	}
	all := v.f.values(values)
	v.mu.Lock()
	defer v.mu.Unlock()
	if c := v.kids[k]; c != nil {
		return c.m
	}
	c = &kid[T]{values: all, m: v.newer()}
	v.kids[k] = c
	return c.m
}

func (v *vec[T]) each(fn func(values []string, m *T)) {
	v.mu.RLock()
	kids := make([]*kid[T], 0, len(v.kids))
	for _, c := range v.kids {
		kids = append(kids, c)
	}
	v.mu.RUnlock()
	for _, c := range kids {
		fn(c.values, c.m)
	}
}

// atomicFloat is a float64 updated atomically.
type atomicFloat struct{ bits atomic.Uint64 }

func (a *atomicFloat) load() float64 { return math.Float64frombits(a.bits.Load()) }

func (a *atomicFloat) store(v float64) { a.bits.Store(math.Float64bits(v)) }

func (a *atomicFloat) add(d float64) {
	for {
		old := a.bits.Load()
		if a.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

// Counter is a value that only goes up.
type Counter struct{ v atomicFloat }

// Inc adds 1.
func (c *Counter) Inc() { c.v.add(1) }

// Add adds d, which must not be negative (it panics otherwise).
func (c *Counter) Add(d float64) {
	if d < 0 {
		panic("metrics: a counter cannot decrease")
	}
	c.v.add(d)
}

// Value returns the counter's value.
func (c *Counter) Value() float64 { return c.v.load() }

// Gauge is a value that goes up and down.
type Gauge struct{ v atomicFloat }

// Set sets the gauge to v.
func (g *Gauge) Set(v float64) { g.v.store(v) }

// Inc adds 1.
func (g *Gauge) Inc() { g.v.add(1) }

// Dec subtracts 1.
func (g *Gauge) Dec() { g.v.add(-1) }

// Add adds d (which may be negative).
func (g *Gauge) Add(d float64) { g.v.add(d) }

// Value returns the gauge's value.
func (g *Gauge) Value() float64 { return g.v.load() }

// Histogram counts observations in fixed buckets.
type Histogram struct {
	upper   []float64 // shared with the family; read only
	mu      sync.Mutex
	buckets []uint64 // one per upper bound, then +Inf
	sum     float64
	count   uint64
}

// Observe records one observation.
func (h *Histogram) Observe(v float64) {
	i := sort.SearchFloat64s(h.upper, v) // the first bucket with v <= upper
	h.mu.Lock()
	h.buckets[i]++
	h.sum += v
	h.count++
	h.mu.Unlock()
}

func (h *Histogram) snapshot(values []string) series {
	h.mu.Lock()
	defer h.mu.Unlock()
	return series{values: values, buckets: slices.Clone(h.buckets), sum: h.sum, count: h.count}
}

// CounterVec is a counter family with variable labels.
type CounterVec struct{ v *vec[Counter] }

// With returns the counter of these label values (in the order the labels
// were given), creating it at 0 the first time.
func (c *CounterVec) With(labelValues ...string) *Counter { return c.v.with(labelValues) }

// GaugeVec is a gauge family with variable labels.
type GaugeVec struct{ v *vec[Gauge] }

// With returns the gauge of these label values, creating it at 0 the first
// time.
func (g *GaugeVec) With(labelValues ...string) *Gauge { return g.v.with(labelValues) }

// HistogramVec is a histogram family with variable labels.
type HistogramVec struct{ v *vec[Histogram] }

// With returns the histogram of these label values, creating it empty the
// first time.
func (h *HistogramVec) With(labelValues ...string) *Histogram { return h.v.with(labelValues) }

// NewCounterVec adds a counter family with the variable labels labelNames.
func (r *Registry) NewCounterVec(o Opts, labelNames ...string) *CounterVec {
	f := r.newFamily(o, TypeCounter, labelNames)
	v := newVec(f, func() *Counter { return new(Counter) })
	f.read = func(add func(series)) {
		v.each(func(values []string, c *Counter) { add(series{values: values, value: c.Value()}) })
	}
	r.add(f)
	return &CounterVec{v}
}

// NewCounter adds a counter without variable labels.
func (r *Registry) NewCounter(o Opts) *Counter { return r.NewCounterVec(o).With() }

// NewGaugeVec adds a gauge family with the variable labels labelNames.
func (r *Registry) NewGaugeVec(o Opts, labelNames ...string) *GaugeVec {
	f := r.newFamily(o, TypeGauge, labelNames)
	v := newVec(f, func() *Gauge { return new(Gauge) })
	f.read = func(add func(series)) {
		v.each(func(values []string, g *Gauge) { add(series{values: values, value: g.Value()}) })
	}
	r.add(f)
	return &GaugeVec{v}
}

// NewGauge adds a gauge without variable labels.
func (r *Registry) NewGauge(o Opts) *Gauge { return r.NewGaugeVec(o).With() }

// NewGaugeFunc adds a gauge without variable labels whose value fn returns
// at every scrape. fn must be safe to call from any goroutine.
func (r *Registry) NewGaugeFunc(o Opts, fn func() float64) {
	f := r.newFamily(o, TypeGauge, nil)
	values := f.values(nil)
	f.read = func(add func(series)) { add(series{values: values, value: fn()}) }
	r.add(f)
}

// NewHistogramVec adds a histogram family with the bucket upper bounds
// buckets (strictly increasing; +Inf is implied) and the variable labels
// labelNames.
func (r *Registry) NewHistogramVec(o Opts, buckets []float64, labelNames ...string) *HistogramVec {
	upper := slices.Clone(buckets)
	if n := len(upper); n > 0 && math.IsInf(upper[n-1], +1) {
		upper = upper[:n-1]
	}
	for i, b := range upper {
		if math.IsNaN(b) || math.IsInf(b, 0) || (i > 0 && b <= upper[i-1]) {
			panic(fmt.Sprintf("metrics: %s: buckets must be finite and strictly increasing: %v", o.Name, buckets))
		}
	}
	f := r.newFamily(o, TypeHistogram, labelNames)
	f.upper = upper
	v := newVec(f, func() *Histogram {
		return &Histogram{upper: upper, buckets: make([]uint64, len(upper)+1)}
	})
	f.read = func(add func(series)) {
		v.each(func(values []string, h *Histogram) { add(h.snapshot(values)) })
	}
	r.add(f)
	return &HistogramVec{v}
}

// NewHistogram adds a histogram without variable labels.
func (r *Registry) NewHistogram(o Opts, buckets []float64) *Histogram {
	return r.NewHistogramVec(o, buckets).With()
}

// Desc describes a counter or gauge family whose series a CollectFunc
// computes at scrape time.
type Desc struct {
	Opts
	Type   Type // TypeCounter or TypeGauge
	Labels []string
}

// CollectFunc computes the series of its families at scrape time and adds
// them to s. When it returns an error, none of its families is written.
type CollectFunc func(ctx context.Context, s *Scrape) error

// Scrape gathers the series a CollectFunc adds.
type Scrape struct {
	fams   map[string]*family
	series map[string][]series
	err    error
}

// Add adds a series of the family name (one of the collector's) with the
// value v and the variable label values labelValues. A name or a number of
// labels the family does not have fails the collector's scrape.
func (s *Scrape) Add(name string, v float64, labelValues ...string) {
	f := s.fams[name]
	switch {
	case f == nil:
		s.err = fmt.Errorf("metrics: %s is not a family of this collector", name)
		return
	case len(labelValues) != len(f.slot):
		s.err = fmt.Errorf("metrics: %s takes %d label values, got %d", name, len(f.slot), len(labelValues))
		return
	}
	s.series[name] = append(s.series[name], series{values: f.values(labelValues), value: v})
}

type collector struct {
	fams []*family
	fn   CollectFunc
}

// Collect adds the families descs, whose series fn computes at every
// scrape (say, from one query that yields several values).
func (r *Registry) Collect(fn CollectFunc, descs ...Desc) {
	c := &collector{fn: fn}
	for _, d := range descs {
		if d.Type != TypeCounter && d.Type != TypeGauge {
			panic(fmt.Sprintf("metrics: %s: a collected family is a counter or a gauge", d.Name))
		}
		c.fams = append(c.fams, r.newFamily(d.Opts, d.Type, d.Labels))
	}
	r.mu.Lock()
	r.collectors = append(r.collectors, c)
	r.mu.Unlock()
}

// validMetricName reports whether s matches [a-zA-Z_:][a-zA-Z0-9_:]*.
func validMetricName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c == '_' || c == ':' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || (i > 0 && '0' <= c && c <= '9')
		if !ok {
			return false
		}
	}
	return true
}

// validLabelName reports whether s matches [a-zA-Z_][a-zA-Z0-9_]* and does
// not start with "__" (reserved for Prometheus).
func validLabelName(s string) bool {
	return validMetricName(s) && !strings.Contains(s, ":") && !strings.HasPrefix(s, "__")
}
