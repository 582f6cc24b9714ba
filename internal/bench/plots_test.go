package bench

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// checkPlots draws the curves of summary lines raw into a directory and
// checks that exactly the files of want are written, each well-formed SVG
// with one polyline per series holding the number of points want says.
func checkPlots(t *testing.T, raw string, want map[string][]int) {
	t.Helper()
	plots, err := Plots(strings.NewReader(raw))
	if err != nil {
		t.Fatalf("Plots: %v", err)
	}
	dir := t.TempDir()
	paths, err := WritePlots(dir, plots)
	if err != nil {
		t.Fatalf("WritePlots: %v", err)
	}
	got := map[string][]int{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		got[filepath.Base(p)] = polylinePoints(t, b)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plots: files and points per series (-want +got):\n%s", diff)
	}
}

// polylinePoints parses svg and returns each polyline's number of points.
func polylinePoints(t *testing.T, svg []byte) []int {
	t.Helper()
	var out []int
	d := xml.NewDecoder(bytes.NewReader(svg))
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("not well-formed SVG: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "polyline" {
			for _, a := range se.Attr {
				if a.Name.Local == "points" {
					out = append(out, len(strings.Fields(a.Value)))
				}
			}
		}
	}
}

// TestPlotsOfSavedLines: throughput lines of two stores make one series
// per store, sorted by delegates whatever the order of the lines; swarm
// and scaling lines of two transports make a p50 and p99 series each;
// lines of scenarios without a curve are skipped.
func TestPlotsOfSavedLines(t *testing.T) {
	lines := strings.Join([]string{
		`{"scenario":"throughput","store":"sqlite","delegates":100,"tasks_per_s":{"median":2100,"min":2000,"max":2300}}`,
		`{"scenario":"throughput","store":"postgres","delegates":10,"tasks_per_s":{"median":300,"min":290,"max":310}}`,
		``,
		`{"scenario":"throughput","store":"sqlite","delegates":1,"tasks_per_s":{"median":900,"min":800,"max":1000}}`,
		`{"scenario":"pickup","delegates":1,"pickup_p50_ms":{"median":1}}`,
		`{"scenario":"scaling","transport":"websocket","store":"sqlite","delegates":10,"pickup_p50_ms":{"median":1,"min":1,"max":2},"pickup_p99_ms":{"median":3},"manager_rss_mb":{"median":30}}`,
		`{"scenario":"scaling","transport":"websocket","store":"sqlite","delegates":1,"pickup_p50_ms":{"median":1},"pickup_p99_ms":{"median":2},"manager_rss_mb":{"median":20}}`,
		`{"scenario":"swarm","transport":"polling","store":"sqlite","steps":[{"delegates":1,"pickup_p50_ms":{"median":4}},{"delegates":100,"pickup_p50_ms":{"median":5}},{"delegates":10,"pickup_p50_ms":{"median":4}}]}`,
	}, "\n")
	plots, err := Plots(strings.NewReader(lines))
	if err != nil {
		t.Fatal(err)
	}
	type series struct {
		Name string
		X    []float64
	}
	got := map[string][]series{}
	for _, p := range plots {
		for _, s := range p.Chart.Series {
			var xs []float64
			for _, pt := range s.Points {
				xs = append(xs, pt.X)
			}
			got[p.File] = append(got[p.File], series{s.Name, xs})
		}
	}
	want := map[string][]series{
		"throughput-vs-delegates.svg": {{"postgres", []float64{10}}, {"sqlite", []float64{1, 100}}},
		"pickup-vs-delegates.svg": {
			{"p50 (polling, sqlite)", []float64{1, 10, 100}}, {"p99 (polling, sqlite)", []float64{1, 10, 100}},
			{"p50 (websocket, sqlite)", []float64{1, 10}}, {"p99 (websocket, sqlite)", []float64{1, 10}},
		},
		"manager-rss-vs-delegates.svg": {{"RSS (polling, sqlite)", []float64{1, 10, 100}}, {"RSS (websocket, sqlite)", []float64{1, 10}}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("series (-want +got):\n%s", diff)
	}
	// The medians keep their runs' range as an error bar.
	for _, p := range plots {
		if p.File == "throughput-vs-delegates.svg" {
			if pt := p.Chart.Series[1].Points[1]; pt.Y != 2100 || pt.Lo != 2000 || pt.Hi != 2300 || !pt.Ranged {
				t.Errorf("sqlite at 100 delegates: %+v", pt)
			}
		}
	}
	if _, err := WritePlots(t.TempDir(), plots); err != nil {
		t.Errorf("WritePlots: %v", err)
	}
}

func TestPlotsRefuseWhatIsNotACurve(t *testing.T) {
	for _, tt := range []struct{ name, in, want string }{
		{"not JSON", "{\"scenario\":\"throughput\"}\nhello", "line 2 is not a summary line"},
		{"no scenario", `{"delegates":1}`, "line 1 has no scenario"},
		{"a field of the wrong type", `{"scenario":"throughput","delegates":"ten"}`, "line 1 (throughput)"},
		{"no curve", `{"scenario":"pickup"}`, "no curve in these lines"},
		{"nothing", "", "no curve in these lines"},
		{"a soak without samples", `{"scenario":"soak","samples":[]}`, "no samples"},
	} {
		if _, err := Plots(strings.NewReader(tt.in)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v, want an error saying %q", tt.name, err, tt.want)
		}
	}
	// A step at 0 delegates cannot sit on a logarithmic axis: WritePlots
	// says so and names the file.
	plots, err := Plots(strings.NewReader(`{"scenario":"scaling","transport":"websocket","store":"sqlite","delegates":0}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := WritePlots(t.TempDir(), plots); err == nil || !strings.Contains(err.Error(), "pickup-vs-delegates.svg") || !strings.Contains(err.Error(), "logarithmic") {
		t.Errorf("a step at 0 delegates: %v", err)
	}
}

// FuzzPlots: any input gives charts or an error, never a panic, and every
// chart it gives renders or says why not.
func FuzzPlots(f *testing.F) {
	for _, s := range []string{
		`{"scenario":"throughput","store":"sqlite","delegates":10,"tasks_per_s":{"median":1,"min":0,"max":2}}`,
		`{"scenario":"scaling","transport":"websocket","store":"sqlite","delegates":3,"pickup_p50_ms":{"median":1}}`,
		`{"scenario":"swarm","steps":[{"delegates":1},{"delegates":2}]}`,
		`{"scenario":"soak","samples":[{"at_s":0,"manager_rss_mb":20},{"at_s":10,"manager_rss_mb":21}]}`,
		"\n\n{}",
		`{"scenario":"soak","samples":[{"at_s":1e308}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		plots, err := Plots(bytes.NewReader(in))
		if err != nil {
			return
		}
		for _, p := range plots {
			if svg, err := p.Chart.SVG(); err == nil {
				polylinePoints(t, svg)
			}
		}
	})
}
