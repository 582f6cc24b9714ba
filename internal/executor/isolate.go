package executor

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Isolation selects how an Isolator finds and ends every process a task
// started.
type Isolation string

const (
	// IsolationAuto uses a cgroup when the delegate can create one and
	// the process tree otherwise.
	IsolationAuto Isolation = "auto"
	// IsolationCgroup starts each task in its own cgroup (version 2)
	// under one the delegate owns, and ends it with the whole cgroup:
	// nothing a task starts can leave it.
	IsolationCgroup Isolation = "cgroup"
	// IsolationTree makes the delegate a child subreaper and ends a task
	// with every process found from it: descendants of its shell, its
	// process group, and processes whose environment carries the run's
	// marker. See Isolator for what this cannot find.
	IsolationTree Isolation = "tree"
)

// ParseIsolation reads a mode as written in LEGATE_TASK_ISOLATION; ""
// means IsolationAuto.
func ParseIsolation(s string) (Isolation, error) {
	switch m := Isolation(strings.ToLower(strings.TrimSpace(s))); m {
	case "":
		return IsolationAuto, nil
	case IsolationAuto, IsolationCgroup, IsolationTree:
		return m, nil
	}
	return "", fmt.Errorf("task isolation %q: want auto, cgroup or tree", s)
}

// RunMarkerEnv is the environment variable an Isolator sets in every
// isolated task to a value unique to the run. In tree mode processes are
// found by it (as long as they keep it), including after a crash of the
// delegate.
const RunMarkerEnv = "LEGATE_TASK_RUN"

// stopPoll is how often a stopping run is checked for processes left.
const stopPoll = 10 * time.Millisecond

// killWait bounds the wait for SIGKILLed processes to be gone (a process
// in uninterruptible sleep, such as on a hung NFS mount, dies only when
// the kernel lets it).
const killWait = 10 * time.Second

// IsolatorOptions configures an Isolator. Zero values mean the documented
// defaults.
type IsolatorOptions struct {
	// Mode; "" means IsolationAuto.
	Mode Isolation
	// Dir is the delegate's working directory: it names the delegate's
	// cgroup (so a restart on the same directory finds what a crashed run
	// left) and holds tree mode's run records (Dir/task-runs). Required.
	Dir string
	// CgroupParent, when set, is the cgroup directory (a path under the
	// cgroup2 mount) that task cgroups are created in instead of
	// legate-<hash of Dir> under the process's own cgroup. For tests.
	CgroupParent string
	// Logger; nil means slog.Default().
	Logger *slog.Logger
	// Sandbox says whether shell tasks run in namespaces of their own
	// (see Sandbox); "" means SandboxOff here: the delegate defaults to
	// SandboxAuto.
	Sandbox Sandbox
	// UIDs, when not empty, is the range of users a root delegate runs
	// sandboxed tasks as, one per running task.
	UIDs UIDRange
}

// Isolator makes sure that when a shell task ends, for any reason, every
// process it started ends too. A delegate process has one, passed to
// every task run in Options.Isolator.
//
// In cgroup mode each run gets a cgroup (version 2) created under one
// owned by the delegate, and its shell is started directly inside it
// (clone3 with CLONE_INTO_CGROUP), so no process of the task is ever
// outside it. Ending the run sends SIGTERM to every process in it, then
// after the grace kills the whole cgroup (cgroup.kill, or freeze and
// SIGKILL each process on kernels before 5.14), waits until it is empty and
// removes it. After a crash of the delegate, Sweep at the next start kills
// and removes every cgroup the crashed run left.
//
// In tree mode (no writable cgroup2 hierarchy, such as in an unprivileged
// container) the delegate becomes a child subreaper: processes whose
// parent exits are re-parented to it instead of to init, so every process
// a task starts stays a descendant of the delegate. Ending a run signals
// the processes found from it: the descendants of its shell, the members
// of its process group, the processes whose environment holds the run's
// RunMarkerEnv, and their descendants; this repeats until none is left.
// Zombies the delegate inherits are reaped when a run ends. The limits of
// tree mode:
//   - A process that leaves the task's process group (setsid), removes
//     RunMarkerEnv from its environment (env -i) and whose parent exits
//     before the task ends cannot be told apart from the delegate's own
//     children; it is not found. Use cgroup mode where tasks are not
//     trusted that far.
//   - The environment is only readable for processes of the delegate's
//     user (or all, as root).
//   - After a crash of the delegate, Sweep finds leftover processes by
//     their RunMarkerEnv only (the records of runs in Dir/task-runs say
//     which values to look for); processes that dropped it survive.
//   - The process reaps zombie children that are not process-group
//     leaders in its own session (those may be shells its code waits
//     for); a program embedding an Isolator in tree mode must not start
//     other children that leave its session and wait for them itself.
type Isolator struct {
	log  *slog.Logger
	dir  string
	self procInfo

	mu   sync.Mutex
	mode Isolation // resolved: cgroup or tree
	// cg is the cgroup task cgroups are made in (cgroup mode).
	cg *cgroupDir
	// subreaper is set once the process is a child subreaper (tree
	// mode), or when it is PID 1 and so inherits orphans anyway.
	subreaper bool
	// sb runs shell tasks in namespaces of their own (nil: not);
	// sbReason says why not when it was asked for.
	sb       *sandbox
	sbReason string
}

