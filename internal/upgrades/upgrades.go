// Package upgrades is the manager's service for delegate upgrades
// (docs/upgrades.md). The manager wants one version per delegate group:
// its own, unless an administrator pinned another or holds the group back
// (the upgrade policy), offered ring by ring. Watchers ask it which version
// to run (handleUpgradeCheck) and download signed binaries from its release
// directory (handleReleaseBinary); delegates older than it accepts are
// refused at registration (RefuseExpired); the delegate listings show where
// each instance stands (View, PageView).
//
// It may import api, access, protocol, release and store (for its types;
// what it calls of the database is its Store interface); never the
// manager, another service, the delegate, the CLI, the executors or the
// web UI.
// What it needs of the manager (delegate tokens, the account's delegates)
// are interfaces of its own: Tokens and Delegates.
package upgrades

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/access"
	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/protocol"
	"github.com/legate-dev/legate/internal/release"
	"github.com/legate-dev/legate/internal/store"
)

// Store is what the service needs of the database (*store.Store).
type Store interface {
	GetUpgradePolicy(ctx context.Context, acct, org, project, name string) (store.UpgradePolicy, error)
	SetUpgradePolicy(ctx context.Context, acct string, p store.UpgradePolicy) error
	UpgradePolicies(ctx context.Context, acct string) (map[string]store.UpgradePolicy, error)
	ReportUpgrade(ctx context.Context, r store.UpgradeReport) error
	UpgradeReports(ctx context.Context, acct string) (map[string]store.UpgradeReport, error)
	RingReached(ctx context.Context, acct, org, project, ring, version string, at time.Time) (time.Time, error)
	RingSoaks(ctx context.Context, acct, version string) (map[string]time.Time, error)
}

// Tokens checks delegate tokens (the manager's), which watchers send as
// their credential.
type Tokens interface {
	// DelegateToken finds the valid (not revoked) delegate token of an
	// account; when there is none it answers 401 and returns false.
	DelegateToken(w http.ResponseWriter, r *http.Request, accountID, token string) (store.Token, bool)
}

// Delegates lists an account's delegates (the manager's).
type Delegates interface {
	// ListDelegates returns every instance of the account that has not
	// deregistered, as the API shows it (its upgrade fields filled in by
	// View).
	ListDelegates(ctx context.Context, acct string) ([]protocol.Delegate, error)
}

// Scopes checks that an org and project exist (the scopes service's).
type Scopes interface {
	CheckScope(ctx context.Context, acct, org, project string) error
}

// Config configures a Service. The manager passes on its own values
// (manager.Config); zero values mean the same defaults.
type Config struct {
	Store     Store
	Tokens    Tokens
	Delegates Delegates
	// Scopes checks the scope an upgrade policy names; nil checks none.
	Scopes Scopes
	// ReleaseDir holds the release binaries served to watchers:
	// DIR/VERSION/legate-OS-ARCH with its signature next to it (+ ".sig",
	// legate release sign); "" = none.
	ReleaseDir string
	// UpgradePollInterval is how often watchers are told to ask which
	// version to run. 0 = 1m.
	UpgradePollInterval time.Duration
	// UpgradeSoak is how long every delegate of a ring must have run the
	// manager's version, with no failed upgrade, before the next ring is
	// offered it. 0 = 24h.
	UpgradeSoak time.Duration
	// Version is the manager's version; "" = dev.
	Version string
	// Log; nil = slog.Default().
	Log *slog.Logger
	// Now is the clock; nil = time.Now.
	Now func() time.Time
}

// Service decides which version each delegate group wants and serves
// release binaries to watchers.
type Service struct {
	cfg       Config
	st        Store
	tokens    Tokens
	delegates Delegates
	log       *slog.Logger
}

