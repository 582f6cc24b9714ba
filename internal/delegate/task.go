package delegate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/legate-dev/legate/internal/backoff"
	"github.com/legate-dev/legate/internal/executor"
	"github.com/legate-dev/legate/internal/executor/containers"
	"github.com/legate-dev/legate/internal/mask"
	"github.com/legate-dev/legate/internal/protocol"
)

// runTask acquires an offered task and, if this delegate wins it, runs it,
// streams its output and reports the result. parent is the agent's loop
// context; the task runs in a child of it that a.kill cancels. The task's
// slot (its placeholder in a.tasks, made by offeredWith) is freed when
// runTask returns.
func (a *Agent) runTask(parent context.Context, id string, capabilities []string) {
	defer a.taskWG.Done()
	defer a.freeSlot(parent, id)
	ctx, unkill := a.kill.context(parent)
	defer unkill()
	gen := a.regGen.Load()
	if !a.capable(ctx, id, capabilities) {
		a.metrics.rejectedOffer(rejectCapability)
		return
	}
	// A stop requested since the offer (or during the capability check)
	// means no new task: the offer is left for other delegates.
	a.mu.Lock()
	draining := a.draining
	a.mu.Unlock()
	if draining {
		a.metrics.rejectedOffer(rejectDraining)
		return
	}
	if a.once.closed.Load() {
		return // a one-shot delegate claims one task only
	}
	acq, ok := a.claim(ctx, id, gen)
	if !ok {
		a.once.lost(a, id)
		return
	}
	a.once.claimed()
	taskCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	t := &runningTask{epoch: acq.Epoch, cancel: cancel}
	a.mu.Lock()
	a.tasks[id] = t
	a.mu.Unlock()
	log := a.log.With("task", id, "epoch", acq.Epoch, "type", acq.Spec.Type)
	log.Info("task acquired")
	// An http task starts no process and leaves nothing on disk: it
	// runs in the delegate, whose memory tasks cannot read.
	if a.gate != nil && acq.Spec.Type != protocol.TaskHTTP {
		defer a.gate.enter(taskCtx, scopeOf(acq.Spec), func() {
			log.Info("task waits: tasks of another scope run here, and without a sandbox tasks of one scope run at a time (LEGATE_ALLOW_MIXED_SCOPES)",
				"org", acq.Spec.Org, "project", acq.Spec.Project)
		})()
	}
	defer a.perf.executing.begin()()
	res, outputRefused := a.execute(taskCtx, log, id, acq, cancel)
	resultRefused := a.deliverResult(log, id, res)
	logRefusal(log, t, outputRefused, resultRefused)
	log.Info("task finished", "status", res.Status, "exit_code", derefInt(res.ExitCode))
	a.once.finish(nil)
}

// logRefusal logs, once per task, that the manager refused its output or
// result because the task is no longer this delegate's. After the manager
// aborted the task (a user cancelled it) that is expected: info, not a
// warning. It is logged when the task is over rather than at the refusal:
// by then an abort that crossed the refused report has normally arrived.
func logRefusal(log logger, t *runningTask, output, result error) {
	if output == nil && result == nil {
		return
	}
	msg, err := "manager refused the result: the task is no longer held by this delegate", result
	if result == nil {
		msg, err = "manager refused the task's output: the task is no longer held by this delegate", output
	}
	if t.aborted.Load() {
		log.Info(msg+" (it aborted the task)", "err", err, "output_refused", output != nil)
		return
	}
	log.Warn(msg, "err", err, "output_refused", output != nil)
}

// freeSlot forgets task id and gives its slot to an offer that found none
// free, if there is one.
func (a *Agent) freeSlot(ctx context.Context, id string) {
	a.mu.Lock()
	delete(a.tasks, id)
	nextID, next := a.nextDeferred()
	a.mu.Unlock()
	if nextID != "" {
		a.offeredWith(ctx, nextID, next)
	}
}

// capable validates the capabilities a task needs from here (those not
// validated recently), reports fresh results to the manager, and reports
// whether all are available.
func (a *Agent) capable(ctx context.Context, id string, capabilities []string) bool {
	if len(capabilities) == 0 {
		return true
	}
	results, ok := a.caps.check(ctx, capabilities)
	if len(results) > 0 {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		if err := a.client().ReportCapabilities(rctx, protocol.CapabilityReport{TaskID: id, Results: results}); err != nil {
			a.log.Warn("report capability results", "task", id, "err", err)
		}
		cancel()
	}
	for _, r := range results {
		if !r.OK {
			a.log.Info("not taking task: capability not available here", "task", id, "criteria", r.Criteria, "err", r.Error)
		}
	}
	return ok
}