// runsDir is where tree mode records its runs, under IsolatorOptions.Dir.
const runsDir = "task-runs"

// NewIsolator prepares task isolation. In auto mode it uses a cgroup when
// it can create its cgroup and falls back to the process tree; in cgroup
// mode it fails when it cannot.
func NewIsolator(opts IsolatorOptions) (*Isolator, error) {
	mode, err := ParseIsolation(string(opts.Mode))
	if err != nil {
		return nil, err
	}
	if opts.Dir == "" {
		return nil, errors.New("task isolation needs the delegate's working directory")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("task isolation: %w", err)
	}
	i := &Isolator{log: opts.Logger, dir: dir}
	if i.log == nil {
		i.log = slog.Default()
	}
	self, ok := readProc(os.Getpid())
	if !ok {
		return nil, errors.New("task isolation needs /proc (cannot read /proc/self/stat)")
	}
	i.self = self
	var cgErr error
	if mode != IsolationTree {
		parent := opts.CgroupParent
		if parent == "" {
			parent, cgErr = delegateCgroup(dir)
		}
		if cgErr == nil {
			i.cg, cgErr = openCgroupDir(parent)
		}
		if cgErr == nil {
			i.mode = IsolationCgroup
		} else if mode == IsolationCgroup {
			return nil, fmt.Errorf("task isolation: cgroup mode needs a writable cgroup2 hierarchy: %w", cgErr)
		}
	}
	if i.mode == "" {
		if err := i.becomeSubreaper(); err != nil {
			return nil, err
		}
		i.mode = IsolationTree
		if mode == IsolationAuto {
			i.log.Info("task isolation: no usable cgroup; ending task processes by process tree", "reason", cgErr)
		}
	}
	if os.Getpid() == 1 {
		i.subreaper = true // orphans come to PID 1 whatever the mode
	}
	if err := i.startSandbox(opts); err != nil {
		return nil, err
	}
	return i, nil
}

// startSandbox tries the sandbox asked for with a trial task, and keeps it
// when the trial succeeds (see Sandbox).
func (i *Isolator) startSandbox(opts IsolatorOptions) error {
	mode := opts.Sandbox
	if mode == "" {
		mode = SandboxOff
	}
	if _, err := ParseSandbox(string(mode)); err != nil {
		return err
	}
	root := os.Geteuid() == 0
	if opts.UIDs.Count > 0 && !root {
		return fmt.Errorf("task user IDs (LEGATE_TASK_UIDS=%s) need the delegate to run as root; it runs as user %d", opts.UIDs, os.Geteuid())
	}
	if mode == SandboxOff {
		i.sbReason = "turned off (LEGATE_TASK_SANDBOX=off)"
		return nil
	}
	sb := &sandbox{root: root, uids: opts.UIDs, used: map[int]bool{}, hide: []string{i.dir}}
	if i.dir == "/" {
		sb.hide = nil
		for _, d := range SandboxHiddenDirs() {
			sb.hide = append(sb.hide, filepath.Join(i.dir, d))
		}
	}
	err := reachable(i.dir, opts.UIDs)
	if err == nil {
		err = sb.probe(filepath.Join(i.dir, SandboxHiddenDirs()[0]))
	}
	if err != nil {
		if mode == SandboxNamespaces {
			return fmt.Errorf("task sandbox (LEGATE_TASK_SANDBOX=namespaces) not possible here: %w", err)
		}
		i.sbReason = err.Error()
		return nil
	}
	i.sb = sb
	return nil
}

// reachable checks that task users can reach the delegate's working
// directory (inside the sandbox it is an empty tmpfs with the task's own
// directory): every directory above it must let others search it.
func reachable(dir string, uids UIDRange) error {
	if uids.Count == 0 {
		return nil
	}
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return err
		}
		if st.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("task users (LEGATE_TASK_UIDS) cannot reach the working directory %s: %s does not let others search it (chmod o+x %s, or use a working directory under directories that do)", dir, d, d)
		}
		if d == "/" {
			return nil
		}
	}
}

