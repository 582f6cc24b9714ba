// Package promtest scrapes a Prometheus /metrics endpoint over real HTTP,
// parses it with a strict parser of the text format (Parse) and reads
// values from it, for tests of the manager's and the delegate's metrics.
// It uses the standard library only, so that Prometheus's own libraries
// stay out of legate's go.mod: the e2e module checks Parse against
// Prometheus's parser (e2e/promformat). It imports nothing from the project.
package promtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"
)

// Families is one scrape: metric families by name.
type Families map[string]*Family

// Scrape fetches url (a /metrics endpoint) and parses it, failing the test
// when the answer is not 200 or does not parse.
func Scrape(t testing.TB, url string) Families {
	t.Helper()
	f, err := TryScrape(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	return f
}

// TryScrape is Scrape that returns the error, for polling loops.
func TryScrape(url string) (Families, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return nil, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		return nil, fmt.Errorf("content type %q, want the text format", ct)
	}
	fams, err := Parse(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	return fams, nil
}

// find returns the metric of family name whose labels include every
// name/value pair of labels ("k1", "v1", "k2", "v2", ...).
func (f Families) find(name string, labels []string) (*Family, *Series, error) {
	if len(labels)%2 != 0 {
		return nil, nil, fmt.Errorf("labels must be name/value pairs: %q", labels)
	}
	fam := f[name]
	if fam == nil {
		return nil, nil, fmt.Errorf("no metric family %s (have %s)", name, strings.Join(f.Names(), ", "))
	}
	var found *Series
	for i := range fam.Series {
		m := &fam.Series[i]
		have := map[string]string{}
		for _, l := range m.Labels {
			have[l.Name] = l.Value
		}
		ok := true
		for i := 0; i < len(labels); i += 2 {
			ok = ok && have[labels[i]] == labels[i+1]
		}
		if !ok {
			continue
		}
		if found != nil {
			return nil, nil, fmt.Errorf("%s%v matches more than one series", name, labels)
		}
		found = m
	}
	if found == nil {
		return nil, nil, fmt.Errorf("no series %s%v", name, labels)
	}
	return fam, found, nil
}

// Names lists the metric families, sorted.
func (f Families) Names() []string {
	out := make([]string, 0, len(f))
	for n := range f {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Has reports whether a series of name with labels exists.
func (f Families) Has(name string, labels ...string) bool {
	_, _, err := f.find(name, labels)
	return err == nil
}

// Lookup returns the value of a counter, gauge or untyped series, or for
// a histogram its sample count.
func (f Families) Lookup(name string, labels ...string) (float64, error) {
	fam, m, err := f.find(name, labels)
	if err != nil {
		return 0, err
	}
	if fam.Type == TypeHistogram {
		return float64(m.Count), nil
	}
	return m.Value, nil
}

// Value is Lookup that fails the test when the series is missing.
func (f Families) Value(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	v, err := f.Lookup(name, labels...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Type returns the type of a metric family (TypeCounter, ...; "" when it
// is missing).
func (f Families) Type(name string) string {
	if fam := f[name]; fam != nil {
		return fam.Type
	}
	return ""
}

// Histogram returns the sample count and sum of a histogram series.
func (f Families) Histogram(t testing.TB, name string, labels ...string) (count uint64, sum float64) {
	t.Helper()
	fam, m, err := f.find(name, labels)
	if err != nil {
		t.Fatal(err)
	}
	if fam.Type != TypeHistogram {
		t.Fatalf("%s is a %s, not a histogram", name, fam.Type)
	}
	return m.Count, m.Sum
}
