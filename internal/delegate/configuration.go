package delegate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/legate-dev/legate/internal/backoff"
	"github.com/legate-dev/legate/internal/protocol"
)

// configState tracks the delegate configuration: the one the manager says
// applies, the one this process last ran, and whether a run is due or in
// progress (then the delegate takes no task).
type configState struct {
	mu sync.Mutex
	// want is the configuration that applies (nil: none), valid when known.
	want  *protocol.AppliedConfiguration
	known bool
	// fetch asks the loop to fetch the configuration (it changed).
	fetch bool
	// applied identifies the configuration this process last ran; ran is
	// false until it ran (or found none to run) once.
	applied string
	ran     bool
	// running labels the due or running configuration ("NAME vN").
	running string
	wake    chan struct{} // cap 1
}

func newConfigState() *configState { return &configState{wake: make(chan struct{}, 1)} }

// configID identifies a configuration version by name, version and script
// (a configuration deleted and created again starts at version 1 again).
func configID(c *protocol.AppliedConfiguration) string {
	if c == nil {
		return ""
	}
	h := sha256.Sum256([]byte(c.Script))
	return c.Name + "\x00" + strconv.FormatInt(c.Version, 10) + "\x00" + hex.EncodeToString(h[:8])
}

func configLabel(c *protocol.AppliedConfiguration) string {
	return c.Name + " v" + strconv.FormatInt(c.Version, 10)
}

func (s *configState) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// offer records the configuration a registration answer or a fetch named.
// When it is not the one last run, the delegate stops taking tasks until
// it ran.
func (s *configState) offer(c *protocol.AppliedConfiguration) {
	s.mu.Lock()
	s.want, s.known = c, true
	if c != nil && (!s.ran || configID(c) != s.applied) {
		s.running = configLabel(c)
	}
	s.mu.Unlock()
	s.poke()
}

// changed records a configuration_changed event.
func (s *configState) changed() {
	s.mu.Lock()
	s.fetch = true
	s.mu.Unlock()
	s.poke()
}

// busy names the configuration that is due or running, "" when none is.
func (s *configState) busy() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

// configLoop runs the configuration that applies whenever it changes,
// until ctx ends.
func (a *Agent) configLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.config.wake:
		}
		a.applyConfiguration(ctx)
	}
}

// applyConfiguration fetches the configuration if asked to, runs it if it
// is not the one last run, reports the outcome, and then takes tasks again.
func (a *Agent) applyConfiguration(ctx context.Context) {
	s := a.config
	b := backoff.Backoff{Min: 250 * time.Millisecond, Max: 30 * time.Second}
	wasBusy := false
	for ctx.Err() == nil {
		s.mu.Lock()
		fetch := s.fetch
		s.fetch = false
		s.mu.Unlock()
		if fetch {
			gen := a.regGen.Load()
			fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			resp, err := a.client().DelegateConfiguration(fctx)
			cancel()
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				retry := a.handleCallError(ctx, err, gen)
				a.log.Warn("fetch the delegate configuration", "err", err, "retry", retry)
				if !retry {
					s.mu.Lock()
					s.running = ""
					s.mu.Unlock()
					break
				}
				s.mu.Lock()
				s.fetch = true
				s.mu.Unlock()
				if !b.Wait(ctx) {
					return
				}
				continue
			}
			s.mu.Lock()
			s.want, s.known = resp.Configuration, true
			s.mu.Unlock()
		}
		s.mu.Lock()
		c, id := s.want, configID(s.want)
		if !s.known || (s.ran && id == s.applied) {
			s.running = ""
			s.mu.Unlock()
			break
		}
		if c == nil {
			// None applies (any more): nothing to undo, nothing to run.
			had := s.applied != ""
			s.ran, s.applied, s.running = true, "", ""
			s.mu.Unlock()
			if had {
				a.log.Info("no delegate configuration applies to this delegate any more")
			}
			break
		}
		s.running = configLabel(c)
		s.mu.Unlock()
		wasBusy = true
		a.sendHeartbeat(ctx) // says that it configures and takes no task
		res := a.runConfiguration(ctx, c)
		s.mu.Lock()
		s.ran, s.applied = true, id
		s.mu.Unlock()
		a.reportConfiguration(ctx, res)
		// Loop: the configuration may have changed while it ran.
	}
	if wasBusy && ctx.Err() == nil {
		a.sendHeartbeat(ctx) // done: takes tasks again
		a.retryDeferred(ctx)
	}
}

