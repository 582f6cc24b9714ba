package bench

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver, for throwaway databases

	"github.com/legate-dev/legate/internal/client"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat: 100
// on every Linux architecture Go supports.
const clockTicks = 100

// tail keeps the last bytes written to it, for error messages.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

const tailMax = 16 << 10

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailMax {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-tailMax:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// childEnv is the environment of every child: this process's, without
// legate's own variables (which would configure a delegate or the CLI
// behind the bench's back), plus extra.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(k, "LEGATE_"), strings.HasPrefix(k, "HARNESS_"), strings.HasPrefix(k, "DELEGATE_"),
			k == "ACCOUNT_ID", k == "MANAGER_HOST_AND_PORT", k == "POLL_FOR_TASKS", k == "INIT_SCRIPT":
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// process is a child legate process.
type process struct {
	name string
	cmd  *exec.Cmd
	out  *tail
	done chan struct{}
	err  error
}

func (p *process) pid() int { return p.cmd.Process.Pid }

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM and waits up to grace, then kills.
func (p *process) stop(grace time.Duration) error {
	if p.exited() {
		return nil
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s (pid %d) did not stop within %s after SIGTERM; killed", p.name, p.pid(), grace)
	}
}

// kill sends SIGKILL and waits.
func (p *process) kill() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// startProcess starts exe with args; its output goes to a tail buffer and
// to lineFn (one call per line), if given.
func startProcess(name, exe, dir string, env, args []string, lineFn func(string)) (*process, error) {
	cmd := exec.Command(exe, args...)
	cmd.Env = env
	cmd.Dir = dir
	// A child must not outlive the bench (killed or crashed).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &process{name: name, cmd: cmd, out: &tail{}, done: make(chan struct{})}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	pw.Close()
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		defer pr.Close()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			_, _ = p.out.Write([]byte(line + "\n"))
			if lineFn != nil {
				lineFn(line)
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() {
		p.err = cmd.Wait()
		<-copied
		close(p.done)
	}()
	return p, nil
}

// usage is a process's resident memory and CPU time, from /proc.
type usage struct {
	rssKB int64
	cpu   time.Duration // user + system
	// wchar and syscw are the bytes the process passed to write system
	// calls and how many calls (/proc/PID/io; zero where it cannot be
	// read): a manager's WAL, journal and socket writes.
	wchar, syscw int64
}

func (u usage) rssMB() float64 { return float64(u.rssKB) / 1024 }

// readUsage reads /proc/PID/status (VmRSS) and /proc/PID/stat (utime,
// stime).
func readUsage(pid int) (usage, error) {
	var u usage
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, fmt.Errorf("read process status: %w", err)
	}
	for _, line := range strings.Split(string(st), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				u.rssKB, _ = strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, fmt.Errorf("read process stat: %w", err)
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// fields are counted after the last ')'.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return u, errors.New("read process stat: no command field")
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return u, errors.New("read process stat: too few fields")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	stt, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return u, errors.New("read process stat: bad utime or stime")
	}
	u.cpu = time.Duration(ut+stt) * time.Second / clockTicks
	// /proc/PID/io is readable only by the process's owner (and root):
	// without it the write counters stay zero.
	if io, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid)); err == nil {
		for _, line := range strings.Split(string(io), "\n") {
			k, v, _ := strings.Cut(line, ": ")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "wchar":
				u.wchar = n
			case "syscw":
				u.syscw = n
			}
		}
	}
	return u, nil
}

// raiseFileLimit raises this process's RLIMIT_NOFILE soft limit to the hard
// limit; children inherit it. It returns the new soft limit.
func raiseFileLimit() (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, fmt.Errorf("read the open-file limit: %w", err)
	}
	// Set it even when the soft limit is already the hard one: the Go
	// runtime raised it at start and would restore the original for
	// children, unless the program sets the limit itself.
	rl.Cur = rl.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, fmt.Errorf("raise the open-file limit: %w", err)
	}
	return rl.Cur, nil
}

// manager is a manager process with its admin credentials.
type manager struct {
	*process
	url, account, apiKey string
	admin                *client.Client
	heartbeat            time.Duration
}

// managerOpts configure one manager process.
type managerOpts struct {
	heartbeat  time.Duration
	db         string // empty = SQLite in the data directory
	cpuProfile string
	logLevel   string
	// listen is the address ("": a free loopback port); args are more
	// flags of the manager.
	listen string
	args   []string
	// started, when set, is given the process's ID as soon as it runs,
	// before it answers.
	started chan<- int
	// readyWithin bounds the wait for its first answer (0: 30 s).
	readyWithin time.Duration
}

