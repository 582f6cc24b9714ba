package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
)

// One-shot delegates (docs/elastic.md): exit codes of `legate delegate
// --once` (internal/delegate's ExitNoTask and ExitClaimLost).
const (
	exitOnceNoTask    = 3
	exitOnceClaimLost = 4
)

// oneShot starts a one-shot delegate process with this hostname and tags.
func (c *cluster) oneShot(token, hostname, tags string, env ...string) *proc {
	c.t.Helper()
	env = append(append(c.seed004Env(token, "oneshot", tags), "DELEGATE_HOSTNAME="+hostname), env...)
	return start(c.t, "one-shot "+hostname, env, "delegate", "--once", "--grace", "20s")
}

// notListed fails the test when a delegate with this hostname is listed
// (a one-shot delegate deregisters: it is not left as a disconnected
// instance).
func (c *cluster) notListed(hostname string) {
	c.t.Helper()
	if d, ok := c.findDelegate(hostname); ok {
		c.t.Errorf("delegate %s still listed after it exited: status %s", hostname, d.Status)
	}
}

// TestOneShotDelegatesRunTwentyTasks: 20 tasks run by 20 one-shot
// delegate processes, at most four at a time, each exiting 0 after its one
// task; every task succeeded, and ran exactly once. Each task selects its
// delegate by hostname, so no two one-shot delegates race for one task
// (that race is TestOneShotDelegateLostClaimExits), and is submitted once
// its delegate is connected: a task no known delegate could run (a
// hostname never registered) ends not_assigned after one liveness window.
func TestOneShotDelegatesRunTwentyTasks(t *testing.T) {
	c := startCluster(t)
	tok := c.token("oneshot")
	ran := filepath.Join(t.TempDir(), "ran")
	const n, atOnce = 20, 4
	ids := make([]string, n)
	slots := make(chan struct{}, atOnce)
	var wg sync.WaitGroup
	codes := make([]int, n)
	outs := make([]string, n)
	for i := range n {
		slots <- struct{}{}
		host := fmt.Sprintf("os-%02d", i)
		p := c.oneShot(tok, host, "oneshot")
		c.waitConnected(host, "")
		ids[i] = strings.TrimSpace(c.mustCLI("task", "run", "--detach", "--selector", host,
			"--script", `echo "$LEGATE_TASK_ID" >> `+ran))
		wg.Go(func() {
			defer func() { <-slots }()
			codes[i] = p.waitCode(2 * time.Minute)
			outs[i] = p.out.String()
		})
	}
	wg.Wait()
	for i, code := range codes {
		if code != 0 {
			t.Errorf("one-shot delegate os-%02d exited %d, want 0; output:\n%s", i, code, outs[i])
		}
		if got := strings.Count(outs[i], "task acquired"); got != 1 {
			t.Errorf("one-shot delegate os-%02d acquired %d tasks, want 1", i, got)
		}
	}
	for _, id := range ids {
		if st := c.task(id).Status; st != protocol.StatusSucceeded {
			t.Errorf("task %s: status %s, want %s", id, st, protocol.StatusSucceeded)
		}
	}
	b, err := os.ReadFile(ran)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Fields(string(b))
	slices.Sort(lines)
	want := slices.Clone(ids)
	slices.Sort(want)
	if !slices.Equal(lines, want) {
		t.Errorf("tasks that ran:\n%v\nwant each task exactly once:\n%v", lines, want)
	}
	for i := range n {
		c.notListed(fmt.Sprintf("os-%02d", i))
	}
}

// TestOneShotDelegateTakesOneTaskOfABurst: offered four tasks at once, a
// one-shot delegate runs one, exits 0, and leaves the others to other
// delegates (queued, or not_assigned once no delegate could run them).
func TestOneShotDelegateTakesOneTaskOfABurst(t *testing.T) {
	c := startCluster(t)
	tok := c.token("oneshot")
	p := c.oneShot(tok, "os-burst", "burst")
	c.waitConnected("os-burst", "")
	var ids []string
	for range 4 {
		ids = append(ids, strings.TrimSpace(c.mustCLI("task", "run", "--detach", "--selector", "burst", "--script", "true")))
	}
	if code := p.waitCode(2 * time.Minute); code != 0 {
		t.Fatalf("one-shot delegate exited %d, want 0; output:\n%s", code, p.out.String())
	}
	var succeeded, left int
	for _, id := range ids {
		switch tk := c.task(id); {
		case tk.Status == protocol.StatusSucceeded:
			succeeded++
		case (tk.Status == protocol.StatusQueued || tk.Status == protocol.StatusNotAssigned) && tk.Attempts == 0:
			left++
		default:
			t.Errorf("task %s: status %s, attempts %d", id, tk.Status, tk.Attempts)
		}
	}
	if succeeded != 1 || left != 3 {
		t.Errorf("%d tasks succeeded and %d were left, want 1 and 3; delegate output:\n%s", succeeded, left, p.out.String())
	}
	c.notListed("os-burst")
}

