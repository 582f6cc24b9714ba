package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/pgtest"
)

// binary is the legate binary built once for the smoke tests: it runs as
// the manager and as real delegates, while the scenarios themselves (the
// swarm, the measurements) run in this test process, under -race too.
var binary string

func TestMain(m *testing.M) {
	os.Exit(mainWithBinary(m))
}

func mainWithBinary(m *testing.M) int {
	dir, err := os.MkdirTemp("", "legate-bench-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "legate")
	build := exec.Command("go", "build", "-o", binary, "../../cmd/legate")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build legate:", err)
		return 1
	}
	return pgtest.Main(m)
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// runSmoke runs a scenario with --smoke sizes in this process and returns
// its summary lines, decoded.
func runSmoke(t *testing.T, cfg Config) []map[string]any {
	t.Helper()
	return decodeLines(t, runSmokeRaw(t, cfg))
}

// runSmokeRaw runs a scenario with --smoke sizes in this process and
// returns its summary lines as printed.
func runSmokeRaw(t *testing.T, cfg Config) string {
	t.Helper()
	cfg.Exe, cfg.Smoke = binary, true
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	t0 := time.Now()
	if err := Run(ctx, cfg, &out, testLogger(t)); err != nil {
		t.Fatalf("%s: %v", cfg.Scenario, err)
	}
	t.Logf("%s took %s: %s", cfg.Scenario, time.Since(t0).Round(time.Millisecond), strings.TrimSpace(out.String()))
	return out.String()
}

func decodeLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("summary line is not JSON: %v\n%s", err, line)
		}
		lines = append(lines, v)
	}
	return lines
}

// stat returns the Stat at key of v, failing the test when there is none
// or when it is not ordered min ≤ median ≤ max.
func stat(t *testing.T, v map[string]any, key string) Stat {
	t.Helper()
	raw, ok := v[key].(map[string]any)
	if !ok {
		t.Fatalf("%v: no %s", v["scenario"], key)
	}
	st := Stat{Median: num(t, raw, "median"), Min: num(t, raw, "min"), Max: num(t, raw, "max")}
	if !(st.Min <= st.Median && st.Median <= st.Max) || st.Min < 0 {
		t.Errorf("%v: %s is not min ≤ median ≤ max: %+v", v["scenario"], key, st)
	}
	return st
}

func num(t *testing.T, v map[string]any, key string) float64 {
	t.Helper()
	f, ok := v[key].(float64)
	if !ok {
		t.Fatalf("%v: %s is not a number: %v", v["scenario"], key, v[key])
	}
	return f
}

// positive checks that each named stat has a positive median.
func positive(t *testing.T, v map[string]any, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if st := stat(t, v, k); st.Median <= 0 {
			t.Errorf("%v: %s median is %v, want > 0", v["scenario"], k, st.Median)
		}
	}
}

// ordered checks p50 ≤ p99 ≤ max on the medians of three stats.
func ordered(t *testing.T, v map[string]any, p50, p99, mx string) {
	t.Helper()
	a, b, c := stat(t, v, p50), stat(t, v, p99), stat(t, v, mx)
	if !(a.Median <= b.Median && b.Median <= c.Median) {
		t.Errorf("%v: want %s ≤ %s ≤ %s, got %v ≤ %v ≤ %v", v["scenario"], p50, p99, mx, a.Median, b.Median, c.Median)
	}
	if a.Median <= 0 {
		t.Errorf("%v: %s median is %v, want > 0", v["scenario"], p50, a.Median)
	}
}

// healthy checks that the swarm lost nothing.
func healthy(t *testing.T, v map[string]any) {
	t.Helper()
	for _, k := range []string{"ws_drops", "heartbeats_failed", "calls_failed"} {
		if n := num(t, v, k); n != 0 {
			t.Errorf("%v: %s = %v, want 0", v["scenario"], k, n)
		}
	}
}

