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
	"syscall"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// ScriptName is the file a shell task's script is written to in WorkDir.
const ScriptName = "script.sh"

// groupPoll is how often a terminating process group is checked for exit.
const groupPoll = 20 * time.Millisecond

func runShell(ctx context.Context, spec protocol.TaskSpec, opts Options, out io.Writer) Outcome {
	if spec.Shell == nil {
		return failed(`shell task has no "shell" section`)
	}
	if opts.WorkDir == "" {
		return failed("shell task needs a work directory (none configured)")
	}
	if err := ctx.Err(); err != nil {
		return Outcome{Status: protocol.StatusCancelled, Error: "task cancelled before it started"}
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		return faulted(fmt.Sprintf("bash not found on the delegate's PATH: %v", err))
	}
	if err := os.MkdirAll(opts.WorkDir, 0o700); err != nil {
		return faulted(fmt.Sprintf("create work directory: %v", err))
	}
	script, arg := filepath.Join(opts.WorkDir, ScriptName), ScriptName
	if opts.ScriptPath != "" {
		script, arg = opts.ScriptPath, opts.ScriptPath
		if err := os.MkdirAll(filepath.Dir(script), 0o700); err != nil {
			return faulted(fmt.Sprintf("create script directory: %v", err))
		}
	}
	if err := writeScript(script, spec.Shell.Script); err != nil {
		return faulted(err.Error())
	}

	// The output pipe is read here, not by exec.Cmd: its copier gives up
	// WaitDelay after the script exits, which would lose output still in
	// the pipe while the writer applies back-pressure.
	pr, pw, err := os.Pipe()
	if err != nil {
		return faulted(fmt.Sprintf("create output pipe: %v", err))
	}
	defer pr.Close()
	outPath, err := prepareOutputFile(opts.WorkDir)
	if err != nil {
		pw.Close()
		return faulted(err.Error())
	}
	env := append(buildEnv(opts.Env, spec.Env, spec.SecretEnv), protocol.OutputEnv+"="+outPath)
	var run *isoRun
	if opts.Isolator != nil {
		if run, err = opts.Isolator.prepare(); err != nil {
			pw.Close()
			return faulted(fmt.Sprintf("isolate task processes: %v", err))
		}
		env = append(env, run.marker)
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
	if run != nil {
		run.apply(cmd.SysProcAttr)
	}
	err = cmd.Start()
	if err != nil && run != nil && run.startFailed(err) {
		cmd = &exec.Cmd{Path: cmd.Path, Args: cmd.Args, Dir: cmd.Dir, Env: cmd.Env, Stdout: pw, Stderr: pw,
			SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
		err = cmd.Start()
	}
	pw.Close()
	if err != nil {
		if run != nil {
			run.release()
		}
		return faulted(fmt.Sprintf("start bash: %v", err))
	}
	pgid := cmd.Process.Pid
	if run != nil {
		run.started(pgid)
	}
	if opts.OnStart != nil {
		opts.OnStart()
	}
	reader := startOutputReader(pr, out)

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	var timeout <-chan time.Time
	if opts.Timeout > 0 {
		t := time.NewTimer(opts.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	// end stops what is left of the task: with an Isolator every process
	// it started, else (cancel and timeout only) its process group.
	var stopErr error
	end := func(all bool) string {
		if run != nil {
			stopErr = run.stop(opts.killGrace())
			if all {
				<-done
			}
			return "killed all its processes"
		}
		if all {
			terminate(pgid, done, opts.killGrace())
		}
		return "killed process group"
	}
	var o Outcome
	var notice string
	select {
	case err := <-done:
		o = exited(cmd, err)
		end(false)
	case <-ctx.Done():
		what := end(true)
		notice = fmt.Sprintf("\n[legate: task cancelled; %s]\n", what)
		o = Outcome{Status: protocol.StatusCancelled, Error: "task cancelled"}
	case <-timeout:
		what := end(true)
		notice = fmt.Sprintf("\n[legate: task timed out after %s; %s]\n", opts.Timeout, what)
		o = Outcome{Status: protocol.StatusTimedOut, Error: fmt.Sprintf("task timed out after %s", opts.Timeout)}
	}
	held := reader.finish()
	if run != nil {
		run.release()
	}
	if stopErr != nil {
		fmt.Fprintf(out, "\n[legate: %v]\n", stopErr)
	}
	if held {
		fmt.Fprintf(out, "\n[legate: stopped reading output after the script ended; background processes still hold it]\n")
	}
	if notice != "" {
		io.WriteString(out, notice)
	}
	var problems []string
	o.Outputs, problems = readOutputFile(outPath)
	for _, p := range problems {
		fmt.Fprintf(out, "\n[legate: %s]\n", p)
	}
	return o
}

func (o Options) killGrace() time.Duration {
	if o.KillGrace > 0 {
		return o.KillGrace
	}
	return DefaultKillGrace
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

// terminate stops the process group pgid: SIGTERM, then SIGKILL once grace
// passed unless the whole group is gone by then. It returns when the main
// process has been waited for.
func terminate(pgid int, done <-chan error, grace time.Duration) {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(groupPoll)
	defer tick.Stop()
	mainDone := false
	for {
		select {
		case <-done:
			mainDone = true
			done = nil
			if groupGone(pgid) {
				return
			}
		case <-tick.C:
			if mainDone && groupGone(pgid) {
				return
			}
		case <-deadline.C:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			if !mainDone {
				<-done
			}
			return
		}
	}
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