// claim acquires an offered task; false when another delegate has it or
// the acquire failed (logged). gen is the registration the offer came in.
func (a *Agent) claim(ctx context.Context, id string, gen int64) (protocol.AcquireResponse, bool) {
	began := time.Now()
	acq, err := a.acquire(ctx, id)
	if err == nil {
		a.perf.acquireNS.Store(int64(time.Since(began)))
		return acq, true
	}
	var pe *protocol.Error
	switch {
	case errors.As(err, &pe) && (pe.Code == protocol.CodeAlreadyClaimed || pe.Code == protocol.CodeTaskTerminal):
		a.log.Debug("task taken by another delegate", "task", id)
	case ctx.Err() != nil:
		a.log.Debug("acquire given up: the delegate is stopping", "task", id)
	default:
		a.log.Warn("acquire failed", "task", id, "err", err)
		a.metrics.rejectedOffer(rejectAcquire)
		a.handleCallError(ctx, err, gen)
	}
	return protocol.AcquireResponse{}, false
}

// execute runs an acquired task in its working directory while its
// output is masked and shipped to the manager, reports its start, and
// returns its result (masked), once all its output was sent or kept, and
// the manager's refusal of the output, if it refused it. ctx is the task's
// context and cancel cancels it (as an abort by the manager does; the
// shipper does when the manager refuses the output).
func (a *Agent) execute(ctx context.Context, log logger, id string, acq protocol.AcquireResponse,
	cancel context.CancelCauseFunc) (protocol.ResultRequest, error) {
	ship := newShipper(a, id, acq.Epoch, cancel)
	secrets := a.secretsToMask(acq)
	out := mask.New(ship, secrets)
	dir := taskDir(a.opts.WorkDir, id)
	env := append(append([]string{}, a.opts.TaskEnv...), "LEGATE_TASK_ID="+id)
	// The start report must land before the result, or a fast task would
	// finish without a started_at.
	var started sync.WaitGroup
	if executor.UsesContainers(acq.Spec.Type) {
		a.awaitSweep(ctx, log)
	}
	a.metrics.taskStarted(acq.Spec.Type)
	began := time.Now()
	outcome := executor.Run(ctx, acq.Spec, executor.Options{
		WorkDir:    dir,
		Env:        env,
		Timeout:    time.Duration(acq.TimeoutMS) * time.Millisecond,
		HTTPClient: a.opts.TaskHTTPClient,
		Isolator:   a.iso,
		Containers: a.taskContainers(),
		TaskID:     id,
		OnStart: func() {
			started.Go(func() { a.reportStarted(ctx, log, id, acq.Epoch) })
		},
	}, out)
	log.Debug("task process ended; sending the rest of its output", "status", outcome.Status)
	_ = out.Flush()
	lastSeq := ship.close()
	started.Wait()
	if cause := context.Cause(ctx); errors.Is(cause, errAborted) || errors.Is(cause, errLeaseLost) {
		outcome.Status = protocol.StatusCancelled
		if outcome.Error == "" {
			outcome.Error = cause.Error()
		}
	}
	a.metrics.taskFinished(acq.Spec.Type, outcome.Status, time.Since(began))
	a.perf.ran.Add(1)
	if outcome.Status == protocol.StatusFailed || outcome.Status == protocol.StatusTimedOut {
		a.perf.failed.Add(1)
	}
	if err := os.RemoveAll(dir); err != nil {
		log.Warn("remove task directory", "dir", dir, "err", err)
	}
	res := protocol.ResultRequest{
		Epoch: acq.Epoch, Status: outcome.Status, ExitCode: outcome.ExitCode,
		Error: mask.String(outcome.Error, secrets), HTTPResult: outcome.HTTPResult, LastSeq: lastSeq,
		DelegateFault: outcome.DelegateFault,
	}
	if len(outcome.Outputs) > 0 {
		res.Outputs = make(map[string]string, len(outcome.Outputs))
		for k, v := range outcome.Outputs {
			res.Outputs[k] = mask.String(v, secrets)
		}
	}
	if res.HTTPResult != nil {
		h := *res.HTTPResult
		h.BodyExcerpt = mask.String(h.BodyExcerpt, secrets)
		res.HTTPResult = &h
	}
	return res, ship.refusal()
}

