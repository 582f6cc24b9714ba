package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/client"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/release"
)

// The versions of the upgrade proofs: the manager and the watchers start
// on vA and move to vB (two builds of the same code); vOld is older than
// a vA manager accepts (v1.89.0 on).
const (
	vA   = "v1.90.0"
	vB   = "v1.90.1"
	vOld = "v1.88.0"
)

// upgradeBuilds are legate binaries built with a version each, and
// bLite the legate-delegate of vB.
type upgradeBuilds struct{ a, b, old, bLite string }

var (
	upgradeBuildOnce sync.Once
	upgradeBuilt     upgradeBuilds
	upgradeBuildErr  error
)

// buildVersions builds the binaries of vA, vB and vOld once per run, next
// to the e2e binary (removed with it).
func buildVersions(t *testing.T) upgradeBuilds {
	t.Helper()
	if os.Getenv("LEGATE_E2E_BINARY") != "" {
		t.Skip("the upgrade proofs build versions of this tree; LEGATE_E2E_BINARY is set")
	}
	upgradeBuildOnce.Do(func() {
		dir := filepath.Dir(binary)
		out := map[string]string{}
		for _, v := range []string{vA, vB, vOld, vB + "-lite"} {
			p := filepath.Join(dir, "legate-"+v)
			version, tags := strings.TrimSuffix(v, "-lite"), []string{}
			if version != v {
				tags = []string{"-tags", "delegate"}
			}
			build := exec.Command("go", append(append([]string{"build"}, tags...), "-ldflags", "-X main.version="+version, "-o", p, "./cmd/legate")...)
			build.Dir = repoRoot
			build.Env = append(os.Environ(), "CGO_ENABLED=0")
			if b, err := build.CombinedOutput(); err != nil {
				upgradeBuildErr = fmt.Errorf("build %s: %v\n%s", v, err, b)
				return
			}
			out[v] = p
		}
		upgradeBuilt = upgradeBuilds{a: out[vA], b: out[vB], old: out[vOld], bLite: out[vB+"-lite"]}
	})
	if upgradeBuildErr != nil {
		t.Fatal(upgradeBuildErr)
	}
	return upgradeBuilt
}

// upgradeCluster is a manager of version vA with a release directory, a
// signing key pair that watchers trust, and an admin client.
type upgradeCluster struct {
	*cluster
	rel    string
	key    []byte // private key file
	pub    string // public key file
	admin  *client.Client
	builds upgradeBuilds
}

func startUpgradeCluster(t *testing.T) *upgradeCluster {
	t.Helper()
	bins := buildVersions(t)
	u := &upgradeCluster{cluster: &cluster{t: t, data: t.TempDir()}, rel: t.TempDir(), builds: bins}
	priv, pub, err := release.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	u.key = priv
	u.pub = filepath.Join(t.TempDir(), "release.pub")
	if err := os.WriteFile(u.pub, pub, 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	u.mgr = startBinary(t, bins.a, "manager "+vA, nil, "manager", "--listen", addr, "--data", u.data,
		"--heartbeat-interval", "500ms", "--release-dir", u.rel)
	u.url = "http://" + addr
	eventually(t, 15*time.Second, "manager admin.env", func() bool {
		env, err := readEnv(filepath.Join(u.data, "admin.env"))
		if err != nil || env["LEGATE_API_KEY"] == "" {
			return false
		}
		u.account, u.apiKey = env["LEGATE_ACCOUNT_ID"], env["LEGATE_API_KEY"]
		return u.cli("version").code == 0 && u.cli("delegates", "list").code == 0
	})
	if u.admin, err = client.New(u.url, nil); err != nil {
		t.Fatal(err)
	}
	u.admin.SetSecret(u.apiKey)
	return u
}

// publish puts bin into the release directory as version, signed with
// key (the trusted one when nil).
func (u *upgradeCluster) publish(bin []byte, version string, key []byte) {
	u.t.Helper()
	u.publishBinary(release.BinaryLegate, bin, version, key)
}

// publishBinary is publish for the release binary which (legate or
// legate-delegate).
func (u *upgradeCluster) publishBinary(which string, bin []byte, version string, key []byte) {
	u.t.Helper()
	if key == nil {
		key = u.key
	}
	p := filepath.Join(u.rel, version, release.ReleaseFileName(which, runtime.GOOS, runtime.GOARCH))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		u.t.Fatal(err)
	}
	if err := os.WriteFile(p, bin, 0o755); err != nil {
		u.t.Fatal(err)
	}
	priv, err := release.ParsePrivateKey(key)
	if err != nil {
		u.t.Fatal(err)
	}
	d, _ := release.Digest(bytes.NewReader(bin))
	sig, err := release.Sign(priv, release.Manifest{Binary: which, Version: version, OS: runtime.GOOS, Arch: runtime.GOARCH, SHA256: d})
	if err != nil {
		u.t.Fatal(err)
	}
	if err := os.WriteFile(p+".sig", sig.Encode(), 0o644); err != nil {
		u.t.Fatal(err)
	}
}