// SandboxHiddenDirs are the directories, under the delegate's working
// directory, that a sandboxed task sees empty when that directory is /
// (otherwise the whole working directory is): "tasks" holds every task's
// working directory (its own is bound back), "spool" results and output
// not delivered yet, "task-runs" tree mode's records, "scripts" the
// delegate's own scripts.
func SandboxHiddenDirs() []string { return []string{"tasks", "spool", runsDir, "scripts"} }

// SandboxState says how shell tasks are kept apart: Mode is
// SandboxNamespaces or SandboxOff, UIDs the range of their users (when
// any), Reason why there is no sandbox (when there is none).
type SandboxState struct {
	Mode   Sandbox
	UIDs   string
	Reason string
}

// Sandbox reports the sandbox in use.
func (i *Isolator) Sandbox() SandboxState {
	if i.sb == nil {
		return SandboxState{Mode: SandboxOff, Reason: i.sbReason}
	}
	return SandboxState{Mode: SandboxNamespaces, UIDs: i.sb.uids.String()}
}

func (i *Isolator) sandbox() *sandbox { return i.sb }

// Mode is the mechanism in use: IsolationCgroup or IsolationTree.
func (i *Isolator) Mode() Isolation {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.mode
}

// CgroupPath is the cgroup task cgroups are created in ("" in tree mode).
func (i *Isolator) CgroupPath() string {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.mode != IsolationCgroup {
		return ""
	}
	return i.cg.path
}

func (i *Isolator) becomeSubreaper() error {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.subreaper {
		return nil
	}
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("task isolation: become a child subreaper: %w", err)
	}
	i.subreaper = true
	return nil
}

// fallBackToTree switches a cgroup isolator to tree mode after starting a
// shell in a cgroup failed (clone3 refused, as some seccomp filters do).
func (i *Isolator) fallBackToTree(cause error) error {
	if err := i.becomeSubreaper(); err != nil {
		return err
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.mode == IsolationCgroup {
		i.mode = IsolationTree
		i.log.Warn("task isolation: cannot start tasks in a cgroup; ending task processes by process tree from now on", "err", cause)
	}
	return nil
}

// Sweep ends what an earlier run of this delegate (same Dir) left behind
// when it crashed: every leftover task cgroup is killed and removed, and
// in tree mode the processes carrying the marker of a recorded run are
// killed. It returns how many leftover runs it found. Call it once at
// start, before any task runs.
func (i *Isolator) Sweep() (int, error) {
	n := 0
	var errs []error
	i.mu.Lock()
	cg := i.cg
	i.mu.Unlock()
	if cg != nil {
		k, err := cg.sweep()
		n += k
		if err != nil {
			errs = append(errs, err)
		}
	}
	k, err := sweepRecordedRuns(filepath.Join(i.dir, runsDir))
	n += k
	if err != nil {
		errs = append(errs, err)
	}
	i.reapOrphans(nil, 0)
	return n, errors.Join(errs...)
}

// Close removes the delegate's cgroup when no task cgroup is left in it
// and reaps inherited zombies. Call it when no task runs any more.
func (i *Isolator) Close() error {
	i.reapOrphans(nil, 0)
	i.mu.Lock()
	cg := i.cg
	i.mu.Unlock()
	if cg == nil {
		return nil
	}
	return cg.close()
}

// isoRun is one isolated run of a shell.
type isoRun struct {
	iso    *Isolator
	marker string // RunMarkerEnv=value
	// cgroup mode
	cg   *taskCgroup
	tree bool
	// tree mode
	record string   // the run's record file
	shell  procInfo // the shell, once started
	// seen holds every process found as part of the run (tree mode),
	// reaped when it ends if it became our zombie; last is the last list
	// of processes stopTree read (what release reaps from).
	seen map[int]procInfo
	last []procInfo
}

// prepare readies a run: in cgroup mode its cgroup, in tree mode its
// record. It returns the run and the environment entry to add.
func (i *Isolator) prepare() (*isoRun, error) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	nonce := hex.EncodeToString(b[:])
	r := &isoRun{iso: i, marker: RunMarkerEnv + "=" + nonce}
	i.mu.Lock()
	mode, cg := i.mode, i.cg
	i.mu.Unlock()
	if mode == IsolationCgroup {
		tc, err := cg.create("run-" + nonce)
		if err != nil {
			return nil, err
		}
		r.cg = tc
		return r, nil
	}
	return r, r.startTree(nonce)
}

