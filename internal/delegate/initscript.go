package delegate

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/legate-dev/legate/internal/executor"
	"github.com/legate-dev/legate/internal/mask"
	"github.com/legate-dev/legate/internal/protocol"
)

// DefaultScriptTimeout bounds INIT_SCRIPT and each configuration script.
const DefaultScriptTimeout = protocol.ConfigurationTimeoutMS * time.Millisecond

// scriptsDir holds the script files of INIT_SCRIPT and configurations,
// under the delegate's working directory.
const scriptsDir = "scripts"

// maxLogLine bounds one logged line of script output; longer lines are
// logged in pieces.
const maxLogLine = 4096

// scriptRun is the outcome of one run of a delegate-level script.
type scriptRun struct {
	outcome  executor.Outcome
	excerpt  string
	total    int64
	started  time.Time
	finished time.Time
}

// runScript runs script with bash in the delegate's working directory,
// with the task environment (no delegate credentials) plus extraEnv,
// bounded by the script timeout; its process group is killed on timeout or
// cancellation. Every output line is logged (msg, with attribute "line")
// and an excerpt of the head and tail is returned, with the delegate's
// credentials masked in both.
func (a *Agent) runScript(ctx context.Context, file, msg string, sc scriptSecrets, extraEnv []string) scriptRun {
	lw := &lineLogger{log: a.log, msg: msg}
	ex := &excerpt{limit: protocol.ConfigurationOutputExcerpt}
	// The delegate's credentials and the script's stored secrets are
	// masked in the log and the excerpt (which goes to the manager) as in
	// task output.
	w := mask.New(&teeWriter{a: lw, b: ex}, slices.Concat(a.ownSecrets, sc.mask))
	env := slices.Concat(a.opts.TaskEnv, extraEnv, sc.env)
	script := sc.script
	r := scriptRun{started: time.Now()}
	r.outcome = executor.Run(ctx, protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: script}},
		executor.Options{
			WorkDir:    a.opts.WorkDir,
			ScriptPath: filepath.Join(a.opts.WorkDir, scriptsDir, file),
			Env:        env,
			Timeout:    a.scriptTimeout(),
		}, w)
	_ = w.Flush()
	lw.flush()
	r.finished = time.Now()
	r.excerpt, r.total = ex.String(), ex.total
	return r
}

func (a *Agent) scriptTimeout() time.Duration {
	if a.opts.ScriptTimeout > 0 {
		return a.opts.ScriptTimeout
	}
	return DefaultScriptTimeout
}

// runInitScript runs INIT_SCRIPT (the script text, as the seeds' task
// definitions set it) before the delegate connects. Its output goes to the
// delegate's log line by line. A script that cannot start, exits non-zero
// or outlives the script timeout stops the delegate with an error that
// names INIT_SCRIPT. A stop request while it runs kills it and returns nil.
func (a *Agent) runInitScript(ctx context.Context) error {
	script := a.cfg.InitScript
	if script == "" {
		return nil
	}
	sc, err := a.initSecrets(ctx, script)
	if err != nil {
		if ctx.Err() != nil {
			a.log.Info("stop requested while INIT_SCRIPT's stored secrets were fetched; not starting")
			return nil
		}
		return err
	}
	a.log.Info("running INIT_SCRIPT", "dir", a.opts.WorkDir, "timeout", a.scriptTimeout())
	r := a.runScript(ctx, "init.sh", "INIT_SCRIPT", sc, nil)
	o := r.outcome
	switch {
	case o.Status == protocol.StatusSucceeded:
		a.log.Info("INIT_SCRIPT finished", "exit_code", 0, "took", r.finished.Sub(r.started).Round(time.Millisecond))
		return nil
	case o.Status == protocol.StatusCancelled && ctx.Err() != nil:
		a.log.Info("stop requested while INIT_SCRIPT ran; not starting")
		return nil
	case o.Status == protocol.StatusTimedOut:
		return fmt.Errorf("INIT_SCRIPT did not finish within %s and was killed; the delegate does not start", a.scriptTimeout())
	case o.ExitCode != nil:
		return fmt.Errorf("INIT_SCRIPT failed with exit code %d; the delegate does not start (its output is in the log above)", *o.ExitCode)
	}
	return fmt.Errorf("INIT_SCRIPT could not run: %s; the delegate does not start", o.Error)
}

// lineLogger logs each line written to it.
type lineLogger struct {
	log *slog.Logger
	msg string
	buf []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			l.buf = append(l.buf, p...)
			for len(l.buf) >= maxLogLine {
				l.emit(l.buf[:maxLogLine])
				l.buf = append(l.buf[:0], l.buf[maxLogLine:]...)
			}
			break
		}
		l.buf = append(l.buf, p[:i]...)
		l.emit(l.buf)
		l.buf = l.buf[:0]
		p = p[i+1:]
	}
	return n, nil
}

func (l *lineLogger) emit(line []byte) {
	for len(line) > maxLogLine {
		l.log.Info(l.msg, "line", string(line[:maxLogLine]))
		line = line[maxLogLine:]
	}
	l.log.Info(l.msg, "line", string(bytes.TrimRight(line, "\r")))
}

// flush logs a last line that had no newline.
func (l *lineLogger) flush() {
	if len(l.buf) > 0 {
		l.emit(l.buf)
		l.buf = l.buf[:0]
	}
}

// excerpt keeps the first and the last limit/2 bytes written to it.
type excerpt struct {
	limit int
	head  []byte
	tail  []byte // the last limit/2 bytes after the head
	total int64
}

func (e *excerpt) Write(p []byte) (int, error) {
	n := len(p)
	e.total += int64(n)
	half := e.limit / 2
	if room := half - len(e.head); room > 0 {
		k := min(room, len(p))
		e.head = append(e.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	if len(p) >= half {
		e.tail = append(e.tail[:0], p[len(p)-half:]...)
		return n, nil
	}
	e.tail = append(e.tail, p...)
	if over := len(e.tail) - half; over > 0 {
		e.tail = append(e.tail[:0], e.tail[over:]...)
	}
	return n, nil
}

// String is the head, a marker saying how many bytes were left out (if
// any), and the tail.
func (e *excerpt) String() string {
	kept := int64(len(e.head) + len(e.tail))
	if kept == e.total {
		return string(e.head) + string(e.tail)
	}
	return string(e.head) + "\n[… " + strconv.FormatInt(e.total-kept, 10) + " bytes left out …]\n" + string(e.tail)
}

// teeWriter writes to two writers that never fail.
type teeWriter struct {
	mu   sync.Mutex
	a, b interface{ Write([]byte) (int, error) }
}

func (t *teeWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, _ = t.a.Write(p)
	_, _ = t.b.Write(p)
	return len(p), nil
}