// watcher starts `legate watcher` of version vA for the delegate name on
// hostname; when the test ends it is stopped with SIGTERM (its delegates
// drain) before the manager.
func (u *upgradeCluster) watcher(token, name, hostname string, extra ...string) *proc {
	u.t.Helper()
	return u.watcherOf(u.builds.a, token, name, hostname, extra...)
}

// watcherOf is watcher with the legate binary bin (another version).
func (u *upgradeCluster) watcherOf(bin, token, name, hostname string, extra ...string) *proc {
	u.t.Helper()
	env := append([]string{"ACCOUNT_ID=" + u.account, "DELEGATE_TOKEN=" + token, "MANAGER_HOST_AND_PORT=" + u.url,
		"DELEGATE_NAME=" + name, "DELEGATE_HOSTNAME=" + hostname, "LEGATE_UPGRADE_PUBLIC_KEY=" + u.pub}, extra...)
	p := startBinary(u.t, bin, "watcher "+hostname, env, "watcher", "--dir", u.t.TempDir(),
		"--poll-interval", "200ms", "--connect-timeout", "20s", "--log-level", "debug")
	u.t.Cleanup(func() {
		if !p.exited() {
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(30 * time.Second):
			}
		}
	})
	return p
}

// instances lists the delegate instances (deregistered ones too).
func (u *upgradeCluster) instances() []protocol.Delegate {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := u.admin.ListAllDelegates(ctx)
	if err != nil {
		u.t.Fatal(err)
	}
	return l.Delegates
}

// connectedVersions maps each hostname to the versions connected there.
func (u *upgradeCluster) connectedVersions() map[string][]string {
	out := map[string][]string{}
	for _, d := range u.instances() {
		if d.Status == protocol.DelegateConnected {
			out[d.Hostname] = append(out[d.Hostname], d.Version)
		}
	}
	return out
}

// onlyOn reports whether each of hosts runs exactly version, connected.
func onlyOn(m map[string][]string, version string, hosts ...string) bool {
	for _, h := range hosts {
		if len(m[h]) != 1 || m[h][0] != version {
			return false
		}
	}
	return true
}

