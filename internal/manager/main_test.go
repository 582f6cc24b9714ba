package manager

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/legate-dev/legate/internal/pgtest"
)

// TestMain runs the tests, stops the throwaway PostgreSQL cluster of the
// tests that run managers on a shared database (if one was started), and
// then fails the run if any goroutine is left behind: every goroutine a
// manager starts has an owner that waits for it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(withPostgres{m}) }

// withPostgres runs the tests through pgtest.Main, so the cluster is
// stopped (and its pool closed) before goleak looks for leaks.
type withPostgres struct{ m *testing.M }

func (w withPostgres) Run() int { return pgtest.Main(w.m) }