// New creates the service.
func New(cfg Config) *Service {
	if cfg.UpgradePollInterval <= 0 {
		cfg.UpgradePollInterval = time.Minute
	}
	if cfg.UpgradeSoak <= 0 {
		cfg.UpgradeSoak = 24 * time.Hour
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{cfg: cfg, st: cfg.Store, tokens: cfg.Tokens, delegates: cfg.Delegates, log: cfg.Log}
}

// Routes returns the service's routes. It reads nothing of s, so the
// route table can be listed without a running service.
func (s *Service) Routes() []api.Route {
	return []api.Route{
		// Watchers: the delegate token in the headers is the credential,
		// checked by the handler before anything is read.
		{Method: "POST", Pattern: protocol.PathUpgradeCheck, Body: api.BodySmall, Public: s.handleUpgradeCheck},
		{Method: "GET", Pattern: protocol.PathReleases + "/{version}/{os}/{arch}", Stream: true, Public: s.handleReleaseBinary},
		{Method: "GET", Pattern: protocol.PathReleases + "/{version}/{os}/{arch}/signature", Public: s.handleReleaseSignature},
		// A group's upgrade policy: the version it wants is the account
		// administrator's call (user:manage at the account, as for limits).
		{Method: "PUT", Pattern: protocol.PathDelegates + "/{name}/upgrade", Body: api.BodyTiny, Admin: s.handleSetUpgradePolicy, Rule: api.Rule{Perm: access.UserManage, Scope: api.AtAccount}, Audit: "delegate.upgrade_policy"},
	}
}

// upgradePlan is what the manager wants of an account's delegate groups
// now: each group's policy (by store.UpgradeGroupKey), what the watchers
// reported, and for each ring of each scope (store.RingKey) why it waits
// for an earlier one ("" when the manager's version is offered to it).
//
// A group is the delegates of one name registered with tokens of exactly
// one scope, and each scope's rings progress among its own groups only:
// a delegate of a project, whatever its name, is never a member of the
// account's rings (nor of its org's), so it can neither hold them back
// nor fail them, and an account's policy does not steer it. Covering
// would be the wrong rule here: it would let any narrower scope's token
// add members to a wider scope's ring.
type upgradePlan struct {
	policies map[string]store.UpgradePolicy
	reports  map[string]store.UpgradeReport
	waiting  map[string]string
}

// scopeKey is the scope of a delegate group: its tokens' org and project.
type scopeKey struct{ org, project string }

// upgradeRingOf is the ring of a group with policy p.
func upgradeRingOf(p store.UpgradePolicy) string {
	if p.Ring == "" {
		return protocol.RingDefault
	}
	return p.Ring
}

// planUpgrades decides, from the account's listed instances (ds), which
// rings the manager's version is offered to: a ring waits until every
// connected delegate of the nearest earlier ring that has some (groups
// neither pinned nor held) runs it, for the soak time, with no failed
// upgrade to it. The first time a ring runs it entirely is recorded.
func (s *Service) planUpgrades(ctx context.Context, acct string, ds []protocol.Delegate) (upgradePlan, error) {
	pl := upgradePlan{waiting: map[string]string{}}
	var err error
	if pl.policies, err = s.st.UpgradePolicies(ctx, acct); err != nil {
		return pl, err
	}
	if pl.reports, err = s.st.UpgradeReports(ctx, acct); err != nil {
		return pl, err
	}
	soaks, err := s.st.RingSoaks(ctx, acct, s.cfg.Version)
	if err != nil {
		return pl, err
	}
	byScope := map[scopeKey][]protocol.Delegate{}
	for _, d := range ds {
		k := scopeKey{d.Org, d.Project}
		byScope[k] = append(byScope[k], d)
	}
	for k, members := range byScope {
		if err := s.planScope(ctx, acct, k, members, &pl, soaks); err != nil {
			return pl, err
		}
	}
	return pl, nil
}

// planScope plans the rings of one scope from its delegates (ds) into
// pl.waiting; soaks are the account's (store.RingSoaks).
func (s *Service) planScope(ctx context.Context, acct string, k scopeKey, ds []protocol.Delegate, pl *upgradePlan, soaks map[string]time.Time) error {
	target := s.cfg.Version
	type ringState struct{ members, behind, failed bool }
	rings := map[string]*ringState{}
	for _, r := range protocol.Rings() {
		rings[r] = &ringState{}
	}
	for _, d := range ds {
		p := pl.policies[store.UpgradeGroupKey(k.org, k.project, d.Name)]
		if d.Status != protocol.DelegateConnected || p.Held || p.Pinned != "" {
			continue
		}
		rs := rings[upgradeRingOf(p)]
		if rs == nil {
			continue
		}
		rs.members = true
		if !release.SameVersion(d.Version, target) {
			rs.behind = true
		}
		if r, ok := pl.reports[store.UpgradeReportKey(k.org, k.project, d.Name, d.Hostname)]; ok && r.State == protocol.WatcherFailed && release.SameVersion(r.Target, target) {
			rs.failed = true
		}
	}
	now := s.cfg.Now()
	for _, r := range protocol.Rings() {
		rk := store.RingKey(k.org, k.project, r)
		if rs := rings[r]; rs.members && !rs.behind && !rs.failed {
			if _, ok := soaks[rk]; !ok {
				at, err := s.st.RingReached(ctx, acct, k.org, k.project, r, target, now)
				if err != nil {
					return err
				}
				soaks[rk] = at
				s.log.Info("every delegate of a ring runs the manager's version; its soak time starts", "account", acct,
					"scope", protocol.ScopeLabel(k.org, k.project), "ring", r, "version", target, "soak", s.cfg.UpgradeSoak)
			}
		}
	}
	prev := ""
	for _, r := range protocol.Rings() {
		rk := store.RingKey(k.org, k.project, r)
		if prev != "" {
			ps := rings[prev]
			reached, ok := soaks[store.RingKey(k.org, k.project, prev)]
			switch {
			case ps.failed:
				pl.waiting[rk] = fmt.Sprintf("ring %s had a failed upgrade to %s", prev, target)
			case ps.behind || !ok:
				pl.waiting[rk] = fmt.Sprintf("waits until every delegate of ring %s runs %s", prev, target)
			case now.Sub(reached) < s.cfg.UpgradeSoak:
				pl.waiting[rk] = fmt.Sprintf("waits until ring %s has run %s for %s (at %s)", prev, target, s.cfg.UpgradeSoak,
					reached.Add(s.cfg.UpgradeSoak).UTC().Format(time.RFC3339))
			}
		}
		if rings[r].members {
			prev = r
		}
	}
	return nil
}

// groupWants is what a group wants: the version ("" when held or while
// its ring waits), whether it is held, why its ring waits, its ring, and
// whether the version is one an administrator pinned.
type groupWants struct {
	wanted  string
	held    bool
	waiting string
	ring    string
	pinned  bool
}

// wanted is what the group called name of scope org/project wants.
func (pl upgradePlan) wanted(s *Service, org, project, name string) groupWants {
	p := pl.policies[store.UpgradeGroupKey(org, project, name)]
	g := groupWants{ring: upgradeRingOf(p)}
	switch {
	case p.Held:
		g.held = true
	case p.Pinned != "":
		g.wanted, g.pinned = p.Pinned, true
	case pl.waiting[store.RingKey(org, project, g.ring)] != "":
		g.held, g.waiting = true, pl.waiting[store.RingKey(org, project, g.ring)]
	default:
		g.wanted = s.cfg.Version
	}
	return g
}

// RefuseExpired answers a registration of a delegate older than this
// manager accepts, naming the version to install, and returns true; it
// returns false (and answers nothing) when the version is accepted.
func (s *Service) RefuseExpired(w http.ResponseWriter, r *http.Request, req protocol.RegisterRequest, org, project string) bool {
	if release.Accepted(s.cfg.Version, req.Version) {
		return false
	}
	oldest, _ := release.OldestAccepted(s.cfg.Version)
	install := s.cfg.Version
	if p, err := s.st.GetUpgradePolicy(r.Context(), req.AccountID, org, project, req.Name); err == nil && p.Pinned != "" && release.Accepted(s.cfg.Version, p.Pinned) {
		install = p.Pinned
	}
	s.log.Info("registration refused: the delegate's version is older than this manager accepts", "account", req.AccountID,
		"name", req.Name, "hostname", req.Hostname, "version", req.Version, "oldest_accepted", oldest.String(), "install", install)
	api.WriteError(w, http.StatusUpgradeRequired, protocol.CodeDelegateExpired,
		"delegate version %s is older than this manager (%s) accepts (%s or later): install legate %s",
		req.Version, s.cfg.Version, oldest.String(), install)
	return true
}

// upgradeState is where an instance of version v stands: see
// protocol.UpgradeCurrent and the others.
func (s *Service) upgradeState(v, wanted string, held bool, rep *store.UpgradeReport) string {
	if !release.Accepted(s.cfg.Version, v) {
		return protocol.UpgradeExpired
	}
	if rep != nil && !held && wanted != "" && release.SameVersion(rep.Target, wanted) && !release.SameVersion(v, wanted) {
		switch rep.State {
		case protocol.WatcherFailed:
			return protocol.UpgradeFailed + ": " + rep.Reason
		case protocol.WatcherUpgrading:
			return protocol.UpgradeUpgrading
		}
	}
	if held || wanted == "" || release.SameVersion(v, wanted) {
		return protocol.UpgradeCurrent
	}
	return protocol.UpgradeAvailable
}

// View fills in the upgrade fields of the listed delegates, with the
// rings planned from every listed delegate (plan nil: ds).
func (s *Service) View(ctx context.Context, acct string, ds, plan []protocol.Delegate) error {
	if len(ds) == 0 {
		return nil
	}
	if plan == nil {
		plan = ds
	}
	pl, err := s.planUpgrades(ctx, acct, plan)
	if err != nil {
		return err
	}
	for i := range ds {
		d := &ds[i]
		g := pl.wanted(s, d.Org, d.Project, d.Name)
		var rep *store.UpgradeReport
		if r, ok := pl.reports[store.UpgradeReportKey(d.Org, d.Project, d.Name, d.Hostname)]; ok {
			rep = &r
		}
		d.WantedVersion, d.UpgradeWaiting, d.UpgradeRing = g.wanted, g.waiting, g.ring
		d.UpgradeState = s.upgradeState(d.Version, g.wanted, g.held, rep)
		d.RefusedFrom = s.RefusedFrom(d.Version)
	}
	return nil
}

// RefusedFrom is the manager version from which a delegate of version v
// will be refused, when it is the next minor version ("": not that
// close): the registration answer tells the delegate, the listings show
// it.
func (s *Service) RefusedFrom(v string) string {
	next, _ := release.RefusedFrom(s.cfg.Version, v)
	return next
}

// PageView fills in the upgrade fields of a page of delegates.
// Which rings wait depends on every connected delegate of the account:
// when some group is in a ring before the default one, the plan reads
// the whole listing; else the page decides it alone (a ring waits only
// for an earlier ring with members).
func (s *Service) PageView(ctx context.Context, acct string, ds []protocol.Delegate) error {
	if len(ds) == 0 {
		return nil
	}
	policies, err := s.st.UpgradePolicies(ctx, acct)
	if err != nil {
		return err
	}
	for _, p := range policies {
		if upgradeRingOf(p) != protocol.RingDefault && !p.Held && p.Pinned == "" {
			all, err := s.delegates.ListDelegates(ctx, acct)
			if err != nil {
				return err
			}
			return s.View(ctx, acct, ds, all)
		}
	}
	return s.View(ctx, acct, ds, nil)
}

// checkUpgradeRequest trims and checks what a watcher sent.
func checkUpgradeRequest(req *protocol.UpgradeCheckRequest) error {
	req.Name = strings.TrimSpace(req.Name)
	req.Hostname = strings.TrimSpace(req.Hostname)
	switch {
	case req.Name == "" || len(req.Name) > 63:
		return errors.New("name is required (1-63 characters)")
	case req.Hostname == "" || len(req.Hostname) > 253:
		return errors.New("hostname is required (1-253 characters)")
	case len(req.Version) > 64 || len(req.Target) > 64:
		return errors.New("version and target: at most 64 characters")
	case len(req.OS) > 32 || len(req.Arch) > 32:
		return errors.New("os and arch: at most 32 characters")
	case len(req.Reason) > 1024:
		return errors.New("reason: at most 1024 bytes")
	}
	switch req.State {
	case protocol.WatcherIdle, protocol.WatcherUpgrading, protocol.WatcherFailed:
	default:
		return fmt.Errorf("state %q: want %q, %q or empty", req.State, protocol.WatcherUpgrading, protocol.WatcherFailed)
	}
	return nil
}

// watcherToken checks the delegate token a watcher sends in its headers
// (protocol.HeaderAccountID and the token as a bearer); it answers and
// returns false when it is not valid.
func (s *Service) watcherToken(w http.ResponseWriter, r *http.Request) (string, store.Token, bool) {
	account := strings.TrimSpace(r.Header.Get(protocol.HeaderAccountID))
	if account == "" || api.Bearer(r) == "" {
		api.WriteError(w, http.StatusUnauthorized, protocol.CodeUnauthenticated,
			"a watcher sends the delegate token as a bearer and the account in the %s header", protocol.HeaderAccountID)
		return "", store.Token{}, false
	}
	tok, ok := s.tokens.DelegateToken(w, r, account, api.Bearer(r))
	return account, tok, ok
}

// handleUpgradeCheck answers a watcher: the version its group wants,
// whether the manager holds a signed binary of it for the watcher's
// platform, and which versions of its delegate are connected from its
// host. It records what the watcher reports.
func (s *Service) handleUpgradeCheck(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	acct, tok, ok := s.watcherToken(w, r)
	if !ok {
		return
	}
	var req protocol.UpgradeCheckRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	if err := checkUpgradeRequest(&req); err != nil {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
		return
	}
	ds, err := s.delegates.ListDelegates(ctx, acct)
	if err != nil {
		api.StoreError(w, err, "delegates")
		return
	}
	// A report is recorded only for a delegate of that name on that host
	// registered with the same token: a token cannot speak for the
	// delegates of another (and stall a ring with made-up failures). It
	// is the report of the token's scope's group of that name.
	if slices.ContainsFunc(ds, func(d protocol.Delegate) bool {
		return strings.EqualFold(d.Name, req.Name) && strings.EqualFold(d.Hostname, req.Hostname) && d.TokenName == tok.Name
	}) {
		if err := s.st.ReportUpgrade(ctx, store.UpgradeReport{AccountID: acct, Org: tok.Org, Project: tok.Project, Name: req.Name,
			Hostname: req.Hostname, State: req.State, Target: req.Target, Reason: req.Reason, UpdatedAt: s.cfg.Now()}); err != nil {
			api.StoreError(w, err, "upgrade report")
			return
		}
	}
	pl, err := s.planUpgrades(ctx, acct, ds)
	if err != nil {
		api.StoreError(w, err, "upgrade policy")
		return
	}
	g := pl.wanted(s, tok.Org, tok.Project, req.Name)
	resp := protocol.UpgradeCheckResponse{Wanted: g.wanted, Held: g.held, Waiting: g.waiting, Pinned: g.pinned, Connected: []string{},
		PollIntervalMS: s.cfg.UpgradePollInterval.Milliseconds()}
	if resp.Wanted != "" && release.ValidVersionName(resp.Wanted) {
		_, _, err := s.releaseFiles(release.BinaryLegate, resp.Wanted, req.OS, req.Arch)
		resp.Available = err == nil
	}
	for _, d := range ds {
		if strings.EqualFold(d.Name, req.Name) && strings.EqualFold(d.Hostname, req.Hostname) &&
			d.Status == protocol.DelegateConnected && d.TokenName == tok.Name && d.Upgrade != protocol.UpgradeManual {
			resp.Connected = append(resp.Connected, d.Version)
		}
	}
	api.WriteJSON(w, http.StatusOK, resp)
}

// releaseFiles finds the binary (release.BinaryLegate or BinaryDelegate)
// of version for goos/goarch in the release directory and reads its
// signature; it fails when either is missing, when the signature does not
// decode or is for another binary, version or platform: an unsigned
// binary is never served.
func (s *Service) releaseFiles(binary, version, goos, goarch string) (string, release.Signature, error) {
	if s.cfg.ReleaseDir == "" {
		return "", release.Signature{}, errors.New("this manager has no release directory")
	}
	if !release.ValidVersionName(version) || !validPlatform(goos) || !validPlatform(goarch) {
		return "", release.Signature{}, errors.New("not a valid version or platform")
	}
	bin := filepath.Join(s.cfg.ReleaseDir, version, release.ReleaseFileName(binary, goos, goarch))
	if _, err := os.Stat(bin); err != nil {
		return "", release.Signature{}, fmt.Errorf("no %s of %s for %s/%s", binary, version, goos, goarch)
	}
	b, err := os.ReadFile(bin + ".sig")
	if err != nil {
		return "", release.Signature{}, fmt.Errorf("the %s of %s for %s/%s is not signed (legate release sign)", binary, version, goos, goarch)
	}
	sig, err := release.DecodeSignature(b)
	if err != nil {
		return "", release.Signature{}, fmt.Errorf("the signature of %s %s for %s/%s: %w", binary, version, goos, goarch, err)
	}
	if sig.Which() != binary || sig.Version != version || sig.OS != goos || sig.Arch != goarch {
		return "", release.Signature{}, fmt.Errorf("the signature next to %s is for %s %s %s/%s", bin, sig.Which(), sig.Version, sig.OS, sig.Arch)
	}
	return bin, sig, nil
}

// releaseBinary is the binary a release request names (its "binary"
// query parameter): legate when absent.
func releaseBinary(w http.ResponseWriter, r *http.Request) (string, bool) {
	switch b := r.URL.Query().Get(protocol.QueryReleaseBinary); b {
	case "", release.BinaryLegate:
		return release.BinaryLegate, true
	case release.BinaryDelegate:
		return b, true
	default:
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "the %s parameter must be %s or %s", protocol.QueryReleaseBinary, release.BinaryLegate, release.BinaryDelegate)
		return "", false
	}
}

