package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/legate-dev/legate/internal/executor/pipe"
	"github.com/legate-dev/legate/internal/protocol"
)

// ScriptName is the file a shell task's script is written to in WorkDir.
const ScriptName = "script.sh"

// groupPoll is how often a terminating process group is checked for exit.
const groupPoll = 20 * time.Millisecond

// shellType runs a bash script in its own process group (see Isolator
// for the processes it starts).
type shellType struct{}

func (shellType) New(spec protocol.TaskSpec, opts Options) (Execution, error) {
	if spec.Shell == nil {
		return nil, errors.New(`shell task has no "shell" section`)
	}
	if opts.WorkDir == "" {
		return nil, errors.New("shell task needs a work directory (none configured)")
	}
	return &shellRun{spec: spec, opts: opts}, nil
}

// shellRun is one run of a shell task.
type shellRun struct {
	spec protocol.TaskSpec
	opts Options

	out     io.Writer
	pr      *os.File    // the output pipe's read end
	outPath string      // the task's $LEGATE_OUTPUT file
	run     *isoRun     // with an Isolator
	sbx     *sandboxRun // with an Isolator's sandbox
	cmd     *exec.Cmd
	pgid    int
	reader  *pipe.Reader
	// exited is closed once bash was waited for (waitErr set).
	exited  chan struct{}
	waitErr error

	mu   sync.Mutex
	done <-chan struct{} // exited, until Interrupt
	// killed is closed by Terminate (without an Isolator).
	killed chan struct{}
	// what says what Interrupt did, for the notice; stopErr is what an
	// Isolator could not end.
	what    string
	stopErr error
}

func (s *shellRun) Start(_ context.Context, out io.Writer) error {
	bash, err := exec.LookPath("bash")
	if err != nil {
		return faultf("bash not found on the delegate's PATH: %v", err)
	}
	opts := s.opts
	if err := os.MkdirAll(opts.WorkDir, 0o700); err != nil {
		return faultf("create work directory: %v", err)
	}
	script, arg := filepath.Join(opts.WorkDir, ScriptName), ScriptName
	if opts.ScriptPath != "" {
		script, arg = opts.ScriptPath, opts.ScriptPath
		if err := os.MkdirAll(filepath.Dir(script), 0o700); err != nil {
			return faultf("create script directory: %v", err)
		}
	}
	if err := writeScript(script, s.spec.Shell.Script); err != nil {
		return faultError{err}
	}

	// The output pipe is read here, not by exec.Cmd: its copier gives up
	// WaitDelay after the script exits, which would lose output still in
	// the pipe while the writer applies back-pressure.
	pr, pw, err := os.Pipe()
	if err != nil {
		return faultf("create output pipe: %v", err)
	}
	s.pr = pr
	if s.outPath, err = prepareOutputFile(opts.WorkDir); err != nil {
		pw.Close()
		return faultError{err}
	}
	env := append(buildEnv(opts.Env, s.spec.Env, s.spec.SecretEnv), protocol.OutputEnv+"="+s.outPath)
	if opts.Isolator != nil {
		if s.run, err = opts.Isolator.prepare(); err != nil {
			pw.Close()
			return faultf("isolate task processes: %v", err)
		}
		env = append(env, s.run.marker)
	}
	cmd := &exec.Cmd{
		Path:        bash,
		Args:        []string{"bash", arg},
		Dir:         opts.WorkDir,
		Env:         env,
		Stdout:      pw, // the same pipe for both: order preserved
		Stderr:      pw,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if s.run != nil {
		if sb := s.run.iso.sandbox(); sb != nil {
			if s.sbx, err = sb.wrap(cmd, opts.WorkDir); err != nil {
				pw.Close()
				return faultf("task sandbox: %v", err)
			}
		}
		s.run.apply(cmd.SysProcAttr)
	}
	err = cmd.Start()
	if err != nil && s.run != nil && s.run.startFailed(err) {
		attr := *cmd.SysProcAttr // the sandbox's namespaces stay
		attr.UseCgroupFD, attr.CgroupFD = false, 0
		cmd = &exec.Cmd{Path: cmd.Path, Args: cmd.Args, Dir: cmd.Dir, Env: cmd.Env, Stdout: pw, Stderr: pw,
			ExtraFiles: cmd.ExtraFiles, SysProcAttr: &attr}
		err = cmd.Start()
	}
	pw.Close()
	if s.sbx != nil {
		s.sbx.started(cmd)
	}
	if err != nil {
		return faultf("start bash: %v", err)
	}
	s.cmd, s.pgid = cmd, cmd.Process.Pid
	if s.run != nil {
		s.run.started(s.pgid)
	}
	s.out = out
	s.reader = pipe.Start(pr, out)
	s.exited = make(chan struct{})
	s.done = s.exited
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	return nil
}

func (s *shellRun) Done() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}

// Interrupt ends every process of the task with an Isolator (SIGTERM, and
// SIGKILL after the grace: it returns once none is left). Without one it
// sends SIGTERM to the task's process group, which is done once bash
// exited and no live process is left in the group.
func (s *shellRun) Interrupt() {
	if s.run != nil {
		s.stopErr = s.run.stop(s.opts.killGrace())
		s.what = "killed all its processes"
		return
	}
	s.what = "killed process group"
	stopped := make(chan struct{})
	s.killed = make(chan struct{})
	s.mu.Lock()
	s.done = stopped
	s.mu.Unlock()
	_ = syscall.Kill(-s.pgid, syscall.SIGTERM)
	go s.awaitGroup(stopped)
}

