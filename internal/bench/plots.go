package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/legate-dev/legate/internal/plot"
)

// Plots turn summary lines (as the scenarios print them, saved one per
// line) into the curves BENCHMARKS.md shows:
//
//   - pickup-vs-delegates.svg: pickup p50 and p99 against connected
//     delegates (swarm or scaling lines), per transport and store;
//   - manager-rss-vs-delegates.svg: the manager's RSS against them;
//   - throughput-vs-delegates.svg: tasks per second against simulated
//     delegates (throughput lines, one per size), per store;
//   - soak-memory.svg, soak-goroutines.svg, soak-database.svg: a soak's
//     readings over time (its last run's samples).
//
// Each point is a median with its min and max as an error bar.

// Plot is one chart and the file name it is written to.
type Plot struct {
	File  string
	Chart plot.Chart
}

// MaxPlotLine bounds one summary line (a soak's samples make the longest:
// about 100 bytes per sample, 360 for an hour at 10 s).
const MaxPlotLine = 8 << 20

// Plots reads summary lines from r (blank lines and lines of scenarios
// without a curve, such as pickup or footprint, are skipped) and returns
// the charts they make. A line that is not a summary is an error naming
// it; no curve at all is an error too.
func Plots(r io.Reader) ([]Plot, error) {
	sum, err := readSummaries(r)
	if err != nil {
		return nil, err
	}
	var out []Plot
	if len(sum.steps) > 0 {
		out = append(out, swarmPlots(sum.steps)...)
	}
	if len(sum.through) > 0 {
		out = append(out, throughputPlot(sum.through))
	}
	if len(sum.soaks) > 0 {
		// The last soak's samples: one soak per file is the usual case.
		ps, err := soakPlots(sum.soaks[len(sum.soaks)-1])
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
	if len(out) == 0 {
		return nil, errors.New("no curve in these lines: plots come from swarm, scaling, throughput and soak summaries")
	}
	return out, nil
}

// swarmKey names the curves of one transport and store.
type swarmKey struct{ transport, store string }

// summaries are the summary lines that make curves, by curve.
type summaries struct {
	steps   map[swarmKey][]SwarmStep       // swarm and scaling lines
	through map[string][]ThroughputSummary // by store
	soaks   []SoakSummary
}

// readSummaries reads the summary lines of r.
func readSummaries(r io.Reader) (summaries, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxPlotLine)
	sum := summaries{steps: map[swarmKey][]SwarmStep{}, through: map[string][]ThroughputSummary{}}
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if err := sum.add(n, line); err != nil {
			return summaries{}, err
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return summaries{}, fmt.Errorf("line %d is longer than %d bytes", n+1, MaxPlotLine)
		}
		return summaries{}, fmt.Errorf("read summary lines: %w", err)
	}
	return sum, nil
}

