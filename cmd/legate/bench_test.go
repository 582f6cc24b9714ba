//go:build !delegate

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBenchPlotCommand: legate bench plot reads saved lines from files and
// stdin ("-") and writes the curves into --out, saying which; a missing
// file or lines without a curve fail with a message.
func TestBenchPlotCommand(t *testing.T) {
	dir := t.TempDir()
	saved := filepath.Join(dir, "throughput.jsonl")
	// The file's last line has no newline: the next input must not join it.
	if err := os.WriteFile(saved, []byte(`{"scenario":"throughput","store":"sqlite","delegates":1,"tasks_per_s":{"median":900}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(stdin string, args ...string) (string, error) {
		cmd := newBenchCmd()
		var errOut bytes.Buffer
		cmd.SetIn(strings.NewReader(stdin))
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&errOut)
		cmd.SetArgs(args)
		err := cmd.Execute()
		return errOut.String(), err
	}
	out := filepath.Join(dir, "plots")
	stderr, err := run(`{"scenario":"throughput","store":"sqlite","delegates":10,"tasks_per_s":{"median":2000}}`+"\n", "plot", saved, "-", "--out", out)
	if err != nil {
		t.Fatalf("bench plot: %v\n%s", err, stderr)
	}
	svg, err := os.ReadFile(filepath.Join(out, "throughput-vs-delegates.svg"))
	if err != nil || !strings.Contains(stderr, "wrote "+filepath.Join(out, "throughput-vs-delegates.svg")) {
		t.Fatalf("no plot written (%v); stderr:\n%s", err, stderr)
	}
	if !strings.Contains(string(svg), "sqlite: 1 → 900; 10 → 2,000.") {
		t.Errorf("the plot does not hold both lines' points:\n%s", svg)
	}
	if _, err := run("", "plot", filepath.Join(dir, "missing.jsonl"), "--out", out); err == nil || !strings.Contains(err.Error(), "missing.jsonl") {
		t.Errorf("a missing file: %v", err)
	}
	if _, err := run(`{"scenario":"pickup"}`, "plot", "--out", out); err == nil || !strings.Contains(err.Error(), "no curve") {
		t.Errorf("lines without a curve: %v", err)
	}
}
