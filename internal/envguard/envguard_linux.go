package envguard

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"
)

// Reexec executes the program again in this process, without the
// credentials r names in its environment and command line, handing their
// values over through an inherited pipe (see the package comment). On
// success it does not return. It returns nil at once when there is
// nothing to take out and r.Executable is "", and an error when the program cannot be executed
// again; the process is then unchanged and may go on as it is.
//
// Call it before the process starts anything that must survive, as the
// new image starts from main again.
func Reexec(r Request) error {
	env, args, values := r.split()
	if len(values) == 0 && r.Executable == "" {
		return nil
	}
	payload, err := Encode(values)
	if err != nil {
		return err
	}
	exe := r.Executable
	if exe == "" {
		exe = "/proc/self/exe"
	}
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		return fmt.Errorf("create the hand-over pipe: %w", err)
	}
	rd, wr := p[0], p[1]
	defer syscall.Close(wr)
	if rd < 3 {
		// Only when stdin, stdout or stderr was closed: keep those free
		// (Receive accepts descriptors from 3 on).
		n, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(rd), syscall.F_DUPFD_CLOEXEC, 3)
		syscall.Close(rd)
		if e != 0 {
			return fmt.Errorf("hand-over pipe: %w", e)
		}
		rd = int(n)
	}
	if err := handOver(rd, wr, payload); err != nil {
		syscall.Close(rd)
		return err
	}
	env = append(env, FDEnv+"="+strconv.Itoa(rd))
	err = syscall.Exec(exe, args, env)
	syscall.Close(rd)
	return fmt.Errorf("execute %s again: %w", exe, err)
}

// handOver writes payload into the pipe without blocking (nobody reads it
// before the exec) and lets its read end rd survive the exec.
func handOver(rd, wr int, payload []byte) error {
	if err := fcntl(wr, syscall.F_SETFL, syscall.O_NONBLOCK); err != nil {
		return fmt.Errorf("hand-over pipe: %w", err)
	}
	if len(payload) > 4096 {
		// A pipe holds 64 KiB, or one page once the user has many pipes.
		_ = fcntl(wr, syscall.F_SETPIPE_SZ, len(payload))
	}
	for off := 0; off < len(payload); {
		n, err := syscall.Write(wr, payload[off:])
		if err != nil {
			return fmt.Errorf("the credentials (%d bytes) do not fit in the hand-over pipe: %w", len(payload), err)
		}
		off += n
	}
	if err := fcntl(rd, syscall.F_SETFD, 0); err != nil { // clear FD_CLOEXEC
		return fmt.Errorf("hand-over pipe: %w", err)
	}
	return nil
}

func fcntl(fd, cmd, arg int) error {
	_, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), uintptr(cmd), uintptr(arg))
	if e != 0 {
		return e
	}
	return nil
}

// Receive returns the credentials Reexec handed over, when this process is
// the re-executed image: FDEnv is set. It reads them, closes the pipe and
// removes FDEnv from the environment, and reports received = true. Without
// FDEnv it returns nil, false, nil. Call it first thing in main.
func Receive() (values Values, received bool, err error) {
	v, ok := os.LookupEnv(FDEnv)
	if !ok {
		return nil, false, nil
	}
	os.Unsetenv(FDEnv)
	bad := func(why string, err error) error {
		msg := fmt.Sprintf("%s=%q: %s; legate sets this variable when it restarts itself without its credentials in the environment, so it must not be set by hand: unset it", FDEnv, v, why)
		if err != nil {
			return fmt.Errorf("%s (%w)", msg, err)
		}
		return errors.New(msg)
	}
	fd, err := strconv.Atoi(v)
	if err != nil || fd < 3 {
		return nil, true, bad("not the number of an inherited file descriptor", nil)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, true, bad("no such open file descriptor", err)
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFIFO {
		return nil, true, bad("not a pipe", nil)
	}
	syscall.CloseOnExec(fd)
	f := os.NewFile(uintptr(fd), "credentials hand-over")
	defer f.Close()
	// Read exactly what the header announces: no EOF is needed.
	b := make([]byte, headerLen)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, true, bad("reading the credentials", err)
	}
	n, err := bodyLen(b)
	if err != nil {
		return nil, true, bad("reading the credentials", err)
	}
	b = append(b, make([]byte, n)...)
	if _, err := io.ReadFull(f, b[headerLen:]); err != nil {
		return nil, true, bad("reading the credentials", err)
	}
	m, err := Decode(b)
	if err != nil {
		return nil, true, bad("reading the credentials", err)
	}
	return m, true, nil
}

// Harden marks the process not dumpable (prctl PR_SET_DUMPABLE 0): the
// processes of its user, such as a delegate's tasks, can then no longer
// read its memory, environment or open files through /proc, nor trace it,
// and it leaves no core dump. The process itself is not limited. Each
// program it executes is dumpable again (the kernel resets the flag at
// execve), so its tasks are not affected. A process with CAP_SYS_PTRACE,
// such as one running as root, can still read everything.
func Harden() error {
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0); e != 0 {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", e)
	}
	return nil
}

// close_range(2): the same number on every architecture (new system calls
// share one table since Linux 5.1), and its CLOSE_RANGE_CLOEXEC flag.
const (
	sysCloseRange     = 436
	closeRangeCloexec = 1 << 2
)

// SealDescriptors marks every open file descriptor from 3 on
// close-on-exec, so that the programs the process starts, such as a
// delegate's tasks, get only the descriptors it gives them: not those it
// inherited from whatever started it (a supervisor's socket, a pipe), which
// Go's os/exec would pass on. The process itself keeps them open.
func SealDescriptors() error {
	if _, _, e := syscall.Syscall(sysCloseRange, 3, ^uintptr(0), closeRangeCloexec); e == 0 {
		return nil
	}
	// Before Linux 5.11: one by one.
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("list open file descriptors: %w", err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("list open file descriptors: %w", err)
	}
	for _, n := range names {
		if fd, err := strconv.Atoi(n); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
	return nil
}