// runConfiguration runs one configuration's script and returns its outcome.
func (a *Agent) runConfiguration(ctx context.Context, c *protocol.AppliedConfiguration) protocol.ConfigurationResult {
	label := configLabel(c)
	a.log.Info("running delegate configuration (no new tasks meanwhile)", "configuration", c.Name, "version", c.Version,
		"timeout", a.scriptTimeout())
	// Killed when the delegate stops (its loops end) or kills its tasks.
	sctx, release := a.kill.context(ctx)
	defer release()
	sc, err := withSecrets(c.Script, c.Secrets, func(name string) error {
		return fmt.Errorf("the configuration uses the stored secret %s, which the manager did not give: there is none of that name at the configuration's scope, or its value does not open (see the manager's log); create it (legate secret create %s) or change the script", name, name)
	})
	if err != nil {
		now := time.Now().UTC()
		a.log.Warn("delegate configuration failed", "configuration", c.Name, "version", c.Version, "err", err)
		return protocol.ConfigurationResult{Name: c.Name, Version: c.Version, Error: err.Error(), StartedAt: now, FinishedAt: now}
	}
	r := a.runScript(sctx, "configuration.sh", "configuration "+label, sc, []string{
		"LEGATE_CONFIGURATION=" + c.Name,
		"LEGATE_CONFIGURATION_VERSION=" + strconv.FormatInt(c.Version, 10),
	})
	res := protocol.ConfigurationResult{
		Name: c.Name, Version: c.Version, ExitCode: r.outcome.ExitCode, Error: r.outcome.Error,
		Output: r.excerpt, OutputBytes: r.total, StartedAt: r.started.UTC(), FinishedAt: r.finished.UTC(),
	}
	if r.outcome.Status == protocol.StatusTimedOut {
		res.Error = "the configuration script did not finish within " + a.scriptTimeout().String() + " and was killed"
	}
	attrs := []any{"configuration", c.Name, "version", c.Version, "took", r.finished.Sub(r.started).Round(time.Millisecond)}
	if res.ExitCode != nil {
		attrs = append(attrs, "exit_code", *res.ExitCode)
	}
	if r.outcome.Status == protocol.StatusSucceeded {
		a.log.Info("delegate configuration finished", attrs...)
	} else {
		a.log.Warn("delegate configuration failed", append(attrs, "err", res.Error)...)
	}
	return res
}

// reportConfiguration sends a configuration run's outcome to the manager,
// a few times if it has to.
func (a *Agent) reportConfiguration(ctx context.Context, res protocol.ConfigurationResult) {
	rctx := context.WithoutCancel(ctx)
	b := backoff.Backoff{Min: 250 * time.Millisecond, Max: 5 * time.Second}
	for attempt := 1; attempt <= 5; attempt++ {
		gen := a.regGen.Load()
		cctx, cancel := context.WithTimeout(rctx, 10*time.Second)
		err := a.client().ReportConfiguration(cctx, res)
		cancel()
		if err == nil {
			return
		}
		a.log.Warn("report the configuration result", "configuration", res.Name, "attempt", attempt, "err", err)
		if !a.handleCallError(rctx, err, gen) {
			return
		}
		if !b.Wait(ctx) {
			return
		}
	}
}

// retryDeferred offers again the tasks refused while a configuration ran
// or while no slot was free; ctx is the agent's loop context.
func (a *Agent) retryDeferred(ctx context.Context) {
	a.mu.Lock()
	type offer struct {
		id string
		deferredOffer
	}
	var pending []offer
	for id, o := a.nextDeferred(); id != ""; id, o = a.nextDeferred() {
		pending = append(pending, offer{id, o})
	}
	a.mu.Unlock()
	for _, o := range pending {
		a.offeredWith(ctx, o.id, o.deferredOffer)
	}
}
