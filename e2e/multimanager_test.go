package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/pgtest"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/seal"
)

// The tests of this file run two manager processes, A and B, on one
// PostgreSQL database (a fresh one per test, on the test binary's throwaway
// server: see package pgtest), as replicas behind a load balancer would be:
// what a user asks of one manager must reach the delegates connected to
// the other.

// managerPair is two managers sharing one database and so one account;
// each has its own data dir, admin.env and API key.
type managerPair struct {
	a, b *cluster
}

// startManagerPair starts manager A, then manager B on the same database.
func startManagerPair(t testing.TB) managerPair {
	t.Helper()
	dsn := pgtest.NewDatabase(t) // before the managers: dropped after they are killed
	// Managers of one database share its master key.
	key := seal.EnvMasterKey + "=" + seal.EncodeKey(seal.NewKey())
	a := startSharedManager(t, "manager A", dsn, []string{key})
	b := startSharedManager(t, "manager B", dsn, []string{key})
	if b.account != a.account {
		t.Fatalf("manager B uses account %q, manager A %q: want the one in the database", b.account, a.account)
	}
	if b.apiKey == a.apiKey {
		t.Errorf("managers A and B wrote the same API key; want one each")
	}
	return managerPair{a: a, b: b}
}

// startSharedManager starts a manager on the database dsn with its own data
// dir, the environment env and extra flags, and waits until it serves and
// has written its admin.env.
func startSharedManager(t testing.TB, name, dsn string, env []string, extra ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, data: t.TempDir()}
	addr := freePort(t)
	args := append([]string{"manager", "--db", dsn, "--data", c.data, "--listen", addr, "--heartbeat-interval", "500ms"}, extra...)
	c.mgr = start(t, name, env, args...)
	c.url = "http://" + addr
	eventually(t, 30*time.Second, name+" admin.env and listening", func() bool {
		if c.mgr.exited() {
			t.Fatalf("%s exited at start:\n%s", name, c.mgr.out.String())
		}
		env, err := readEnv(filepath.Join(c.data, "admin.env"))
		if err != nil || env["LEGATE_API_KEY"] == "" || env["LEGATE_ACCOUNT_ID"] == "" {
			return false
		}
		c.account, c.apiKey = env["LEGATE_ACCOUNT_ID"], env["LEGATE_API_KEY"]
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		conn.Close()
		return c.cli("token", "list").code == 0 // serving, and the key is valid
	})
	return c
}

// taskWithMarker returns the task whose script contains marker.
func (c *cluster) taskWithMarker(marker string) (protocol.Task, bool) {
	c.t.Helper()
	var list protocol.TaskList
	out := c.mustCLI("task", "list", "--json", "--limit", "100")
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		c.t.Fatalf("decode task list: %v\n%s", err, out)
	}
	for _, t := range list.Tasks {
		if t.Shell != nil && strings.Contains(t.Shell.Script, marker) {
			return t, true
		}
	}
	return protocol.Task{}, false
}