// reportStarted tells the manager that the task's process started.
func (a *Agent) reportStarted(ctx context.Context, log logger, id string, epoch int64) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := a.reportStartedOnce(ctx, id, protocol.StartedRequest{Epoch: epoch}); err != nil {
		log.Debug("report started", "err", err)
	}
}

// logger is what a task's code logs with: the agent's logger with the
// task's attributes.
type logger interface {
	Debug(msg string, args ...any)
	Info(msg string, args ...any)
	Warn(msg string, args ...any)
}

// startIsolation prepares the isolation of task processes and ends what
// an earlier run of this delegate (same working directory) left running
// when it crashed. The returned func releases it once no task runs.
func (a *Agent) startIsolation() (func(), error) {
	iso, err := executor.NewIsolator(executor.IsolatorOptions{Mode: a.isolation, Dir: a.opts.WorkDir, Logger: a.log,
		Sandbox: a.sandbox, UIDs: a.uids})
	if err != nil {
		return nil, err
	}
	a.reportSandbox(iso.Sandbox())
	n, err := iso.Sweep()
	if err != nil {
		a.log.Warn("task isolation: could not end everything an earlier run left running", "err", err)
	}
	if n > 0 {
		a.log.Warn("task isolation: ended the processes of tasks an earlier run of this delegate left running", "runs", n)
	}
	a.log.Info("task isolation", "mode", iso.Mode(), "cgroup", iso.CgroupPath())
	a.iso = iso
	return func() {
		if err := iso.Close(); err != nil {
			a.log.Warn("task isolation", "err", err)
		}
	}, nil
}

// startContainers finds the container runtime and the platform, and
// starts removing the containers and volumes an earlier run of this
// delegate (same working directory and hostname) left when it crashed.
// The delegate registers meanwhile (the runtime's CLI can take seconds on
// a busy host); container tasks wait for the sweep (a.swept). Without a
// runtime the delegate still runs; it is not offered container tasks.
// The returned func waits for the sweep, which ctx ends.
func (a *Agent) startContainers(ctx context.Context) (wait func()) {
	a.swept = make(chan struct{})
	getenv := envLookup(a.opts.Environ)
	platform, err := containers.DetectPlatform(getenv)
	if err != nil {
		a.log.Warn("platform", "err", err)
	}
	a.platform = platform
	sum := sha256.Sum256([]byte(a.hostname + "\x00" + a.opts.WorkDir))
	c, err := containers.Find(getenv, hex.EncodeToString(sum[:8]), platform)
	if err != nil {
		a.log.Info("container tasks: no container runtime", "reason", err.Error(), "platform", platform)
		a.containerReason = err.Error()
		close(a.swept)
		return func() {}
	}
	c.AllowPrivileged, c.HostPaths = a.cfg.ContainerPrivileged, a.cfg.ContainerHostPaths
	if c.Pods != nil {
		a.log.Info("container tasks run as Kubernetes pods", "namespace", c.Pods.Namespace, "api", c.Pods.Config.Server,
			"credentials", c.Pods.Config.Source, "start_deadline", c.Pods.StartDeadline.String(), "owner", c.Owner,
			"privileged", c.AllowPrivileged, "host_paths", strings.Join(c.HostPaths, ","))
	} else {
		a.log.Info("container tasks", "runtime", c.Path, "platform", platform, "owner", c.Owner,
			"privileged", c.AllowPrivileged, "host_paths", strings.Join(c.HostPaths, ","))
	}
	a.containers = c
	go func() {
		defer close(a.swept)
		nc, nv, err := c.Sweep(ctx)
		if err != nil {
			a.log.Warn("container tasks: could not remove everything an earlier run left", "err", err)
		}
		if nc+nv > 0 {
			a.log.Warn("container tasks: removed the containers and volumes an earlier run of this delegate left", "containers", nc, "volumes", nv)
		}
	}()
	return func() { <-a.swept }
}

// taskContainers is the container runtime tasks run on: nil (not an
// interface holding a nil *containers.Runtime) when the delegate has none,
// so that a container task fails saying so.
func (a *Agent) taskContainers() executor.ContainerRuntime {
	if a.containers == nil {
		return nil
	}
	return a.containers
}

