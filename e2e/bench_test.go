package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/config"
	"github.com/legate-dev/legate/internal/delegate"
	"github.com/legate-dev/legate/internal/protocol"
)

// Benchmarks of the core path with real processes on loopback. Run:
//
//	(cd e2e && go test -run '^$' -bench . -benchtime 200x .)
//
// Each reports medians and tails as custom metrics; BENCHMARKS.md records
// the figures.

// delegateProc starts a delegate for a benchmark and waits until it is connected.
func (c *cluster) delegateProc(hostname string, extra ...string) *exec.Cmd {
	c.t.Helper()
	tok := c.token("bench-" + hostname)
	cmd := exec.Command(binary, "delegate")
	cmd.Env = append(append(baseEnv(), c.seed004Env(tok, "bench", "")...), "DELEGATE_HOSTNAME="+hostname)
	cmd.Env = append(cmd.Env, extra...)
	cmd.Dir = c.t.TempDir()
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c.waitConnected(hostname, "")
	return cmd
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration{}, d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s)-1) * p)
	return s[i]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// benchPickup measures queued → process started (and queued → finished)
// for tasks submitted one at a time to one idle delegate started with
// extra settings.
func benchPickup(b *testing.B, poll bool, extra ...string) {
	env := startCluster(b)
	if poll {
		extra = append(extra, "POLL_FOR_TASKS=true")
	}
	env.delegateProc("bench-host", extra...)
	ctx := context.Background()
	c, err := client.New(env.url, nil)
	if err != nil {
		b.Fatal(err)
	}
	c.SetSecret(env.apiKey)
	spec := protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "true"}}
	// Warm up.
	for i := 0; i < 5; i++ {
		if _, err := runAndWait(ctx, c, spec); err != nil {
			b.Fatal(err)
		}
	}
	var pickup, whole []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t, err := runAndWait(ctx, c, spec)
		if err != nil {
			b.Fatal(err)
		}
		if t.StartedAt == nil || t.Status != protocol.StatusSucceeded {
			b.Fatalf("task %+v", t)
		}
		pickup = append(pickup, t.StartedAt.Sub(t.CreatedAt))
		if t.FinishedAt != nil {
			whole = append(whole, t.FinishedAt.Sub(t.CreatedAt))
		}
	}
	b.StopTimer()
	b.ReportMetric(ms(percentile(pickup, 0.5)), "p50-pickup-ms")
	b.ReportMetric(ms(percentile(pickup, 0.99)), "p99-pickup-ms")
	b.ReportMetric(ms(percentile(pickup, 1)), "max-pickup-ms")
	b.ReportMetric(ms(percentile(whole, 0.5)), "p50-finished-ms")
}

func runAndWait(ctx context.Context, c *client.Client, spec protocol.TaskSpec) (protocol.Task, error) {
	t, err := c.SubmitTask(ctx, spec)
	if err != nil {
		return t, err
	}
	return c.StreamLogs(ctx, t.ID, true, func(protocol.LogStreamLine) error { return nil })
}

func BenchmarkPickupWebSocket(b *testing.B) { benchPickup(b, false) }
func BenchmarkPickupPolling(b *testing.B)   { benchPickup(b, true) }

// BenchmarkPickupSandbox is BenchmarkPickupWebSocket with each task in a
// sandbox of its own (the default where the host allows it; the other
// benchmarks run delegates without, see baseEnv).
func BenchmarkPickupSandbox(b *testing.B) {
	benchPickup(b, false, "LEGATE_TASK_SANDBOX=namespaces")
}

// BenchmarkDelegateStartToConnected measures exec of the delegate binary
// until it logs that its event channel is connected.
func BenchmarkDelegateStartToConnected(b *testing.B) {
	env := startCluster(b)
	tok := env.token("startup")
	var took []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		cmd := exec.Command(binary, "delegate")
		cmd.Env = append(baseEnv(), "ACCOUNT_ID="+env.account, "DELEGATE_TOKEN="+tok,
			"MANAGER_HOST_AND_PORT="+env.url, "DELEGATE_NAME=startup", "DELEGATE_HOSTNAME=startup-host")
		cmd.Dir = b.TempDir()
		stdout, err := cmd.StdoutPipe() // where the delegate logs
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		ok := false
		for sc.Scan() {
			if strings.Contains(sc.Text(), "connected to the manager") {
				took = append(took, time.Since(t0))
				ok = true
				break
			}
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if !ok {
			b.Fatal("delegate never connected")
		}
	}
	b.StopTimer()
	b.ReportMetric(ms(percentile(took, 0.5)), "p50-start-to-connected-ms")
	b.ReportMetric(ms(percentile(took, 1)), "max-start-to-connected-ms")
}

