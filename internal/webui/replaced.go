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

// replacement is the instance that took over from one no longer
// connected.
type replacement struct {
	InstanceID string
	Hostname   string
	Version    string
	// At is when the replacement happened: when the old instance was
	// last heard of, or when the new one registered if that was later.
	At time.Time
}

// replacements returns, by instance ID, the replacement of each instance
// of ins that is not connected and was replaced by a connected instance
// of the same delegate (name and scope) registered after it and either
// on the same host (a watcher's switch), of another version (a rolling
// upgrade), or after the old one was last heard of (a new instance in
// its place). The newest such instance is its replacement.
func replacements(ins []protocol.Delegate) map[string]replacement {
	out := map[string]replacement{}
	for _, old := range ins {
		if old.Status == protocol.DelegateConnected {
			continue
		}
		var best *protocol.Delegate
		for i := range ins {
			n := &ins[i]
			if n.Status != protocol.DelegateConnected || n.InstanceID == old.InstanceID || !replaces(*n, old) {
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
		out[old.InstanceID] = replacement{InstanceID: best.InstanceID, Hostname: best.Hostname, Version: best.Version, At: at}
	}
	return out
}

// replaces reports whether n, connected, took over from old.
func replaces(n, old protocol.Delegate) bool {
	if !strings.EqualFold(n.Name, old.Name) || n.Org != old.Org || n.Project != old.Project || !n.RegisteredAt.After(old.RegisteredAt) {
		return false
	}
	return n.Hostname == old.Hostname || n.Version != old.Version ||
		(old.LastHeartbeat != nil && !n.RegisteredAt.Before(*old.LastHeartbeat))
}