// awaitSweep holds a container task until the sweep of what an earlier
// run left has ended (it removes containers by the delegate's label, so
// it would remove the task's too), or until ctx ends: the task then ends
// as cancelled in executor.Run.
func (a *Agent) awaitSweep(ctx context.Context, log logger) {
	if a.swept == nil {
		return
	}
	select {
	case <-a.swept:
		return
	default:
	}
	log.Info("container task waits for the removal of what an earlier run of this delegate left")
	select {
	case <-a.swept:
	case <-ctx.Done():
	}
}

// envLookup returns a getenv over environ ("K=V"; nil: the process's).
func envLookup(environ []string) func(string) string {
	if environ == nil {
		return os.Getenv
	}
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return func(k string) string { return m[k] }
}

// acquire claims a task, asking again when the answer was lost on the way
// (a transport error, not a refusal): the manager answers a repeated claim
// by the holder with the same lease, so the task runs exactly once.
func (a *Agent) acquire(ctx context.Context, id string) (protocol.AcquireResponse, error) {
	if acq, err := a.acquireWS(ctx, id); !errors.Is(err, errNoWSReport) {
		return acq, err
	}
	b := backoff.Backoff{Min: 50 * time.Millisecond, Max: time.Second}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		var acq protocol.AcquireResponse
		acq, err = a.client().Acquire(ctx, id)
		var pe *protocol.Error
		if err == nil || errors.As(err, &pe) || ctx.Err() != nil {
			return acq, err
		}
		if !b.Wait(ctx) {
			return acq, err
		}
	}
	return protocol.AcquireResponse{}, err
}

