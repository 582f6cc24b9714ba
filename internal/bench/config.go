package bench

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Scenario names, in the order --help lists them.
const (
	ScenarioPickup     = "pickup"
	ScenarioThroughput = "throughput"
	ScenarioSwarm      = "swarm"
	ScenarioScaling    = "scaling"
	ScenarioFootprint  = "footprint"
	ScenarioFailover   = "failover"
	ScenarioSoak       = "soak"
	ScenarioStorm      = "storm"
)

// ScenarioInfo names a scenario and says what it measures.
type ScenarioInfo struct{ Name, What string }

// Scenarios lists every scenario with a one-line description.
func Scenarios() []ScenarioInfo {
	return []ScenarioInfo{
		{ScenarioPickup, "queued → started latency (p50/p99/max) with N delegates and a queue for other selectors, vs a 3 s poller"},
		{ScenarioThroughput, "trivial tasks per second, submit → result, simulated delegates, SQLite or PostgreSQL"},
		{ScenarioSwarm, "manager RSS, CPU, heartbeat cost and pickup as simulated delegates grow (steps); one line"},
		{ScenarioScaling, "the swarm's steps, one line per step (the scaling curve)"},
		{ScenarioFootprint, "a real delegate process: start → connected, idle RSS, RSS while running tasks"},
		{ScenarioFailover, "kill -9 of a real delegate running a retryable task → running again on another"},
		{ScenarioStorm, "N simulated delegates dropped at once by a manager killed and started again: time until all are back, peak RSS and CPU, Retry-After answers; hints off, then on"},
		{ScenarioSoak, "a steady task rate with N delegates for a duration: RSS, goroutines, open files, database size and their slopes"},
	}
}

// Transports of simulated delegates.
const (
	TransportWebSocket = "websocket"
	TransportPolling   = "polling"
)

// Stores the manager can use.
const (
	StoreSQLite   = "sqlite"
	StorePostgres = "postgres"
)

// Config is one invocation of a scenario. Zero values mean the scenario's
// default (or its smoke default with Smoke); Resolve fills them in.
type Config struct {
	Scenario string
	// Exe is the legate binary run as the manager and as real delegates.
	Exe string
	// Runs is how many times the measurement is repeated (fresh manager
	// each time); every figure is the median of the runs with min and max.
	Runs int
	// Smoke shrinks every size to something that runs in seconds.
	Smoke bool

	Store       string
	PostgresDSN string
	// Heartbeat is the manager's heartbeat interval.
	Heartbeat time.Duration

	// Delegates connected (pickup, throughput).
	Delegates int
	// Transport of the simulated delegates (pickup, swarm).
	Transport string
	// Real runs real `legate delegate` processes instead of simulated
	// delegates (pickup): the measured pickup then includes the fork/exec
	// of the task's process.
	Real bool
	// QueuedOther is how many tasks wait for selectors no delegate has
	// (pickup, swarm).
	QueuedOther int
	// Tasks measured per run (pickup: one at a time; throughput: in total;
	// swarm: pickups per step).
	Tasks int
	// Warmup tasks per run, not measured.
	Warmup int
	// Inflight bounds the tasks submitted and not yet finished (throughput).
	Inflight int

	// BaselineTasks measured per run with the 3 s poller (pickup); 0 with
	// NoBaseline skips it.
	BaselineTasks int
	NoBaseline    bool
	// BaselinePeriod is the poller's period (3 s, the original's fallback).
	BaselinePeriod time.Duration

	// Steps are the swarm sizes (swarm, scaling).
	Steps []int
	// Window is how long manager CPU is measured at each step (swarm).
	Window time.Duration
	// SourceIPs spreads the swarm's connections over 127.0.0.1..N.
	SourceIPs int
	// Workers bound the goroutines that acquire and report offered tasks.
	Workers int
	// HTTPReports makes the simulated delegates acquire and report over
	// HTTP even when the manager takes frames on the WebSocket.
	HTTPReports bool
	// Connect bounds concurrent registrations while a swarm grows.
	Connect int

	// Settle is how long a real delegate idles before its RSS is read
	// (footprint).
	Settle time.Duration
	// BusyTasks run at once on the real delegate, each BusyScript (footprint).
	BusyTasks  int
	BusyScript string
	// DelegateBinary is the real delegate's LEGATE_DELEGATE_BINARY
	// (footprint): "" or "auto" runs it as legate-delegate when that lies
	// beside the binary, "off" as the binary itself.
	DelegateBinary string

	// Rate is the steady task rate of the soak, tasks per second; Duration
	// how long it lasts; Sample how often it reads the figures.
	Rate     int
	Duration time.Duration
	Sample   time.Duration
	// StormTimeout bounds how long the storm waits for the fleet to be
	// back after the manager started again.
	StormTimeout time.Duration
	// Admissions is the manager's --admissions with hints on (0: its
	// default).
	Admissions int

	// CPUProfile, when set, is where the manager process writes a pprof
	// CPU profile of the last run (throughput).
	CPUProfile string
	// LogLevel of the manager process.
	LogLevel string
}