func validPlatform(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// handleReleaseBinary serves a signed release binary (its digest must
// match its signature's: a corrupted file is not served).
func (s *Service) handleReleaseBinary(w http.ResponseWriter, r *http.Request) {
	if _, _, ok := s.watcherToken(w, r); !ok {
		return
	}
	binary, ok := releaseBinary(w, r)
	if !ok {
		return
	}
	bin, sig, err := s.releaseFiles(binary, r.PathValue("version"), r.PathValue("os"), r.PathValue("arch"))
	if err != nil {
		api.WriteError(w, http.StatusNotFound, protocol.CodeNotFound, "%s", err.Error())
		return
	}
	f, err := os.Open(bin)
	if err != nil {
		api.WriteError(w, http.StatusNotFound, protocol.CodeNotFound, "%s", err.Error())
		return
	}
	defer f.Close()
	digest, err := release.Digest(f)
	if err != nil {
		api.WriteError(w, http.StatusInternalServerError, protocol.CodeInternal, "read %s: %s", filepath.Base(bin), err)
		return
	}
	if string(digest) != string(sig.SHA256) {
		s.log.Error("a release binary differs from its signature; not served", "file", bin)
		api.WriteError(w, http.StatusConflict, protocol.CodeConflict, "the binary of %s for %s/%s differs from its signature; it is not served",
			sig.Version, sig.OS, sig.Arch)
		return
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		api.WriteError(w, http.StatusInternalServerError, protocol.CodeInternal, "%s", err.Error())
		return
	}
	st, err := f.Stat()
	if err != nil {
		api.WriteError(w, http.StatusInternalServerError, protocol.CodeInternal, "%s", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, "", st.ModTime(), f)
}

// handleReleaseSignature serves a release binary's signature file.
func (s *Service) handleReleaseSignature(w http.ResponseWriter, r *http.Request) {
	if _, _, ok := s.watcherToken(w, r); !ok {
		return
	}
	binary, ok := releaseBinary(w, r)
	if !ok {
		return
	}
	_, sig, err := s.releaseFiles(binary, r.PathValue("version"), r.PathValue("os"), r.PathValue("arch"))
	if err != nil {
		api.WriteError(w, http.StatusNotFound, protocol.CodeNotFound, "%s", err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write(sig.Encode())
}

// handleSetUpgradePolicy pins a delegate group to a version, holds it
// back, releases it (it wants the manager's version again) or puts it in
// a ring.
func (s *Service) handleSetUpgradePolicy(w http.ResponseWriter, r *http.Request, acct string) {
	ctx := r.Context()
	name := strings.TrimSpace(r.PathValue("name"))
	var req protocol.UpgradePolicyRequest
	if !api.DecodeBody(w, r, &req) {
		return
	}
	if name == "" || len(name) > 63 {
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "a delegate name has 1-63 characters")
		return
	}
	org, project := strings.TrimSpace(req.Org), strings.TrimSpace(req.Project)
	if s.cfg.Scopes != nil {
		if err := s.cfg.Scopes.CheckScope(ctx, acct, org, project); err != nil {
			api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "%s", err.Error())
			return
		}
	}
	p, err := s.st.GetUpgradePolicy(ctx, acct, org, project, name)
	if err != nil {
		api.StoreError(w, err, "upgrade policy")
		return
	}
	p.UpdatedAt = s.cfg.Now()
	detail := req.Action
	switch req.Action {
	case protocol.UpgradePin:
		v := strings.TrimSpace(req.Version)
		if !release.ValidVersionName(v) {
			api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "pin needs a version (such as v1.2.3), not %q", req.Version)
			return
		}
		if !release.Accepted(s.cfg.Version, v) {
			oldest, _ := release.OldestAccepted(s.cfg.Version)
			api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "version %s is older than this manager (%s) accepts (%s or later)", v, s.cfg.Version, oldest.String())
			return
		}
		p.Pinned, p.Held = v, false
		detail += " " + v
	case protocol.UpgradeHold:
		p.Held = true
	case protocol.UpgradeRelease:
		p.Pinned, p.Held = "", false
	case protocol.UpgradeSetRing:
		ring := strings.ToLower(strings.TrimSpace(req.Ring))
		if !slices.Contains(protocol.Rings(), ring) {
			api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "ring %q: want one of %s", req.Ring, strings.Join(protocol.Rings(), ", "))
			return
		}
		p.Ring = ring
		if ring == protocol.RingDefault {
			p.Ring = ""
		}
		detail += " " + ring
	default:
		api.WriteError(w, http.StatusBadRequest, protocol.CodeBadRequest, "action %q: want %q, %q, %q or %q", req.Action,
			protocol.UpgradePin, protocol.UpgradeHold, protocol.UpgradeRelease, protocol.UpgradeSetRing)
		return
	}
	if err := s.st.SetUpgradePolicy(ctx, acct, p); err != nil {
		api.StoreError(w, err, "upgrade policy")
		return
	}
	ds, err := s.delegates.ListDelegates(ctx, acct)
	if err != nil {
		api.StoreError(w, err, "delegates")
		return
	}
	pl, err := s.planUpgrades(ctx, acct, ds)
	if err != nil {
		api.StoreError(w, err, "upgrade policy")
		return
	}
	g := pl.wanted(s, org, project, name)
	v := protocol.UpgradePolicy{Name: p.Name, Org: org, Project: project, Pinned: p.Pinned, Held: p.Held, Ring: g.ring, Wanted: g.wanted,
		Waiting: g.waiting, ManagerVersion: s.cfg.Version}
	if oldest, ok := release.OldestAccepted(s.cfg.Version); ok {
		v.OldestAccepted = oldest.String()
	}
	if org != "" {
		detail += " (" + protocol.ScopeLabel(org, project) + ")"
	}
	api.NoteAudit(ctx, func(e *store.AuditEvent) { e.Detail = detail })
	s.log.Info("delegate upgrade policy set", "account", acct, "name", name, "scope", protocol.ScopeLabel(org, project),
		"action", detail, "wanted", v.Wanted)
	api.WriteJSON(w, http.StatusOK, v)
}