// TestUpgradeUnderLoadNoTaskFailsOrRunsTwice is issue 16's proof: three
// delegates under watchers on vA, a task every 50 ms (each runs about a
// second and appends its ID to a file), the manager made to want vB: all
// three end on vB, and no task failed, was cancelled or ran twice. The
// upgrade's timeline and the longest pickup are logged as figures
// (BENCHMARKS.md), not asserted.
func TestUpgradeUnderLoadNoTaskFailsOrRunsTwice(t *testing.T) {
	u := startUpgradeCluster(t)
	b, err := os.ReadFile(u.builds.b)
	if err != nil {
		t.Fatal(err)
	}
	u.publish(b, vB, nil)
	lite, err := os.ReadFile(u.builds.bLite)
	if err != nil {
		t.Fatal(err)
	}
	u.publishBinary(release.BinaryDelegate, lite, vB, nil)
	tok := u.token("up")
	hosts := []string{"up-1", "up-2", "up-3"}
	var watchers []*proc
	for _, h := range hosts {
		watchers = append(watchers, u.watcher(tok, "up", h))
	}
	eventually(t, 30*time.Second, "three delegates connected on "+vA, func() bool { return onlyOn(u.connectedVersions(), vA, hosts...) })

	ran := filepath.Join(t.TempDir(), "ran")
	script := `echo "$LEGATE_TASK_ID" >> ` + ran + `; sleep 1`
	var (
		mu  sync.Mutex
		ids []string
	)
	submitted := func() int { mu.Lock(); defer mu.Unlock(); return len(ids) }
	stop := make(chan struct{})
	streamDone := make(chan error, 1)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				streamDone <- nil
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			task, err := u.admin.SubmitTask(ctx, protocol.TaskSpec{Type: protocol.TaskShell, Shell: &protocol.ShellSpec{Script: script},
				Selectors: []string{"up"}})
			cancel()
			if err != nil {
				streamDone <- fmt.Errorf("submit: %w", err)
				return
			}
			mu.Lock()
			ids = append(ids, task.ID)
			mu.Unlock()
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
			<-streamDone
		}
	}()
	eventually(t, 20*time.Second, "40 tasks submitted on "+vA, func() bool { return submitted() >= 40 })

	pinned := time.Now()
	u.mustCLI("delegates", "upgrade", "pin", "up", vB)
	eventually(t, 90*time.Second, "all three delegates on "+vB+" and the old ones drained", func() bool {
		if !onlyOn(u.connectedVersions(), vB, hosts...) {
			return false
		}
		for _, w := range watchers {
			if !strings.Contains(w.out.String(), "the old delegate drained and exited") {
				return false
			}
		}
		return true
	})
	switched := time.Now()
	atSwitch := submitted()
	eventually(t, 20*time.Second, "40 more tasks submitted on "+vB, func() bool { return submitted() >= atSwitch+40 })
	close(stop)
	if err := <-streamDone; err != nil {
		t.Fatal(err)
	}

	// Every task ends, succeeded, once.
	tasks := map[string]protocol.Task{}
	eventually(t, 60*time.Second, "every task finished", func() bool {
		for _, id := range ids {
			if tk, ok := tasks[id]; ok && protocol.Terminal(tk.Status) {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			tk, err := u.admin.GetTask(ctx, id)
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			tasks[id] = tk
			if !protocol.Terminal(tk.Status) {
				return false
			}
		}
		return true
	})
	byVersion := map[string]int{}
	versionOf := map[string]string{}
	for _, d := range u.instances() {
		versionOf[d.InstanceID] = d.Version
	}
	for _, id := range ids {
		tk := tasks[id]
		if tk.Status != protocol.StatusSucceeded || tk.Attempts != 1 {
			t.Errorf("task %s: %s after %d attempt(s) on %s (%s): %s", id, tk.Status, tk.Attempts, tk.DelegateHostname, versionOf[tk.InstanceID], tk.Error)
		}
		byVersion[versionOf[tk.InstanceID]]++
	}
	b, err = os.ReadFile(ran)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, line := range strings.Fields(string(b)) {
		count[line]++
	}
	for _, id := range ids {
		if count[id] != 1 {
			t.Errorf("task %s ran %d times", id, count[id])
		}
	}
	if len(count) != len(ids) {
		t.Errorf("%d task IDs in the file, %d tasks submitted", len(count), len(ids))
	}
	if byVersion[vA] == 0 || byVersion[vB] == 0 {
		t.Errorf("tasks by version: %v; want some on each", byVersion)
	}
	// The new version's delegates run as the legate-delegate the watcher
	// downloaded beside it (the manager serves it signed).
	for i, w := range watchers {
		if !strings.Contains(w.out.String(), "version="+vB+" binary=") || !strings.Contains(w.out.String(), "/versions/"+vB+"/legate-delegate ") {
			t.Errorf("watcher %s: the %s delegate does not run as versions/%s/legate-delegate:\n%s", hosts[i], vB, vB, w.out.String())
		}
	}

	// Figures (not asserted): the longest pickup, and each watcher's
	// timeline.
	var maxPickup time.Duration
	var maxPickupID string
	var acquired []time.Time
	for _, id := range ids {
		tk := tasks[id]
		if tk.AcquiredAt == nil {
			continue
		}
		acquired = append(acquired, *tk.AcquiredAt)
		if p := tk.AcquiredAt.Sub(tk.CreatedAt); p > maxPickup {
			maxPickup, maxPickupID = p, id
		}
	}
	slices.SortFunc(acquired, func(a, b time.Time) int { return a.Compare(b) })
	var maxGap time.Duration
	for i := 1; i < len(acquired); i++ {
		maxGap = max(maxGap, acquired[i].Sub(acquired[i-1]))
	}
	t.Logf("upgrade figures: %d tasks (%d on %s, %d on %s), all succeeded once; longest pickup (queued → acquired) %s (task %s); "+
		"longest gap between two pickups %s (submissions every 50ms; heartbeat interval 500ms); pin → all on %s and drained %s",
		len(ids), byVersion[vA], vA, byVersion[vB], vB, maxPickup.Round(time.Millisecond), maxPickupID, maxGap.Round(time.Millisecond),
		vB, switched.Sub(pinned).Round(time.Millisecond))
	for i, w := range watchers {
		t.Logf("upgrade figures: watcher %s: %s", hosts[i], timeline(w.out.String()))
	}
}

