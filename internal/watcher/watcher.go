// Package watcher runs a delegate as a child process and upgrades it with
// no failed task: it restarts a delegate that exits (with backoff), asks
// the manager which version the delegate's group wants, downloads and
// verifies a signed binary of it, starts it beside the running one, and
// once the new process is connected stops the old one, which drains (it
// stops acquiring and finishes its tasks while heartbeating). A new
// version that does not connect in time, or exits repeatedly, is stopped,
// the old one keeps working, the manager is told why, and that version is
// not tried again until the manager wants another. Each version runs in a
// directory of its own, with an instance slot of its own (the manager
// tells the two processes apart) and a health port of its own.
package watcher

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/legate-dev/legate/internal/atomicfile"
	"github.com/legate-dev/legate/internal/backoff"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/release"
)

// Manager is what the watcher needs of the manager (a *client.Client).
type Manager interface {
	UpgradeCheck(ctx context.Context, accountID, token string, req protocol.UpgradeCheckRequest) (protocol.UpgradeCheckResponse, error)
	ReleaseSignature(ctx context.Context, accountID, token, binary, version, goos, goarch string) ([]byte, error)
	DownloadRelease(ctx context.Context, accountID, token, binary, version, goos, goarch string, w io.Writer, limit int64) (int64, error)
}

// Options configures a Watcher. Zero values mean the documented defaults.
type Options struct {
	// Binary and Version are the legate binary the watcher starts first
	// (its own) and its version.
	Binary  string
	Version string
	// Dir holds the watcher's state: versions/VERSION/legate (downloaded
	// binaries), work/VERSION (each version's delegate working directory),
	// current (the version to start first) and failed (the version that
	// failed, and why).
	Dir string
	// Env is the delegates' environment (their credentials included).
	Env []string
	// AccountID, Token, Name and Hostname identify the delegate to the
	// manager (Hostname as the delegate registers).
	AccountID, Token, Name, Hostname string
	// Manager is asked which version to run.
	Manager Manager
	// PublicKey verifies downloaded binaries; nil: the watcher supervises
	// but never upgrades (it says so once).
	PublicKey ed25519.PublicKey
	// AutoUpgrade is AUTO_UPGRADE: false supervises only.
	AutoUpgrade bool
	// HTTPPort is the delegates' health port (DELEGATE_HTTP_PORT): the
	// running delegate has it, a new version beside it HTTPPort+1 (they
	// alternate); 0 = off for both.
	HTTPPort int
	// ConnectTimeout bounds how long a new version may take to connect;
	// 0 = 2m.
	ConnectTimeout time.Duration
	// MaxStartExits is how many times a new version may exit before it
	// connects before it is rolled back; 0 = 3.
	MaxStartExits int
	// PollInterval overrides the manager's poll interval; 0 = the
	// manager's.
	PollInterval time.Duration
	// SwitchPoll is how often the watcher asks while a new version
	// connects; 0 = 250ms.
	SwitchPoll time.Duration
	// MaxBinarySize bounds a download; 0 = 512 MiB.
	MaxBinarySize int64
	// Force is closed at the watcher's second stop request (a second
	// Ctrl-C or SIGTERM): the delegates, draining since the first, are
	// told again (SIGTERM), which cancels their running tasks. nil: never.
	Force <-chan struct{}
	// Logger; nil = slog.Default().
	Logger *slog.Logger
	// Stdout and Stderr receive the delegates' output; nil = os.Stdout
	// and os.Stderr.
	Stdout, Stderr *os.File
}

// Watcher supervises and upgrades one delegate. Create it with New and
// run it once with Run.
type Watcher struct {
	opts Options
	log  *slog.Logger
}