// BenchmarkDelegateIdleRSS reports the resident memory of a connected,
// idle delegate after it has settled for 3 s. It measures one delegate
// whatever b.N is.
func BenchmarkDelegateIdleRSS(b *testing.B) {
	env := startCluster(b)
	p := env.delegateProc("idle")
	time.Sleep(3 * time.Second)
	rss := rssKB(b, p.Process.Pid)
	b.ReportMetric(float64(rss)/1024, "idle-rss-MB")
}

func rssKB(b *testing.B, pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			f := strings.Fields(line)
			n, _ := strconv.Atoi(f[1])
			return n
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// BenchmarkPickupBaseline3sPoller is the baseline for the pickup figures:
// a delegate that asks for work every 3 s without holding the request open,
// as the original's polling fallback does. It speaks the real protocol from
// the benchmark (register, poll with wait 0, acquire, report started) and
// starts no process, so it measures the polling cost alone. At most 20
// tasks are measured whatever b.N is (each takes up to 3 s).
func BenchmarkPickupBaseline3sPoller(b *testing.B) {
	env := startCluster(b)
	tok := env.token("baseline")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d, err := client.New(env.url, nil)
	if err != nil {
		b.Fatal(err)
	}
	reg, err := d.Register(ctx, protocol.RegisterRequest{AccountID: env.account, Token: tok, Name: "baseline", Hostname: "baseline-host", IP: "127.0.0.1"})
	if err != nil {
		b.Fatal(err)
	}
	d.SetSecret(reg.Session)
	// Heartbeats on the manager's interval keep it connected between polls
	// (the original heartbeats apart from polling too).
	go func() {
		for ctx.Err() == nil {
			_, _ = d.Heartbeat(ctx, protocol.Heartbeat{})
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(reg.HeartbeatIntervalMS) * time.Millisecond * 4 / 5):
			}
		}
	}()
	go func() {
		for ctx.Err() == nil {
			evs, err := d.Poll(ctx, 0)
			if err == nil {
				for _, ev := range evs.Events {
					if ev.Kind != protocol.EventTaskAvailable {
						continue
					}
					acq, err := d.Acquire(ctx, ev.TaskID)
					if err != nil {
						continue
					}
					_ = d.Started(ctx, ev.TaskID, protocol.StartedRequest{Epoch: acq.Epoch})
					zero := 0
					_, _ = d.Result(ctx, ev.TaskID, protocol.ResultRequest{Epoch: acq.Epoch, Status: protocol.StatusSucceeded, ExitCode: &zero})
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(3 * time.Second):
			}
		}
	}()
	c, err := client.New(env.url, nil)
	if err != nil {
		b.Fatal(err)
	}
	c.SetSecret(env.apiKey)
	spec := protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "true"}}
	n := min(b.N, 20)
	var pickup, whole []time.Duration
	b.ResetTimer()
	for i := 0; i < n; i++ {
		t, err := runAndWait(ctx, c, spec)
		if err != nil {
			b.Fatal(err)
		}
		if t.StartedAt == nil {
			b.Fatalf("task %+v", t)
		}
		pickup = append(pickup, t.StartedAt.Sub(t.CreatedAt))
		// Submit at a spread of phases over the whole 3 s poll cycle.
		time.Sleep(time.Duration(i*1379%3000) * time.Millisecond)
	}
	b.StopTimer()
	b.ReportMetric(ms(percentile(pickup, 0.5)), "p50-pickup-ms")
	b.ReportMetric(ms(percentile(pickup, 0.99)), "p99-pickup-ms")
	b.ReportMetric(ms(percentile(pickup, 1)), "max-pickup-ms")
	b.ReportMetric(ms(percentile(whole, 0.5)), "p50-finished-ms")
}

// BenchmarkFailoverAfterKill measures, with a 1 s heartbeat interval, the
// time from kill -9 of the delegate running a retryable task to the task's
// process running on the other replica (started_at of the second attempt).
// At most 5 kills are measured whatever b.N is. Its connection closes with
// the process: the manager cuts the lease to one interval.
func BenchmarkFailoverAfterKill(b *testing.B) { benchFailover(b, syscall.SIGKILL) }

// BenchmarkFailoverAfterStop is BenchmarkFailoverAfterKill with SIGSTOP:
// the delegate goes silent and its connection stays open, so the task
// fails over when its lease (three intervals from the last contact) ends.
func BenchmarkFailoverAfterStop(b *testing.B) { benchFailover(b, syscall.SIGSTOP) }

