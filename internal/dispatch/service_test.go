package dispatch

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/legate-dev/legate/internal/cluster"
	"github.com/legate-dev/legate/internal/events"
	"github.com/legate-dev/legate/internal/metrics"
	"github.com/legate-dev/legate/internal/store"
)

// newTestService builds a Service over a real SQLite store in a temporary
// directory, with the manager's default settings and the clock now, and
// an account for its tasks. Its loops do not run: a test calls what it
// checks. The tests that need the whole API start a whole manager
// (package manager).
func newTestService(t *testing.T, now func() time.Time) (m *Service, st *store.Store, acct string) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir()+"/legate.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	acct = "acct1"
	if err := st.CreateAccount(ctx, store.Account{ID: acct, CreatedAt: now()}); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := metrics.NewRegistry()
	heartbeat := 10 * time.Second
	m, err = New(ctx, Config{Store: st, Bus: cluster.New(st, log), Events: &events.Stream{}, Metrics: reg,
		APIErrors:  reg.NewCounterVec(metrics.Opts{Name: "legate_manager_api_errors_total", Help: "API errors."}, "code"),
		SessionKey: make([]byte, 32), HeartbeatInterval: heartbeat, MissedHeartbeats: 3, SessionTTL: time.Hour,
		DefaultTaskTimeout: time.Hour, DefaultQueueTimeout: 5 * time.Minute, LongPollWait: 25 * time.Second,
		LogCap: store.LogCap{Head: 4 << 20, Tail: 4 << 20}, SweepInterval: 500 * time.Millisecond, OfferFanout: 3,
		PruneDelegatesAfter: 6 * time.Hour, FollowPollInterval: time.Second, AuditRetention: 90 * 24 * time.Hour,
		Version: "dev", Log: log, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return m, st, acct
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