// New checks the options.
func New(opts Options) (*Watcher, error) {
	switch {
	case opts.Binary == "":
		return nil, errors.New("watcher: no binary to run")
	case opts.Dir == "":
		return nil, errors.New("watcher: no state directory")
	case opts.Manager == nil:
		return nil, errors.New("watcher: no manager")
	case opts.Name == "" || opts.Hostname == "":
		return nil, errors.New("watcher: the delegate's name and hostname are needed")
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 2 * time.Minute
	}
	if opts.MaxStartExits <= 0 {
		opts.MaxStartExits = 3
	}
	if opts.SwitchPoll <= 0 {
		opts.SwitchPoll = 250 * time.Millisecond
	}
	if opts.MaxBinarySize <= 0 {
		opts.MaxBinarySize = 512 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Stdout == nil {
		opts.Stdout = os.Stdout
	}
	if opts.Stderr == nil {
		opts.Stderr = os.Stderr
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	return &Watcher{opts: opts, log: opts.Logger}, nil
}

// child is one delegate process.
type child struct {
	version string
	binary  string
	port    int
	cmd     *exec.Cmd
	done    chan struct{} // closed when the process exited
	err     error         // its exit, once done is closed
	started time.Time
	// stopping is when the watcher sent SIGTERM to retire it (zero
	// otherwise).
	stopping time.Time
}

func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// signal sends sig to the process (nothing once it exited).
func (c *child) signal(sig os.Signal) {
	if !c.exited() {
		_ = c.cmd.Process.Signal(sig)
	}
}

// start starts a delegate of version from binary with health port port.
func (w *Watcher) start(version, binary string, port int) (*child, error) {
	work := filepath.Join(w.opts.Dir, "work", version)
	if err := os.MkdirAll(work, 0o700); err != nil {
		return nil, fmt.Errorf("create the working directory of %s: %w", version, err)
	}
	cmd := exec.Command(binary, "delegate", "--workdir", work)
	cmd.Dir = work
	cmd.Env = append(slices.Clone(w.opts.Env), "LEGATE_WATCHER_SLOT="+version, "DELEGATE_HTTP_PORT="+strconv.Itoa(port))
	cmd.Stdout, cmd.Stderr = w.opts.Stdout, w.opts.Stderr
	setParentDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", version, binary, err)
	}
	c := &child{version: version, binary: binary, port: port, cmd: cmd, done: make(chan struct{}), started: time.Now()}
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	w.log.Info("delegate started", "version", version, "pid", cmd.Process.Pid, "health_port", port)
	return c, nil
}

// stop sends SIGTERM (the delegate drains) and waits for the exit.
func stop(c *child) {
	if c == nil {
		return
	}
	c.signal(syscall.SIGTERM)
	<-c.done
}

// state is what the watcher tells the manager at its next check.
type state struct {
	kind, target, reason string
}

// Run supervises the delegate and upgrades it until ctx ends; then it
// stops the delegates (each drains) and returns nil. It fails only when
// no delegate can be started at all.
func (w *Watcher) Run(ctx context.Context) error {
	version, binary := w.startingVersion()
	cur, err := w.start(version, binary, w.opts.HTTPPort)
	if err != nil {
		return err
	}
	r := &supervisor{Watcher: w, cur: cur, restarts: backoff.Backoff{Min: time.Second, Max: time.Minute}, interval: time.Minute}
	defer r.stopAll()
	if failed, reason := w.loadFailed(); failed != "" {
		r.failed, r.st = failed, state{kind: protocol.WatcherFailed, target: failed, reason: reason}
	}
	if w.opts.AutoUpgrade && w.opts.PublicKey == nil {
		w.log.Warn("no public key to verify upgrades with (LEGATE_UPGRADE_PUBLIC_KEY): the delegate is supervised, never upgraded")
	}
	poll := time.NewTimer(0)
	defer poll.Stop()
	for {
		// The first retiring process to exit, if any.
		var retired <-chan struct{}
		if len(r.retiring) > 0 {
			retired = r.retiring[0].done
		}
		var curDone <-chan struct{}
		if r.restartAt == nil {
			curDone = r.cur.done
		}
		select {
		case <-ctx.Done():
			return nil
		case <-retired:
			r.retired()
		case <-curDone:
			r.exited()
		case <-r.restartAt:
			r.restart()
		case <-poll.C:
			if r.poll(ctx) {
				return nil
			}
			poll.Reset(r.interval)
		}
	}
}

// supervisor is the state of one Run: the delegates, their restarts, and
// what the watcher tells the manager.
type supervisor struct {
	*Watcher
	cur      *child
	retiring []*child // older versions draining, oldest first
	// failed is the version whose upgrade failed: it is not tried again
	// until the manager wants another.
	failed    string
	st        state // what the next check reports
	restarts  backoff.Backoff
	restartAt <-chan time.Time // when cur restarts (nil: it runs)
	interval  time.Duration    // between checks
}

// stopAll sends SIGTERM to every delegate (each drains) and waits for
// their exits; at the second stop request (Options.Force) it sends each
// one left a second SIGTERM, which cancels its running tasks.
func (r *supervisor) stopAll() {
	all := append(r.retiring, r.cur)
	for _, c := range all {
		c.signal(syscall.SIGTERM)
	}
	force := r.opts.Force
	for _, c := range all {
		select {
		case <-c.done:
			continue
		case <-force:
			force = nil
			r.log.Warn("second stop request: the delegates cancel their running tasks")
			for _, c := range all {
				c.signal(syscall.SIGTERM)
			}
		}
		<-c.done
	}
}

// retired notes the exit of the oldest retiring delegate.
func (r *supervisor) retired() {
	old := r.retiring[0]
	r.retiring = r.retiring[1:]
	r.log.Info("the old delegate drained and exited", "version", old.version, "exit", exitText(old.err),
		"drain_ms", time.Since(old.stopping).Milliseconds())
	r.warnUndelivered(old.version)
	r.removeBinary(old.version, r.cur.version)
}

// exited schedules the restart of the current delegate, which exited,
// after a backoff (from its start again once it ran for a while).
func (r *supervisor) exited() {
	d := r.restarts.Next()
	if time.Since(r.cur.started) > 10*time.Minute {
		r.restarts.Reset()
		d = r.restarts.Next()
	}
	r.log.Warn("the delegate exited; restarting it", "version", r.cur.version, "exit", exitText(r.cur.err), "restart_in", d.Round(time.Millisecond))
	r.restartAt = time.After(d)
}

// restart starts the current version again (later again if it cannot).
func (r *supervisor) restart() {
	r.restartAt = nil
	c, err := r.start(r.cur.version, r.cur.binary, r.cur.port)
	if err != nil {
		r.log.Error("restart the delegate", "err", err)
		r.restartAt = time.After(r.restarts.Next())
		return
	}
	r.cur = c
}

// poll asks the manager which version to run and upgrades to it when it
// should. It reports true when ctx ended during an upgrade.
func (r *supervisor) poll(ctx context.Context) (done bool) {
	resp, err := r.check(ctx, r.cur.version, r.st)
	if err != nil {
		r.log.Warn("cannot ask the manager which version to run", "err", err)
		return false
	}
	r.log.Debug("asked the manager which version to run", "wanted", resp.Wanted, "held", resp.Held, "running", r.cur.version)
	if resp.PollIntervalMS > 0 {
		r.interval = time.Duration(resp.PollIntervalMS) * time.Millisecond
	}
	if r.opts.PollInterval > 0 {
		r.interval = r.opts.PollInterval
	}
	if r.failed != "" && !release.SameVersion(resp.Wanted, r.failed) {
		// The manager wants another version now: the failure is
		// forgotten.
		r.failed, r.st = "", state{}
		r.saveFailed("", "")
	}
	if !r.wantsUpgrade(resp, r.cur.version, r.failed) || r.restartAt != nil {
		return false
	}
	next, err := r.upgrade(ctx, r.cur, resp.Wanted)
	switch {
	case ctx.Err() != nil:
		return true
	case err != nil:
		r.upgradeFailed(ctx, resp.Wanted, err)
	default:
		r.upgraded(ctx, next)
	}
	return false
}

// upgradeFailed records that the upgrade to version failed (it is not
// tried again until the manager wants another) and tells the manager.
func (r *supervisor) upgradeFailed(ctx context.Context, version string, err error) {
	r.failed, r.st = version, state{kind: protocol.WatcherFailed, target: version, reason: err.Error()}
	r.saveFailed(r.failed, err.Error())
	r.removeBinary(r.failed, r.cur.version)
	r.log.Error("upgrade failed; the running version goes on, and this one is not tried again until the manager wants another",
		"from", r.cur.version, "to", version, "reason", err.Error())
	if _, err := r.check(ctx, r.cur.version, r.st); err != nil {
		r.log.Warn("cannot report the failed upgrade yet", "err", err)
	}
}

// upgraded makes next, connected, the current delegate (the old one
// drains) and tells the manager.
func (r *supervisor) upgraded(ctx context.Context, next *child) {
	r.retiring = append(r.retiring, r.cur)
	r.cur, r.st = next, state{}
	r.restarts.Reset()
	if _, err := r.check(ctx, r.cur.version, r.st); err != nil {
		r.log.Warn("cannot report the upgrade yet", "err", err)
	}
}

// wantsUpgrade says whether the manager's answer calls for an upgrade of
// the delegate running version.
func (w *Watcher) wantsUpgrade(resp protocol.UpgradeCheckResponse, version, failed string) bool {
	switch {
	case !w.opts.AutoUpgrade || w.opts.PublicKey == nil || resp.Held || resp.Wanted == "":
		return false
	case release.SameVersion(resp.Wanted, version) || (failed != "" && release.SameVersion(resp.Wanted, failed)):
		return false
	case !release.ValidVersionName(resp.Wanted):
		return false
	case !resp.Pinned && release.Downgrade(version, resp.Wanted):
		w.log.Warn("the manager wants a version older than the one running and no administrator pinned it; "+
			"the watcher goes back only to a pinned version (legate delegates upgrade pin NAME VERSION)",
			"running", version, "wanted", resp.Wanted)
		return false
	case !resp.Available:
		w.log.Info("the manager wants another version but holds no signed binary of it for this platform", "wanted", resp.Wanted,
			"platform", runtime.GOOS+"/"+runtime.GOARCH)
		return false
	}
	return true
}

func (w *Watcher) check(ctx context.Context, version string, st state) (protocol.UpgradeCheckResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return w.opts.Manager.UpgradeCheck(ctx, w.opts.AccountID, w.opts.Token, protocol.UpgradeCheckRequest{
		Name: w.opts.Name, Hostname: w.opts.Hostname, Version: version, OS: runtime.GOOS, Arch: runtime.GOARCH,
		AutoUpgrade: w.opts.AutoUpgrade, State: st.kind, Target: st.target, Reason: st.reason,
	})
}

// upgrade switches from cur to version: download and verify, start it
// beside cur, wait until the manager lists it connected, then SIGTERM cur
// (which drains; Run waits for its exit). It returns the new child, or
// why the upgrade failed (the new process is stopped then, and cur was
// not touched).
func (w *Watcher) upgrade(ctx context.Context, cur *child, version string) (*child, error) {
	t0 := time.Now()
	w.log.Info("upgrading the delegate", "from", cur.version, "to", version)
	upgrading := state{kind: protocol.WatcherUpgrading, target: version}
	if _, err := w.check(ctx, cur.version, upgrading); err != nil {
		w.log.Warn("cannot report the upgrade", "err", err)
	}
	binary, err := w.download(ctx, version)
	if err != nil {
		return nil, err
	}
	downloaded := time.Now()
	port := 0
	if w.opts.HTTPPort > 0 {
		port = w.opts.HTTPPort
		if cur.port == w.opts.HTTPPort {
			port = w.opts.HTTPPort + 1
		}
	}
	next, err := w.start(version, binary, port)
	if err != nil {
		return nil, err
	}
	exits := 0
	deadline := time.NewTimer(w.opts.ConnectTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(w.opts.SwitchPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			stop(next)
			return nil, ctx.Err()
		case <-deadline.C:
			stop(next)
			return nil, fmt.Errorf("%s did not connect within %s", version, w.opts.ConnectTimeout)
		case <-next.done:
			exits++
			if exits >= w.opts.MaxStartExits {
				return nil, fmt.Errorf("%s exited %d times before it connected (last: %s)", version, exits, exitText(next.err))
			}
			w.log.Warn("the new version exited before it connected; starting it again", "version", version, "exit", exitText(next.err))
			if next, err = w.start(version, binary, port); err != nil {
				return nil, err
			}
		case <-tick.C:
			resp, err := w.check(ctx, cur.version, upgrading)
			if err != nil {
				w.log.Warn("cannot ask the manager whether the new version connected", "err", err)
				continue
			}
			if !slices.ContainsFunc(resp.Connected, func(v string) bool { return release.SameVersion(v, version) }) {
				continue
			}
			connected := time.Now()
			w.saveCurrent(version)
			cur.stopping = time.Now()
			cur.signal(syscall.SIGTERM)
			w.log.Info("upgrade switched: the new version is connected, the old one drains",
				"from", cur.version, "to", version,
				"download_ms", downloaded.Sub(t0).Milliseconds(), "switch_ms", connected.Sub(downloaded).Milliseconds())
			return next, nil
		}
	}
}

// download fetches version's binary and signature into
// versions/VERSION/, verifies it and returns its path; a binary that does
// not verify is deleted and never started. It fetches legate-delegate
// too, when the manager holds it signed, so that the new version's
// delegate runs as it (legate delegate does when it lies beside legate);
// without it the delegate runs as legate.
func (w *Watcher) download(ctx context.Context, version string) (string, error) {
	dir := filepath.Join(w.opts.Dir, "versions", version)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	path := filepath.Join(dir, release.BinaryLegate)
	if err := w.fetch(ctx, release.BinaryLegate, version, path); err != nil {
		return "", err
	}
	w.log.Info("downloaded and verified", "version", version, "path", path)
	lite := filepath.Join(dir, release.BinaryDelegate)
	err := w.fetch(ctx, release.BinaryDelegate, version, lite)
	var pe *protocol.Error
	switch {
	case err == nil:
		w.log.Info("downloaded and verified", "version", version, "path", lite)
	case errors.Is(err, errNotServed) || (errors.As(err, &pe) && pe.Code == protocol.CodeNotFound):
		// Info, not debug: the delegate of this version idles at the full
		// binary's footprint (docs/upgrades.md), which an operator should
		// be able to see without turning on debug logs.
		w.log.Info("the manager holds no signed legate-delegate of this version: its delegate runs as legate", "version", version, "err", err)
	default:
		w.log.Warn("legate-delegate of the new version is refused: its delegate runs as legate", "version", version, "err", err)
	}
	return path, nil
}

// errNotServed: the manager answered a request for legate-delegate with
// another binary's signature (a manager from before legate-delegate was
// served, which ignores the binary parameter).
var errNotServed = errors.New("the manager does not serve legate-delegate")

// fetch downloads the release binary binary of version and its
// signature, verifies it and installs it at path (mode 0755).
func (w *Watcher) fetch(ctx context.Context, binary, version, path string) error {
	sigText, err := w.opts.Manager.ReleaseSignature(ctx, w.opts.AccountID, w.opts.Token, binary, version, runtime.GOOS, runtime.GOARCH)
	if err != nil {
		return fmt.Errorf("download the signature of %s %s: %w", binary, version, err)
	}
	sig, err := release.DecodeSignature(sigText)
	if err != nil {
		return fmt.Errorf("the signature of %s %s: %w", binary, version, err)
	}
	if binary == release.BinaryDelegate && sig.Which() != binary {
		return errNotServed
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".download-*")
	if err != nil {
		return fmt.Errorf("download %s %s: %w", binary, version, err)
	}
	defer os.Remove(tmp.Name())
	_, err = w.opts.Manager.DownloadRelease(ctx, w.opts.AccountID, w.opts.Token, binary, version, runtime.GOOS, runtime.GOARCH, tmp, w.opts.MaxBinarySize)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("download %s %s: %w", binary, version, err)
	}
	digest, err := release.FileDigest(tmp.Name())
	if err != nil {
		return err
	}
	if err := release.VerifyBinary(w.opts.PublicKey, sig, binary, digest, version, runtime.GOOS, runtime.GOARCH); err != nil {
		return fmt.Errorf("the %s of %s is refused: %w", binary, version, err)
	}
	if err := os.Chmod(tmp.Name(), 0o755); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("install %s %s: %w", binary, version, err)
	}
	return nil
}