func one(t *testing.T, lines []map[string]any, scenario string) map[string]any {
	t.Helper()
	if len(lines) != 1 {
		t.Fatalf("%s printed %d lines, want 1", scenario, len(lines))
	}
	if lines[0]["scenario"] != scenario {
		t.Fatalf("scenario = %v, want %s", lines[0]["scenario"], scenario)
	}
	if num(t, lines[0], "runs") < 1 {
		t.Errorf("%s: runs < 1", scenario)
	}
	return lines[0]
}

// The smoke tests run every scenario with tiny sizes so the harness never
// rots. They check the summaries' shape and sanity, never timings, and run
// in parallel (each has its own manager and directories; most of their
// time is spent waiting).

func TestSmokePickup(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		transport string
		real      bool
	}{{TransportWebSocket, false}, {TransportPolling, false}, {TransportWebSocket, true}} {
		tr := tc.transport
		name := tr
		if tc.real {
			name += "/real"
		}
		t.Run(name, func(t *testing.T) {
			v := one(t, runSmoke(t, Config{Scenario: ScenarioPickup, Transport: tr, QueuedOther: 20, Real: tc.real}), ScenarioPickup)
			if v["transport"] != tr || num(t, v, "delegates") < 1 || num(t, v, "queued_other") != 20 || num(t, v, "tasks_per_run") < 1 {
				t.Errorf("sizes: %v", v)
			}
			if want := map[bool]string{false: "simulated", true: "real"}[tc.real]; v["delegate"] != want {
				t.Errorf("delegate = %v, want %s", v["delegate"], want)
			}
			if !tc.real {
				positive(t, v, "offers_per_task")
			}
			ordered(t, v, "p50_ms", "p99_ms", "max_ms")
			ordered(t, v, "baseline_p50_ms", "baseline_p99_ms", "baseline_max_ms")
			positive(t, v, "manager_rss_mb")
			if num(t, v, "ratio_p50") <= 0 {
				t.Errorf("ratio_p50 = %v", v["ratio_p50"])
			}
			healthy(t, v)
		})
	}
}

func checkThroughput(t *testing.T, v map[string]any) {
	t.Helper()
	if num(t, v, "delegates") < 1 || num(t, v, "tasks_per_run") < 1 {
		t.Errorf("sizes: %v", v)
	}
	positive(t, v, "tasks_per_s", "manager_rss_mb", "offers_per_task")
	if _, err := os.Stat("/proc/self/io"); err == nil {
		// The manager writes its WAL and answers on sockets for every task.
		positive(t, v, "manager_write_kib_per_task", "manager_writes_per_task")
	}
	ordered(t, v, "latency_p50_ms", "latency_p99_ms", "latency_max_ms")
	stat(t, v, "manager_cpu_pct")
	healthy(t, v)
}

func TestSmokeThroughput(t *testing.T) {
	t.Parallel()
	profile := filepath.Join(t.TempDir(), "manager.pprof")
	v := one(t, runSmoke(t, Config{Scenario: ScenarioThroughput, CPUProfile: profile}), ScenarioThroughput)
	checkThroughput(t, v)
	if fi, err := os.Stat(profile); err != nil || fi.Size() == 0 {
		t.Errorf("manager CPU profile: %v", err)
	}
}

func TestSmokeThroughputPostgres(t *testing.T) {
	t.Parallel()
	if !pgtest.Available(t) {
		t.Skip("no PostgreSQL")
	}
	dsn := pgtest.NewDatabase(t)
	v := one(t, runSmoke(t, Config{Scenario: ScenarioThroughput, Store: StorePostgres, PostgresDSN: dsn}), ScenarioThroughput)
	if v["store"] != StorePostgres {
		t.Errorf("store = %v", v["store"])
	}
	checkThroughput(t, v)
}

func checkStep(t *testing.T, v map[string]any) {
	t.Helper()
	if num(t, v, "delegates") < 1 {
		t.Errorf("step without delegates: %v", v)
	}
	positive(t, v, "manager_rss_mb", "heartbeats_per_s")
	ordered(t, v, "pickup_p50_ms", "pickup_p99_ms", "pickup_max_ms")
	for _, k := range []string{"connect_s", "manager_cpu_pct", "cpu_pct_per_1000", "rss_mb_per_1000", "cpu_us_per_heartbeat"} {
		stat(t, v, k)
	}
}

