package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// tourBlock matches a shell block of the README's tour: the fenced block
// right after a "<!-- tour:NAME -->" comment.
var tourBlock = regexp.MustCompile("(?s)<!-- tour:([a-z-]+) -->\\s*```sh\\n(.*?)```")

// readmeTour returns the tour's shell blocks by name, as the README has them.
func readmeTour(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string]string{}
	for _, m := range tourBlock.FindAllStringSubmatch(string(b), -1) {
		if _, dup := blocks[m[1]]; dup {
			t.Fatalf("README.md has two tour blocks named %q", m[1])
		}
		blocks[m[1]] = m[2]
	}
	for _, name := range []string{"dev", "cli", "delegate", "selectors"} {
		if blocks[name] == "" {
			t.Fatalf("README.md has no tour block %q (a ```sh block after <!-- tour:%s -->)", name, name)
		}
	}
	return blocks
}

// tourEnv is the environment of the tour's terminals: a HOME of its own
// (the tour works in ~/legate-tour) and PATH with the legate under test
// first. DELEGATE_HTTP_PORT is set to a free port for the whole tour, as
// if the user had it in their environment: the delegate the tour starts
// serves its health port there rather than on 3460, which something else
// on a shared machine may hold; legate dev must not take it (it did: the
// tour's delegate then died at once).
func tourEnv(t *testing.T, home string) []string {
	t.Helper()
	bin := t.TempDir()
	if err := os.Symlink(binary, filepath.Join(bin, "legate")); err != nil {
		t.Fatal(err)
	}
	_, port, err := net.SplitHostPort(freePort(t))
	if err != nil {
		t.Fatal(err)
	}
	return []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + home,
		"GOCOVERDIR=" + os.Getenv("GOCOVERDIR"), "DELEGATE_HTTP_PORT=" + port}
}

// startTerminal runs a tour block with bash in a process group of its own,
// like a command typed at a terminal: interrupt sends SIGINT to the group,
// as Ctrl-C does.
func startTerminal(t *testing.T, name, dir string, env []string, script string) *proc {
	t.Helper()
	cmd := exec.Command("bash", "-c", script)
	cmd.Env, cmd.Dir = env, dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &proc{t: t, name: name, cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		if !p.exited() {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
		if t.Failed() {
			t.Logf("--- %s ---\n%s", name, p.out.String())
		}
	})
	return p
}

func interrupt(t *testing.T, p *proc) {
	t.Helper()
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatalf("Ctrl-C %s: %v", p.name, err)
	}
}

// shell is a terminal that stays open between tour blocks, so that what
// one block sets (cd, set -a; . admin.env) holds for the next one. bash
// reads the blocks from a pipe on descriptor 3; its stdin is empty, as a
// terminal's is when nobody types.
type shell struct {
	p     *proc
	in    *os.File
	steps int
}

func startShell(t *testing.T, name, dir string, env []string) *shell {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "/dev/fd/3")
	cmd.Env, cmd.Dir = env, dir
	cmd.ExtraFiles = []*os.File{r}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &proc{t: t, name: name, cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	r.Close()
	go func() { p.err = cmd.Wait(); close(p.done) }()
	s := &shell{p: p, in: w}
	t.Cleanup(func() {
		w.Close()
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
		if t.Failed() {
			t.Logf("--- %s ---\n%s", name, p.out.String())
		}
	})
	// A command of a block that fails is reported, as a user would see it.
	s.write(`trap 'echo "__tour_failed__ status $? of: $BASH_COMMAND"' ERR` + "\n")
	return s
}

func (s *shell) write(text string) {
	s.p.t.Helper()
	if _, err := s.in.WriteString(text); err != nil {
		s.p.t.Fatalf("type into %s: %v", s.p.name, err)
	}
}

// run types a block and returns what it printed once it is done.
func (s *shell) run(block string, d time.Duration) string {
	t := s.p.t
	t.Helper()
	before := len(s.p.out.String())
	s.steps++
	marker := fmt.Sprintf("__tour_step_%d_done__", s.steps)
	s.write(block + "\necho " + marker + "\n")
	eventually(t, d, s.p.name+" running its block", func() bool {
		if s.p.exited() {
			t.Fatalf("%s exited:\n%s", s.p.name, s.p.out.String())
		}
		return strings.Contains(s.p.out.String()[before:], marker)
	})
	out := s.p.out.String()[before:]
	out = out[:strings.Index(out, marker)]
	if strings.Contains(out, "__tour_failed__") {
		t.Fatalf("a command of the block failed:\n%s\n--- it printed ---\n%s", block, out)
	}
	return out
}

