package store

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// BenchmarkTaskWrites measures the store's writes of a task's life as the
// throughput scenario makes them (create, broadcast, claim with a capacity,
// start, complete), $LEGATE_BENCH_WORKERS (default 64) tasks at once over
// 10 instances, with writes sharing transactions (grouped) and each in its
// own (alone). One op is one task. On PostgreSQL the server is the test
// binary's (fsync off) unless $LEGATE_TEST_POSTGRES names a durable one:
//
//	DSN=$(bash scripts/pg-start)
//	LEGATE_TEST_POSTGRES="$DSN" go test -run '^$' -bench TaskWrites -benchtime 5000x ./internal/store/
func BenchmarkTaskWrites(b *testing.B) {
	workers := envInt(b, "LEGATE_BENCH_WORKERS", 64)
	for _, bk := range backends {
		for _, mode := range []string{"grouped", "alone"} {
			b.Run(bk.name+"/"+mode, func(b *testing.B) {
				if bk.name == "postgres" && !pgAvailable(b) {
					b.Skip("no PostgreSQL")
				}
				s := bk.open(b)
				if mode == "alone" {
					s.lanes = nil
				}
				benchTaskWrites(b, s, workers)
			})
		}
	}
}

func benchTaskWrites(b *testing.B, s *Store, workers int) {
	ctx := context.Background()
	var next atomic.Int64
	var failed atomic.Int64
	var firstErr sync.Once
	start := time.Now()
	cpu0 := cpuTime()
	io0 := procIO()
	b.ResetTimer()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			inst := fmt.Sprintf("i%d", w%10)
			for {
				n := next.Add(1)
				if n > int64(b.N) {
					return
				}
				id := fmt.Sprintf("t%09d", n)
				now := time.Now()
				err := func() error {
					task := newTask(id, "acc1", now)
					task.Spec.SecretEnv = nil
					if err := s.CreateTask(ctx, task); err != nil {
						return err
					}
					if err := s.Broadcast(ctx, `{"kind":"task","task":"`+id+`"}`); err != nil {
						return err
					}
					c := claimFor(id, inst)
					c.Capacity = 1000
					claimed, err := s.ClaimTask(ctx, c, now)
					if err != nil {
						return err
					}
					if _, err := s.StartTask(ctx, id, claimed.Epoch, Holder{}, now); err != nil {
						return err
					}
					_, err = s.CompleteTask(ctx, id, claimed.Epoch, Result{Status: protocol.StatusSucceeded, ExitCode: new(int)}, now)
					return err
				}()
				if err != nil {
					failed.Add(1)
					firstErr.Do(func() { b.Error(err) })
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "tasks/s")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/task")
	if io1 := procIO(); io1.ok && io0.ok {
		b.ReportMetric(float64(io1.wchar-io0.wchar)/1024/float64(b.N), "written-KiB/task")
		b.ReportMetric(float64(io1.syscw-io0.syscw)/float64(b.N), "writes/task")
	}
}

// ioCounters are this process's write counters from /proc/self/io: the
// bytes its write system calls passed (the WAL's page writes, most of
// them) and how many calls.
type ioCounters struct {
	wchar, syscw int64
	ok           bool
}

func procIO() ioCounters {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return ioCounters{}
	}
	var c ioCounters
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "wchar":
			c.wchar, c.ok = n, true
		case "syscw":
			c.syscw = n
		}
	}
	return c
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