// defaults per scenario: full size and smoke size.
func (c *Config) applyDefaults() {
	def := func(p *int, full, smoke int) {
		if *p == 0 {
			*p = full
			if c.Smoke {
				*p = smoke
			}
		}
	}
	defD := func(p *time.Duration, full, smoke time.Duration) {
		if *p == 0 {
			*p = full
			if c.Smoke {
				*p = smoke
			}
		}
	}
	if c.Scenario == ScenarioSoak || c.Scenario == ScenarioStorm {
		def(&c.Runs, 1, 1) // an hour each; a storm takes minutes per mode
	}
	def(&c.Runs, 5, 1)
	if c.Store == "" {
		c.Store = StoreSQLite
	}
	if c.Transport == "" {
		c.Transport = TransportWebSocket
	}
	if c.LogLevel == "" {
		c.LogLevel = "warn"
	}
	def(&c.Workers, 64, 8)
	def(&c.Connect, 32, 4)
	def(&c.SourceIPs, 4, 1)
	switch c.Scenario {
	case ScenarioPickup:
		defD(&c.Heartbeat, 10*time.Second, time.Second)
		def(&c.Delegates, 1, 2)
		def(&c.Tasks, 200, 10)
		def(&c.Warmup, 5, 1)
		def(&c.BaselineTasks, 10, 1)
		defD(&c.BaselinePeriod, 3*time.Second, 300*time.Millisecond)
		if c.NoBaseline {
			c.BaselineTasks = 0
		}
	case ScenarioThroughput:
		defD(&c.Heartbeat, 10*time.Second, time.Second)
		def(&c.Delegates, 10, 2)
		def(&c.Tasks, 5000, 100)
		def(&c.Warmup, 50, 5)
		def(&c.Inflight, 256, 16)
		if c.Workers < c.Inflight {
			c.Workers = c.Inflight
		}
	case ScenarioSwarm, ScenarioScaling:
		defD(&c.Heartbeat, 10*time.Second, 500*time.Millisecond)
		if len(c.Steps) == 0 {
			c.Steps = []int{1, 10, 100, 1000, 10000}
			if c.Smoke {
				c.Steps = []int{1, 5}
			}
		}
		def(&c.Tasks, 50, 5)
		def(&c.Warmup, 3, 1)
		defD(&c.Window, 3*c.Heartbeat, time.Second)
	case ScenarioFootprint:
		defD(&c.Heartbeat, 10*time.Second, time.Second)
		defD(&c.Settle, 3*time.Second, 500*time.Millisecond)
		def(&c.BusyTasks, 10, 10)
		if c.BusyScript == "" {
			c.BusyScript = "sleep 2"
			if c.Smoke {
				c.BusyScript = "sleep 0.5"
			}
		}
	case ScenarioFailover:
		defD(&c.Heartbeat, time.Second, 250*time.Millisecond)
	case ScenarioStorm:
		defD(&c.Heartbeat, 10*time.Second, time.Second)
		def(&c.Delegates, 10000, 20)
		defD(&c.StormTimeout, 10*time.Minute, time.Minute)
	case ScenarioSoak:
		defD(&c.Heartbeat, 10*time.Second, time.Second)
		def(&c.Delegates, 100, 3)
		def(&c.Rate, 200, 20)
		defD(&c.Duration, time.Hour, 4*time.Second)
		defD(&c.Sample, 10*time.Second, 500*time.Millisecond)
	}
}

