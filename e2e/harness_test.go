// Package e2e runs the real legate binary as a manager and as delegate
// processes over loopback and checks what a user sees.
//
// e2e is a Go module of its own (as deploy/check is), so that its
// test-only dependencies (chromedp, Toxiproxy, Prometheus's libraries)
// stay out of legate's go.mod: run its tests from this directory, for
// example (cd e2e && go test -run TestReadmeTour .).
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/pgtest"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/testport"
)

// binary is the legate binary built once for the whole run.
var binary string

// repoRoot is the root of legate's repository, seen from this module. The
// binaries under test are built there, by legate's own go.mod, so that they
// are the product's builds: built from this module, they would link the
// versions its test-only dependencies select and record this module as
// their main one.
const repoRoot = ".."

// TestMain builds the binary once. LEGATE_E2E_BINARY=PATH runs the tests and
// benchmarks against a binary built elsewhere instead (for example an older
// commit, to measure before and after a change with the same benchmark code).
func TestMain(m *testing.M) {
	if prebuilt := os.Getenv("LEGATE_E2E_BINARY"); prebuilt != "" {
		abs, err := filepath.Abs(prebuilt)
		if err != nil {
			fmt.Fprintln(os.Stderr, "LEGATE_E2E_BINARY:", err)
			os.Exit(1)
		}
		if _, err := os.Stat(abs); err != nil {
			fmt.Fprintln(os.Stderr, "LEGATE_E2E_BINARY:", err)
			os.Exit(1)
		}
		binary = abs
		os.Exit(pgtest.Main(m))
	}
	dir, err := os.MkdirTemp("", "legate-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "legate")
	build := exec.Command("go", "build", "-o", binary, "./cmd/legate")
	build.Dir = repoRoot
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build legate:", err)
		os.Exit(1)
	}
	code := pgtest.Main(m) // stops the PostgreSQL server of the multi-manager tests
	os.RemoveAll(dir)
	os.Exit(code)
}

// proc is a running legate process whose output is captured.
type proc struct {
	t    testing.TB
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs the binary with args and env (added to a minimal environment).
func start(t testing.TB, name string, env []string, args ...string) *proc {
	t.Helper()
	return startBinary(t, binary, name, env, args...)
}

// startBinary is start with another legate binary (such as a build of
// another version).
func startBinary(t testing.TB, bin, name string, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(baseEnv(), env...)
	cmd.Dir = t.TempDir()
	// A process group of its own: the cleanup ends what the process
	// started too (a watcher's delegates), which would otherwise hold the
	// output pipe open, and Wait with it, after the process ended.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = time.Minute
	p := &proc{t: t, name: name, cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Signal(syscall.SIGKILL)
		}
		// Whatever is left of the group (its children) ends with it.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		if t.Failed() {
			t.Logf("--- output of %s ---\n%s", name, p.out.String())
		}
	})
	return p
}

// baseEnv is the environment of every process: PATH and HOME only, so no
// variable of the machine leaks into a delegate's configuration. Delegates
// serve no health and metrics port (many run at once); a test that scrapes
// one appends DELEGATE_HTTP_PORT (the last value of a variable wins).
// Tasks of these tests signal through files in the test's temporary
// directory, which a task sandbox hides: delegates run without one and
// with mixed scopes, as before it, unless a test asks (isolation_test.go).
func baseEnv() []string {
	return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "GOCOVERDIR=" + os.Getenv("GOCOVERDIR"),
		"DELEGATE_HTTP_PORT=0", "LEGATE_TASK_SANDBOX=off", "LEGATE_ALLOW_MIXED_SCOPES=true"}
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(d time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		p.t.Fatalf("%s did not exit within %s; output:\n%s", p.name, d, p.out.String())
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		p.t.Fatalf("%s: %v", p.name, p.err)
	}
	return 0
}