// startTree records the run so a crash of the delegate leaves a trace
// Sweep can follow.
func (r *isoRun) startTree(nonce string) error {
	r.tree = true
	r.cg = nil
	r.seen = map[int]procInfo{}
	dir := filepath.Join(r.iso.dir, runsDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("task isolation: record the run: %w", err)
	}
	r.record = filepath.Join(dir, nonce)
	f, err := os.OpenFile(r.record, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("task isolation: record the run: %w", err)
	}
	return f.Close()
}

// apply sets up attr for the shell's start.
func (r *isoRun) apply(attr *syscall.SysProcAttr) {
	if r.cg != nil {
		attr.UseCgroupFD = true
		attr.CgroupFD = r.cg.fd
	}
}

// startFailed reports a failed start of the shell. In cgroup mode it
// switches the isolator to tree mode and returns true when the start
// should be tried again (the run is now a tree run).
func (r *isoRun) startFailed(err error) (retry bool) {
	// clone3 filtered by seccomp (ENOSYS, EPERM), CLONE_INTO_CGROUP not
	// supported (EINVAL, E2BIG) or the cgroup refused (EBADF: not a
	// cgroup, EACCES, EBUSY, EOPNOTSUPP); other errors are not the
	// cgroup's.
	if r.cg == nil || !errors.Is(err, syscall.ENOSYS) && !errors.Is(err, syscall.EPERM) && !errors.Is(err, syscall.EINVAL) &&
		!errors.Is(err, syscall.E2BIG) && !errors.Is(err, syscall.EACCES) && !errors.Is(err, syscall.EBUSY) &&
		!errors.Is(err, syscall.EOPNOTSUPP) && !errors.Is(err, syscall.EBADF) {
		return false
	}
	r.cg.remove(r.iso.log)
	r.cg = nil
	if ferr := r.iso.fallBackToTree(err); ferr != nil {
		r.iso.log.Warn("task isolation", "err", ferr)
		return false
	}
	return r.startTree(strings.TrimPrefix(r.marker, RunMarkerEnv+"=")) == nil
}

// started notes the shell's pid.
func (r *isoRun) started(pid int) {
	if r.cg != nil {
		r.cg.closeFD()
		return
	}
	if p, ok := readProc(pid); ok {
		r.shell = p
	} else {
		r.shell = procInfo{pid: pid, pgrp: pid}
	}
}

// stop ends every process of the run: SIGTERM, then SIGKILL for what is
// left after grace. It returns once none is left (or after killWait, with
// an error naming what survived).
func (r *isoRun) stop(grace time.Duration) error {
	if r.cg != nil {
		return r.cg.stop(grace)
	}
	return r.stopTree(grace)
}

// release removes what the run needed: its cgroup, or its record, and
// reaps the zombies of its processes.
func (r *isoRun) release() {
	if r.cg != nil {
		r.cg.closeFD()
		r.cg.remove(r.iso.log)
		return
	}
	if r.tree {
		r.iso.reapFrom(r.last, r.seen, r.shell.pid)
		if r.record != "" {
			_ = os.Remove(r.record)
		}
	}
}

// shellLike reports a child of ours that may be a shell some code of
// this process started and waits for: a process-group leader in our
// session (every shell this package starts is one).
func (i *Isolator) shellLike(p procInfo) bool {
	return p.pgrp == p.pid && p.sid == i.self.sid
}

// reapOrphans waits for zombie children that nothing else of this process
// waits for (see reapFrom).
func (i *Isolator) reapOrphans(seen map[int]procInfo, skip int) {
	i.reapFrom(nil, seen, skip)
}

// reapFrom reaps, among procs (nil: read them now), the zombie children
// that nothing else of this process waits for: the zombies of processes in
// seen (other than the shell skip, which exec.Cmd waits for), and every
// zombie child that is not shellLike. It does nothing unless the process
// inherits orphans.
func (i *Isolator) reapFrom(procs []procInfo, seen map[int]procInfo, skip int) {
	i.mu.Lock()
	sub := i.subreaper
	i.mu.Unlock()
	if !sub {
		return
	}
	if procs == nil {
		var err error
		if procs, err = listProcs(); err != nil {
			return
		}
	}
	self := os.Getpid()
	for _, p := range procs {
		if p.ppid != self || !p.dead() || p.pid == skip {
			continue
		}
		if s, ok := seen[p.pid]; (ok && s.start == p.start) || !i.shellLike(p) {
			var ws unix.WaitStatus
			_, _ = unix.Wait4(p.pid, &ws, unix.WNOHANG, nil)
		}
	}
}
