package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// BenchmarkManagerRSSUnderLargeUnauthenticatedBodies is item 3 of issue
// 10: 16 registrations at once, each an 8 MiB body without valid
// credentials (a wrong token), for 5 rounds, against a manager process. It
// reports the manager's peak resident memory (VmHWM) before and after the
// rounds, for two bodies: one 8 MiB description, and 8 MiB of empty tags
// (which JSON decoding turns into some 45 MiB of string headers each). One
// measurement per body whatever b.N is; LEGATE_BENCH_ROUNDS overrides the
// rounds. Run it against an older binary with LEGATE_E2E_BINARY=PATH:
//
//	(cd e2e && go test -run '^$' -bench ManagerRSSUnderLarge -benchtime 1x .)
func BenchmarkManagerRSSUnderLargeUnauthenticatedBodies(b *testing.B) {
	const size = 8 << 20
	description := func(prefix string) []byte {
		return []byte(prefix + `"description":"` + strings.Repeat("A", size-len(prefix)-18) + `"}`)
	}
	tags := func(prefix string) []byte {
		n := (size - len(prefix) - 12) / 3
		return []byte(prefix + `"tags":[` + strings.Repeat(`"",`, n) + `""]}`)
	}
	for _, tc := range []struct {
		name    string
		body    func(prefix string) []byte
		chunked bool // no Content-Length: the manager cannot refuse it unread
	}{
		{"description", description, false},
		{"tags", tags, false},
		{"tags-chunked", tags, true},
	} {
		b.Run(tc.name, func(b *testing.B) { benchLargeRegistrations(b, tc.body, tc.chunked) })
	}
}

func benchLargeRegistrations(b *testing.B, makeBody func(prefix string) []byte, chunked bool) {
	const concurrent = 16
	rounds := 5
	if v, err := strconv.Atoi(os.Getenv("LEGATE_BENCH_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	c := startCluster(b)
	pid := c.mgr.cmd.Process.Pid
	body := makeBody(`{"account_id":"` + c.account + `","token":"not-a-token","name":"n","hostname":"h",`)
	// A connection per request: the manager closes those whose body it
	// did not read.
	hc := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Minute}
	idle := statusKB(b, pid, "VmHWM:")
	var mu sync.Mutex
	answers := map[string]int{}
	b.ResetTimer()
	start := time.Now()
	for r := 0; r < rounds; r++ {
		var wg sync.WaitGroup
		for i := 0; i < concurrent; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var rd io.Reader = bytes.NewReader(body)
				if chunked {
					rd = struct{ io.Reader }{rd} // hides the length
				}
				resp, err := hc.Post(c.url+protocol.PathRegister, "application/json", rd)
				key := "error"
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					key = strconv.Itoa(resp.StatusCode)
				}
				mu.Lock()
				answers[key]++
				mu.Unlock()
			}()
		}
		wg.Wait()
	}
	took := time.Since(start)
	b.StopTimer()
	peak := statusKB(b, pid, "VmHWM:")
	b.Logf("%d-byte bodies, answers to %d requests: %v (error: the connection was closed while the body was being sent)", len(body), rounds*concurrent, answers)
	b.ReportMetric(float64(idle)/1024, "idle-peak-rss-MiB")
	b.ReportMetric(float64(peak)/1024, "peak-rss-MiB")
	b.ReportMetric(took.Seconds(), "flood-s")
	// The manager still serves.
	if r := c.cli("delegates", "list"); r.code != 0 {
		b.Fatalf("manager after the flood: %d %s", r.code, r.stderr)
	}
}

// statusKB reads a kB field (VmRSS:, VmHWM:) of /proc/PID/status.
func statusKB(b *testing.B, pid int, field string) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, field) {
			n, _ := strconv.Atoi(strings.Fields(line)[1])
			return n
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