func TestSmokeSwarm(t *testing.T) {
	t.Parallel()
	v := one(t, runSmoke(t, Config{Scenario: ScenarioSwarm}), ScenarioSwarm)
	steps, ok := v["steps"].([]any)
	if !ok || len(steps) < 2 {
		t.Fatalf("steps: %v", v["steps"])
	}
	prev := 0.0
	for _, s := range steps {
		st := s.(map[string]any)
		st["scenario"] = ScenarioSwarm
		checkStep(t, st)
		if n := num(t, st, "delegates"); n <= prev {
			t.Errorf("steps do not grow: %v after %v", n, prev)
		} else {
			prev = n
		}
	}
	positive(t, v, "idle_manager_rss_mb")
	healthy(t, v)
}

func TestSmokeScaling(t *testing.T) {
	t.Parallel()
	raw := runSmokeRaw(t, Config{Scenario: ScenarioScaling, Steps: []int{1, 3}})
	lines := decodeLines(t, raw)
	checkPlots(t, raw, map[string][]int{"pickup-vs-delegates.svg": {2, 2}, "manager-rss-vs-delegates.svg": {2}})
	if len(lines) != 2 {
		t.Fatalf("scaling printed %d lines, want one per step (2)", len(lines))
	}
	for i, v := range lines {
		if v["scenario"] != ScenarioScaling || num(t, v, "delegates") != float64([]int{1, 3}[i]) {
			t.Errorf("line %d: %v", i, v)
		}
		checkStep(t, v)
		healthy(t, v)
	}
}

func TestSmokeFootprint(t *testing.T) {
	t.Parallel()
	v := one(t, runSmoke(t, Config{Scenario: ScenarioFootprint}), ScenarioFootprint)
	positive(t, v, "start_to_connected_ms", "idle_rss_mb", "busy_rss_mb", "busy_pickup_p50_ms")
	if num(t, v, "busy_tasks") < 1 {
		t.Errorf("busy_tasks: %v", v["busy_tasks"])
	}
	if a, b := stat(t, v, "busy_pickup_p50_ms"), stat(t, v, "busy_pickup_max_ms"); a.Median > b.Median {
		t.Errorf("busy pickup p50 %v > max %v", a.Median, b.Median)
	}
	// No legate-delegate lies beside the test's binary.
	if v["delegate_binary"] != "legate" {
		t.Errorf("delegate_binary = %v, want legate", v["delegate_binary"])
	}
}

func TestLoggedBinary(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ log, want string }{
		{`time=x level=INFO msg="delegate starting" version=dev binary=/usr/local/bin/legate-delegate workdir=/w log_level=INFO`, "/usr/local/bin/legate-delegate"},
		{"time=x level=INFO msg=other binary=/x/y\ntime=x level=INFO msg=\"delegate starting\" binary=\"/my dir/legate\" workdir=/w", "/my dir/legate"},
		{`time=x level=INFO msg="delegate starting" version=dev workdir=/w`, ""},
		{"", ""},
	} {
		if got := LoggedBinary(tt.log); got != tt.want {
			t.Errorf("LoggedBinary(%q) = %q, want %q", tt.log, got, tt.want)
		}
	}
}

func TestSmokeFailover(t *testing.T) {
	t.Parallel()
	v := one(t, runSmoke(t, Config{Scenario: ScenarioFailover}), ScenarioFailover)
	positive(t, v, "failover_s", "failover_intervals")
	if num(t, v, "heartbeat_ms") <= 0 {
		t.Errorf("heartbeat_ms: %v", v["heartbeat_ms"])
	}
}