func TestManagerPairRunsTasksAcrossManagers(t *testing.T) {
	t.Parallel()
	p := startManagerPair(t)
	tok := p.b.token("cross") // a token made through B works on A: one database
	p.a.delegate("cross", "cross-host", p.a.seed004Env(tok, "cross", "mm-cross")...)

	nonce := time.Now().UnixNano()
	for i := range 5 {
		marker := fmt.Sprintf("mm-cross-%d-%d", nonce, i)
		r := p.b.cli("task", "run", "--selector", "mm-cross", "--script",
			fmt.Sprintf("echo %s-first; echo %s-second", marker, marker))
		if r.code != 0 {
			t.Fatalf("run %d via B: exit %d\nstdout: %s\nstderr: %s", i, r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stdout, marker+"-first\n"+marker+"-second\n") {
			t.Fatalf("run %d via B: stdout %q, want the task's output", i, r.stdout)
		}
		task, ok := p.b.taskWithMarker(marker)
		if !ok {
			t.Fatalf("run %d: task not listed via B", i)
		}
		if task.Status != protocol.StatusSucceeded || task.DelegateHostname != "cross-host" {
			t.Errorf("run %d: %s on %q, want succeeded on cross-host", i, task.Status, task.DelegateHostname)
		}
		// Informational only: how long the hop through the other manager took.
		if task.StartedAt != nil {
			t.Logf("run %d: created→started %s", i, task.StartedAt.Sub(task.CreatedAt))
		}
	}
	// Every manager reports a delegate connected to any of them as connected.
	if d, ok := p.b.findDelegate("cross-host"); !ok || d.Status != protocol.DelegateConnected {
		t.Errorf("delegates list via B shows the delegate connected to A as %+v, want connected", d)
	}
}

func TestManagerPairCancelReachesTheOtherManagersDelegate(t *testing.T) {
	t.Parallel()
	p := startManagerPair(t)
	tok := p.a.token("cancel")
	p.a.delegate("cancel", "cancel-host", p.a.seed004Env(tok, "cancel", "mm-cancel")...)

	mark := fmt.Sprintf("legate-e2e-mm-cancel-%d", time.Now().UnixNano())
	id := p.b.submit("--selector", "mm-cancel", "--script", fmt.Sprintf("exec -a %s sleep 304", mark))
	eventually(t, 15*time.Second, "task process running", func() bool { return processExists(mark) })
	p.b.mustCLI("task", "cancel", id)
	eventually(t, 15*time.Second, "cancelled process gone", func() bool { return !processExists(mark) })
	for _, c := range []*cluster{p.b, p.a} {
		if got := c.task(id); got.Status != protocol.StatusCancelled {
			t.Errorf("task via %s: %s, want cancelled", c.mgr.name, got.Status)
		}
	}
	// The delegate is free again and still takes work from B.
	if r := p.b.cli("task", "run", "--selector", "mm-cancel", "--script", "echo still here"); r.code != 0 || !strings.Contains(r.stdout, "still here") {
		t.Errorf("after cancel: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestManagerPairTokenRevokeReachesTheOtherManagersDelegate(t *testing.T) {
	t.Parallel()
	p := startManagerPair(t)
	keep := p.a.token("keep")
	gone := p.a.token("gone")
	pk := p.a.delegate("keeper", "mm-keep-host", p.a.seed004Env(keep, "keeper", "")...)
	pg := p.a.delegate("goner", "mm-gone-host", p.a.seed004Env(gone, "goner", "")...)

	p.b.mustCLI("token", "revoke", "gone")
	if code := pg.wait(20 * time.Second); code == 0 {
		t.Error("delegate whose token was revoked via B exited 0")
	}
	if out := pg.out.String(); !strings.Contains(out, "revoked") {
		t.Errorf("revoked delegate's output does not say so:\n%s", out)
	}
	if pk.exited() {
		t.Fatal("the delegate with the other token stopped too")
	}
	if r := p.b.cli("task", "run", "--selector", "keeper", "--script", "echo kept"); r.code != 0 {
		t.Errorf("keeper no longer runs tasks: exit %d stderr %s", r.code, r.stderr)
	}
}

func TestManagerPairFailover(t *testing.T) {
	t.Parallel()
	p := startManagerPair(t)
	tok := p.a.token("failover")
	env := append(p.a.seed004Env(tok, "failover", "mm-failover"), "MANAGER_HOST_AND_PORT="+p.a.url+","+p.b.url)
	del := p.a.delegate("failover", "failover-host", env...) // on A, the first URL

	// Two tasks running on it when A dies: one ends while no manager has
	// it, the other after it moved to B.
	dir := t.TempDir()
	early, late := filepath.Join(dir, "early"), filepath.Join(dir, "late")
	blocked := func(marker, name string) string {
		return fmt.Sprintf("echo %s started; while [ ! -e %s ]; do sleep 0.05; done; echo %s done", name, marker, name)
	}
	earlyID := p.b.submit("--selector", "mm-failover", "--script", blocked(early, "early"))
	lateID := p.b.submit("--selector", "mm-failover", "--script", blocked(late, "late"))
	p.b.waitRunning(earlyID)
	p.b.waitRunning(lateID)

	p.a.mgr.signal(syscall.SIGKILL)
	p.a.mgr.wait(10 * time.Second)
	if err := os.WriteFile(early, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	// The delegate moves to B by itself.
	p.b.waitConnected("failover-host", "")
	if del.exited() {
		t.Fatalf("delegate exited when manager A died:\n%s", del.out.String())
	}
	// New work submitted via B runs on it.
	if r := p.b.cli("task", "run", "--selector", "mm-failover", "--script", "echo after failover"); r.code != 0 || !strings.Contains(r.stdout, "after failover") {
		t.Errorf("new task after failover: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	if err := os.WriteFile(late, nil, 0o600); err != nil {
		t.Fatal(err)
	}

	// Both tasks that were running when A died end succeeded, and their
	// results and output reach B.
	for _, tc := range []struct{ id, name string }{{earlyID, "early"}, {lateID, "late"}} {
		got := p.b.waitTerminal(tc.id)
		if got.Status != protocol.StatusSucceeded || got.DelegateHostname != "failover-host" {
			t.Errorf("%s task: %s (%s) on %q, attempts %d; want succeeded on failover-host",
				tc.name, got.Status, got.Error, got.DelegateHostname, got.Attempts)
		}
		logs := p.b.mustCLI("task", "logs", tc.id)
		if !strings.Contains(logs, tc.name+" done") {
			t.Errorf("%s task logs via B = %q, want %q", tc.name, logs, tc.name+" done")
		}
	}
}