func benchFailover(b *testing.B, sig syscall.Signal) {
	started := time.Now()
	env := startCluster(b, "--heartbeat-interval", "1s")
	tok := env.token("failover")
	startReplica := func(host string) *exec.Cmd {
		cmd := exec.Command(binary, "delegate")
		cmd.Env = append(append(baseEnv(), env.seed004Env(tok, "failover", "")...), "DELEGATE_HOSTNAME="+host)
		cmd.Dir = b.TempDir()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		env.waitConnected(host, "")
		return cmd
	}
	procs := map[string]*exec.Cmd{"fo-a": startReplica("fo-a"), "fo-b": startReplica("fo-b")}
	ctx := context.Background()
	c, err := client.New(env.url, nil)
	if err != nil {
		b.Fatal(err)
	}
	c.SetSecret(env.apiKey)
	n := min(b.N, 5)
	var took []time.Duration
	b.ResetTimer()
	for i := 0; i < n; i++ {
		marker := b.TempDir() + "/go"
		task, err := c.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskShell, Retries: 1,
			Shell: &protocol.ShellSpec{Script: "while [ ! -e " + marker + " ]; do sleep 0.01; done"}})
		if err != nil {
			b.Fatal(err)
		}
		var first protocol.Task
		eventually(b, 10*time.Second, "first attempt running", func() bool {
			first, _ = c.GetTask(ctx, task.ID)
			return first.StartedAt != nil
		})
		victim := first.DelegateHostname
		// A manager gives delegates one lease (3 intervals) after its
		// start before it declares their tasks lost: not what is
		// measured here.
		time.Sleep(time.Until(started.Add(3 * time.Second)))
		_ = procs[victim].Process.Signal(sig)
		killed := time.Now()
		if sig == syscall.SIGKILL {
			_ = procs[victim].Wait()
		}
		var second protocol.Task
		eventually(b, 30*time.Second, "second attempt running", func() bool {
			second, _ = c.GetTask(ctx, task.ID)
			return second.Attempts == 2 && second.StartedAt != nil
		})
		took = append(took, second.StartedAt.Sub(killed))
		if err := os.WriteFile(marker, nil, 0o600); err != nil {
			b.Fatal(err)
		}
		if _, err := c.StreamLogs(ctx, task.ID, true, func(protocol.LogStreamLine) error { return nil }); err != nil {
			b.Fatal(err)
		}
		if sig != syscall.SIGKILL {
			_ = procs[victim].Process.Kill()
			_ = procs[victim].Wait()
		}
		procs[victim] = startReplica(victim)
	}
	b.StopTimer()
	b.ReportMetric(percentile(took, 0.5).Seconds(), "p50-failover-s")
	b.ReportMetric(percentile(took, 1).Seconds(), "max-failover-s")
	b.ReportMetric(percentile(took, 0.5).Seconds()/1.0, "p50-heartbeat-intervals")
}

// BenchmarkReconnect1000AfterManagerRestart runs 1,000 real delegate agents
// (internal/delegate, in this process) against a manager process, restarts
// the manager (SIGTERM, same address and data) and measures the time until
// the manager lists all 1,000 as connected again. One measurement whatever
// b.N is. LEGATE_BENCH_DELEGATES overrides the count.
func BenchmarkReconnect1000AfterManagerRestart(b *testing.B) {
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("LEGATE_BENCH_DELEGATES")); err == nil && v > 0 {
		n = v
	}
	env := startCluster(b, "--heartbeat-interval", "2s")
	tok := env.token("swarm")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	b.Cleanup(func() { cancel(); wg.Wait() })
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for i := 0; i < n; i++ {
		a, err := delegate.New(delegate.Options{
			Config: config.Delegate{AccountID: env.account, Token: tok, ManagerURLs: []string{env.url},
				Name: "swarm", Hostname: fmt.Sprintf("swarm-%04d", i), Type: "SHELL"},
			WorkDir: b.TempDir(), Grace: time.Second, Logger: quiet, IP: "127.0.0.1", TaskEnv: []string{},
			// They run no task: no trial of the sandbox at each start.
			TaskSandbox: "off", AllowMixedScopes: true,
		})
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = a.Run(ctx) }()
	}
	c, err := client.New(env.url, nil)
	if err != nil {
		b.Fatal(err)
	}
	c.SetSecret(env.apiKey)
	last := time.Now()
	connected := func() int {
		dl, err := c.ListDelegates(ctx)
		if err != nil {
			return -1
		}
		k, ws := 0, 0
		for _, d := range dl.Delegates {
			if d.Status == protocol.DelegateConnected {
				k++
				if d.Connection == protocol.ConnWebSocket {
					ws++
				}
			}
		}
		if time.Since(last) > 5*time.Second {
			b.Logf("%d of %d connected (%d over the WebSocket)", k, n, ws)
			last = time.Now()
		}
		return ws
	}
	eventually(b, 2*time.Minute, "all delegates connected", func() bool { return connected() == n })
	b.ResetTimer()
	env.mgr.signal(syscall.SIGTERM)
	env.mgr.wait(30 * time.Second)
	restarted := time.Now()
	env.startManager(strings.TrimPrefix(env.url, "http://"), "--heartbeat-interval", "2s")
	c.SetSecret(env.apiKey)
	eventually(b, 2*time.Minute, "all delegates reconnected", func() bool { return connected() == n })
	took := time.Since(restarted)
	b.StopTimer()
	b.ReportMetric(took.Seconds(), "reconnect-all-s")
	b.ReportMetric(float64(n), "delegates")
}