// TestSmokeSoak: the soak's line has its rate, slopes and samples. It is
// seconds long and asserts shape, never the slopes (a CI-size soak is
// `legate bench soak --duration 5m`).
func TestSmokeSoak(t *testing.T) {
	t.Parallel()
	raw := runSmokeRaw(t, Config{Scenario: ScenarioSoak})
	v := one(t, decodeLines(t, raw), ScenarioSoak)
	n := len(v["samples"].([]any))
	checkPlots(t, raw, map[string][]int{"soak-memory.svg": {n, n}, "soak-goroutines.svg": {n, n, n}, "soak-database.svg": {n}})
	positive(t, v, "tasks_per_s", "manager_rss_mb_last", "manager_goroutines_last", "manager_open_files_last")
	// Slopes may be negative (a few seconds of samples are noise).
	for _, k := range []string{"manager_rss_mb_per_h", "manager_goroutines_per_h", "manager_open_files_per_h", "bench_rss_mb_per_h", "bench_goroutines_per_h", "db_mb_per_h"} {
		raw, ok := v[k].(map[string]any)
		if !ok {
			t.Fatalf("soak: no %s", k)
		}
		if lo, mid, hi := num(t, raw, "min"), num(t, raw, "median"), num(t, raw, "max"); !(lo <= mid && mid <= hi) {
			t.Errorf("soak: %s is not min ≤ median ≤ max: %v", k, raw)
		}
	}
	samples, ok := v["samples"].([]any)
	if !ok || len(samples) < 2 {
		t.Fatalf("samples: %v, want at least 2", v["samples"])
	}
	first := samples[0].(map[string]any)
	if first["manager_rss_mb"].(float64) <= 0 || first["db_mb"].(float64) <= 0 {
		t.Errorf("first sample: %v", first)
	}
}

// TestMedianSlope: the slope of points on a line is the line's, and a
// burst in a few of them does not tilt it.
func TestMedianSlope(t *testing.T) {
	for _, tc := range []struct {
		xs, ys []float64
		want   float64
	}{
		{[]float64{0, 1, 2, 3}, []float64{5, 7, 9, 11}, 2},
		{[]float64{0, 1, 2}, []float64{4, 4, 4}, 0},
		{[]float64{1}, []float64{3}, 0},
		{[]float64{2, 2}, []float64{1, 5}, 0},
		// Flat at 10 with a burst at the end (least squares: 1.57).
		{[]float64{0, 1, 2, 3, 4, 5, 6, 7}, []float64{10, 10, 10, 10, 10, 10, 10, 20}, 0},
		// A rise of 1 per step under a burst in the middle.
		{[]float64{0, 1, 2, 3, 4, 5, 6, 7, 8}, []float64{0, 1, 2, 3, 40, 5, 6, 7, 8}, 1},
	} {
		if got := medianSlope(tc.xs, tc.ys); got != tc.want {
			t.Errorf("slope(%v, %v) = %v, want %v", tc.xs, tc.ys, got, tc.want)
		}
	}
}

// TestCommand runs the real command: --help lists every scenario, and a
// scenario prints exactly one line to stdout (progress goes to stderr).
func TestCommand(t *testing.T) {
	t.Parallel()
	help, err := exec.Command(binary, "bench", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("bench --help: %v\n%s", err, help)
	}
	for _, s := range Scenarios() {
		if !strings.Contains(string(help), s.Name) {
			t.Errorf("bench --help does not list %s", s.Name)
		}
	}
	for _, f := range []string{"--runs", "--smoke", "--store", "--postgres-dsn", "--delegates", "--queued-other", "--transport", "--steps", "--cpuprofile", "--heartbeat"} {
		if !strings.Contains(string(help), f) {
			t.Errorf("bench --help does not list %s", f)
		}
	}
	cmd := exec.Command(binary, "bench", "pickup", "--smoke", "--no-baseline")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("bench pickup --smoke: %v\n%s", err, stderr.String())
	}
	v := one(t, decodeLines(t, stdout.String()), ScenarioPickup)
	ordered(t, v, "p50_ms", "p99_ms", "max_ms")
	if _, ok := v["baseline_p50_ms"]; ok {
		t.Errorf("--no-baseline still measured the baseline: %v", v)
	}
	if !strings.Contains(stderr.String(), "pickup") {
		t.Errorf("no progress on stderr: %q", stderr.String())
	}
	out, err := exec.Command(binary, "bench", "nonsense").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "unknown scenario") {
		t.Errorf("bench nonsense: err %v, output %s", err, out)
	}
}