func (p *proc) signal(s os.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(s); err != nil {
		p.t.Fatalf("signal %s: %v", p.name, err)
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", d, what)
}

// cluster is a manager process plus helpers to drive it with the CLI.
type cluster struct {
	t       testing.TB
	url     string
	account string
	apiKey  string
	data    string
	mgr     *proc
	// cliExtra is added to the environment of every CLI call (such as
	// LEGATE_CA_CERT for a manager with a private CA).
	cliExtra []string
}

// freePort is 127.0.0.1:PORT with a port nothing listens on, outside the
// kernel's ephemeral range (internal/testport says why).
func freePort(t testing.TB) string {
	t.Helper()
	return testport.Addr(t)
}

// startCluster starts a manager with a short heartbeat interval.
func startCluster(t testing.TB, extra ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, data: t.TempDir()}
	c.startManager(freePort(t), extra...)
	return c
}

func (c *cluster) startManager(addr string, extra ...string) {
	t := c.t
	t.Helper()
	args := append([]string{"manager", "--listen", addr, "--data", c.data, "--heartbeat-interval", "500ms"}, extra...)
	c.mgr = start(t, "manager", nil, args...)
	c.url = "http://" + addr
	eventually(t, 15*time.Second, "manager admin.env", func() bool {
		env, err := readEnv(filepath.Join(c.data, "admin.env"))
		if err != nil || env["LEGATE_API_KEY"] == "" {
			return false
		}
		c.account, c.apiKey = env["LEGATE_ACCOUNT_ID"], env["LEGATE_API_KEY"]
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		conn.Close()
		return true
	})
}

func readEnv(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			out[k] = v
		}
	}
	return out, nil
}

// cliResult is what one CLI invocation produced.
type cliResult struct {
	stdout, stderr string
	code           int
}

// cli runs the legate CLI against the cluster and waits for it.
func (c *cluster) cli(args ...string) cliResult {
	c.t.Helper()
	return c.cliEnv(nil, args...)
}

