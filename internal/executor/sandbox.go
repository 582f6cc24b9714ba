package executor

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Sandbox selects whether shell tasks run in a sandbox of their own: new
// user, PID, mount and IPC namespaces in which another task's processes,
// environment, working directory and temporary files do not exist.
type Sandbox string

const (
	// SandboxAuto uses namespaces when a trial at start shows the host
	// allows them, and runs tasks without otherwise.
	SandboxAuto Sandbox = "auto"
	// SandboxNamespaces requires namespaces: the delegate does not start
	// without them.
	SandboxNamespaces Sandbox = "namespaces"
	// SandboxOff runs tasks in the delegate's own namespaces.
	SandboxOff Sandbox = "off"
)

// ParseSandbox reads a mode as written in LEGATE_TASK_SANDBOX; "" means
// SandboxAuto.
func ParseSandbox(s string) (Sandbox, error) {
	switch m := Sandbox(strings.ToLower(strings.TrimSpace(s))); m {
	case "":
		return SandboxAuto, nil
	case SandboxAuto, SandboxNamespaces, SandboxOff:
		return m, nil
	}
	return "", fmt.Errorf("task sandbox %q: want auto, namespaces or off", s)
}

// UIDRange is a range of user IDs a root delegate runs tasks as, one per
// running task (LEGATE_TASK_UIDS=FIRST-LAST).
type UIDRange struct {
	First, Count int
}

// MaxUIDRange bounds the size of LEGATE_TASK_UIDS: more IDs than tasks
// could ever run at once only hide typing mistakes.
const MaxUIDRange = 1 << 20

// ParseUIDRange reads "FIRST-LAST" (inclusive); "" means none.
func ParseUIDRange(s string) (UIDRange, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return UIDRange{}, nil
	}
	a, b, ok := strings.Cut(s, "-")
	first, err1 := strconv.Atoi(strings.TrimSpace(a))
	last, err2 := strconv.Atoi(strings.TrimSpace(b))
	switch {
	case !ok || err1 != nil || err2 != nil:
		return UIDRange{}, fmt.Errorf("task user IDs %q: want FIRST-LAST, such as 100000-100999", s)
	case first < 1000 || last < first:
		return UIDRange{}, fmt.Errorf("task user IDs %q: want FIRST-LAST with 1000 <= FIRST <= LAST (IDs below 1000 belong to the system)", s)
	case last-first+1 > MaxUIDRange || last >= 1<<31-1:
		return UIDRange{}, fmt.Errorf("task user IDs %q: at most %d IDs, below 2147483647", s, MaxUIDRange)
	}
	return UIDRange{First: first, Count: last - first + 1}, nil
}

func (r UIDRange) String() string {
	if r.Count == 0 {
		return ""
	}
	return fmt.Sprintf("%d-%d", r.First, r.First+r.Count-1)
}

// sandboxInitArg is the hidden first argument with which the delegate's
// own binary runs as the first process of a task's sandbox (see
// runSandboxInit).
const sandboxInitArg = "__legate-task-init"

// sandboxTmpDirs get a fresh, empty tmpfs in every sandbox: what one task
// leaves there no other sees.
func sandboxTmpDirs() []string { return []string{"/tmp", "/var/tmp", "/dev/shm"} }

// sandboxSpec is what the init of a sandbox needs, passed as its second
// argument (JSON): the directories to cover, the one to bind back, and the
// program to run.
type sandboxSpec struct {
	// Hide are covered with an empty tmpfs (the delegate's task, spool
	// and run-record directories).
	Hide []string `json:"hide"`
	// Keep is the task's working directory, bound back under Hide.
	Keep string `json:"keep,omitempty"`
	// UID is the user the program runs as (outside: root in its
	// namespace), -1 for the init's own.
	UID int `json:"uid"`
	// Path and Args are the program (Args[0] its name).
	Path string   `json:"path"`
	Args []string `json:"args"`
}

// Register the hidden entry point: a package init so that every binary
// linking this package — the delegate, and the tests that run tasks —
// can be re-executed as a sandbox's init, before anything else (a test
// binary would otherwise run its tests).
func init() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case sandboxInitArg:
			os.Exit(runSandboxInit(os.Args[2:]))
		case kubernetesArg:
			os.Exit(runKubernetes())
		}
	}
}

// sandbox is an Isolator's namespaces: set when the trial at start
// succeeded.
type sandbox struct {
	hide []string
	// root: the delegate runs as root (it maps user 0 of the sandbox to
	// a user of uids when set, to root otherwise); else it maps user 0 to
	// its own user.
	root bool
	uids UIDRange
	mu   sync.Mutex
	used map[int]bool // uids of running tasks
}

// sandboxRun is what one run holds of its sandbox: the user it runs as
// and the pipe its init reports the shell's status on.
type sandboxRun struct {
	sb     *sandbox
	uid    int // -1: none of the range
	status *os.File
}