func TestStatOf(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want Stat
	}{
		{nil, Stat{}},
		{[]float64{3}, Stat{3, 3, 3}},
		{[]float64{5, 1, 3}, Stat{3, 1, 5}},
		{[]float64{4, 1, 3, 2}, Stat{2.5, 1, 4}},
		{[]float64{1.23456}, Stat{1.235, 1.235, 1.235}},
	} {
		if got := statOf(tc.in); got != tc.want {
			t.Errorf("statOf(%v) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func TestPercentile(t *testing.T) {
	var s []time.Duration
	for i := 100; i >= 1; i-- {
		s = append(s, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{{0.5, 50 * time.Millisecond}, {0.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}, {0, time.Millisecond}} {
		if got := percentile(s, tc.p); got != tc.want {
			t.Errorf("percentile(%v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if percentile(nil, 0.5) != 0 {
		t.Error("percentile of nothing is not 0")
	}
	if s[0] != 100*time.Millisecond {
		t.Error("percentile sorted its input")
	}
}

func TestReadUsage(t *testing.T) {
	u, err := readUsage(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if u.rssKB <= 0 || u.cpu < 0 {
		t.Errorf("usage of this process: %+v", u)
	}
	if _, err := os.Stat("/proc/self/io"); err == nil {
		if err := os.WriteFile(filepath.Join(t.TempDir(), "f"), make([]byte, 4096), 0o600); err != nil {
			t.Fatal(err)
		}
		after, err := readUsage(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if after.wchar-u.wchar < 4096 || after.syscw <= u.syscw {
			t.Errorf("write counters after writing 4 KiB: %+v, before %+v", after, u)
		}
	}
	if _, err := readUsage(1 << 30); err == nil {
		t.Error("usage of a missing process: no error")
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Scenario: "nope", Exe: "x"}, "unknown scenario"},
		{Config{Scenario: ScenarioPickup}, "no legate binary"},
		{Config{Scenario: ScenarioPickup, Exe: "x", Store: "mysql"}, "--store"},
		{Config{Scenario: ScenarioPickup, Exe: "x", Store: StorePostgres}, "--postgres-dsn"},
		{Config{Scenario: ScenarioPickup, Exe: "x", Transport: "carrier-pigeon"}, "--transport"},
		{Config{Scenario: ScenarioFailover, Exe: "x", Heartbeat: time.Millisecond}, "--heartbeat"},
		{Config{Scenario: ScenarioSwarm, Exe: "x", Steps: []int{0}}, "--steps"},
		{Config{Scenario: ScenarioPickup, Exe: "x", Runs: -1}, "--runs"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err %v, want %q", tc.cfg, err, tc.want)
		}
	}
	c := Config{Scenario: ScenarioSwarm, Exe: "x"}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Runs != 5 || c.Heartbeat != 10*time.Second || len(c.Steps) != 5 || c.Steps[4] != 10000 || c.Window != 30*time.Second {
		t.Errorf("swarm defaults: %+v", c)
	}
	c = Config{Scenario: ScenarioPickup, Exe: "x", Smoke: true}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.Runs != 1 || c.Tasks > 20 || c.Delegates > 5 {
		t.Errorf("smoke defaults are not small: %+v", c)
	}
}

// TestSmokeStorm: the storm prints a line with hints off, then one with
// hints on, each with every delegate back after the manager's restart.
// It asserts shape and that they came back, never timings.
func TestSmokeStorm(t *testing.T) {
	t.Parallel()
	lines := decodeLines(t, runSmokeRaw(t, Config{Scenario: ScenarioStorm}))
	if len(lines) != 2 || lines[0]["hints"] != false || lines[1]["hints"] != true {
		t.Fatalf("storm lines: %v; want hints off, then on", lines)
	}
	for _, v := range lines {
		if v["scenario"] != ScenarioStorm {
			t.Fatalf("scenario %v", v["scenario"])
		}
		positive(t, v, "back_s", "peak_rss_mb")
		back := v["back"].(map[string]any)
		if num(t, back, "min") != num(t, v, "delegates") {
			t.Errorf("hints %v: %v of %v delegates back", v["hints"], back, v["delegates"])
		}
	}
}