var timelineRE = regexp.MustCompile(`(download_ms|switch_ms|drain_ms)=(\d+)`)

// timeline pulls the download, switch and drain durations out of a
// watcher's log.
func timeline(log string) string {
	var parts []string
	for _, m := range timelineRE.FindAllStringSubmatch(log, -1) {
		parts = append(parts, strings.TrimSuffix(m[1], "_ms")+" "+m[2]+"ms")
	}
	return strings.Join(parts, ", ")
}

// TestUpgradeRefusesBadBinariesRollsBackAndRefusesExpired: a binary
// signed with another key, and one that differs from its signature, are
// refused and nothing is started; a version that exits at start is rolled
// back while the old one keeps serving, the reason shown by delegates
// describe, and it is not tried again; a delegate older than the manager
// accepts is refused with the version to install.
func TestUpgradeRefusesBadBinariesRollsBackAndRefusesExpired(t *testing.T) {
	u := startUpgradeCluster(t)
	b, err := os.ReadFile(u.builds.b)
	if err != nil {
		t.Fatal(err)
	}
	otherKey, _, err := release.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	u.publish(b, "v1.90.3", otherKey)
	u.publish(b, "v1.90.4", nil)
	if err := os.WriteFile(filepath.Join(u.rel, "v1.90.4", release.BinaryName(runtime.GOOS, runtime.GOARCH)), append(b, 0), 0o755); err != nil {
		t.Fatal(err)
	}
	u.publish([]byte("#!/bin/sh\necho 'this build is broken' >&2\nexit 3\n"), "v1.90.2", nil)
	tok := u.token("rb")
	// rb-1's first manager URL is down: its watcher asks the second (and
	// so does its delegate), or it would never be told of a version.
	w := u.watcher(tok, "rb", "rb-1", "MANAGER_HOST_AND_PORT=http://"+refusedAddr(t)+","+u.url)
	// A replica that opted out: supervised, never upgraded, and listed so.
	off := u.watcher(tok, "rb", "rb-2", "AUTO_UPGRADE=false")
	eventually(t, 30*time.Second, "the delegates connected on "+vA, func() bool { return onlyOn(u.connectedVersions(), vA, "rb-1", "rb-2") })
	for _, d := range u.instances() {
		if want := map[string]string{"rb-1": protocol.UpgradeAuto, "rb-2": protocol.UpgradeOff}[d.Hostname]; d.Upgrade != want {
			t.Errorf("%s registered with upgrade mode %q, want %q", d.Hostname, d.Upgrade, want)
		}
	}
	if out := u.mustCLI("delegates", "list", "-o", "wide"); !regexp.MustCompile(`rb +rb-2 .* off `).MatchString(out) {
		t.Errorf("delegates list does not show rb-2's auto-upgrade off:\n%s", out)
	}

	failedWith := func(what, reason string) {
		t.Helper()
		eventually(t, 60*time.Second, what, func() bool {
			r := u.cli("delegates", "describe", "rb")
			return r.code == 0 && strings.Contains(r.stdout, "upgrade failed: ") && strings.Contains(r.stdout, reason)
		})
		if !onlyOn(u.connectedVersions(), vA, "rb-1") {
			t.Fatalf("%s: the delegate does not run %s alone: %v", what, vA, u.connectedVersions())
		}
		if tk, _ := u.runJSON("--selector", "rb-1", "--script", "echo still serving"); tk.Status != protocol.StatusSucceeded || tk.DelegateHostname != "rb-1" {
			t.Fatalf("%s: a task on the old version: %s %s", what, tk.Status, tk.Error)
		}
	}
	started := func(version string) int {
		return strings.Count(w.out.String(), `msg="delegate started" component=watcher version=`+version+" ")
	}

	u.mustCLI("delegates", "upgrade", "pin", "rb", "v1.90.3")
	failedWith("a binary signed with another key refused", "does not verify with the trusted public key")
	if n := started("v1.90.3"); n != 0 {
		t.Errorf("the wrongly signed version was started %d times", n)
	}

	u.mustCLI("delegates", "upgrade", "pin", "rb", "v1.90.4")
	failedWith("a corrupted binary refused", "differs from its signature")
	if n := started("v1.90.4"); n != 0 {
		t.Errorf("the corrupted version was started %d times", n)
	}

	u.mustCLI("delegates", "upgrade", "pin", "rb", "v1.90.2")
	failedWith("a version that exits at start rolled back", "v1.90.2 exited 3 times before it connected")
	if n := started("v1.90.2"); n != 3 {
		t.Errorf("the version that exits was started %d times, want 3", n)
	}
	// The watcher goes on asking (each answer still wants v1.90.2) and
	// does not try it again.
	const asked = `msg="asked the manager which version to run" component=watcher wanted=v1.90.2`
	polls := strings.Count(w.out.String(), asked)
	eventually(t, 20*time.Second, "five more answers that want v1.90.2", func() bool {
		return strings.Count(w.out.String(), asked) >= polls+5
	})
	if n := started("v1.90.2"); n != 3 {
		t.Errorf("the version that failed was tried again (%d starts)", n)
	}
	if strings.Contains(off.out.String(), "upgrading the delegate") || !onlyOn(u.connectedVersions(), vA, "rb-2") {
		t.Errorf("the watcher with AUTO_UPGRADE=false upgraded:\n%s", off.out.String())
	}

	// A delegate older than the manager accepts is refused, told what to install.
	old := startBinary(t, u.builds.old, "delegate "+vOld, []string{"ACCOUNT_ID=" + u.account, "DELEGATE_TOKEN=" + tok,
		"MANAGER_HOST_AND_PORT=" + u.url, "DELEGATE_NAME=legacy", "DELEGATE_HOSTNAME=rb-old"}, "delegate")
	if code := old.wait(30 * time.Second); code == 0 {
		t.Fatalf("a %s delegate was accepted by a %s manager", vOld, vA)
	}
	for _, want := range []string{"older than this manager (" + vA + ") accepts (v1.89.0 or later)", "install legate " + vA} {
		if !strings.Contains(old.out.String(), want) {
			t.Errorf("the refusal of an expired delegate does not say %q:\n%s", want, old.out.String())
		}
	}
}

