package executor

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// procInfo is what /proc/PID/stat says about one process.
type procInfo struct {
	pid, ppid, pgrp, sid int
	state                byte
	// start is the start time in clock ticks after boot: with pid it
	// identifies a process (a pid may be reused, the pair is not).
	start uint64
}

// dead reports a zombie (exited, not yet waited for) or a dying process.
func (p procInfo) dead() bool { return p.state == 'Z' || p.state == 'X' || p.state == 'x' }

// parseStat parses the content of /proc/PID/stat.
func parseStat(b []byte) (procInfo, error) {
	// Format: pid (comm) state ppid pgrp session tty tpgid flags minflt
	// cminflt majflt cmajflt utime stime cutime cstime priority nice
	// num_threads itrealvalue starttime ...; comm may hold spaces and ')'.
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 1 || end < open {
		return procInfo{}, errors.New("malformed stat: no (comm)")
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return procInfo{}, fmt.Errorf("malformed stat pid: %w", err)
	}
	f := bytes.Fields(b[end+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return procInfo{}, errors.New("malformed stat: too few fields")
	}
	p := procInfo{pid: pid, state: f[0][0]}
	ints := []*int{&p.ppid, &p.pgrp, &p.sid}
	for i, dst := range ints {
		n, err := strconv.Atoi(string(f[1+i]))
		if err != nil {
			return procInfo{}, fmt.Errorf("malformed stat field %d: %w", 2+i, err)
		}
		*dst = n
	}
	if p.start, err = strconv.ParseUint(string(f[19]), 10, 64); err != nil {
		return procInfo{}, fmt.Errorf("malformed stat starttime: %w", err)
	}
	return p, nil
}

// readProc reads /proc/PID/stat; ok is false when the process is gone.
func readProc(pid int) (procInfo, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	p, err := parseStat(b)
	return p, err == nil
}

// listProcs returns every process /proc shows (those that vanish while it
// is read are left out).
func listProcs() ([]procInfo, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	out := make([]procInfo, 0, len(names))
	for _, name := range names {
		if name == "" || name[0] < '0' || name[0] > '9' {
			continue
		}
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		if p, ok := readProc(pid); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// environHas reports whether the environment the process started with (or
// set since, /proc/PID/environ) holds the exact entry kv ("K=V"). An
// unreadable environment (a zombie, another user's process) holds nothing.
func environHas(pid int, kv string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false
	}
	return environContains(b, kv)
}

// environContains reports whether the NUL-separated environment block b
// holds the entry kv.
func environContains(b []byte, kv string) bool {
	for len(b) > 0 {
		i := bytes.IndexByte(b, 0)
		entry := b
		if i >= 0 {
			entry, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if string(entry) == kv {
			return true
		}
	}
	return false
}

// signalProc sends sig to the process p names, unless pid now names
// another process (it exited and the pid was reused since p was read): a
// pidfd pins the process while its start time is checked.
func signalProc(p procInfo, sig syscall.Signal) {
	fd, err := unix.PidfdOpen(p.pid, 0)
	if err != nil {
		if errors.Is(err, unix.ENOSYS) {
			// Kernels before 5.3: the window between reading /proc
			// and kill(2) is all there is.
			if cur, ok := readProc(p.pid); ok && cur.start == p.start {
				_ = syscall.Kill(p.pid, sig)
			}
		}
		return // gone
	}
	defer unix.Close(fd)
	if cur, ok := readProc(p.pid); !ok || cur.start != p.start {
		return
	}
	_ = unix.PidfdSendSignal(fd, sig, nil, 0)
}
