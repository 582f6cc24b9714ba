//go:build !delegate

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/bench"
)

func newBenchCmd() *cobra.Command {
	var cfg bench.Config
	var logLevel, plotDir string
	var list strings.Builder
	for _, s := range bench.Scenarios() {
		fmt.Fprintf(&list, "  %-11s %s\n", s.Name, s.What)
	}
	cmd := &cobra.Command{
		Use:   "bench SCENARIO",
		Short: "Run a whole-system benchmark scenario and print one JSON summary line",
		Long: `Run a benchmark scenario against a manager started for it (this binary,
re-executed as "legate manager" on a loopback port with a throwaway data
directory), driven by simulated delegates speaking the real protocol or by
real delegate processes. Every figure is the median of --runs runs with
their min and max. The summary goes to stdout as one JSON line (scaling:
one per step); progress goes to stderr. docs/bench.md explains each number.

Scenarios:
` + list.String() + `
Sizes left at 0 take the scenario's default (with --smoke: a seconds-long
tiny size, as CI runs it). --plot DIR also draws the scenario's curves as
SVG files in DIR (swarm, scaling, throughput, soak); "legate bench plot"
draws them from saved summary lines, e.g. several throughput lines.`,
		Example: `  legate bench pickup --delegates 1000 --queued-other 10000
  legate bench pickup --transport polling --delegates 100
  legate bench throughput --delegates 50 --cpuprofile manager.pprof
  legate bench throughput --store postgres --postgres-dsn "$(bash scripts/pg-start)"
  legate bench swarm --steps 1,10,100,1000,10000
  legate bench footprint
  legate bench failover --heartbeat 10s
  legate bench soak --delegates 100 --rate 200 --duration 1h
  legate bench scaling --steps 1,10,100,1000,10000 --plot docs/bench
  legate bench scaling --smoke`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: scenarioNames(),
		RunE: func(cmd *cobra.Command, args []string) error {
			log, err := newLogger(logLevel)
			if err != nil {
				return err
			}
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("find this binary to run as the manager: %w", err)
			}
			cfg.Scenario, cfg.Exe = args[0], exe
			if plotDir == "" {
				return bench.Run(cmd.Context(), cfg, cmd.OutOrStdout(), log)
			}
			var lines bytes.Buffer
			if err := bench.Run(cmd.Context(), cfg, io.MultiWriter(cmd.OutOrStdout(), &lines), log); err != nil {
				return err
			}
			return writePlots(cmd, plotDir, &lines)
		},
	}
	cmd.AddCommand(newBenchPlotCmd())
	f := cmd.Flags()
	f.IntVar(&cfg.Runs, "runs", 0, "repetitions; each figure is their median with min and max (default 5; smoke 1)")
	f.BoolVar(&cfg.Smoke, "smoke", false, "tiny sizes that run in seconds (CI)")
	f.StringVar(&cfg.Store, "store", "sqlite", "manager store: sqlite or postgres")
	f.StringVar(&cfg.PostgresDSN, "postgres-dsn", "", "with --store postgres: a server where the bench creates (and drops) a database per run")
	f.DurationVar(&cfg.Heartbeat, "heartbeat", 0, "manager heartbeat interval (default 10s; failover 1s)")
	f.IntVar(&cfg.Delegates, "delegates", 0, "pickup, throughput, soak, storm: simulated delegates (default pickup 1, throughput 10, soak 100, storm 10000)")
	f.StringVar(&cfg.Transport, "transport", "websocket", "pickup, swarm: the delegates' event channel: websocket or polling")
	f.BoolVar(&cfg.Real, "real", false, "pickup: real legate delegate processes (the task's bash is forked) instead of simulated ones")
	f.IntVar(&cfg.QueuedOther, "queued-other", 0, "pickup, swarm: tasks kept queued for selectors no delegate takes")
	f.IntVar(&cfg.Tasks, "tasks", 0, "tasks measured per run (pickup 200 one at a time; throughput 5000; swarm 50 pickups per step)")
	f.IntVar(&cfg.Warmup, "warmup", 0, "unmeasured tasks per run before measuring")
	f.IntVar(&cfg.Inflight, "inflight", 0, "throughput: tasks submitted and not finished at once (default 256)")
	f.IntVar(&cfg.BaselineTasks, "baseline-tasks", 0, "pickup: tasks per run for the 3 s poller baseline (default 10)")
	f.BoolVar(&cfg.NoBaseline, "no-baseline", false, "pickup: skip the baseline")
	f.DurationVar(&cfg.BaselinePeriod, "baseline-period", 0, "pickup: the baseline's poll period (default 3s)")
	f.IntSliceVar(&cfg.Steps, "steps", nil, "swarm, scaling: delegate counts (default 1,10,100,1000,10000)")
	f.DurationVar(&cfg.Window, "window", 0, "swarm, scaling: how long manager CPU is measured per step (default 3 heartbeats)")
	f.IntVar(&cfg.SourceIPs, "source-ips", 0, "spread simulated delegates' connections over 127.0.0.1..N (default 4)")
	f.IntVar(&cfg.Workers, "workers", 0, "goroutines that acquire and report offered tasks for the swarm (default 64)")
	f.BoolVar(&cfg.HTTPReports, "http-reports", false, "simulated delegates acquire and report started and results over HTTP, as before protocol 5, not on the WebSocket")
	f.IntVar(&cfg.Connect, "connect", 0, "registrations at once while a swarm grows (default 32)")
	f.DurationVar(&cfg.Settle, "settle", 0, "footprint: idle time before the idle RSS is read (default 3s)")
	f.IntVar(&cfg.BusyTasks, "busy-tasks", 0, "footprint: tasks run at once for the busy RSS (default 10)")
	f.StringVar(&cfg.BusyScript, "busy-script", "", "footprint: each busy task's script (default 'sleep 2')")
	f.StringVar(&cfg.DelegateBinary, "delegate-binary", "", "footprint: auto (default) runs the delegate as legate-delegate when that lies beside this binary and is the same build, off as this binary (LEGATE_DELEGATE_BINARY)")
	f.IntVar(&cfg.Rate, "rate", 0, "soak: tasks submitted per second, steadily (default 200)")
	f.DurationVar(&cfg.Duration, "duration", 0, "soak: how long (default 1h; a CI-size run: 5m)")
	f.DurationVar(&cfg.Sample, "sample", 0, "soak: how often RSS, goroutines, open files and the database size are read (default 10s)")
	f.IntVar(&cfg.Admissions, "admissions", 0, "storm: the manager's --admissions with hints on (default its own, 64)")
	f.DurationVar(&cfg.StormTimeout, "storm-timeout", 0, "storm: how long to wait for every delegate to be back after the restart (default 10m)")
	f.StringVar(&cfg.CPUProfile, "cpuprofile", "", "throughput: write the manager's pprof CPU profile of the last run here")
	f.StringVar(&cfg.LogLevel, "manager-log-level", "warn", "the manager process's log level")
	f.StringVar(&logLevel, "log-level", "info", "progress log level (stderr)")
	f.StringVar(&plotDir, "plot", "", "also draw the scenario's curves as SVG files in this directory (swarm, scaling, throughput, soak)")
	return cmd
}

func newBenchPlotCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "plot [FILE...]",
		Short: "Draw SVG curves from saved summary lines of legate bench",
		Long: `Read summary lines that legate bench printed (from the files, or from
stdin when none is given or a file is "-") and draw their curves as SVG
files in --out:

  pickup-vs-delegates.svg       pickup p50 and p99 against connected
                                delegates (swarm or scaling lines)
  manager-rss-vs-delegates.svg  the manager's RSS against them
  throughput-vs-delegates.svg   tasks/s against delegates (one throughput
                                line per size; a series per store)
  soak-memory.svg, soak-goroutines.svg, soak-database.svg
                                a soak's readings over time

Each point is the median of the runs, with their min and max as an error
bar. Lines of other scenarios are skipped.`,
		Example: `  for n in 1 10 100 1000; do legate bench throughput --delegates $n; done > throughput.jsonl
  legate bench plot throughput.jsonl --out docs/bench
  legate bench soak --duration 1h | tee soak.jsonl | legate bench plot --out docs/bench`,
		RunE: func(cmd *cobra.Command, args []string) error {
			var in []io.Reader
			for _, name := range args {
				if name == "-" {
					in = append(in, cmd.InOrStdin())
					continue
				}
				f, err := os.Open(name)
				if err != nil {
					return err
				}
				defer f.Close()
				// Each file ends its last line.
				in = append(in, f, strings.NewReader("\n"))
			}
			if len(in) == 0 {
				in = append(in, cmd.InOrStdin())
			}
			return writePlots(cmd, dir, io.MultiReader(in...))
		},
	}
	cmd.Flags().StringVarP(&dir, "out", "o", ".", "directory the SVG files are written to (made if missing)")
	return cmd
}

// writePlots draws the curves of the summary lines in r into dir and
// says which files it wrote.
func writePlots(cmd *cobra.Command, dir string, r io.Reader) error {
	plots, err := bench.Plots(r)
	if err != nil {
		return err
	}
	paths, err := bench.WritePlots(dir, plots)
	for _, p := range paths {
		fmt.Fprintln(cmd.ErrOrStderr(), "wrote", p)
	}
	return err
}

func scenarioNames() []string {
	var out []string
	for _, s := range bench.Scenarios() {
		out = append(out, s.Name)
	}
	return out
}