// acquireUID takes a free user of the range; -1 without one.
func (sb *sandbox) acquireUID() (int, error) {
	if sb.uids.Count == 0 {
		return -1, nil
	}
	sb.mu.Lock()
	defer sb.mu.Unlock()
	for i := 0; i < sb.uids.Count; i++ {
		u := sb.uids.First + i
		if !sb.used[u] {
			sb.used[u] = true
			return u, nil
		}
	}
	return -1, fmt.Errorf("every task user ID of LEGATE_TASK_UIDS=%s is in use; widen the range", sb.uids)
}

func (sb *sandbox) releaseUID(u int) {
	if u < 0 {
		return
	}
	sb.mu.Lock()
	delete(sb.used, u)
	sb.mu.Unlock()
}

// wrap turns cmd (a shell to start in workDir) into the start of the
// sandbox's init running it. It returns the run's sandbox state, which
// the caller releases.
func (sb *sandbox) wrap(cmd *exec.Cmd, workDir string) (*sandboxRun, error) {
	// The init resolves the path in the task's directory, not in the
	// delegate's: a relative one (legate dev's .legate-dev/...) would name
	// nothing there.
	workDir, err := filepath.Abs(workDir)
	if err != nil {
		return nil, fmt.Errorf("task sandbox: the task directory: %w", err)
	}
	uid, err := sb.acquireUID()
	if err != nil {
		return nil, err
	}
	sr := &sandboxRun{sb: sb, uid: uid}
	if uid >= 0 {
		// The task's own user owns its directory; no other task's may read it.
		if err := chownTree(workDir, uid); err != nil {
			sb.releaseUID(uid)
			return nil, err
		}
	}
	spec := sandboxSpec{Hide: sb.hide, Keep: workDir, UID: uid, Path: cmd.Path, Args: cmd.Args}
	b, err := json.Marshal(spec)
	if err != nil {
		sb.releaseUID(uid)
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		sb.releaseUID(uid)
		return nil, err
	}
	sr.status = r
	cmd.Path = "/proc/self/exe"
	cmd.Args = []string{"legate-task-init", sandboxInitArg, string(b)}
	cmd.ExtraFiles = []*os.File{w} // fd 3 of the init
	sb.apply(cmd.SysProcAttr, uid)
	return sr, nil
}

// apply sets up the namespaces of an init in attr: its user 0 is the
// delegate's own user; with a task user uid, that user is mapped too, for
// the init to hand it to the program.
func (sb *sandbox) apply(attr *syscall.SysProcAttr, uid int) {
	attr.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC
	attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Geteuid(), Size: 1}}
	attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getegid(), Size: 1}}
	if uid >= 0 {
		attr.UidMappings = append(attr.UidMappings, syscall.SysProcIDMap{ContainerID: uid, HostID: uid, Size: 1})
		attr.GidMappings = append(attr.GidMappings, syscall.SysProcIDMap{ContainerID: uid, HostID: uid, Size: 1})
	}
	attr.GidMappingsEnableSetgroups = sb.root
	attr.Credential = &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: !sb.root}
}

// started closes the init's end of the status pipe in this process.
func (sr *sandboxRun) started(cmd *exec.Cmd) {
	for _, f := range cmd.ExtraFiles {
		f.Close()
	}
}

// shellStatus is the wait status of the shell the init reported; ok is
// false when the init ended before it could (killed).
func (sr *sandboxRun) shellStatus() (syscall.WaitStatus, bool) {
	var b [4]byte
	if _, err := io.ReadFull(sr.status, b[:]); err != nil {
		return 0, false
	}
	return syscall.WaitStatus(binary.LittleEndian.Uint32(b[:])), true
}

func (sr *sandboxRun) release() {
	if sr.status != nil {
		sr.status.Close()
	}
	sr.sb.releaseUID(sr.uid)
	sr.uid = -1
}

// chownTree gives dir and what is in it to uid (and the group of that
// number).
func chownTree(dir string, uid int) error {
	err := filepath.WalkDir(dir, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, uid)
	})
	if err != nil {
		return fmt.Errorf("give the task directory to its user %d: %w", uid, err)
	}
	return nil
}

