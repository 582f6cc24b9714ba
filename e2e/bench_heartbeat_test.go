package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

// BenchmarkOversizedHeartbeat measures what one heartbeat listing 180,000
// made-up task IDs costs a real manager process: its CPU time (utime +
// stime from /proc/PID/stat, before and after) and the wall time of the
// call, over HTTP from one registered delegate session (capacity 4). The
// second case lists 10,000, the most a delegate of unlimited capacity may
// list. Run:
//
//	(cd e2e && go test -run '^$' -bench OversizedHeartbeat -benchtime 10x .)
//	(cd e2e && LEGATE_E2E_BINARY=/work/bin/legate-before go test -run '^$' -bench OversizedHeartbeat -benchtime 3x .)
//
// A manager that refuses the body (too large for the route) counts as
// refused; that is a valid answer too, and the figures show its cost.
func BenchmarkOversizedHeartbeat(b *testing.B) {
	c := startCluster(b)
	tok := c.token("bench")
	ctx := context.Background()
	d, err := client.New(c.url, nil)
	if err != nil {
		b.Fatal(err)
	}
	resp, err := d.Register(ctx, protocol.RegisterRequest{ProtocolVersion: protocol.Version, AccountID: c.account, Token: tok,
		Name: "bench", Hostname: "bench-h", IP: "127.0.0.1", Capacity: 4})
	if err != nil {
		b.Fatal(err)
	}
	d.SetSecret(resp.Session)
	pid := c.mgr.cmd.Process.Pid
	seq := int64(0)
	for _, listed := range []int{180_000, 10_000} {
		b.Run(fmt.Sprintf("listed=%d", listed), func(b *testing.B) {
			running := make([]protocol.RunningTask, listed)
			for i := range running {
				running[i] = protocol.RunningTask{ID: fmt.Sprintf("t_%016d", i), Epoch: 1} // as long as a real ID
			}
			var cpu, wall time.Duration
			refused, aborts := 0, 0
			b.ResetTimer()
			for range b.N {
				seq++
				before := procCPU(b, pid)
				began := time.Now()
				hb, err := d.Heartbeat(ctx, protocol.Heartbeat{Seq: seq, Running: running})
				wall += time.Since(began)
				var pe *protocol.Error
				switch {
				case err == nil:
					aborts = len(hb.Abort)
				case errors.As(err, &pe) && pe.Code == protocol.CodeBadRequest:
					refused++
				default:
					b.Fatalf("heartbeat: %v", err)
				}
				cpu += procCPU(b, pid) - before
			}
			b.StopTimer()
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "manager-cpu-ms/op")
			b.ReportMetric(float64(wall.Microseconds())/1000/float64(b.N), "wall-ms/op")
			b.ReportMetric(float64(refused)/float64(b.N), "refused/op")
			b.ReportMetric(float64(aborts), "aborts-answered")
		})
	}
}

// procCPU is the CPU time (user + system) the process has used so far.
func procCPU(tb testing.TB, pid int) time.Duration {
	tb.Helper()
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		tb.Fatal(err)
	}
	// The command name (field 2) may hold spaces: count from after it.
	rest := string(stat)
	rest = rest[strings.LastIndexByte(rest, ')')+2:]
	f := strings.Fields(rest)
	// f[0] is field 3 (state); utime is field 14, stime field 15, in
	// clock ticks (USER_HZ, 100 on Linux).
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		tb.Fatalf("parse /proc/%d/stat: %q", pid, stat)
	}
	return time.Duration(utime+stime) * (time.Second / 100)
}
