package executor

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Task cgroups (cgroup version 2). The delegate's own cgroup is read from
// /proc/self/cgroup (the "0::" line) and located under the cgroup2 mount
// found in /proc/self/mountinfo; tasks run in
// <own cgroup>/legate-<hash of the work dir>/run-<nonce>. No controller is
// enabled: the cgroup only groups processes, which cgroup.kill,
// cgroup.freeze and cgroup.events work on without any.

// delegateCgroup returns the path of the cgroup this process's task
// cgroups go in: a child of its own cgroup named after dir.
func delegateCgroup(dir string) (string, error) {
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	path, ok := unifiedPath(own)
	if !ok {
		return "", errors.New(`no cgroup2 membership in /proc/self/cgroup (no "0::" line)`)
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	base, err := cgroup2Dir(mi, path)
	if err != nil {
		return "", err
	}
	h := sha256.Sum256([]byte(dir))
	return filepath.Join(base, "legate-"+hex.EncodeToString(h[:6])), nil
}

// unifiedPath returns the cgroup2 path of the "0::PATH" line.
func unifiedPath(procCgroup []byte) (string, bool) {
	for _, line := range strings.Split(string(procCgroup), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok && strings.HasPrefix(p, "/") {
			return p, true
		}
	}
	return "", false
}

// cgroup2Dir returns the directory of cgroup path under a cgroup2 mount
// listed in mountinfo: of the mounts whose root contains path, the one
// with the deepest root.
func cgroup2Dir(mountinfo []byte, path string) (string, error) {
	best, bestRoot := "", ""
	sc := bufio.NewScanner(bytes.NewReader(mountinfo))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		// id parent maj:min root mountpoint opts [optional...] - fstype src superopts
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) < 6 || len(qf) < 1 || qf[0] != "cgroup2" {
			continue
		}
		root, mnt := unescapeMount(pf[3]), unescapeMount(pf[4])
		if slices.Contains(strings.Split(pf[5], ","), "ro") || !within(path, root) {
			continue
		}
		if best == "" || len(root) > len(bestRoot) {
			best, bestRoot = filepath.Join(mnt, strings.TrimPrefix(path, root)), root
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	if best == "" {
		return "", fmt.Errorf("no writable cgroup2 mount holds this process's cgroup %s", path)
	}
	return best, nil
}

// within reports whether path is root or below it.
func within(path, root string) bool {
	if root == "/" {
		return true
	}
	return path == root || strings.HasPrefix(path, root+"/")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cgroupDir is the delegate's cgroup that task cgroups are created in.
type cgroupDir struct {
	path string
	// noKill is set when cgroup.kill is missing (kernels before 5.14).
	noKill bool
}

// openCgroupDir creates (or reuses) the cgroup at path and checks it is a
// cgroup2 directory this process can make task cgroups in.
func openCgroupDir(path string) (*cgroupDir, error) {
	if err := os.Mkdir(path, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("create cgroup %s: %w", path, err)
	}
	if _, err := os.Stat(filepath.Join(path, "cgroup.procs")); err != nil {
		return nil, fmt.Errorf("%s is not a cgroup2 directory: %w", path, err)
	}
	// Creating a child is what every task does: try it once now, so a
	// hierarchy that allows mkdir of our cgroup but not below fails here.
	probe := filepath.Join(path, "probe-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(probe, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("create a task cgroup in %s: %w", path, err)
	}
	c := &cgroupDir{path: path}
	if _, err := os.Stat(filepath.Join(probe, "cgroup.kill")); err != nil {
		c.noKill = true
	}
	_ = os.Remove(probe)
	return c, nil
}

// create makes the task cgroup name and opens it for CLONE_INTO_CGROUP.
func (c *cgroupDir) create(name string) (*taskCgroup, error) {
	p := filepath.Join(c.path, name)
	err := os.Mkdir(p, 0o755)
	for attempt := 0; attempt < 5 && errors.Is(err, fs.ErrNotExist); attempt++ {
		// Another delegate's Sweep removed our cgroup while it was empty
		// (and may do so again before the task cgroup is in it).
		if err = os.Mkdir(c.path, 0o755); err == nil || errors.Is(err, fs.ErrExist) {
			err = os.Mkdir(p, 0o755)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("create task cgroup: %w", err)
	}
	fd, err := syscall.Open(p, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		_ = os.Remove(p)
		return nil, fmt.Errorf("open task cgroup: %w", err)
	}
	return &taskCgroup{path: p, fd: fd, noKill: c.noKill}, nil
}

// sweep kills and removes every task cgroup left in c (by a crashed run),
// and removes the empty cgroups of other delegates next to it (left by
// delegates killed while idle, whose working directory is not used again).
func (c *cgroupDir) sweep() (int, error) {
	c.removeIdleSiblings()
	entries, err := os.ReadDir(c.path)
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		n++
		t := &taskCgroup{path: filepath.Join(c.path, e.Name()), fd: -1, noKill: c.noKill}
		if err := t.stop(0); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := removeCgroupTree(t.path); err != nil {
			errs = append(errs, err)
		}
	}
	return n, errors.Join(errs...)
}

// siblingName and runName match the cgroups delegateCgroup and prepare
// name.
var (
	siblingName = regexp.MustCompile(`^legate-[0-9a-f]{12}$`)
	runName     = regexp.MustCompile(`^run-[0-9a-f]{16}$`)
)

// staleRun is how old an empty task cgroup of another delegate must be to
// be removed: a live delegate's is empty only for the instant between
// creating it and starting the shell in it (and after the task's processes
// ended, when removing it under the delegate does no harm).
const staleRun = time.Minute

// removeIdleSiblings removes the delegate cgroups next to c that hold no
// live process, with their empty task cgroups older than staleRun (left by
// delegates killed with SIGKILL, whose working directory is not used
// again, so no Sweep of their own removes them). A live delegate whose
// cgroup was removed makes it again for its next task (see create).
func (c *cgroupDir) removeIdleSiblings() {
	parent := filepath.Dir(c.path)
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		p := filepath.Join(parent, e.Name())
		if !e.IsDir() || p == c.path || !siblingName.MatchString(e.Name()) {
			continue
		}
		runs, _ := os.ReadDir(p)
		for _, r := range runs {
			info, err := r.Info()
			if !r.IsDir() || !runName.MatchString(r.Name()) || err != nil || time.Since(info.ModTime()) < staleRun {
				continue
			}
			if t := (&taskCgroup{path: filepath.Join(p, r.Name()), fd: -1}); !t.populated() {
				_ = removeCgroupTree(t.path)
			}
		}
		// rmdir fails (EBUSY) on a cgroup with children or processes.
		_ = os.Remove(p)
	}
}

// close removes c if no task cgroup is left in it.
func (c *cgroupDir) close() error {
	err := os.Remove(c.path)
	if err == nil || errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.EBUSY) || errors.Is(err, syscall.ENOTEMPTY) {
		return nil
	}
	return fmt.Errorf("remove cgroup %s: %w", c.path, err)
}