// Validate resolves defaults and checks the configuration.
func (c *Config) Validate() error {
	list := Scenarios()
	if !slices.ContainsFunc(list, func(s ScenarioInfo) bool { return s.Name == c.Scenario }) {
		names := make([]string, len(list))
		for i, s := range list {
			names[i] = s.Name
		}
		return fmt.Errorf("unknown scenario %q (one of %s)", c.Scenario, strings.Join(names, ", "))
	}
	if c.Exe == "" {
		return errors.New("no legate binary to run as the manager")
	}
	c.applyDefaults()
	switch {
	case c.Runs < 1 || c.Runs > 1000:
		return fmt.Errorf("--runs %d: between 1 and 1000", c.Runs)
	case c.Store != StoreSQLite && c.Store != StorePostgres:
		return fmt.Errorf("--store %q: sqlite or postgres", c.Store)
	case c.Store == StorePostgres && c.PostgresDSN == "":
		return errors.New("--store postgres needs --postgres-dsn (a server where the bench may create databases; scripts/pg-start prints one)")
	case c.Transport != TransportWebSocket && c.Transport != TransportPolling:
		return fmt.Errorf("--transport %q: websocket or polling", c.Transport)
	case c.Heartbeat < 100*time.Millisecond:
		return fmt.Errorf("--heartbeat %s: at least 100ms", c.Heartbeat)
	case c.Delegates < 0 || c.Delegates > 100000:
		return fmt.Errorf("--delegates %d: between 1 and 100000", c.Delegates)
	case c.QueuedOther < 0 || c.QueuedOther > 1000000:
		return fmt.Errorf("--queued-other %d: between 0 and 1000000", c.QueuedOther)
	case c.Tasks < 0 || c.Tasks > 10000000:
		return fmt.Errorf("--tasks %d: between 1 and 10000000", c.Tasks)
	case c.Real && c.Delegates > 50:
		return fmt.Errorf("--real with %d delegates: at most 50 real delegate processes", c.Delegates)
	case c.DelegateBinary != "" && c.DelegateBinary != "auto" && c.DelegateBinary != "off":
		return fmt.Errorf("--delegate-binary %q: auto or off", c.DelegateBinary)
	case c.SourceIPs < 1 || c.SourceIPs > 250:
		return fmt.Errorf("--source-ips %d: between 1 and 250", c.SourceIPs)
	case c.Workers < 1 || c.Workers > 10000:
		return fmt.Errorf("--workers %d: between 1 and 10000", c.Workers)
	case c.Rate < 0 || c.Rate > 100000:
		return fmt.Errorf("--rate %d: between 1 and 100000 tasks per second", c.Rate)
	case c.Duration < 0:
		return fmt.Errorf("--duration %s: a positive duration such as 5m", c.Duration)
	case c.Scenario == ScenarioSoak && c.Sample > c.Duration/2:
		return fmt.Errorf("--sample %s: at most half of --duration %s, so the slope has samples", c.Sample, c.Duration)
	}
	for _, n := range c.Steps {
		if n < 1 || n > 100000 {
			return fmt.Errorf("--steps: %d is not between 1 and 100000", n)
		}
	}
	return nil
}
