package delegate_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/config"
	"github.com/legate-dev/legate/internal/delegate"
	"github.com/legate-dev/legate/internal/protocol"
)

// perfLine is the performance line as the JSON handler writes it.
type perfLine struct {
	Msg           string   `json:"msg"`
	CPUProcess    *float64 `json:"cpu_process"`
	CPUSystem     *float64 `json:"cpu_system"`
	MaxExecuting  *int64   `json:"max_executing"`
	MaxValidating *int64   `json:"max_validating"`
	RSSMB         *float64 `json:"rss_mb"`
	Goroutines    *int64   `json:"goroutines"`
}

// perfLines parses the performance lines of a JSON log and checks that
// each has every field with a sensible value.
func perfLines(t *testing.T, log string) []perfLine {
	t.Helper()
	var out []perfLine
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, `"msg":"performance"`) {
			continue
		}
		var p perfLine
		if err := json.Unmarshal([]byte(line), &p); err != nil {
			t.Fatalf("performance line %q: %v", line, err)
		}
		switch {
		case p.CPUProcess == nil || *p.CPUProcess < 0 || *p.CPUProcess > 100,
			p.CPUSystem == nil || *p.CPUSystem < 0 || *p.CPUSystem > 100,
			p.MaxExecuting == nil || *p.MaxExecuting < 0,
			p.MaxValidating == nil || *p.MaxValidating < 0,
			p.RSSMB == nil || *p.RSSMB <= 0,
			p.Goroutines == nil || *p.Goroutines <= 0:
			t.Fatalf("performance line with a missing or impossible field: %s", line)
		}
		out = append(out, p)
	}
	return out
}

// waitPerf waits for a performance line logged after the first skip ones
// for which cond holds, and returns how many lines there are then.
func waitPerf(t *testing.T, buf *logBuffer, skip int, what string, cond func(perfLine) bool) int {
	t.Helper()
	n := skip
	eventually(t, "a performance line with "+what, func() (bool, string) {
		lines := perfLines(t, buf.String())
		for i := skip; i < len(lines); i++ {
			if cond(lines[i]) {
				n = i + 1
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d lines", len(lines))
	})
	return n
}

func TestPerformanceLineCountsExecutingAndValidatingTasks(t *testing.T) {
	t.Parallel()
	tm := startManager(t, testConfig())
	buf := &logBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("---- agent log ----\n%s", buf.String())
		}
	})
	logger := slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	const host = "perf-host"
	a, err := delegate.New(delegate.Options{
		Config: config.Delegate{
			AccountID: tm.admin.AccountID, Token: tm.token(t, "perf").Value, ManagerURLs: []string{tm.url},
			Name: "perf", Hostname: host, Type: "SHELL",
		},
		WorkDir: t.TempDir(), Grace: time.Minute, Version: "test", Logger: logger,
		PerfInterval: 50 * time.Millisecond,
		// Its tasks wait for files in the test's temporary directory,
		// which a sandbox hides.
		TaskSandbox: "off", AllowMixedScopes: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(waitLong):
			t.Errorf("Run did not return")
		}
	})
	tm.waitConnected(t, host, protocol.ConnWebSocket)
	seen := waitPerf(t, buf, 0, "nothing running", func(p perfLine) bool {
		return *p.MaxExecuting == 0 && *p.MaxValidating == 0
	})

	// Three tasks held running at once.
	dir := t.TempDir()
	var ids, markers []string
	for i := range 3 {
		marker := filepath.Join(dir, fmt.Sprintf("marker-%d", i))
		ids = append(ids, tm.submitScript(t, waitMarkerScript(marker)).ID)
		markers = append(markers, marker)
	}
	for _, id := range ids {
		tm.waitTask(t, id, protocol.StatusRunning)
	}
	seen = waitPerf(t, buf, seen, "max_executing 3", func(p perfLine) bool { return *p.MaxExecuting == 3 })

	// A capability check held open by the endpoint it checks.
	release := make(chan struct{})
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(endpoint.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	capTask := tm.submit(t, protocol.TaskSpec{
		Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: "echo ok"}, Capabilities: []string{endpoint.URL},
	})
	seen = waitPerf(t, buf, seen, "max_validating 1 while three tasks run", func(p perfLine) bool {
		return *p.MaxValidating == 1 && *p.MaxExecuting == 3
	})
	close(release)
	for _, m := range markers {
		touch(t, m)
	}
	for _, id := range append(ids, capTask.ID) {
		tm.waitTask(t, id, protocol.StatusSucceeded)
	}
	waitPerf(t, buf, seen, "nothing running again", func(p perfLine) bool {
		return *p.MaxExecuting == 0 && *p.MaxValidating == 0
	})
}
