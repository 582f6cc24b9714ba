package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/bench"
)

func newBenchCmd() *cobra.Command {
	var cfg bench.Config
	var logLevel string
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
tiny size, as CI runs it).`,
		Example: `  legate bench pickup --delegates 1000 --queued-other 10000
  legate bench pickup --transport polling --delegates 100
  legate bench throughput --delegates 50 --cpuprofile manager.pprof
  legate bench throughput --store postgres --postgres-dsn "$(bash scripts/pg-start)"
  legate bench swarm --steps 1,10,100,1000,10000
  legate bench footprint
  legate bench failover --heartbeat 10s
  legate bench soak --delegates 100 --rate 200 --duration 1h
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
			return bench.Run(cmd.Context(), cfg, cmd.OutOrStdout(), log)
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Runs, "runs", 0, "repetitions; each figure is their median with min and max (default 5; smoke 1)")
	f.BoolVar(&cfg.Smoke, "smoke", false, "tiny sizes that run in seconds (CI)")
	f.StringVar(&cfg.Store, "store", "sqlite", "manager store: sqlite or postgres")
	f.StringVar(&cfg.PostgresDSN, "postgres-dsn", "", "with --store postgres: a server where the bench creates (and drops) a database per run")
	f.DurationVar(&cfg.Heartbeat, "heartbeat", 0, "manager heartbeat interval (default 10s; failover 1s)")
	f.IntVar(&cfg.Delegates, "delegates", 0, "pickup, throughput, soak: simulated delegates (default pickup 1, throughput 10, soak 100)")
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
	f.IntVar(&cfg.Connect, "connect", 0, "registrations at once while a swarm grows (default 32)")
	f.DurationVar(&cfg.Settle, "settle", 0, "footprint: idle time before the idle RSS is read (default 3s)")
	f.IntVar(&cfg.BusyTasks, "busy-tasks", 0, "footprint: tasks run at once for the busy RSS (default 10)")
	f.StringVar(&cfg.BusyScript, "busy-script", "", "footprint: each busy task's script (default 'sleep 2')")
	f.IntVar(&cfg.Rate, "rate", 0, "soak: tasks submitted per second, steadily (default 200)")
	f.DurationVar(&cfg.Duration, "duration", 0, "soak: how long (default 1h; a CI-size run: 5m)")
	f.DurationVar(&cfg.Sample, "sample", 0, "soak: how often RSS, goroutines, open files and the database size are read (default 10s)")
	f.StringVar(&cfg.CPUProfile, "cpuprofile", "", "throughput: write the manager's pprof CPU profile of the last run here")
	f.StringVar(&cfg.LogLevel, "manager-log-level", "warn", "the manager process's log level")
	f.StringVar(&logLevel, "log-level", "info", "progress log level (stderr)")
	return cmd
}

func scenarioNames() []string {
	var out []string
	for _, s := range bench.Scenarios() {
		out = append(out, s.Name)
	}
	return out
}