// startManager runs `legate manager` on a free loopback port with a fresh
// data directory under dir and waits until it answers.
func startManager(ctx context.Context, exe, dir string, o managerOpts) (*manager, error) {
	data := filepath.Join(dir, "manager")
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, fmt.Errorf("manager data directory: %w", err)
	}
	args := []string{"manager", "--listen", cmp.Or(o.listen, "127.0.0.1:0"), "--data", data,
		"--heartbeat-interval", o.heartbeat.String(), "--log-level", o.logLevel}
	args = append(args, o.args...)
	if o.db != "" {
		args = append(args, "--db", o.db)
	}
	var extra []string
	if o.cpuProfile != "" {
		extra = append(extra, EnvCPUProfile+"="+o.cpuProfile)
	}
	p, err := startProcess("manager", exe, dir, childEnv(extra...), args, nil)
	if err != nil {
		return nil, err
	}
	if o.started != nil {
		o.started <- p.pid()
	}
	m := &manager{process: p, heartbeat: o.heartbeat}
	deadline := time.Now().Add(cmp.Or(o.readyWithin, 30*time.Second))
	for {
		if err := m.ready(ctx, filepath.Join(data, "admin.env")); err == nil {
			return m, nil
		} else if p.exited() || time.Now().After(deadline) || ctx.Err() != nil {
			p.kill()
			return nil, fmt.Errorf("manager did not start: %w; its output:\n%s", err, p.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (m *manager) ready(ctx context.Context, envFile string) error {
	b, err := os.ReadFile(envFile)
	if err != nil {
		return err
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			env[k] = v
		}
	}
	if env["LEGATE_API_KEY"] == "" || env["LEGATE_URL"] == "" {
		return errors.New("admin.env incomplete")
	}
	c, err := client.New(env["LEGATE_URL"], sourceClient(0))
	if err != nil {
		return err
	}
	hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := c.Health(hctx); err != nil {
		return err
	}
	c.SetSecret(env["LEGATE_API_KEY"])
	m.url, m.account, m.apiKey, m.admin = env["LEGATE_URL"], env["LEGATE_ACCOUNT_ID"], env["LEGATE_API_KEY"], c
	return nil
}

func (m *manager) usage() (usage, error) { return readUsage(m.pid()) }

// token creates a delegate token and returns its value.
func (m *manager) token(ctx context.Context, name string) (string, error) {
	t, err := m.admin.CreateToken(ctx, name)
	if err != nil {
		return "", fmt.Errorf("create delegate token: %w", err)
	}
	return t.Value, nil
}

// shutdown stops the manager with SIGTERM (so a CPU profile is written).
func (m *manager) shutdown(log *slog.Logger) {
	if err := m.stop(30 * time.Second); err != nil {
		log.Warn("stop manager", "err", err)
	}
}

// throwawayDB creates a fresh database on the PostgreSQL server of dsn and
// returns its DSN and a function that drops it.
func throwawayDB(ctx context.Context, dsn string) (string, func(), error) {
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", nil, fmt.Errorf("--postgres-dsn %q: want a postgres:// URL", dsn)
	}
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return "", nil, fmt.Errorf("open PostgreSQL: %w", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "legate_bench_" + hex.EncodeToString(b[:])
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := db.ExecContext(cctx, `CREATE DATABASE `+name+` TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'`); err != nil {
		db.Close()
		return "", nil, fmt.Errorf("create throwaway database: %w", err)
	}
	drop := func() {
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = db.ExecContext(dctx, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`)
		db.Close()
	}
	nu := *u
	nu.Path = "/" + name
	return nu.String(), drop, nil
}

// delegateProc is a real `legate delegate` process.
type delegateProc struct {
	*process
	started   time.Time
	connected chan time.Time // receives once, when the delegate logs it is connected
}

// startDelegate runs a real delegate against m and returns at once; read
// connected to know when its event channel is up.
func startDelegate(exe, dir string, m *manager, token, name, hostname string, extra ...string) (*delegateProc, error) {
	wd := filepath.Join(dir, "delegate-"+hostname)
	if err := os.MkdirAll(wd, 0o700); err != nil {
		return nil, fmt.Errorf("delegate work directory: %w", err)
	}
	// Several delegates run at once: none serves health and metrics (the
	// default port would be taken by the first).
	env := childEnv(append([]string{"ACCOUNT_ID=" + m.account, "DELEGATE_TOKEN=" + token,
		"MANAGER_HOST_AND_PORT=" + m.url, "DELEGATE_NAME=" + name, "DELEGATE_HOSTNAME=" + hostname,
		"DELEGATE_HTTP_PORT=0"}, extra...)...)
	d := &delegateProc{connected: make(chan time.Time, 1)}
	var once sync.Once
	d.started = time.Now()
	p, err := startProcess("delegate "+hostname, exe, wd, env, []string{"delegate", "--grace", "5s"}, func(line string) {
		// The event channel is up: the WebSocket or the first long poll,
		// or, with POLL_FOR_TASKS=true, the poll loop started.
		if strings.Contains(line, "connected to the manager") || strings.Contains(line, "polling for tasks (POLL_FOR_TASKS=true)") {
			once.Do(func() { d.connected <- time.Now() })
		}
	})
	if err != nil {
		return nil, err
	}
	d.process = p
	return d, nil
}

// waitConnected waits until the delegate logs that it is connected.
func (d *delegateProc) waitConnected(ctx context.Context, limit time.Duration) (time.Time, error) {
	select {
	case t := <-d.connected:
		return t, nil
	case <-d.done:
		return time.Time{}, fmt.Errorf("%s exited before connecting: %v; its output:\n%s", d.name, d.err, d.out.String())
	case <-time.After(limit):
		return time.Time{}, fmt.Errorf("%s did not connect within %s; its output:\n%s", d.name, limit, d.out.String())
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}
