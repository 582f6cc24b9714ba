package webui

import (
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/protocol"
)

// TestReplacements: an instance that left is replaced by a connected one
// of the same delegate that came after it from the same host (a
// watcher's switch), with another version (a rolling upgrade) or after it
// was last heard of; not by an older replica, another delegate, another
// scope or one that is not connected. Another version replaces an
// instance only when the old one stopped cleanly or went quiet within a
// liveness window of the new one's registration: an old replica that
// crashed long after a replica of another version came up is missing.
// The replacement says why: an upgrade, a restart, a new instance.
func TestReplacements(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	at := func(m int) *time.Time { x := t0.Add(time.Duration(m) * time.Minute); return &x }
	inst := func(id, name, host, version, status string, registered int, heard *time.Time) protocol.Delegate {
		return protocol.Delegate{InstanceID: id, Name: name, Hostname: host, Version: version, Status: status,
			RegisteredAt: *at(registered), LastHeartbeat: heard}
	}
	const on, off, gone = protocol.DelegateConnected, protocol.DelegateDisconnected, protocol.DelegateDeregistered
	for _, c := range []struct {
		what string
		ins  []protocol.Delegate
		want map[string]string // old instance -> its replacement
		at   map[string]time.Time
		why  map[string]string // old instance -> why it was replaced
	}{
		{"a watcher's switch on one host", []protocol.Delegate{
			inst("old", "b", "h1", "v1.0.0", gone, 0, at(12)), inst("new", "B", "h1", "v1.1.0", on, 10, at(13))},
			map[string]string{"old": "new"}, map[string]time.Time{"old": *at(12)}, map[string]string{"old": replacedByUpgrade}},
		{"a rolling upgrade, new hosts", []protocol.Delegate{
			inst("p1", "b", "pod-1", "v1.0.0", off, 0, at(5)), inst("p2", "b", "pod-2", "v1.1.0", on, 4, at(20))},
			map[string]string{"p1": "p2"}, map[string]time.Time{"p1": *at(5)}, map[string]string{"p1": replacedByUpgrade}},
		{"a new pod after the old one left, same version", []protocol.Delegate{
			inst("p1", "b", "pod-1", "v1.0.0", off, 0, at(5)), inst("p3", "b", "pod-3", "v1.0.0", on, 7, at(20))},
			map[string]string{"p1": "p3"}, map[string]time.Time{"p1": *at(7)}, map[string]string{"p1": replacedInPlace}},
		{"a replica of another version came up while the old one ran, then the old one crashed", []protocol.Delegate{
			inst("r1", "b", "pod-1", "v1.0.0", off, 0, at(60)), inst("r2", "b", "pod-2", "v1.1.0", on, 10, at(70))},
			map[string]string{}, nil, nil},
		{"a clean rolling update", []protocol.Delegate{
			inst("p1", "b", "pod-1", "v1.0.0", gone, 0, at(30)), inst("p2", "b", "pod-2", "v1.1.0", on, 10, at(40))},
			map[string]string{"p1": "p2"}, map[string]time.Time{"p1": *at(30)}, map[string]string{"p1": replacedByUpgrade}},
		{"a crash and restart on the same host, same version", []protocol.Delegate{
			inst("old", "b", "h1", "v1.0.0", off, 0, at(5)), inst("new", "b", "h1", "v1.0.0", on, 6, at(9))},
			map[string]string{"old": "new"}, map[string]time.Time{"old": *at(6)}, map[string]string{"old": replacedByRestart}},
		{"the newest replacement wins", []protocol.Delegate{
			inst("old", "b", "h1", "v1.0.0", gone, 0, at(3)), inst("n1", "b", "h1", "v1.1.0", on, 1, at(9)), inst("n2", "b", "h1", "v1.2.0", on, 2, at(9))},
			map[string]string{"old": "n2"}, nil, nil},
		{"an older replica replaces nothing", []protocol.Delegate{
			inst("r1", "b", "h1", "v1.0.0", on, 0, at(9)), inst("r2", "b", "h2", "v1.0.0", off, 1, at(5))},
			map[string]string{}, nil, nil},
		{"a replica registered while the other ran replaces nothing", []protocol.Delegate{
			inst("r1", "b", "h1", "v1.0.0", off, 0, at(9)), inst("r2", "b", "h2", "v1.0.0", on, 1, at(9))},
			map[string]string{}, nil, nil},
		{"not connected replaces nothing", []protocol.Delegate{
			inst("old", "b", "h1", "v1.0.0", gone, 0, at(3)), inst("new", "b", "h1", "v1.1.0", off, 1, at(4))},
			map[string]string{}, nil, nil},
		{"another delegate replaces nothing", []protocol.Delegate{
			inst("old", "b", "h1", "v1.0.0", gone, 0, at(3)), inst("new", "c", "h1", "v1.1.0", on, 1, at(4))},
			map[string]string{}, nil, nil},
	} {
		got := replacements(c.ins, 90*time.Second)
		if len(got) != len(c.want) {
			t.Errorf("%s: %d replaced, want %d: %+v", c.what, len(got), len(c.want), got)
			continue
		}
		for old, by := range c.want {
			if got[old].InstanceID != by {
				t.Errorf("%s: %s replaced by %q, want %q", c.what, old, got[old].InstanceID, by)
			}
			if want, ok := c.why[old]; ok && got[old].Why != want {
				t.Errorf("%s: %s replaced (%s), want %s", c.what, old, got[old].Why, want)
			}
			if want, ok := c.at[old]; ok && !got[old].At.Equal(want) {
				t.Errorf("%s: %s replaced at %s, want %s", c.what, old, got[old].At, want)
			}
		}
	}
	scoped := []protocol.Delegate{inst("old", "b", "h1", "v1.0.0", gone, 0, at(3)), inst("new", "b", "h1", "v1.1.0", on, 1, at(4))}
	scoped[1].Org = "other"
	if got := replacements(scoped, 90*time.Second); len(got) != 0 {
		t.Errorf("an instance of another scope replaced one: %+v", got)
	}
}
