package identity

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/legate-dev/legate/internal/api"
	"github.com/legate-dev/legate/internal/cluster"
	"github.com/legate-dev/legate/internal/store"
)

// newTestService returns a Service over a new SQLite store, with the
// account Bootstrap makes.
func newTestService(t *testing.T, cfg Config) (*Service, *store.Store, Admin) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, dir+"/legate.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	a, err := Bootstrap(ctx, st, dir, "http://127.0.0.1:1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Store, cfg.Bus = st, cluster.New(st, nil)
	return New(cfg), st, a
}

// TestAuditRetention: the prune loop's pass removes the records older
// than the retention, and none when the log is kept forever.
func TestAuditRetention(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	s, st, admin := newTestService(t, Config{AuditRetention: 48 * time.Hour})
	ctx := context.Background()
	record := func(org string, at time.Time) {
		t.Helper()
		e := store.AuditEvent{ID: api.NewID("au_"), AccountID: admin.AccountID, At: at, Action: "org.create",
			ResourceType: "org", Resource: org, Outcome: "success", Status: 201}
		if err := st.AddAuditEvent(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	record("old", t0)
	record("new", t0.Add(24*time.Hour))
	names := func() []string {
		es, err := st.ListAuditEvents(ctx, store.AuditFilter{AccountID: admin.AccountID, ResourceType: "org"})
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, e := range es {
			out = append(out, e.Resource)
		}
		return out
	}
	if n := s.PruneAudit(ctx, t0.Add(24*time.Hour)); n != 0 {
		t.Errorf("pruned %d records within the retention", n)
	}
	s.PruneAudit(ctx, t0.Add(49*time.Hour)) // "old" is 49h old, "new" 25h
	if diff := cmp.Diff([]string{"new"}, names()); diff != "" {
		t.Errorf("after pruning (-want +got):\n%s", diff)
	}
	forever := New(Config{Store: st, Bus: cluster.New(st, nil), AuditRetention: -1})
	if n := forever.PruneAudit(ctx, t0.Add(1049*time.Hour)); n != 0 || len(names()) != 1 {
		t.Errorf("a log kept forever lost %d records", n)
	}
}

// FuzzAuditQuery: the query parameters of GET /api/v1/audit are parsed
// without panicking, and a cursor the manager writes reads back.
func FuzzAuditQuery(f *testing.F) {
	for _, s := range []string{"24h", "7d", "2026-11-23T08:00:00Z", "-1d", "1790000000000000_au_x", "_", "9999999999999999999d"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = api.ParseSince(s, now)
		_, _, _ = parseAuditAction(s)
		c, err := parseAuditCursor(s)
		if err != nil {
			return
		}
		back, err := parseAuditCursor(strconv.FormatInt(c.At.UnixMicro(), 10) + "_" + c.ID)
		if err != nil || back.ID != c.ID || !back.At.Equal(c.At) {
			t.Errorf("cursor %q: read back %+v, %v; want %+v", s, back, err, c)
		}
	})
}