// taskCgroup is the cgroup of one run.
type taskCgroup struct {
	path   string
	fd     int // for CLONE_INTO_CGROUP; -1 once closed
	noKill bool
}

func (t *taskCgroup) closeFD() {
	if t.fd >= 0 {
		_ = syscall.Close(t.fd)
		t.fd = -1
	}
}

// populated reports whether a live process is left in the cgroup or below
// it (zombies do not count: they left it when they exited).
func (t *taskCgroup) populated() bool {
	b, err := os.ReadFile(filepath.Join(t.path, "cgroup.events"))
	if err != nil {
		return false // gone
	}
	return bytes.Contains(b, []byte("populated 1"))
}

// pids lists the processes in the cgroup and the cgroups below it.
func (t *taskCgroup) pids() []int {
	var out []int
	_ = filepath.WalkDir(t.path, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			return nil
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
		return nil
	})
	return out
}

// stop sends SIGTERM to every process in the cgroup (again to any that
// appears), waits up to grace for the cgroup to empty, then kills what is
// left and waits for it to be gone.
func (t *taskCgroup) stop(grace time.Duration) error {
	if !t.populated() {
		return nil
	}
	if grace > 0 {
		termed := map[int]bool{}
		deadline := time.Now().Add(grace)
		for t.populated() && time.Now().Before(deadline) {
			for _, pid := range t.pids() {
				if !termed[pid] {
					termed[pid] = true
					_ = syscall.Kill(pid, syscall.SIGTERM)
				}
			}
			time.Sleep(stopPoll)
		}
	}
	deadline := time.Now().Add(killWait)
	for t.populated() {
		if time.Now().After(deadline) {
			return fmt.Errorf("processes of cgroup %s still alive %s after SIGKILL: %v", t.path, killWait, t.pids())
		}
		t.kill()
		time.Sleep(stopPoll)
	}
	return nil
}

// kill sends SIGKILL to every process of the cgroup: at once with
// cgroup.kill, or on older kernels frozen (so none can fork meanwhile),
// one by one, then thawed to let the signals act.
func (t *taskCgroup) kill() {
	if !t.noKill {
		if err := os.WriteFile(filepath.Join(t.path, "cgroup.kill"), []byte("1"), 0); err == nil {
			return
		}
	}
	freeze := filepath.Join(t.path, "cgroup.freeze")
	frozen := os.WriteFile(freeze, []byte("1"), 0) == nil
	if frozen {
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) {
			b, err := os.ReadFile(filepath.Join(t.path, "cgroup.events"))
			if err != nil || bytes.Contains(b, []byte("frozen 1")) {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	for _, pid := range t.pids() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if frozen {
		_ = os.WriteFile(freeze, []byte("0"), 0)
	}
}

// remove deletes the (empty) task cgroup; a failure is logged and left
// for the next Sweep.
func (t *taskCgroup) remove(log *slog.Logger) {
	t.closeFD()
	if err := removeCgroupTree(t.path); err != nil {
		log.Warn("task isolation: cannot remove a task cgroup; the next start removes it", "err", err)
	}
}

// removeCgroupTree removes a cgroup and the cgroups a task made below it,
// deepest first. cgroup directories hold only the kernel's files, which
// rmdir takes with them.
func removeCgroupTree(path string) error {
	entries, err := os.ReadDir(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := removeCgroupTree(filepath.Join(path, e.Name())); err != nil {
				return err
			}
		}
	}
	var rerr error
	for attempt := 0; attempt < 50; attempt++ {
		rerr = os.Remove(path)
		if rerr == nil || errors.Is(rerr, fs.ErrNotExist) {
			return nil
		}
		if !errors.Is(rerr, syscall.EBUSY) {
			break
		}
		time.Sleep(stopPoll) // the last exiting task may still be leaving it
	}
	return fmt.Errorf("remove cgroup: %w", rerr)
}
