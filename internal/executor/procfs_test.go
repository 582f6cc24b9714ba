package executor

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// statLine builds a /proc/PID/stat line as the kernel writes it.
func statLine(p procInfo, comm string) string {
	return fmt.Sprintf("%d (%s) %c %d %d %d 34816 %d 4194560 130 0 0 0 0 0 0 0 20 0 1 0 %d 2605056 224 18446744073709551615",
		p.pid, comm, p.state, p.ppid, p.pgrp, p.sid, p.pgrp, p.start)
}

func TestParseStat(t *testing.T) {
	t.Parallel()
	want := procInfo{pid: 4242, ppid: 7, pgrp: 4242, sid: 99, state: 'S', start: 123456789}
	for _, comm := range []string{"sleep", "a b", ") Z 1 1 1 (", "x)", "((", ""} {
		got, err := parseStat([]byte(statLine(want, comm) + "\n"))
		if err != nil {
			t.Fatalf("comm %q: %v", comm, err)
		}
		if diff := cmp.Diff(want, got, cmp.AllowUnexported(procInfo{})); diff != "" {
			t.Errorf("comm %q (-want +got):\n%s", comm, diff)
		}
	}
	for _, bad := range []string{"", "12", "12 (x", "x (y) S 1 2 3", "12 (y) S 1 2"} {
		if _, err := parseStat([]byte(bad)); err == nil {
			t.Errorf("parseStat(%q) succeeded", bad)
		}
	}
	self, ok := readProc(os.Getpid())
	// Running, sleeping, or in a disk wait (a page fault on a busy
	// machine): any state of a live process.
	if !ok || self.pid != os.Getpid() || self.ppid != os.Getppid() || !strings.ContainsRune("RSDtTWIP", rune(self.state)) {
		t.Errorf("readProc(self) = %+v, %v", self, ok)
	}
}

// FuzzParseStat: a task names its processes (comm) as it likes; whatever
// it chooses, the fields after it are read right, and no input panics.
func FuzzParseStat(f *testing.F) {
	f.Add("sleep", []byte("1 (init) S 0 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 5 0 0"))
	f.Add(") R 1 1 1 (", []byte("("))
	f.Fuzz(func(t *testing.T, comm string, raw []byte) {
		_, _ = parseStat(raw)
		if strings.ContainsAny(comm, "\n") {
			return
		}
		want := procInfo{pid: 31, ppid: 1, pgrp: 31, sid: 31, state: 'Z', start: 77}
		got, err := parseStat([]byte(statLine(want, comm)))
		if err != nil || got != want {
			t.Fatalf("comm %q: got %+v, %v", comm, got, err)
		}
	})
}

// environValueRef is environValue written the obvious way.
func environValueRef(b []byte, name string) (string, bool) {
	for _, e := range strings.Split(string(b), "\x00") {
		if v, ok := strings.CutPrefix(e, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// FuzzEnviron: a task writes its environment as it likes; the marker is
// found exactly where a plain split finds it.
func FuzzEnviron(f *testing.F) {
	f.Add([]byte("A=1\x00LEGATE_TASK_RUN=abc\x00B=2\x00"), "abc")
	f.Add([]byte("LEGATE_TASK_RUN=\x00"), "")
	f.Add([]byte("XLEGATE_TASK_RUN=abc"), "abc")
	f.Fuzz(func(t *testing.T, b []byte, v string) {
		gv, gok := environValue(b, RunMarkerEnv)
		wv, wok := environValueRef(b, RunMarkerEnv)
		if gv != wv || gok != wok {
			t.Fatalf("environValue = %q, %v; want %q, %v", gv, gok, wv, wok)
		}
		kv := RunMarkerEnv + "=" + v
		want := false
		for _, e := range strings.Split(string(b), "\x00") {
			want = want || e == kv
		}
		if got := environContains(b, kv); got != want && !strings.Contains(v, "\x00") {
			t.Fatalf("environContains(%q) = %v, want %v", kv, got, want)
		}
	})
}

const mountinfo = `22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:5 - proc proc rw
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
50 22 0:38 /system.slice /mnt/my\040cg rw,relatime - cgroup2 cgroup2 rw
51 22 0:38 /system.slice/ro.service /mnt/ro ro,relatime - cgroup2 cgroup2 rw
`

func TestCgroupPaths(t *testing.T) {
	t.Parallel()
	if p, ok := unifiedPath([]byte("9:name=systemd:/\n4:memory:/x\n0::/system.slice/legate.service\n")); !ok || p != "/system.slice/legate.service" {
		t.Errorf("unifiedPath = %q, %v", p, ok)
	}
	if _, ok := unifiedPath([]byte("4:memory:/x\n")); ok {
		t.Error("unifiedPath found a cgroup2 path in a v1-only file")
	}
	for _, tc := range []struct{ path, want string }{
		{"/", "/sys/fs/cgroup/unified"},
		{"/user.slice/x", "/sys/fs/cgroup/unified/user.slice/x"},
		// The deepest writable mount holding the path wins; ro is skipped.
		{"/system.slice/ro.service", "/mnt/my cg/ro.service"},
		{"/system.slice", "/mnt/my cg"},
	} {
		got, err := cgroup2Dir([]byte(mountinfo), tc.path)
		if err != nil || got != tc.want {
			t.Errorf("cgroup2Dir(%q) = %q, %v; want %q", tc.path, got, err, tc.want)
		}
	}
	if _, err := cgroup2Dir([]byte("31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"), "/"); err == nil {
		t.Error("cgroup2Dir found a cgroup2 mount where there is none")
	}
}

// FuzzCgroup2Dir: no mountinfo content panics the parser.
func FuzzCgroup2Dir(f *testing.F) {
	f.Add([]byte(mountinfo), "/system.slice")
	f.Fuzz(func(t *testing.T, mi []byte, path string) {
		dir, err := cgroup2Dir(mi, path)
		if err == nil && !bytes.Contains(mi, []byte("cgroup2")) {
			t.Fatalf("found %q without a cgroup2 mount", dir)
		}
		_ = unescapeMount(string(mi))
	})
}