// runSandboxInit is the first process (PID 1) of a task's sandbox. It
// mounts a /proc of the new PID namespace (other tasks' processes, their
// environment and working directories do not exist in it), an empty
// tmpfs over each temporary directory and over the delegate's task
// directories, binds back the task's own directory, and starts the
// program in one more user and mount namespace: there the mounts made here
// are locked (the task cannot unmount them to look underneath) although
// it is root in its namespace. It stays to reap orphans, reports the
// program's wait status on fd 3 and exits with its code; when it exits
// the kernel kills whatever else is left in the namespace.
func runSandboxInit(args []string) int {
	status := os.NewFile(3, "status")
	syscall.CloseOnExec(3)
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "[legate: task sandbox: "+format+"]\n", a...)
		return 126
	}
	if len(args) != 1 {
		return fail("bad arguments")
	}
	var spec sandboxSpec
	if err := json.Unmarshal([]byte(args[0]), &spec); err != nil {
		return fail("bad specification: %v", err)
	}
	// Not dumpable: the task, the same user outside, cannot ptrace this
	// process, which holds the capabilities of the outer namespaces.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fail("%v", err)
	}
	if err := sandboxMounts(spec); err != nil {
		return fail("%v", err)
	}
	// Swallow the signals the delegate sends every process of the task:
	// the program gets them itself, and this one must outlive it to report
	// its status. Caught signals are reset for the program by exec.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGPIPE)
	user := max(spec.UID, 0) // as this namespace numbers it
	cmd := &exec.Cmd{
		Path: spec.Path, Args: spec.Args, Env: os.Environ(),
		Stdin: nil, Stdout: os.Stdout, Stderr: os.Stderr, Dir: spec.Keep,
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
			UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: user, Size: 1}},
			GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: user, Size: 1}},
			Credential:  &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
		},
	}
	if err := cmd.Start(); err != nil {
		return fail("start %s: %v", spec.Path, err)
	}
	ws := reapUntil(cmd.Process.Pid)
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], uint32(ws))
	_, _ = status.Write(b[:])
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// reapUntil waits for every child (orphans come to PID 1) until pid
// exited, and returns its status.
func reapUntil(pid int) syscall.WaitStatus {
	for {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return syscall.WaitStatus(127 << 8)
		}
		if got == pid {
			return ws
		}
	}
}

// sandboxMounts makes the sandbox's file system view (see runSandboxInit).
func sandboxMounts(spec sandboxSpec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	var keep *os.File
	if spec.Keep != "" {
		f, err := os.OpenFile(spec.Keep, unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return fmt.Errorf("open the task directory: %w", err)
		}
		defer f.Close()
		keep = f
	}
	if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	for _, d := range sandboxTmpDirs() {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			continue
		}
		if err := unix.Mount("tmpfs", d, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777"); err != nil {
			return fmt.Errorf("mount a private %s: %w", d, err)
		}
	}
	for _, d := range spec.Hide {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			continue
		}
		if err := unix.Mount("tmpfs", d, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755"); err != nil {
			return fmt.Errorf("cover %s: %w", d, err)
		}
	}
	if keep == nil {
		return nil
	}
	// The task's directory was covered with its parent: bind it back.
	// 0755: the task user (LEGATE_TASK_UIDS) walks through these; the
	// bind mount brings the directory's own mode.
	if err := os.MkdirAll(spec.Keep, 0o755); err != nil {
		return fmt.Errorf("bind back the task directory: %w", err)
	}
	src := "/proc/self/fd/" + strconv.Itoa(int(keep.Fd()))
	if err := unix.Mount(src, spec.Keep, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind back the task directory: %w", err)
	}
	return nil
}

// probeSandbox starts a trial task in a sandbox and reports why it cannot
// be used, nil when it can.
func (sb *sandbox) probe(hideDir string) error {
	if err := os.MkdirAll(hideDir, 0o700); err != nil {
		return err
	}
	dir, err := os.MkdirTemp(hideDir, "probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bash, err := exec.LookPath("bash")
	if err != nil {
		return fmt.Errorf("no bash for the trial task: %w", err)
	}
	// The trial sees the processes in its /proc: its init and itself.
	script := `n=0; for p in /proc/[0-9]*; do n=$((n+1)); done; [ "$n" -le 2 ] || exit 3`
	var out strings.Builder
	cmd := &exec.Cmd{Path: bash, Args: []string{"bash", "-c", script}, Dir: dir,
		Stdout: &out, Stderr: &out, SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
	sr, err := sb.wrap(cmd, dir)
	if err != nil {
		return err
	}
	defer sr.release()
	if err := cmd.Start(); err != nil {
		sr.started(cmd)
		return fmt.Errorf("start a process in new namespaces: %w", err)
	}
	sr.started(cmd)
	werr := cmd.Wait()
	ws, ok := sr.shellStatus()
	switch {
	case !ok:
		return fmt.Errorf("trial sandbox failed: %v: %s", werr, strings.TrimSpace(out.String()))
	case ws.ExitStatus() == 3:
		return errors.New("trial sandbox still sees other processes in /proc")
	case ws != 0:
		return fmt.Errorf("trial sandbox failed: %s: %s", ws2str(ws), strings.TrimSpace(out.String()))
	}
	return nil
}

func ws2str(ws syscall.WaitStatus) string {
	if ws.Signaled() {
		return "signal: " + ws.Signal().String()
	}
	return "exit status " + strconv.Itoa(ws.ExitStatus())
}
