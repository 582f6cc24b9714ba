package promtest

import (
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The family types, named as Prometheus's client model names them.
const (
	TypeCounter   = "COUNTER"
	TypeGauge     = "GAUGE"
	TypeHistogram = "HISTOGRAM"
	TypeUntyped   = "UNTYPED"
)

// Family is one metric family of a scrape.
type Family struct {
	Name string
	Help string
	Type string // TypeCounter, TypeGauge, TypeHistogram or TypeUntyped
	// Series in the order of their first line.
	Series []Series
}

// Series is one series of a family.
type Series struct {
	// Labels as written (for a histogram, those of its first line, le
	// left out).
	Labels []Label
	// Value of a counter, gauge or untyped series.
	Value float64
	// Buckets, Count and Sum of a histogram series, buckets as written.
	Buckets []Bucket
	Count   uint64
	Sum     float64
}

// Label is one label of a series.
type Label struct{ Name, Value string }

// Bucket is one bucket of a histogram series.
type Bucket struct {
	UpperBound      float64
	CumulativeCount uint64
}

// Parse reads the Prometheus text exposition format 0.0.4.
//
// It is stricter than Prometheus's parser and reads what it accepts as
// that parser does (the e2e module's promformat tests check both against
// Prometheus's own parser): one space between tokens and none elsewhere,
// no timestamps, no comments but HELP and TYPE, each before the family's
// samples and at most once, no summaries, no series twice, no label name
// starting with "__", valid UTF-8 only, and each histogram series complete
// and consistent (buckets in increasing order with non-decreasing counts,
// the last one +Inf and equal to _count, one _sum and one _count).
// Families with HELP or TYPE but no sample are left out, as Prometheus
// leaves them out.
func Parse(r io.Reader) (Families, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if !utf8.Valid(b) {
		return nil, errors.New("not valid UTF-8")
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		return nil, errors.New("the last line does not end with a newline")
	}
	p := parser{fams: Families{}, state: map[*Family]*famState{}}
	if len(b) > 0 {
		for i, line := range strings.Split(string(b[:len(b)-1]), "\n") {
			if err := p.line(line); err != nil {
				return nil, fmt.Errorf("line %d: %w", i+1, err)
			}
		}
	}
	for name, f := range p.fams {
		if len(f.Series) == 0 {
			delete(p.fams, name)
			continue
		}
		if f.Type != TypeHistogram {
			continue
		}
		for i := range f.Series {
			if err := checkHistogram(f.Name, &f.Series[i], p.state[f].hist[i]); err != nil {
				return nil, err
			}
		}
	}
	return p.fams, nil
}

type parser struct {
	fams  Families
	state map[*Family]*famState
}

// famState is what the parser knows of a family beyond the Family.
type famState struct {
	help, typ bool           // a HELP line, a TYPE line was read
	series    map[string]int // index in Series by the key of its labels
	hist      []*histState   // per series of a histogram
}

// histState is what a histogram series has had so far.
type histState struct {
	sum, count bool
	les        map[float64]bool
}

func (p *parser) family(name string) *Family {
	f := &Family{Name: name}
	p.fams[name] = f
	p.state[f] = &famState{series: map[string]int{}}
	return f
}

func (p *parser) line(s string) error {
	switch {
	case s == "":
		return errors.New("empty line")
	case strings.HasPrefix(s, "# HELP "), strings.HasPrefix(s, "# TYPE "):
		return p.meta(s[2:6], s[7:])
	case s[0] == '#':
		return fmt.Errorf("a comment other than HELP or TYPE: %q", s)
	}
	return p.sample(s)
}

// meta reads the rest of a HELP or TYPE line.
func (p *parser) meta(keyword, s string) error {
	name, rest, ok := strings.Cut(s, " ")
	if !ok || !validMetricName(name) {
		return fmt.Errorf("%s: want a metric name, a space and text, got %q", keyword, s)
	}
	f := p.fams[name]
	if f == nil {
		if base, _ := histogramBase(name); p.fams[base] != nil && p.fams[base].Type == TypeHistogram {
			return fmt.Errorf("%s %s: names a series of histogram %s", keyword, name, base)
		}
		f = p.family(name)
	}
	st := p.state[f]
	if len(f.Series) > 0 {
		return fmt.Errorf("%s %s after its samples", keyword, name)
	}
	if keyword == "HELP" {
		if st.help {
			return fmt.Errorf("a second HELP for %s", name)
		}
		st.help = true
		help, err := unescape(strings.TrimLeft(rest, " \t"), false)
		if err != nil {
			return fmt.Errorf("HELP %s: %w", name, err)
		}
		f.Help = help
		return nil
	}
	if st.typ {
		return fmt.Errorf("a second TYPE for %s", name)
	}
	st.typ = true
	switch rest {
	case "counter", "gauge", "histogram", "untyped":
		f.Type = strings.ToUpper(rest)
	default:
		return fmt.Errorf("TYPE %s: unsupported type %q", name, rest)
	}
	return nil
}

// sample reads a sample line: name, labels, one space, value.
func (p *parser) sample(s string) error {
	i := 0
	for i < len(s) && metricNameByte(s[i], i) {
		i++
	}
	name := s[:i]
	if name == "" {
		return fmt.Errorf("want a metric name or a comment, got %q", s)
	}
	var labels []Label
	rest := s[i:]
	if strings.HasPrefix(rest, "{") {
		var err error
		if labels, rest, err = readLabels(rest[1:]); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	text, ok := strings.CutPrefix(rest, " ")
	if !ok || strings.ContainsAny(text, " \t") {
		return fmt.Errorf("%s: want one space and a value (no timestamp) after the name and labels, got %q", name, rest)
	}
	v, err := parseFloat(text)
	if err != nil {
		return fmt.Errorf("%s: value %q: %w", name, text, err)
	}

	// The family: the name's own, else the histogram whose series it is,
	// else a new untyped one (Prometheus's order).
	f := p.fams[name]
	suffix := ""
	if f == nil {
		if base, sfx := histogramBase(name); p.fams[base] != nil && p.fams[base].Type == TypeHistogram {
			f, suffix = p.fams[base], sfx
		} else {
			f = p.family(name)
		}
	}
	if f.Type == "" {
		f.Type = TypeUntyped
	}
	st := p.state[f]
	if f.Type != TypeHistogram {
		key := labelKey(labels, "")
		if _, dup := st.series[key]; dup {
			return fmt.Errorf("%s: a second sample of the same series", name)
		}
		st.series[key] = len(f.Series)
		f.Series = append(f.Series, Series{Labels: labels, Value: v})
		return nil
	}

	if suffix == "" {
		return fmt.Errorf("%s is a histogram: want its _bucket, _sum or _count", name)
	}
	le := slices.IndexFunc(labels, func(l Label) bool { return l.Name == "le" })
	if (le >= 0) != (suffix == "_bucket") {
		return fmt.Errorf("%s: le must be there on a _bucket line and only there", name)
	}
	key := labelKey(labels, "le")
	idx, seen := st.series[key]
	if !seen {
		idx = len(f.Series)
		st.series[key] = idx
		f.Series = append(f.Series, Series{Labels: slices.DeleteFunc(slices.Clone(labels), func(l Label) bool { return l.Name == "le" })})
		st.hist = append(st.hist, &histState{les: map[float64]bool{}})
	}
	ser, hs := &f.Series[idx], st.hist[idx]
	switch suffix {
	case "_sum":
		if hs.sum {
			return fmt.Errorf("%s: a second _sum for one series", name)
		}
		hs.sum, ser.Sum = true, v
	case "_count":
		n, err := count(v)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if hs.count {
			return fmt.Errorf("%s: a second _count for one series", name)
		}
		hs.count, ser.Count = true, n
	case "_bucket":
		n, err := count(v)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		upper, err := parseFloat(labels[le].Value)
		if err != nil || math.IsNaN(upper) {
			return fmt.Errorf("%s: le %q is not a number", name, labels[le].Value)
		}
		if hs.les[upper] {
			return fmt.Errorf("%s: a second bucket le=%q for one series", name, labels[le].Value)
		}
		hs.les[upper] = true
		ser.Buckets = append(ser.Buckets, Bucket{UpperBound: upper, CumulativeCount: n})
	}
	return nil
}

// checkHistogram checks a histogram series once every line is read.
func checkHistogram(name string, s *Series, hs *histState) error {
	if !hs.sum || !hs.count {
		return fmt.Errorf("histogram %s%v: no _sum or no _count", name, s.Labels)
	}
	b := s.Buckets
	if len(b) == 0 || !math.IsInf(b[len(b)-1].UpperBound, +1) {
		return fmt.Errorf("histogram %s%v: the last bucket is not le=\"+Inf\"", name, s.Labels)
	}
	for i := 1; i < len(b); i++ {
		if b[i].UpperBound <= b[i-1].UpperBound || b[i].CumulativeCount < b[i-1].CumulativeCount {
			return fmt.Errorf("histogram %s%v: buckets out of order or counts decreasing", name, s.Labels)
		}
	}
	if b[len(b)-1].CumulativeCount != s.Count {
		return fmt.Errorf("histogram %s%v: _count %d, but %d in the +Inf bucket", name, s.Labels, s.Count, b[len(b)-1].CumulativeCount)
	}
	return nil
}

// readLabels reads the labels after "{" up to and with "}", and returns
// what follows.
func readLabels(s string) ([]Label, string, error) {
	if rest, ok := strings.CutPrefix(s, "}"); ok {
		return nil, rest, nil
	}
	var labels []Label
	for {
		i := 0
		for i < len(s) && labelNameByte(s[i], i) {
			i++
		}
		name := s[:i]
		if name == "" || strings.HasPrefix(name, "__") {
			return nil, "", fmt.Errorf("invalid label name at %q", s)
		}
		if slices.ContainsFunc(labels, func(l Label) bool { return l.Name == name }) {
			return nil, "", fmt.Errorf("label %s twice", name)
		}
		var ok bool
		if s, ok = strings.CutPrefix(s[i:], `="`); !ok {
			return nil, "", fmt.Errorf("label %s: want =\" after the name", name)
		}
		end := closingQuote(s)
		if end < 0 {
			return nil, "", fmt.Errorf("label %s: no closing quote", name)
		}
		value, err := unescape(s[:end], true)
		if err != nil {
			return nil, "", fmt.Errorf("label %s: %w", name, err)
		}
		labels = append(labels, Label{Name: name, Value: value})
		switch s = s[end+1:]; {
		case strings.HasPrefix(s, ","):
			s = s[1:]
		case strings.HasPrefix(s, "}"):
			return labels, s[1:], nil
		default:
			return nil, "", fmt.Errorf("label %s: want , or } after the value", name)
		}
	}
}

// closingQuote returns the index of the first unescaped double quote in s,
// or -1.
func closingQuote(s string) int {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return -1
}

// unescape undoes the escapes of the format: \\ and \n, and \" in a label
// value.
func unescape(s string, quote bool) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch {
		case i == len(s):
			return "", errors.New(`a lone \ at the end`)
		case s[i] == '\\':
			b.WriteByte('\\')
		case s[i] == 'n':
			b.WriteByte('\n')
		case s[i] == '"' && quote:
			b.WriteByte('"')
		default:
			return "", fmt.Errorf(`invalid escape \%c`, s[i])
		}
	}
	return b.String(), nil
}