func (c *cluster) cliEnv(env []string, args ...string) cliResult {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(append(append(baseEnv(), "LEGATE_URL="+c.url, "LEGATE_API_KEY="+c.apiKey), c.cliExtra...), env...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := cliResult{stdout: so.String(), stderr: se.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		c.t.Fatalf("legate %v: %v", args, err)
	}
	return r
}

// mustCLI runs the CLI and fails the test on a non-zero exit.
func (c *cluster) mustCLI(args ...string) string {
	c.t.Helper()
	r := c.cli(args...)
	if r.code != 0 {
		c.t.Fatalf("legate %v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return r.stdout
}

// token creates a delegate token and returns its value (the last line).
func (c *cluster) token(name string) string {
	c.t.Helper()
	out := strings.TrimSpace(c.mustCLI("token", "create", name))
	lines := strings.Split(out, "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// seed004Env is the variable set of the Docker delegate task definition in
// seed 004, with the values replaced.
func (c *cluster) seed004Env(token, name, tags string) []string {
	return []string{
		"ACCOUNT_ID=" + c.account,
		"DELEGATE_TOKEN=" + token,
		"DELEGATE_TYPE=DOCKER",
		"INIT_SCRIPT=",
		"DEPLOY_MODE=KUBERNETES",
		"MANAGER_HOST_AND_PORT=" + c.url,
		"DELEGATE_NAME=" + name,
		"LOG_STREAMING_SERVICE_URL=" + c.url + "/log-service/",
		"DELEGATE_TAGS=" + tags,
		"NEXT_GEN=true",
	}
}

// seed003Env is the variable set of the ECS task definition in seed 003.
func (c *cluster) seed003Env(token, name string) []string {
	return []string{
		"HARNESS_ACCOUNT_ID=" + c.account,
		"HARNESS_TOKEN=" + token,
		"HARNESS_URL=" + c.url,
		"HARNESS_NAME=" + name,
	}
}

// delegate starts a delegate process with env and waits until the manager
// lists it as connected with the given hostname.
func (c *cluster) delegate(name, hostname string, env ...string) *proc {
	c.t.Helper()
	env = append(env, "DELEGATE_HOSTNAME="+hostname)
	p := start(c.t, "delegate "+hostname, env, "delegate", "--grace", "20s")
	c.waitConnected(hostname, "")
	return p
}

func (c *cluster) delegates() []protocol.Delegate {
	c.t.Helper()
	var dl []protocol.Delegate
	out := c.mustCLI("delegates", "list", "--json")
	var wrap protocol.DelegateList
	if err := json.Unmarshal([]byte(out), &wrap); err == nil && wrap.Delegates != nil {
		return wrap.Delegates
	}
	if err := json.Unmarshal([]byte(out), &dl); err != nil {
		c.t.Fatalf("decode delegates list: %v\n%s", err, out)
	}
	return dl
}

func (c *cluster) findDelegate(hostname string) (protocol.Delegate, bool) {
	for _, d := range c.delegates() {
		if d.Hostname == hostname {
			return d, true
		}
	}
	return protocol.Delegate{}, false
}

// waitConnected waits until the delegate with this hostname is connected
// (over conn, when conn is not empty).
func (c *cluster) waitConnected(hostname, conn string) {
	c.t.Helper()
	eventually(c.t, 20*time.Second, "delegate "+hostname+" connected "+conn, func() bool {
		d, ok := c.findDelegate(hostname)
		return ok && d.Status == protocol.DelegateConnected && (conn == "" || d.Connection == conn)
	})
}

func (c *cluster) task(id string) protocol.Task {
	c.t.Helper()
	var t protocol.Task
	out := c.mustCLI("task", "get", id, "--json")
	if err := json.Unmarshal([]byte(out), &t); err != nil {
		c.t.Fatalf("decode task: %v\n%s", err, out)
	}
	return t
}

// runJSON runs `legate task run --json ARGS` and decodes the final task.
func (c *cluster) runJSON(args ...string) (protocol.Task, cliResult) {
	c.t.Helper()
	r := c.cli(append([]string{"task", "run", "--json"}, args...)...)
	var t protocol.Task
	if err := json.Unmarshal([]byte(r.stdout), &t); err != nil {
		c.t.Fatalf("task run --json %v: %v\nstdout: %s\nstderr: %s", args, err, r.stdout, r.stderr)
	}
	return t, r
}

// streamCLI starts the CLI and returns a reader of its stdout lines.
func (c *cluster) streamCLI(args ...string) (*exec.Cmd, *bufio.Reader, *bytes.Buffer) {
	c.t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(baseEnv(), "LEGATE_URL="+c.url, "LEGATE_API_KEY="+c.apiKey)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, bufio.NewReader(stdout), &stderr
}

// readLineWithin reads one line or fails after d.
func readLineWithin(t testing.TB, r *bufio.Reader, d time.Duration) string {
	t.Helper()
	ch := make(chan string, 1)
	go func() {
		s, _ := r.ReadString('\n')
		ch <- s
	}()
	select {
	case s := <-ch:
		return s
	case <-time.After(d):
		t.Fatalf("no output line within %s", d)
		return ""
	}
}

var _ = io.EOF

func sha256hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// delegateOnly is legate-delegate (go build -tags delegate) of the same
// tree as binary, built on first use, in a directory of its own (next to
// binary, every delegate of the run would run as it).
var delegateOnly struct {
	once sync.Once
	path string
	err  error
}

// delegateOnlyBinary returns legate-delegate of the same build as binary,
// or why there is none (LEGATE_E2E_BINARY names a binary built elsewhere).
func delegateOnlyBinary() (string, error) {
	delegateOnly.once.Do(func() {
		if os.Getenv("LEGATE_E2E_BINARY") != "" {
			delegateOnly.err = errors.New("LEGATE_E2E_BINARY is set: no legate-delegate of the same build as that binary")
			return
		}
		dir := filepath.Join(filepath.Dir(binary), "delegate-only")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			delegateOnly.err = err
			return
		}
		path := filepath.Join(dir, "legate-delegate")
		build := exec.Command("go", "build", "-tags", "delegate", "-o", path, "./cmd/legate")
		build.Dir = repoRoot
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			delegateOnly.err = fmt.Errorf("go build -tags delegate: %v\n%s", err, out)
			return
		}
		delegateOnly.path = path
	})
	return delegateOnly.path, delegateOnly.err
}

// copyFile copies the executable src to dst.
func copyFile(t testing.TB, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// refusedAddr is 127.0.0.1:PORT of a port this test holds bound without
// listening: every connection to it is refused, and no other test can
// take the port while the test runs (a manager URL that is down).
func refusedAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}
