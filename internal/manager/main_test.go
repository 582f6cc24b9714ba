package manager

import (
	"os"
	"testing"

	"github.com/legate-dev/legate/internal/pgtest"
)

// TestMain stops the throwaway PostgreSQL cluster of the tests that run
// managers on a shared database, if one was started.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
