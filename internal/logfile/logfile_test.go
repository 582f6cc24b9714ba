package logfile_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/logfile"
)

// clock is a fake clock the tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// at is a local time on a day of November 2026.
func at(day, hour, minute int) time.Time {
	return time.Date(2026, time.November, day, hour, minute, 0, 0, time.Local)
}

// files returns the regular files of dir by name with their contents.
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = string(b)
	}
	return out
}

func totalSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	for _, c := range files(t, dir) {
		n += int64(len(c))
	}
	return n
}

type existing struct {
	content string
	mtime   time.Time // zero: now
}

type step struct {
	at    time.Time // zero: the clock stays
	write string
}

func TestRotationAndRetention(t *testing.T) {
	t.Parallel()
	// perDay writes one line at noon on each day from first to last.
	perDay := func(first, last int) []step {
		var s []step
		for d := first; d <= last; d++ {
			s = append(s, step{at: at(d, 12, 0), write: fmt.Sprintf("day %02d\n", d)})
		}
		return s
	}
	keep10 := map[string]string{"delegate.log": "day 15\n"}
	for d := 5; d <= 14; d++ {
		keep10[fmt.Sprintf("delegate.log.2026-11-%02d", d)] = fmt.Sprintf("day %02d\n", d)
	}
	tests := []struct {
		name  string
		opts  logfile.Options
		start time.Time
		files map[string]existing
		steps []step
		want  map[string]string
	}{
		{
			name:  "daily roll names each file after the day of its lines",
			start: at(21, 10, 0),
			steps: []step{
				{write: "a\n"},
				{at: at(21, 23, 59), write: "b\n"},
				{at: at(22, 0, 0), write: "c\n"},
				{at: at(24, 8, 0), write: "d\n"},
			},
			want: map[string]string{
				"delegate.log.2026-11-21": "a\nb\n",
				"delegate.log.2026-11-22": "c\n",
				"delegate.log":            "d\n",
			},
		},
		{
			name:  "an empty file is not rolled",
			start: at(21, 10, 0),
			steps: []step{{at: at(23, 10, 0), write: "a\n"}},
			want:  map[string]string{"delegate.log": "a\n"},
		},
		{
			name:  "size rolls several times a day, numbered in order, then the day roll",
			opts:  logfile.Options{MaxSize: 10},
			start: at(21, 10, 0),
			steps: []step{
				{write: "l01\n"}, {write: "l02\n"}, {write: "l03\n"}, {write: "l04\n"},
				{write: "l05\n"}, {write: "l06\n"}, {write: "l07\n"},
				{at: at(22, 0, 1), write: "l08\n"},
			},
			want: map[string]string{
				"delegate.log.2026-11-21":   "l01\nl02\n",
				"delegate.log.2026-11-21.1": "l03\nl04\n",
				"delegate.log.2026-11-21.2": "l05\nl06\n",
				"delegate.log.2026-11-21.3": "l07\n",
				"delegate.log":              "l08\n",
			},
		},
		{
			name:  "a write that reaches MaxSize exactly stays; one that passes it rolls",
			opts:  logfile.Options{MaxSize: 8},
			start: at(21, 10, 0),
			steps: []step{{write: "l01\n"}, {write: "l02\n"}, {write: "l03\n"}},
			want: map[string]string{
				"delegate.log.2026-11-21": "l01\nl02\n",
				"delegate.log":            "l03\n",
			},
		},
		{
			name:  "a line larger than MaxSize is written whole",
			opts:  logfile.Options{MaxSize: 4, MaxTotal: 100},
			start: at(21, 10, 0),
			steps: []step{{write: "0123456789\n"}, {write: "ab\n"}},
			want: map[string]string{
				"delegate.log.2026-11-21": "0123456789\n",
				"delegate.log":            "ab\n",
			},
		},
		{
			name:  "today and exactly the 10 previous days are kept",
			start: at(1, 12, 0),
			steps: perDay(1, 15),
			want:  keep10,
		},
		{
			name:  "KeepDays 2",
			opts:  logfile.Options{KeepDays: 2},
			start: at(1, 12, 0),
			steps: perDay(1, 6),
			want: map[string]string{
				"delegate.log.2026-11-04": "day 04\n",
				"delegate.log.2026-11-05": "day 05\n",
				"delegate.log":            "day 06\n",
			},
		},
		{
			name:  "the total cap deletes the oldest files first",
			opts:  logfile.Options{MaxSize: 10, MaxTotal: 30},
			start: at(20, 10, 0),
			steps: []step{
				{write: "l01\n"}, {write: "l02\n"}, {write: "l03\n"},
				{at: at(21, 10, 0), write: "l04\n"}, {write: "l05\n"}, {write: "l06\n"},
				{write: "l07\n"}, {write: "l08\n"}, {write: "l09\n"},
			},
			// Rolled files may use MaxTotal - MaxSize = 20 bytes.
			want: map[string]string{
				"delegate.log.2026-11-20.1": "l03\n",
				"delegate.log.2026-11-21":   "l04\nl05\n",
				"delegate.log.2026-11-21.1": "l06\nl07\n",
				"delegate.log":              "l08\nl09\n",
			},
		},
		{
			name:  "restart: appends, continues numbering, applies retention at open",
			opts:  logfile.Options{MaxSize: 12},
			start: at(21, 10, 0),
			files: map[string]existing{
				"delegate.log":              {"old\n", at(21, 9, 0)},
				"delegate.log.2026-11-21":   {"r0\n", at(21, 1, 0)},
				"delegate.log.2026-11-21.1": {"r1\n", at(21, 2, 0)},
				"delegate.log.2026-11-10":   {"too old\n", at(10, 23, 0)},
				"delegate.log.2026-11-11":   {"kept\n", at(11, 23, 0)},
				"delegate.log.bak":          {"not ours\n", at(1, 0, 0)},
				"other.txt":                 {"not ours\n", at(1, 0, 0)},
			},
			steps: []step{{write: "new\n"}, {write: "more\n"}, {write: "next\n"}},
			want: map[string]string{
				"delegate.log.2026-11-11":   "kept\n",
				"delegate.log.2026-11-21":   "r0\n",
				"delegate.log.2026-11-21.1": "r1\n",
				"delegate.log.2026-11-21.2": "old\nnew\n",
				"delegate.log":              "more\nnext\n",
				"delegate.log.bak":          "not ours\n",
				"other.txt":                 "not ours\n",
			},
		},
		{
			name:  "restart on a later day rolls the old file under its own day",
			start: at(22, 8, 0),
			files: map[string]existing{"delegate.log": {"yesterday\n", at(21, 18, 0)}},
			steps: []step{{write: "today\n"}},
			want: map[string]string{
				"delegate.log.2026-11-21": "yesterday\n",
				"delegate.log":            "today\n",
			},
		},
		{
			name:  "numbering continues after the lowest numbers were deleted",
			opts:  logfile.Options{MaxSize: 4},
			start: at(21, 10, 0),
			files: map[string]existing{
				"delegate.log.2026-11-21.2": {"r2\n", at(21, 2, 0)},
				"delegate.log":              {"cur\n", at(21, 9, 0)},
			},
			steps: []step{{write: "new\n"}},
			want: map[string]string{
				"delegate.log.2026-11-21.2": "r2\n",
				"delegate.log.2026-11-21.3": "cur\n",
				"delegate.log":              "new\n",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for name, f := range tc.files {
				path := filepath.Join(dir, name)
				if err := os.WriteFile(path, []byte(f.content), 0o600); err != nil {
					t.Fatal(err)
				}
				if !f.mtime.IsZero() {
					if err := os.Chtimes(path, f.mtime, f.mtime); err != nil {
						t.Fatal(err)
					}
				}
			}
			clk := &clock{t: tc.start}
			var fallback bytes.Buffer
			opts := tc.opts
			opts.Dir, opts.Now, opts.Fallback = dir, clk.Now, &fallback
			w, err := logfile.Open(opts)
			if err != nil {
				t.Fatal(err)
			}
			maxTotal := opts.MaxTotal
			if maxTotal == 0 {
				maxTotal = logfile.DefaultMaxTotal
			}
			for i, s := range tc.steps {
				if !s.at.IsZero() {
					clk.Set(s.at)
				}
				if n, err := w.Write([]byte(s.write)); err != nil || n != len(s.write) {
					t.Fatalf("step %d: Write = %d, %v", i, n, err)
				}
				if tc.files == nil { // all files are the writer's
					if got := totalSize(t, dir); got > maxTotal {
						t.Fatalf("step %d: the log files hold %d bytes, more than MaxTotal %d", i, got, maxTotal)
					}
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, files(t, dir)); diff != "" {
				t.Errorf("files (-want +got):\n%s", diff)
			}
			if fallback.Len() > 0 {
				t.Errorf("unexpected error report: %s", fallback.String())
			}
		})
	}
}

func TestRolledListsOldestFirst(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	names := []string{
		"delegate.log.2026-11-21.10", "delegate.log.2026-11-21.2", "delegate.log.2026-11-21",
		"delegate.log.2026-11-20.1", "delegate.log.2026-11-20", "delegate.log",
		"delegate.log.2026-11-21.01", "delegate.log.2026-13-01", "delegate.log.2026-11-21.x",
		"delegate.log.2026-11-21.", "delegate.logx.2026-11-21",
	}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := logfile.Rolled(dir, logfile.DefaultName)
	if err != nil {
		t.Fatal(err)
	}
	var gotNames []string
	for _, f := range got {
		gotNames = append(gotNames, f.Name)
	}
	want := []string{
		"delegate.log.2026-11-20", "delegate.log.2026-11-20.1",
		"delegate.log.2026-11-21", "delegate.log.2026-11-21.2", "delegate.log.2026-11-21.10",
	}
	if diff := cmp.Diff(want, gotNames); diff != "" {
		t.Errorf("Rolled (-want +got):\n%s", diff)
	}
}

func TestFailedRollKeepsWritingAndReportsOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clk := &clock{t: at(21, 10, 0)}
	var fallback bytes.Buffer
	w, err := logfile.Open(logfile.Options{Dir: dir, MaxSize: 4, Now: clk.Now, Fallback: &fallback})
	if err != nil {
		t.Fatal(err)
	}
	// A directory where the rolled file would go makes the rename fail.
	blocker := filepath.Join(dir, "delegate.log.2026-11-21")
	if err := os.Mkdir(blocker, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"l01\n", "l02\n", "l03\n"} {
		if _, err := w.Write([]byte(line)); err != nil {
			t.Fatalf("Write %q: %v", line, err)
		}
	}
	if got := files(t, dir)["delegate.log"]; got != "l01\nl02\nl03\n" {
		t.Errorf("delegate.log = %q; want every line kept in the current file", got)
	}
	report := fallback.String()
	if strings.Count(report, "\n") != 1 || !strings.Contains(report, "roll log file") {
		t.Errorf("fallback got %q; want one line about the failed roll", report)
	}
	// Within a minute the writer does not try again; after it, it does.
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	clk.Set(at(21, 10, 0).Add(30 * time.Second))
	if _, err := w.Write([]byte("l04\n")); err != nil {
		t.Fatal(err)
	}
	if _, ok := files(t, dir)["delegate.log.2026-11-21"]; ok {
		t.Errorf("rolled again within a minute of a failure")
	}
	clk.Set(at(21, 10, 2))
	if _, err := w.Write([]byte("l05\n")); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"delegate.log.2026-11-21": "l01\nl02\nl03\nl04\n",
		"delegate.log":            "l05\n",
	}
	if diff := cmp.Diff(want, files(t, dir)); diff != "" {
		t.Errorf("files after the retry (-want +got):\n%s", diff)
	}
	if fallback.String() != report {
		t.Errorf("fallback got more reports: %q", fallback.String())
	}
	if _, err := w.Write([]byte("late\n")); err == nil {
		t.Errorf("Write after Close succeeded")
	}
}