// TestOneShotDelegateLostClaimExits: the task offered to a one-shot
// delegate is acquired by another delegate between the offer and the
// claim; the one-shot delegate exits (ExitClaimLost) rather than idling.
// The race is arranged without timing: the task needs a capability that
// the one-shot delegate checks (an HTTP URL served here) before it
// claims, and the server lets another delegate acquire the task before it
// answers the check.
func TestOneShotDelegateLostClaimExits(t *testing.T) {
	c := startCluster(t)
	tok := c.token("oneshot")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	other := registerBareDelegate(ctx, t, c, tok, "other", "race")

	// The task's ID reaches the handler through a channel: the request
	// comes from another process, which the race detector cannot see as
	// ordering the handler after the ID was set.
	ids := make(chan string, 1)
	var once sync.Once
	acquired := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() {
			_, err := other.Acquire(r.Context(), <-ids)
			acquired <- err
		})
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	ids <- strings.TrimSpace(c.mustCLI("task", "run", "--detach", "--selector", "race", "--capability", srv.URL+"/ready", "--script", "true"))

	p := c.oneShot(tok, "os-race", "race")
	code := p.waitCode(2 * time.Minute)
	select {
	case err := <-acquired:
		if err != nil {
			t.Fatalf("the other delegate could not acquire the task: %v", err)
		}
	default:
		t.Fatalf("the one-shot delegate never checked the task's capability; output:\n%s", p.out.String())
	}
	if code != exitOnceClaimLost {
		t.Fatalf("one-shot delegate exited %d, want %d (claim lost); output:\n%s", code, exitOnceClaimLost, p.out.String())
	}
	if out := p.out.String(); !strings.Contains(out, "claim of the offered task failed") {
		t.Errorf("no clear log line for the lost claim; output:\n%s", out)
	}
	c.notListed("os-race")
}

// TestOneShotDelegateTimeout: a one-shot delegate given no task within
// DELEGATE_ONCE_TIMEOUT exits (ExitNoTask) and deregisters.
func TestOneShotDelegateTimeout(t *testing.T) {
	c := startCluster(t)
	tok := c.token("oneshot")
	p := c.oneShot(tok, "os-idle", "idle", "DELEGATE_ONCE_TIMEOUT=1s")
	if code := p.waitCode(time.Minute); code != exitOnceNoTask {
		t.Fatalf("one-shot delegate exited %d, want %d (no task); output:\n%s", code, exitOnceNoTask, p.out.String())
	}
	if out := p.out.String(); !strings.Contains(out, "no task came within the timeout") {
		t.Errorf("no clear log line for the timeout; output:\n%s", out)
	}
	c.notListed("os-idle")
}

// TestSingleUseTokenRefusedOnSecondRegistration: a token created with
// --uses 1 registers one delegate process; a second registration is
// refused with token_used_up, and token list shows no use left.
func TestSingleUseTokenRefusedOnSecondRegistration(t *testing.T) {
	c := startCluster(t)
	out := strings.TrimSpace(c.mustCLI("token", "create", "single", "--uses", "1"))
	lines := strings.Split(out, "\n")
	tok := strings.TrimSpace(lines[len(lines)-1])
	first := c.oneShot(tok, "os-single-1", "single")
	c.waitConnected("os-single-1", "")
	id := strings.TrimSpace(c.mustCLI("task", "run", "--detach", "--selector", "single", "--script", "true"))
	if code := first.waitCode(2 * time.Minute); code != 0 {
		t.Fatalf("first one-shot delegate exited %d, want 0; output:\n%s", code, first.out.String())
	}
	if st := c.task(id).Status; st != protocol.StatusSucceeded {
		t.Errorf("task %s: status %s, want succeeded", id, st)
	}
	second := c.oneShot(tok, "os-single-2", "single")
	if code := second.waitCode(time.Minute); code == 0 {
		t.Fatalf("second registration with a single-use token: exit 0, want a refusal; output:\n%s", second.out.String())
	}
	if o := second.out.String(); !strings.Contains(o, string(protocol.CodeTokenUsedUp)) {
		t.Errorf("refusal does not say %s; output:\n%s", protocol.CodeTokenUsedUp, o)
	}
	list := c.mustCLI("token", "list")
	if !strings.Contains(list, "uses-left=0/1") {
		t.Errorf("token list does not show the uses left:\n%s", list)
	}
}