func derefInt(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

// deliverResult sends the result until the manager answers (or refuses it
// for good). A result the first attempt could not deliver is kept on disk:
// when the delegate stops first, the next start delivers it. It returns
// the manager's refusal when the task is no longer this delegate's (for
// the caller to log), nil otherwise.
func (a *Agent) deliverResult(log logger, id string, res protocol.ResultRequest) (refused error) {
	b := backoff.Backoff{Min: 200 * time.Millisecond, Max: 15 * time.Second}
	saved := false
	for {
		gen := a.regGen.Load()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		err := a.sendResult(ctx, id, res)
		cancel()
		if err == nil {
			a.spool.remove(id)
			return nil
		}
		var pe *protocol.Error
		if errors.As(err, &pe) && (pe.Code == protocol.CodeStaleLease || pe.Code == protocol.CodeNotFound || pe.Code == protocol.CodeTaskTerminal) {
			if pe.Code == protocol.CodeStaleLease {
				a.metrics.staleReport("result")
			}
			a.spool.remove(id)
			return err
		}
		if !a.handleCallError(context.Background(), err, gen) {
			log.Warn("result not delivered", "err", err)
			a.spool.remove(id)
			return nil
		}
		if !saved {
			// Not delivered at the first try: keep it on disk until it is.
			if err := a.spool.save(id, res); err != nil {
				log.Warn("cannot keep the result on disk; delivering from memory only", "err", err)
			}
			saved = true
		}
		d := b.Next()
		log.Warn("result not delivered yet; retrying", "err", err, "retry_in", d.Round(time.Millisecond))
		select {
		case <-time.After(d):
		case <-a.stopDelivery:
			return nil // kept in the spool
		case <-a.opts.ForceStop:
			return nil // kept in the spool
		}
	}
}

// shipper collects output and sends it to the manager in numbered chunks,
// one request at a time, up to maxBatch chunks per request, as log frames
// (the output's bytes copied, not escaped into JSON; as JSON to a manager
// that does not read them): while a request is in flight new output
// gathers into the next chunks, so output flows with the least delay and
// no request storm. At most maxBuffered bytes wait to be sent: beyond that Write blocks
// until the sender took a chunk, which blocks the task's output pipe and so
// the task's writes (back-pressure), keeping the delegate's memory flat
// however fast a task writes. A task blocked so still ends on cancel,
// timeout or abort (the executor ends its processes without the pipe); a
// Write stops blocking when the manager refuses the output or the delegate
// stops delivering (output is then dropped).
//
// Gathering. The manager stores the head and the tail of a task's output
// (LogLimits, 4 MiB each by default) and, given an upload that carries
// more than the tail, never writes what its cap drops at once. So once a
// task's output is past the head and a tail and it writes fast (a full batch waited
// for the sender), its output gathers into uploads of up to gatherSize
// (one and a half tails, at most the manager's MaxUploadBytes: 6 MiB by
// default),
// sent when that much waits or gatherWait after the oldest waiting byte;
// while gathering, up to gatherSize bytes may wait. Output that slows down
// (less than a batch gathered in gatherWait) goes back to the above. Only
// a manager that said its LogLimits gets large uploads; one task of the
// delegate gathers at a time (Agent.gatherSlot, held until the task's
// output ends), which bounds the memory it takes: its buffer and the
// upload's body, 2 × gatherSize.
type shipper struct {
	a      *Agent
	id     string
	epoch  int64
	cancel context.CancelCauseFunc

	mu    sync.Mutex
	space *sync.Cond // signalled when buf shrinks or output is dropped from now on
	buf   []byte
	// since is when the oldest byte in buf was written.
	since time.Time
	seq   int64
	// taken counts the bytes of output cut into chunks so far.
	taken int64
	// gather is the size of the uploads output gathers into, 0 when it
	// does not (see Gathering above); slot: the shipper holds the agent's
	// gather slot.
	gather int
	slot   bool
	// closed: the task's output ended; dead: the manager refused the
	// output (refused says why); stopped: the delegate stopped delivering.
	// dead and stopped drop further output.
	closed, dead, stopped bool
	refused               error
	// held counts the writers waiting for room (held by back-pressure).
	held int
	// json: the manager refused log frames; send JSON. small: the manager
	// refused a large upload; gather no more. (Loop only.)
	json, small bool
	// body is the array of the last upload's frames, reused (loop only).
	body []byte
	wake chan struct{}
	done chan struct{}
}

// maxChunk is the most output one log chunk carries (the unit the
// manager stores, and drops past its cap).
const maxChunk = 256 << 10

// maxBatch is the most chunks one log request carries when output does
// not gather: 1 MiB, so a task that writes fast costs one request (and
// one transaction of the manager's) per MiB.
const maxBatch = 4

// maxBuffered bounds the output waiting to be sent, per task, when output
// does not gather: two requests' worth, so the sender always finds a full
// batch ready while the task fills the next one, and a fast task is held
// to the sender's pace without stalls between requests; more would only
// cost memory.
const maxBuffered = 2 * maxBatch * maxChunk

// gatherHalfTails is how many halves of the manager's tail one gathered
// upload carries: three, of which the manager stores two (a tail; it
// deletes the tail it stored before), so it writes two thirds of the
// output past the head and skips the rest. More would skip more, but the
// delegate's peak RSS (a task writing 1 GiB) grows with 2 × gatherSize
// of buffers and what the garbage collector lets grow with them: measured
// on this machine ~50 MiB with 6 MiB uploads, ~62 with 8, ~75 with 12,
// against a bound of 64 MB.
const gatherHalfTails = 3

// frameHeaders bounds the frame header of one uploaded chunk.
const frameHeaders = 32

// gatherWait bounds how long output waits to gather: a task whose output
// slows down still has it sent within gatherWait.
const gatherWait = 100 * time.Millisecond

// batch is output taken to be sent: its chunks as log frames, or, once
// the manager refused log frames, as chunks for JSON.
type batch struct {
	frames []byte
	chunks []protocol.LogChunk
	count  int
}

// logChunks returns the chunks of b.
func (b *batch) logChunks() []protocol.LogChunk {
	if b.frames == nil {
		return b.chunks
	}
	chunks, _ := protocol.DecodeChunkFrames(b.frames) // made by takeBatch
	return chunks
}

func newShipper(a *Agent, id string, epoch int64, cancel context.CancelCauseFunc) *shipper {
	s := &shipper{a: a, id: id, epoch: epoch, cancel: cancel, wake: make(chan struct{}, 1), done: make(chan struct{})}
	s.space = sync.NewCond(&s.mu)
	go s.loop()
	return s
}

// limit is how much output may wait (s.mu held).
func (s *shipper) limit() int { return max(maxBuffered, s.gather) }

// Write queues p to be sent, blocking while the limit of bytes waits. It
// never fails.
func (s *shipper) Write(p []byte) (int, error) {
	n := len(p)
	s.mu.Lock()
	for len(p) > 0 && !s.dead && !s.stopped {
		room := s.limit() - len(s.buf)
		if room <= 0 {
			s.held++
			s.space.Wait()
			s.held--
			continue
		}
		k := min(room, len(p))
		first := len(s.buf) == 0
		if first {
			s.since = time.Now()
		}
		s.buf = append(s.buf, p[:k]...)
		p = p[k:]
		// A gathering sender waits for a full upload (or its timer, which
		// the first byte starts).
		if s.gather == 0 || first || len(s.buf) >= s.gather {
			s.poke()
		}
	}
	s.mu.Unlock()
	return n, nil
}

func (s *shipper) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// refusal is the manager's refusal of the output, nil when it took it.
func (s *shipper) refusal() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// close sends what is left and returns the number of the last chunk.
func (s *shipper) close() int64 {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.poke()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seq
}

// takeChunk removes the next chunk from buf (s.mu held): at most maxChunk
// bytes, not ending inside a UTF-8 sequence that later bytes complete
// (the manager stores text: a split rune would become two U+FFFD). It
// returns nil when nothing can be sent yet.
func (s *shipper) takeChunk() *protocol.LogChunk {
	n := s.cutChunk(s.buf)
	if n == 0 {
		return nil
	}
	c := &protocol.LogChunk{Seq: s.seq, Time: time.Now().UTC(), Data: string(s.buf[:n])}
	s.compact(n)
	return c
}

// cutChunk numbers the next chunk, the start of b (the rest of buf; s.mu
// held), and returns its length; 0 when nothing can be sent yet.
func (s *shipper) cutChunk(b []byte) int {
	n := min(len(b), maxChunk)
	if n < len(b) || !s.closed {
		n = runeBoundary(b, n)
	}
	if n == 0 {
		return 0
	}
	s.seq++
	s.taken += int64(n)
	return n
}

// compact removes the first n bytes of buf (s.mu held), keeping one array.
func (s *shipper) compact(n int) {
	s.buf = s.buf[:copy(s.buf, s.buf[n:])]
	if len(s.buf) > 0 {
		s.since = time.Now() // written before now: sent no later than before
	}
	s.space.Broadcast()
}

// runeBoundary moves n back (by at most 3 bytes) so that b[:n] does not
// end with the first bytes of a multi-byte UTF-8 sequence.
func runeBoundary(b []byte, n int) int {
	for i := 1; i <= utf8.UTFMax-1 && i <= n; i++ {
		c := b[n-i]
		if c < utf8.RuneSelf {
			return n
		}
		if utf8.RuneStart(c) {
			if seqLen(c) > i {
				return n - i
			}
			return n
		}
	}
	return n
}

// seqLen is the length of the UTF-8 sequence that lead byte c starts
// (1 for bytes that start none).
func seqLen(c byte) int {
	switch {
	case c >= 0xF8:
		return 1
	case c >= 0xF0:
		return 4
	case c >= 0xE0:
		return 3
	case c >= 0xC0:
		return 2
	}
	return 1
}

// drop makes Write discard output from now on (s.mu held).
func (s *shipper) drop() {
	s.buf = nil
	s.space.Broadcast()
}

// gatherSize is the size of the uploads output may gather into now, 0
// when it may not: the manager said its limits and takes frames, and the
// output is past the head and a tail (until then the manager drops
// nothing, and a follower that attaches late, as `task run` does after
// its submit, still finds every byte stored, as before gathering) (s.mu
// held).
func (s *shipper) gatherSize() int {
	lim := s.a.logLimits.Load()
	if lim == nil || s.json || s.small || s.taken < lim.HeadBytes+lim.TailBytes {
		return 0
	}
	size := int64(protocol.MaxLogUpload)
	if lim.TailBytes > 0 {
		size = gatherHalfTails * lim.TailBytes / 2
	}
	size = min(size, lim.MaxUploadBytes, protocol.MaxLogUpload)
	size -= size % maxChunk
	if size <= maxBatch*maxChunk {
		return 0
	}
	return int(size)
}

// setGather starts (size > 0) or ends output gathering (s.mu held). The
// task that gathered once keeps the delegate's gather slot and its
// buffers until its output ends (release), so output that alternates
// between fast and slow costs no new memory.
func (s *shipper) setGather(size int) {
	if size == 0 || s.gather > 0 {
		s.gather = size
		return
	}
	if !s.slot {
		select {
		case s.a.gatherSlot <- struct{}{}:
			s.slot = true
		default:
			return // another task gathers
		}
	}
	if cap(s.buf) < size {
		s.buf = append(make([]byte, 0, size), s.buf...)
	}
	s.gather = size
	s.space.Broadcast() // more may wait now
}

// release gives back the gather slot and the buffers (s.mu held).
func (s *shipper) release() {
	s.gather = 0
	if s.slot {
		<-s.a.gatherSlot
		s.slot = false
	}
	s.buf, s.body = nil, nil
}

// takeBatch takes the next batch to send (s.mu held): up to maxBatch
// chunks, or while gathering a full upload or what waited gatherWait. It
// returns nil and how long to wait when output is gathering, nil and 0
// when nothing waits.
func (s *shipper) takeBatch() (*batch, time.Duration) {
	if len(s.buf) == 0 {
		return nil, 0
	}
	switch {
	case s.gather == 0 && len(s.buf) >= maxBatch*maxChunk:
		// A full batch waited: output comes faster than it is sent.
		s.setGather(s.gatherSize())
	case s.gather > 0 && s.gatherSize() == 0:
		s.setGather(0) // the manager refused a large upload, or frames
	}
	size := maxBatch * maxChunk
	if s.gather > 0 {
		waited := time.Since(s.since)
		if !s.closed && len(s.buf) < s.gather && waited < gatherWait {
			return nil, gatherWait - waited
		}
		if !s.closed && len(s.buf) < maxBatch*maxChunk {
			s.setGather(0) // slowed down: send as before
		} else {
			size = s.gather
		}
	}
	b := &batch{}
	if !s.json {
		b.frames = s.body[:0]
		s.body = nil // lent to the upload until it is delivered
		if b.frames == nil {
			n := min(len(s.buf), size)
			b.frames = make([]byte, 0, n+frameHeaders*(n/maxChunk+1))
		}
	}
	off := 0
	for off < len(s.buf) && off < size {
		n := s.cutChunk(s.buf[off:])
		if n == 0 {
			break
		}
		b.count++
		data := s.buf[off : off+n]
		if s.json {
			b.chunks = append(b.chunks, protocol.LogChunk{Seq: s.seq, Time: time.Now().UTC(), Data: string(data)})
		} else {
			b.frames = protocol.AppendUploadFrame(b.frames, s.seq, time.Now().UTC(), data)
		}
		off += n
	}
	if off == 0 {
		s.body = b.frames // not lent after all
		// Only the start of a rune waits: more output completes it. (A
		// gathering writer does not wake the sender for it: look again.)
		if s.gather > 0 {
			return nil, gatherWait
		}
		return nil, 0
	}
	s.compact(off) // once per batch, not per chunk
	return b, 0
}

// send sends one batch: as log frames, or as JSON once the manager
// refused log frames (an older manager cannot read them). A large upload
// the manager refuses as too large (a manager that changed since it said
// its limits) goes again in batches of maxBatch chunks.
func (s *shipper) send(ctx context.Context, b *batch) error {
	if s.json {
		return s.sendJSON(ctx, b.logChunks())
	}
	err := s.a.client().SendLogFrameBody(ctx, s.id, s.epoch, b.frames)
	var pe *protocol.Error
	switch {
	case errors.As(err, &pe) && pe.Status == http.StatusRequestEntityTooLarge && b.count > maxBatch:
		s.a.log.Info("the manager takes smaller uploads of output than it said; sending 1 MiB at a time", "task", s.id, "err", err)
		s.small = true
		chunks := b.logChunks()
		for len(chunks) > 0 {
			n := min(len(chunks), maxBatch)
			if err := s.a.client().SendLogFrames(ctx, s.id, protocol.LogsRequest{Epoch: s.epoch, Chunks: chunks[:n]}); err != nil {
				return err
			}
			chunks = chunks[n:]
		}
		return nil
	case errors.As(err, &pe) && (pe.Code == protocol.CodeBadRequest || pe.Status == http.StatusUnsupportedMediaType):
		s.a.log.Info("the manager does not take output as log frames; sending JSON", "task", s.id, "err", err)
		s.json = true
		return s.sendJSON(ctx, b.logChunks())
	}
	return err
}

// sendJSON sends chunks as JSON, at most maxBatch a request.
func (s *shipper) sendJSON(ctx context.Context, chunks []protocol.LogChunk) error {
	for len(chunks) > 0 {
		n := min(len(chunks), maxBatch)
		if err := s.a.client().SendLogs(ctx, s.id, protocol.LogsRequest{Epoch: s.epoch, Chunks: chunks[:n]}); err != nil {
			return err
		}
		chunks = chunks[n:]
	}
	return nil
}

func (s *shipper) loop() {
	defer close(s.done)
	defer func() {
		s.mu.Lock()
		s.release()
		s.mu.Unlock()
	}()
	b := backoff.Backoff{Min: 100 * time.Millisecond, Max: 10 * time.Second}
	var pending *batch
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	warned := false
	for {
		if pending == nil {
			s.mu.Lock()
			next, wait := s.takeBatch()
			closed := s.closed
			s.mu.Unlock()
			if next == nil {
				switch {
				case wait > 0:
					if timer == nil {
						timer = time.NewTimer(wait)
					} else {
						timer.Reset(wait)
					}
					select {
					case <-s.wake:
					case <-timer.C:
					}
				case closed:
					return
				default:
					<-s.wake
				}
				continue
			}
			pending = next
		}
		gen := s.a.regGen.Load()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		err := s.send(ctx, pending)
		cancel()
		if err == nil {
			if pending.frames != nil {
				s.body = pending.frames // delivered: the array may be reused
			}
			pending = nil
			b.Reset()
			continue
		}
		var pe *protocol.Error
		if errors.As(err, &pe) && (pe.Code == protocol.CodeStaleLease || pe.Code == protocol.CodeNotFound) {
			// The task is no longer ours: stop it and drop its output. The
			// refusal is logged when the task is over (logRefusal).
			if pe.Code == protocol.CodeStaleLease {
				s.a.metrics.staleReport("log")
			}
			s.cancel(errLeaseLost)
			s.mu.Lock()
			s.dead, s.refused = true, err
			s.drop()
			s.mu.Unlock()
			pending = nil
			continue
		}
		if !s.a.handleCallError(context.Background(), err, gen) {
			pending = nil
			continue
		}
		if !warned {
			s.a.log.Warn("output not delivered yet; retrying", "task", s.id, "err", err)
			warned = true
		}
		select {
		case <-time.After(b.Next()):
		case <-s.a.stopDelivery:
			s.keep(pending)
			return
		case <-s.a.opts.ForceStop:
			s.keep(pending)
			return
		}
	}
}

// maxSpooledLogs bounds the output kept on disk per task: its tail.
const maxSpooledLogs = 1 << 20

// keep writes the output not sent yet (pending, then the buffer) to the
// spool, so the next start of the delegate sends it before the result.
// Output written after this is dropped: the delegate is stopping.
func (s *shipper) keep(pending *batch) {
	var chunks []protocol.LogChunk
	if pending != nil {
		chunks = pending.logChunks()
	}
	s.mu.Lock()
	s.closed, s.stopped = true, true // the rest goes in one last chunk each
	for c := s.takeChunk(); c != nil; c = s.takeChunk() {
		chunks = append(chunks, *c)
	}
	s.drop()
	s.mu.Unlock()
	size := 0
	first := len(chunks)
	for first > 0 && size+len(chunks[first-1].Data) <= maxSpooledLogs {
		first--
		size += len(chunks[first].Data)
	}
	if first == len(chunks) {
		first = len(chunks) - 1 // one chunk is at most maxChunk
	}
	if err := s.a.spool.saveLogs(spooledLogs{TaskID: s.id, Epoch: s.epoch, Chunks: chunks[first:]}); err != nil {
		s.a.log.Warn("cannot keep unsent output on disk", "task", s.id, "err", err)
	}
}

// deliverSpooledLogs sends output kept by an earlier run, before its result.
func (a *Agent) deliverSpooledLogs(log logger, taskID string) {
	l, ok := a.spool.loadLogs(taskID)
	if !ok {
		return
	}
	b := backoff.Backoff{Min: 200 * time.Millisecond, Max: 15 * time.Second}
	for {
		gen := a.regGen.Load()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		err := a.client().SendLogs(ctx, taskID, protocol.LogsRequest{Epoch: l.Epoch, Chunks: l.Chunks})
		cancel()
		var pe *protocol.Error
		switch {
		case err == nil:
			a.spool.removeLogs(taskID)
			return
		case errors.As(err, &pe) && !pe.Code.Recoverable() && pe.Code != protocol.CodeUnauthenticated:
			log.Warn("manager refused output kept from an earlier run", "err", err)
			a.spool.removeLogs(taskID)
			return
		}
		if !a.handleCallError(context.Background(), err, gen) {
			return
		}
		select {
		case <-time.After(b.Next()):
		case <-a.stopDelivery:
			return
		case <-a.opts.ForceStop:
			return
		}
	}
}