// add reads line n, a summary line.
func (sum *summaries) add(n int, line []byte) error {
	var head struct {
		Scenario string `json:"scenario"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return fmt.Errorf("line %d is not a summary line of legate bench: %v", n, err)
	}
	var err error
	switch head.Scenario {
	case ScenarioSwarm:
		var s SwarmSummary
		if err = json.Unmarshal(line, &s); err == nil {
			k := swarmKey{s.Transport, s.Store}
			sum.steps[k] = append(sum.steps[k], s.Steps...)
		}
	case ScenarioScaling:
		var s ScalingLine
		if err = json.Unmarshal(line, &s); err == nil {
			k := swarmKey{s.Transport, s.Store}
			sum.steps[k] = append(sum.steps[k], s.SwarmStep)
		}
	case ScenarioThroughput:
		var s ThroughputSummary
		if err = json.Unmarshal(line, &s); err == nil {
			sum.through[s.Store] = append(sum.through[s.Store], s)
		}
	case ScenarioSoak:
		var s SoakSummary
		if err = json.Unmarshal(line, &s); err == nil {
			sum.soaks = append(sum.soaks, s)
		}
	case "":
		return fmt.Errorf("line %d has no scenario: is it a summary line of legate bench?", n)
	}
	if err != nil {
		return fmt.Errorf("line %d (%s): %v", n, head.Scenario, err)
	}
	return nil
}

// swarmPlots are the pickup and RSS curves against connected delegates,
// one set per transport and store.
func swarmPlots(steps map[swarmKey][]SwarmStep) []Plot {
	keys := make([]swarmKey, 0, len(steps))
	for k := range steps {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b swarmKey) int {
		return cmp.Or(cmp.Compare(a.transport, b.transport), cmp.Compare(a.store, b.store))
	})
	name := func(k swarmKey, what string) string {
		if len(keys) == 1 {
			return what
		}
		return what + " (" + k.transport + ", " + k.store + ")"
	}
	pickup := plot.Chart{Title: "Pickup against connected delegates", XLabel: "connected delegates", YLabel: "pickup, ms (queued → started)", LogX: true}
	rss := plot.Chart{Title: "Manager memory against connected delegates", XLabel: "connected delegates", YLabel: "manager RSS, MB", LogX: true}
	for _, k := range keys {
		st := steps[k]
		slices.SortStableFunc(st, func(a, b SwarmStep) int { return cmp.Compare(a.Delegates, b.Delegates) })
		var p50, p99, mem []plot.Point
		for _, s := range st {
			x := float64(s.Delegates)
			p50 = append(p50, point(x, s.PickupP50MS))
			p99 = append(p99, point(x, s.PickupP99MS))
			mem = append(mem, point(x, s.ManagerRSSMB))
		}
		pickup.Series = append(pickup.Series, plot.Series{Name: name(k, "p50"), Points: p50}, plot.Series{Name: name(k, "p99"), Points: p99})
		rss.Series = append(rss.Series, plot.Series{Name: name(k, "RSS"), Points: mem})
	}
	return []Plot{{"pickup-vs-delegates.svg", pickup}, {"manager-rss-vs-delegates.svg", rss}}
}

// throughputPlot is the throughput curve against simulated delegates,
// one per store.
func throughputPlot(through map[string][]ThroughputSummary) Plot {
	c := plot.Chart{Title: "Throughput against delegates", XLabel: "simulated delegates", YLabel: "tasks per second (submit → result)", LogX: true}
	for _, store := range sortedKeys(through) {
		ts := through[store]
		slices.SortStableFunc(ts, func(a, b ThroughputSummary) int { return cmp.Compare(a.Delegates, b.Delegates) })
		var pts []plot.Point
		for _, t := range ts {
			pts = append(pts, point(float64(t.Delegates), t.TasksPerS))
		}
		c.Series = append(c.Series, plot.Series{Name: store, Points: pts})
	}
	return Plot{"throughput-vs-delegates.svg", c}
}

// soakPlots are a soak's readings over time: memory, goroutines and
// files, database.
func soakPlots(s SoakSummary) ([]Plot, error) {
	if len(s.Samples) == 0 {
		return nil, errors.New("the soak line has no samples to plot")
	}
	title := fmt.Sprintf("Soak: %d tasks/s, %d delegates, %s", s.RatePerS, s.Delegates, s.Store)
	var mrss, brss, mg, bg, files, db []plot.Point
	for _, x := range s.Samples {
		m := x.AtS / 60
		mrss = append(mrss, plot.Point{X: m, Y: x.ManagerRSSMB})
		brss = append(brss, plot.Point{X: m, Y: x.BenchRSSMB})
		mg = append(mg, plot.Point{X: m, Y: x.ManagerGoroutines})
		bg = append(bg, plot.Point{X: m, Y: x.BenchGoroutines})
		files = append(files, plot.Point{X: m, Y: x.ManagerOpenFiles})
		db = append(db, plot.Point{X: m, Y: x.DBMB})
	}
	return []Plot{
		{"soak-memory.svg", plot.Chart{Title: title + ": memory", XLabel: "minutes", YLabel: "RSS, MB", Series: []plot.Series{
			{Name: "manager", Points: mrss}, {Name: "delegates (the bench process)", Points: brss}}}},
		{"soak-goroutines.svg", plot.Chart{Title: title + ": goroutines and files", XLabel: "minutes", YLabel: "count", Series: []plot.Series{
			{Name: "manager goroutines", Points: mg}, {Name: "bench goroutines", Points: bg}, {Name: "manager open files", Points: files}}}},
		{"soak-database.svg", plot.Chart{Title: title + ": database", XLabel: "minutes", YLabel: "SQLite database and WAL, MB", Series: []plot.Series{
			{Name: "database", Points: db}}}},
	}, nil
}

// WritePlots renders plots as SVG files in dir (made if missing) and
// returns their paths.
func WritePlots(dir string, plots []Plot) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("plot directory: %w", err)
	}
	var paths []string
	for _, p := range plots {
		svg, err := p.Chart.SVG()
		if err != nil {
			return paths, fmt.Errorf("%s: %w", p.File, err)
		}
		path := filepath.Join(dir, p.File)
		if err := os.WriteFile(path, svg, 0o644); err != nil {
			return paths, fmt.Errorf("write %s: %w", p.File, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// point is a median with its runs' range (a range that does not hold the
// median, from a hand-edited line, is dropped rather than refused).
func point(x float64, s Stat) plot.Point {
	p := plot.Point{X: x, Y: s.Median, Lo: s.Min, Hi: s.Max, Ranged: s.Min < s.Max}
	if p.Lo > p.Y || p.Hi < p.Y {
		p.Lo, p.Hi, p.Ranged = 0, 0, false
	}
	return p
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