// startingVersion is the version the watcher runs first: the one it
// switched to last (when its binary is still there), else its own.
func (w *Watcher) startingVersion() (version, binary string) {
	b, err := os.ReadFile(filepath.Join(w.opts.Dir, "current"))
	if err == nil {
		v := strings.TrimSpace(string(b))
		p := filepath.Join(w.opts.Dir, "versions", v, "legate")
		if release.ValidVersionName(v) && !release.SameVersion(v, w.opts.Version) {
			if _, err := os.Stat(p); err == nil {
				return v, p
			}
		}
	}
	return w.opts.Version, w.opts.Binary
}

// warnUndelivered says so when the delegate of version exited with
// results it could not deliver (the manager was unreachable all through
// its drain): they stay in its spool, which only that version's delegate
// (same slot, same directory) sends.
func (w *Watcher) warnUndelivered(version string) {
	spool := filepath.Join(w.opts.Dir, "work", version, "spool")
	entries, err := os.ReadDir(spool)
	n := 0
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".result.json") {
			n++
		}
	}
	if err != nil || n == 0 {
		return
	}
	w.log.Warn("the old version exited with results it could not deliver; they are kept and sent when that version runs again "+
		"(LEGATE_WATCHER_SLOT="+version+" legate delegate --workdir "+filepath.Join(w.opts.Dir, "work", version)+")",
		"version", version, "results", n, "spool", spool)
}