// TestReadmeTour runs the README's five-minute tour as pasted, against
// the binary under test: legate dev in one terminal, the CLI in a second,
// a second delegate started the way the README says in a third, then the
// selector and secret tasks back in the second; and checks what the
// README promises on the way.
func TestReadmeTour(t *testing.T) {
	t.Parallel()
	blocks := readmeTour(t)
	home := t.TempDir()
	env := tourEnv(t, home)

	// Terminal 1: legate dev.
	dev := startTerminal(t, "terminal 1 (legate dev)", home, env, blocks["dev"])
	tour := filepath.Join(home, "legate-tour")
	adminEnv := filepath.Join(tour, ".legate-dev", "admin.env")
	c := &cluster{t: t}
	eventually(t, 30*time.Second, "legate dev running", func() bool {
		if dev.exited() {
			t.Fatalf("legate dev exited:\n%s", dev.out.String())
		}
		if !strings.Contains(dev.out.String(), "legate dev is running") {
			return false
		}
		e, err := readEnv(adminEnv)
		if err != nil {
			return false
		}
		c.url, c.account, c.apiKey = e["LEGATE_URL"], e["LEGATE_ACCOUNT_ID"], e["LEGATE_API_KEY"]
		return c.apiKey != ""
	})
	if want := "set -a; . " + adminEnv + "; set +a\n  legate delegates list\n"; !strings.Contains(dev.out.String(), want) {
		t.Errorf("legate dev does not print commands that work as printed (%q):\n%s", want, dev.out.String())
	}

	// Terminal 2: look around.
	term2 := startShell(t, "terminal 2", home, env)
	out := term2.run(blocks["cli"], 60*time.Second)
	for _, want := range []string{"dev-delegate", "hello from "} {
		if !strings.Contains(out, want) {
			t.Errorf("the first commands of the tour do not print %q:\n%s", want, out)
		}
	}

	// Terminal 3: the second delegate, in its own directory.
	second := startTerminal(t, "terminal 3 (the tour delegate)", home, env, blocks["delegate"])
	eventually(t, 30*time.Second, "the tour delegate connected over websocket", func() bool {
		if second.exited() {
			t.Fatalf("the tour's second delegate exited at once:\n%s", second.out.String())
		}
		for _, d := range c.delegates() {
			if d.Name == "tour-delegate" {
				return d.Status == protocol.DelegateConnected && d.Connection == protocol.ConnWebSocket
			}
		}
		return false
	})

	// Back in terminal 2: selectors and a secret.
	out = term2.run(blocks["selectors"], 60*time.Second)
	var rows []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "dev-delegate ") || strings.HasPrefix(line, "tour-delegate ") {
			rows = append(rows, line)
		}
	}
	if len(rows) != 2 {
		t.Errorf("delegates list shows %d delegates, the README says two:\n%s", len(rows), out)
	}
	for _, row := range rows {
		if !strings.Contains(row, " connected ") || !strings.Contains(row, " websocket ") {
			t.Errorf("the README says both are connected over websocket: %q", row)
		}
	}
	for _, want := range []string{"picked by selector on ", "the delegate name is a selector too", "pw=" + strings.Repeat("*", 14)} {
		if !strings.Contains(out, want) {
			t.Errorf("the tour's tasks do not print %q:\n%s", want, out)
		}
	}
	if strings.Contains(term2.p.out.String(), "hunter2") {
		t.Errorf("the secret shows in the output:\n%s", term2.p.out.String())
	}
	// Where each task ran.
	var list protocol.TaskList
	if err := json.Unmarshal([]byte(c.mustCLI("task", "list", "--json")), &list); err != nil {
		t.Fatal(err)
	}
	ran := map[string]string{}
	for _, task := range list.Tasks {
		if task.Status != protocol.StatusSucceeded {
			t.Errorf("task %s (selectors %v) ended %s: %s", task.ID, task.Selectors, task.Status, task.Error)
		}
		ran[strings.Join(task.Selectors, ",")+" "+task.Shell.Script] = task.DelegateName
	}
	for sel, want := range map[string]string{"tour": "tour-delegate", "tour-delegate": "tour-delegate"} {
		found := false
		for k, name := range ran {
			if strings.HasPrefix(k, sel+" ") {
				found = true
				if name != want {
					t.Errorf("the task with selector %s ran on %s, want %s", sel, name, want)
				}
			}
		}
		if !found {
			t.Errorf("no task with selector %s: %v", sel, ran)
		}
	}
	if _, err := os.Stat(filepath.Join(tour, "tour-delegate", "delegate.log")); err != nil {
		t.Errorf("the tour delegate did not write its log in its own directory: %v", err)
	}

	// Ctrl-C: the tour delegate deregisters, exits 0 and leaves the listing.
	interrupt(t, second)
	if code := second.wait(60 * time.Second); code != 0 {
		t.Errorf("the tour delegate exited %d after Ctrl-C, the README says 0", code)
	}
	var names []string
	for _, d := range c.delegates() {
		names = append(names, d.Name+" "+d.Status)
	}
	if !slices.Equal(names, []string{"dev-delegate connected"}) {
		t.Errorf("delegates list after the tour delegate stopped: %v, want dev-delegate alone", names)
	}
	var all protocol.DelegateList
	if err := json.Unmarshal([]byte(c.mustCLI("delegates", "list", "--all", "--json")), &all); err != nil {
		t.Fatal(err)
	}
	deregistered := false
	for _, d := range all.Delegates {
		deregistered = deregistered || d.Name == "tour-delegate" && d.Status == protocol.DelegateDeregistered
	}
	if !deregistered {
		t.Errorf("delegates list --all does not show the tour delegate deregistered: %+v", all.Delegates)
	}

	interrupt(t, dev)
	if code := dev.wait(60 * time.Second); code != 0 {
		t.Errorf("legate dev exited %d after Ctrl-C, the README says it stops cleanly", code)
	}
}