// labelKey identifies a series by its labels less skip, in any order.
func labelKey(labels []Label, skip string) string {
	var parts []string
	for _, l := range labels {
		if l.Name != skip {
			parts = append(parts, l.Name+"\xff"+l.Value)
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, "\xfe")
}

// histogramBase returns name less its suffix _bucket, _sum or _count, and
// the suffix ("" when it has none).
func histogramBase(name string) (base, suffix string) {
	for _, sfx := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(name, sfx); ok && b != "" {
			return b, sfx
		}
	}
	return name, ""
}

// count converts the value of a _count or _bucket line.
func count(v float64) (uint64, error) {
	if v < 0 || v >= 1<<64 || v != math.Trunc(v) {
		return 0, fmt.Errorf("count %v is not a whole number of 64 bits", v)
	}
	return uint64(v), nil
}

// parseFloat reads a value as Prometheus's parser does.
func parseFloat(s string) (float64, error) {
	if strings.ContainsAny(s, "pP_") {
		return 0, errors.New("unsupported character in a number")
	}
	return strconv.ParseFloat(s, 64)
}

func validMetricName(s string) bool {
	for i := 0; i < len(s); i++ {
		if !metricNameByte(s[i], i) {
			return false
		}
	}
	return s != ""
}

// metricNameByte reports whether c may be byte i of a metric name
// ([a-zA-Z_:][a-zA-Z0-9_:]*).
func metricNameByte(c byte, i int) bool {
	return c == ':' || labelNameByte(c, i)
}

// labelNameByte reports whether c may be byte i of a label name
// ([a-zA-Z_][a-zA-Z0-9_]*).
func labelNameByte(c byte, i int) bool {
	return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || (i > 0 && '0' <= c && c <= '9')
}