// removeBinary deletes the downloaded binary of version (never the one of
// running): the old version once it drained, a version that failed. Its
// working directory (its log, results it could not deliver) stays.
func (w *Watcher) removeBinary(version, running string) {
	if release.SameVersion(version, running) || !release.ValidVersionName(version) {
		return
	}
	if err := os.RemoveAll(filepath.Join(w.opts.Dir, "versions", version)); err != nil {
		w.log.Warn("cannot remove an old binary", "version", version, "err", err)
	}
}

func (w *Watcher) saveCurrent(version string) {
	if err := atomicfile.WriteFile(filepath.Join(w.opts.Dir, "current"), []byte(version+"\n"), 0o600); err != nil {
		w.log.Warn("cannot record the current version", "err", err)
	}
}

// loadFailed reads the version that failed to start and why.
func (w *Watcher) loadFailed() (string, string) {
	b, err := os.ReadFile(filepath.Join(w.opts.Dir, "failed"))
	if err != nil {
		return "", ""
	}
	v, reason, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	if !release.ValidVersionName(v) {
		return "", ""
	}
	return v, reason
}

func (w *Watcher) saveFailed(version, reason string) {
	p := filepath.Join(w.opts.Dir, "failed")
	if version == "" {
		_ = os.Remove(p)
		return
	}
	if err := atomicfile.WriteFile(p, []byte(version+"\n"+strings.ReplaceAll(reason, "\n", " ")+"\n"), 0o600); err != nil {
		w.log.Warn("cannot record the failed version", "err", err)
	}
}

func exitText(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}