// registerBareDelegate registers a delegate through the API (no process)
// and heartbeats for it until ctx ends: a delegate the test drives.
func registerBareDelegate(ctx context.Context, t *testing.T, c *cluster, token, hostname, tags string) *client.Client {
	t.Helper()
	cl, err := client.New(c.url, &http.Client{Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := cl.Register(ctx, protocol.RegisterRequest{ProtocolVersion: protocol.Version, AccountID: c.account, Token: token,
		Name: "oneshot", Hostname: hostname, IP: "127.0.0.1", Tags: protocol.SplitTags(tags), Type: "SHELL", Version: "dev",
		FreshStart: true, ProcessID: hostname, TaskTypes: []string{protocol.TaskShell}})
	if err != nil {
		t.Fatalf("register %s: %v", hostname, err)
	}
	cl.SetSecret(resp.Session)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for seq := int64(1); ; seq++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if _, err := cl.Heartbeat(ctx, protocol.Heartbeat{Seq: seq}); err != nil && !errors.Is(err, context.Canceled) && ctx.Err() == nil {
				t.Logf("heartbeat of %s: %v", hostname, err)
			}
		}
	})
	return cl
}

// waitCode is wait for any goroutine: it returns the exit code, or -1
// when the process did not exit within d (then it is killed by the
// test's cleanup).
func (p *proc) waitCode(d time.Duration) int {
	select {
	case <-p.done:
	case <-time.After(d):
		return -1
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		return -1
	}
	return 0
}

// TestOneShotDelegateDefersABurstAndClaimsNoSecondTask: offers that reach
// a one-shot delegate while its claim is in flight wait (capacity 1), and
// none is claimed after its task: it runs one task and exits 0. The claim
// is held in flight by the task's capability check (an HTTP URL served
// here), answered only once the delegate's metrics show that it deferred
// another offer.
func TestOneShotDelegateDefersABurstAndClaimsNoSecondTask(t *testing.T) {
	c := startCluster(t)
	tok := c.token("oneshot")
	release := make(chan struct{})
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	port := strings.TrimPrefix(freePort(t), "127.0.0.1:")
	p := c.oneShot(tok, "os-defer", "defer", "DELEGATE_HTTP_PORT="+port)
	c.waitConnected("os-defer", "")
	first := strings.TrimSpace(c.mustCLI("task", "run", "--detach", "--selector", "defer", "--capability", srv.URL+"/first", "--script", "true"))
	var others []string
	for i := range 3 {
		others = append(others, strings.TrimSpace(c.mustCLI("task", "run", "--detach", "--selector", "defer",
			"--capability", fmt.Sprintf("%s/other-%d", srv.URL, i), "--script", "true")))
	}
	eventually(t, time.Minute, "an offer deferred while the claim is in flight", func() bool {
		return deferredOffers(t, "http://127.0.0.1:"+port+"/metrics") > 0
	})
	close(release)
	if code := p.waitCode(2 * time.Minute); code != 0 {
		t.Fatalf("one-shot delegate exited %d, want 0; output:\n%s", code, p.out.String())
	}
	if st := c.task(first).Status; st != protocol.StatusSucceeded {
		t.Errorf("first task: status %s, want succeeded", st)
	}
	for _, id := range others {
		if tk := c.task(id); tk.Attempts != 0 || tk.Status == protocol.StatusSucceeded {
			t.Errorf("task %s offered in the burst: status %s, attempts %d; want never acquired", id, tk.Status, tk.Attempts)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(paths, []string{"/first"}) {
		t.Errorf("capability checks %v, want only the first task's: no other task was tried", paths)
	}
	if n := strings.Count(p.out.String(), "task acquired"); n != 1 {
		t.Errorf("%d tasks acquired, want 1", n)
	}
}

// deferredOffers is the delegate's count of offers it put off for want of
// a free slot (legate_delegate_tasks_rejected_total{reason="capacity"}),
// 0 when its metrics cannot be read yet.
func deferredOffers(t *testing.T, url string) int {
	resp, err := http.Get(url)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "legate_delegate_tasks_rejected_total{") && strings.Contains(line, `reason="capacity"`) {
			var n float64
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &n); err == nil {
				return int(n)
			}
		}
	}
	return 0
}