func TestCurrentFileDeletedByOthersIsReplaced(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clk := &clock{t: at(21, 10, 0)}
	var fallback bytes.Buffer
	w, err := logfile.Open(logfile.Options{Dir: dir, Now: clk.Now, Fallback: &fallback})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if _, err := w.Write([]byte("a\n")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "delegate.log")); err != nil {
		t.Fatal(err)
	}
	clk.Set(at(22, 0, 0))
	if _, err := w.Write([]byte("b\n")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{"delegate.log": "b\n"}, files(t, dir)); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	if fallback.Len() > 0 {
		t.Errorf("unexpected report: %s", fallback.String())
	}
}

func TestOpenRejectsBadOptions(t *testing.T) {
	t.Parallel()
	for _, opts := range []logfile.Options{
		{},
		{Dir: t.TempDir(), MaxSize: 100, MaxTotal: 99},
		{Dir: t.TempDir(), Name: "a/b"},
	} {
		if w, err := logfile.Open(opts); err == nil {
			w.Close()
			t.Errorf("Open(%+v) succeeded", opts)
		}
	}
}

func TestConcurrentWritersLoseNoLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Every call of the clock moves it 10 minutes: the writers cross
	// several day boundaries and many size limits.
	var mu sync.Mutex
	now := at(1, 0, 0)
	tick := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(10 * time.Minute)
		return now
	}
	var fallback bytes.Buffer
	w, err := logfile.Open(logfile.Options{Dir: dir, MaxSize: 300, KeepDays: 30, Now: tick, Fallback: &fallback})
	if err != nil {
		t.Fatal(err)
	}
	const writers, lines = 8, 150
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range lines {
				if _, err := fmt.Fprintf(w, "writer %d line %03d\n", g, i); err != nil {
					t.Errorf("write: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var got []string
	rolled := 0
	for name, content := range files(t, dir) {
		if name != "delegate.log" {
			rolled++
		}
		if len(content) > 300 {
			t.Errorf("%s holds %d bytes, more than MaxSize", name, len(content))
		}
		got = append(got, strings.Split(strings.TrimSuffix(content, "\n"), "\n")...)
	}
	var want []string
	for g := range writers {
		for i := range lines {
			want = append(want, fmt.Sprintf("writer %d line %03d", g, i))
		}
	}
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("lines across all files (-want +got):\n%s", diff)
	}
	if rolled < 10 {
		t.Errorf("only %d rolled files; the test meant to roll many times", rolled)
	}
	if fallback.Len() > 0 {
		t.Errorf("unexpected report: %s", fallback.String())
	}
}