// awaitGroup closes stopped once bash exited and its process group is
// gone, or, after Terminate, once bash exited.
func (s *shellRun) awaitGroup(stopped chan<- struct{}) {
	defer close(stopped)
	tick := time.NewTicker(groupPoll)
	defer tick.Stop()
	exited, mainDone := s.exited, false
	for {
		select {
		case <-exited:
			mainDone, exited = true, nil
			if groupGone(s.pgid) {
				return
			}
		case <-tick.C:
			if mainDone && groupGone(s.pgid) {
				return
			}
		case <-s.killed:
			<-s.exited
			return
		}
	}
}

// Terminate sends SIGKILL to the task's process group. With an Isolator
// it does nothing: Interrupt returned once every process was gone.
func (s *shellRun) Terminate() {
	if s.run != nil {
		return
	}
	_ = syscall.Kill(-s.pgid, syscall.SIGKILL)
	close(s.killed)
}

func (s *shellRun) Finish(stop *Stop) Outcome {
	var o Outcome
	var notice string
	if stop == nil {
		o = exited(s.cmd, s.waitErr)
		if s.sbx != nil {
			// The init exits with the shell's code; its report tells a
			// signal from an exit code.
			if ws, ok := s.sbx.shellStatus(); ok {
				o = statusOutcome(ws)
			}
		}
		if s.run != nil {
			// What the script left running ends with it.
			s.stopErr = s.run.stop(s.opts.killGrace())
		}
	} else {
		o = stop.Outcome()
		notice = stop.Notice(s.what)
	}
	held := s.reader.Finish()
	if s.run != nil {
		s.run.release()
		s.run = nil
	}
	if s.sbx != nil {
		s.sbx.release()
		s.sbx = nil
	}
	if s.stopErr != nil {
		fmt.Fprintf(s.out, "\n[legate: %v]\n", s.stopErr)
	}
	if held {
		fmt.Fprintf(s.out, "\n[legate: stopped reading output after the script ended; background processes still hold it]\n")
	}
	if notice != "" {
		io.WriteString(s.out, notice)
	}
	var problems []string
	o.Outputs, problems = readOutputFile(s.outPath)
	for _, p := range problems {
		fmt.Fprintf(s.out, "\n[legate: %s]\n", p)
	}
	return o
}

// Cleanup releases the isolation and the pipe of a run (the isolation of
// one that did not start; Finish releases a started one's).
func (s *shellRun) Cleanup() {
	if s.run != nil {
		s.run.release()
	}
	if s.sbx != nil {
		s.sbx.release()
	}
	if s.pr != nil {
		s.pr.Close()
	}
}

func writeScript(path, script string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o700)
	if err != nil {
		return fmt.Errorf("write script: %w", err)
	}
	if _, err := f.WriteString(script); err != nil {
		f.Close()
		return fmt.Errorf("write script: %w", err)
	}
	if err := f.Chmod(0o700); err != nil { // an old file keeps its mode otherwise
		f.Close()
		return fmt.Errorf("write script: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write script: %w", err)
	}
	return nil
}

// exited turns the result of a script that ended by itself into an Outcome.
func exited(cmd *exec.Cmd, err error) Outcome {
	st := cmd.ProcessState
	if err == nil {
		code := 0
		return Outcome{Status: protocol.StatusSucceeded, ExitCode: &code}
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && st != nil {
		o := failed(ee.Error()) // "exit status 3" or "signal: killed"
		if code := st.ExitCode(); code >= 0 {
			o.ExitCode = &code
		}
		return o
	}
	o := failed(fmt.Sprintf("wait for bash: %v", err))
	if st != nil && st.ExitCode() >= 0 {
		code := st.ExitCode()
		o.ExitCode = &code
	}
	return o
}

// statusOutcome is exited for the wait status of a sandbox's shell.
func statusOutcome(ws syscall.WaitStatus) Outcome {
	if ws.Exited() && ws.ExitStatus() == 0 {
		code := 0
		return Outcome{Status: protocol.StatusSucceeded, ExitCode: &code}
	}
	o := failed(ws2str(ws))
	if ws.Exited() {
		code := ws.ExitStatus()
		o.ExitCode = &code
	}
	return o
}

// groupGone reports whether no live process of group pgid is left. A
// group whose members are all zombies counts as gone: they are dead and
// wait only for their new parent (often a slow PID 1 in containers) to
// reap them.
func groupGone(pgid int) bool {
	if errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) {
		return true
	}
	return !liveMember(pgid)
}

// liveMember reports whether /proc shows a process of group pgid that is
// not a zombie. Without /proc it assumes one is alive.
func liveMember(pgid int) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true
	}
	for _, e := range entries {
		name := e.Name()
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue
		}
		// Format: pid (comm) state ppid pgrp ...; comm may contain spaces.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 3 || f[2] != strconv.Itoa(pgid) {
			continue
		}
		if f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}
