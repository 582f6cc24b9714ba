package executor

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Tree mode: the processes of a run are found in /proc (see Isolator).

// treeMembers returns the live processes of run r among procs: the
// descendants of this process that are r's shell, in r's process group or
// carry r's marker, and all their descendants. Everything found, dead or
// alive, is remembered in r.seen for reaping.
func (r *isoRun) treeMembers(procs []procInfo) []procInfo {
	self := os.Getpid()
	byPID := make(map[int]procInfo, len(procs))
	children := make(map[int][]int, len(procs))
	for _, p := range procs {
		byPID[p.pid] = p
		children[p.ppid] = append(children[p.ppid], p.pid)
	}
	// Every process a task starts stays a descendant of this process: it
	// is a child subreaper, so orphans come back to it.
	var desc []int
	queue := append([]int(nil), children[self]...)
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		desc = append(desc, pid)
		queue = append(queue, children[pid]...)
	}
	in := make(map[int]bool)
	var seeds []int
	for _, pid := range desc {
		p := byPID[pid]
		switch {
		case pid == r.shell.pid && p.start == r.shell.start:
		case p.pgrp == r.shell.pid && p.start >= r.shell.start:
		case !p.dead() && environHas(pid, r.marker):
		default:
			continue
		}
		seeds = append(seeds, pid)
	}
	var live []procInfo
	for len(seeds) > 0 {
		pid := seeds[0]
		seeds = seeds[1:]
		if in[pid] {
			continue
		}
		in[pid] = true
		p := byPID[pid]
		r.seen[pid] = p
		if !p.dead() {
			live = append(live, p)
		}
		seeds = append(seeds, children[pid]...)
	}
	return live
}

// stopTree sends SIGTERM to every process of the run (and to any that
// appears meanwhile), and after grace SIGKILL to what is left, until none
// is left.
func (r *isoRun) stopTree(grace time.Duration) error {
	termed := map[int]uint64{}
	termUntil := time.Now().Add(grace)
	var killUntil time.Time
	for {
		procs, err := listProcs()
		if err != nil {
			return fmt.Errorf("list processes: %w", err)
		}
		live := r.treeMembers(procs)
		if len(live) == 0 {
			r.last = procs
			return nil
		}
		now := time.Now()
		if now.Before(termUntil) {
			for _, p := range live {
				if s, ok := termed[p.pid]; !ok || s != p.start {
					termed[p.pid] = p.start
					signalProc(p, syscall.SIGTERM)
				}
			}
		} else {
			if killUntil.IsZero() {
				killUntil = now.Add(killWait)
			} else if now.After(killUntil) {
				pids := make([]int, len(live))
				for i, p := range live {
					pids[i] = p.pid
				}
				return fmt.Errorf("processes %v still alive %s after SIGKILL", pids, killWait)
			}
			for _, p := range live {
				signalProc(p, syscall.SIGKILL)
			}
		}
		time.Sleep(stopPoll)
	}
}

// sweepRecordedRuns kills the processes of the runs recorded in dir (left
// by a delegate that crashed) that still carry their marker, and removes
// the records. It returns how many records it found.
func sweepRecordedRuns(dir string) (int, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	values := map[string]bool{}
	for _, e := range entries {
		if !e.IsDir() {
			values[e.Name()] = true
		}
	}
	if len(values) == 0 {
		return 0, nil
	}
	deadline := time.Now().Add(killWait)
	self := os.Getpid()
	var alive []int
	for {
		procs, err := listProcs()
		if err != nil {
			return len(values), err
		}
		alive = alive[:0]
		for _, p := range procs {
			if p.pid == self || p.dead() {
				continue
			}
			b, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/environ")
			if err != nil {
				continue
			}
			if v, ok := environValue(b, RunMarkerEnv); ok && values[v] {
				alive = append(alive, p.pid)
				signalProc(p, syscall.SIGKILL)
			}
		}
		if len(alive) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(stopPoll)
	}
	for v := range values {
		_ = os.Remove(filepath.Join(dir, v))
	}
	if len(alive) > 0 {
		return len(values), fmt.Errorf("processes %v of an earlier run still alive after SIGKILL", alive)
	}
	return len(values), nil
}

// environValue returns the value of the first entry named name in the
// NUL-separated environment block b.
func environValue(b []byte, name string) (string, bool) {
	prefix := []byte(name + "=")
	for len(b) > 0 {
		entry := b
		if i := bytes.IndexByte(b, 0); i >= 0 {
			entry, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if v, ok := bytes.CutPrefix(entry, prefix); ok {
			return string(v), true
		}
	}
	return "", false
}
