package webui

import (
	"strings"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// An upgrade replaces an instance rather than changing it: the watcher
// starts the new version beside the old one (another instance of the
// group, from the same host) and stops the old one once the new one is
// connected; a rolling update of a cluster starts new pods and stops the
// old ones. The manager keeps the old instance, not connected, until it
// prunes it (hours later). The pages derive from the listing that such an
// instance was replaced, so that it does not read as a delegate that went
// missing.

// Why a replacement happened, as far as the listing tells.
const (
	// replacedByUpgrade: the new instance runs another version.
	replacedByUpgrade = "upgrade"
	// replacedByRestart: the new instance is on the same host with the
	// same version (a crash and restart, or a restart by hand).
	replacedByRestart = "restart"
	// replacedInPlace: another instance of the same version came after
	// the old one was last heard of.
	replacedInPlace = "in place"
)

// replacement is the instance that took over from one no longer
// connected.
type replacement struct {
	InstanceID string
	Hostname   string
	Version    string
	// Why is replacedByUpgrade, replacedByRestart or replacedInPlace.
	Why string
	// At is when the replacement happened: when the old instance was
	// last heard of, or when the new one registered if that was later.
	At time.Time
}

// Upgrade reports whether the new instance runs another version.
func (r replacement) Upgrade() bool { return r.Why == replacedByUpgrade }

// Restart reports whether the instance restarted on its host with its
// version.
func (r replacement) Restart() bool { return r.Why == replacedByRestart }

// Words says what happened, for a sentence ("…, an upgrade").
func (r replacement) Words() string {
	switch r.Why {
	case replacedByUpgrade:
		return "an upgrade"
	case replacedByRestart:
		return "a restart on the same host"
	}
	return "a new instance in its place"
}

// State is the instance's state in a few words.
func (r replacement) State() string {
	switch r.Why {
	case replacedByUpgrade:
		return "replaced by an upgrade"
	case replacedByRestart:
		return "restarted"
	}
	return "replaced"
}

// replacements returns, by instance ID, the replacement of each instance
// of ins that is not connected and was replaced by a connected instance
// of the same delegate (name and scope) registered after it (see
// replaces). The newest such instance is its replacement. liveness is
// the liveness window: how long an instance may go unheard and still be
// connected. ins is what the caller has: on a page of a paginated list,
// an instance whose replacement is on another page is not found
// replaced there (the delegate's own page lists all its instances).
func replacements(ins []protocol.Delegate, liveness time.Duration) map[string]replacement {
	out := map[string]replacement{}
	for _, old := range ins {
		if old.Status == protocol.DelegateConnected {
			continue
		}
		var best *protocol.Delegate
		for i := range ins {
			n := &ins[i]
			if n.Status != protocol.DelegateConnected || n.InstanceID == old.InstanceID || !replaces(*n, old, liveness) {
				continue
			}
			if best == nil || n.RegisteredAt.After(best.RegisteredAt) {
				best = n
			}
		}
		if best == nil {
			continue
		}
		at := best.RegisteredAt
		if old.LastHeartbeat != nil && old.LastHeartbeat.After(at) {
			at = *old.LastHeartbeat
		}
		why := replacedInPlace
		switch {
		case best.Version != old.Version:
			why = replacedByUpgrade
		case best.Hostname == old.Hostname:
			why = replacedByRestart
		}
		out[old.InstanceID] = replacement{InstanceID: best.InstanceID, Hostname: best.Hostname, Version: best.Version, Why: why, At: at}
	}
	return out
}

// replaces reports whether n, connected, took over from old: n registered
// after old and either on the same host (a watcher's switch, a restart),
// after old was last heard of (a new instance in its place), or, on
// another version, as an upgrade stops the old one: old deregistered (a
// rolling update stops it cleanly) or was last heard of within a
// liveness window of n's registration. An old replica that ran on long
// after another version's replica registered and then went missing (a
// crash in a mixed-version fleet) was not replaced: it is missing.
func replaces(n, old protocol.Delegate, liveness time.Duration) bool {
	if !strings.EqualFold(n.Name, old.Name) || n.Org != old.Org || n.Project != old.Project || !n.RegisteredAt.After(old.RegisteredAt) {
		return false
	}
	if n.Hostname == old.Hostname || (old.LastHeartbeat != nil && !n.RegisteredAt.Before(*old.LastHeartbeat)) {
		return true
	}
	if n.Version == old.Version {
		return false
	}
	return old.Status == protocol.DelegateDeregistered ||
		(old.LastHeartbeat != nil && old.LastHeartbeat.Sub(n.RegisteredAt) <= liveness)
}