// TestWatcherGoesBackOnlyToAPinnedVersion: a watcher of vB under a vA
// manager that holds a signed vA binary is told to run vA (the manager's
// own version, older): it refuses and its delegate stays on vB. Once an
// administrator pins vA (a rollback), the watcher switches to it.
func TestWatcherGoesBackOnlyToAPinnedVersion(t *testing.T) {
	u := startUpgradeCluster(t)
	a, err := os.ReadFile(u.builds.a)
	if err != nil {
		t.Fatal(err)
	}
	u.publish(a, vA, nil)
	w := u.watcherOf(u.builds.b, u.token("down"), "down", "dn-1")
	eventually(t, 30*time.Second, "the delegate connected on "+vB, func() bool { return onlyOn(u.connectedVersions(), vB, "dn-1") })
	const refused = "no administrator pinned it"
	eventually(t, 30*time.Second, "the watcher refuses to go back to "+vA, func() bool { return strings.Contains(w.out.String(), refused) })
	if !onlyOn(u.connectedVersions(), vB, "dn-1") || strings.Contains(w.out.String(), "upgrading the delegate") {
		t.Fatalf("the watcher went back to %s unpinned: %v", vA, u.connectedVersions())
	}
	u.mustCLI("delegates", "upgrade", "pin", "down", vA)
	eventually(t, 60*time.Second, "the delegate rolled back to the pinned "+vA, func() bool { return onlyOn(u.connectedVersions(), vA, "dn-1") })
}
