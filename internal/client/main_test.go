package client

import (
	"os"
	"testing"

	"github.com/legate-dev/legate/internal/leaktest"
)

// TestMain runs the tests and then, if every test passed, fails the run
// when goroutines are left behind (leaktest): a stream or a request that
// outlives its test.
func TestMain(m *testing.M) { os.Exit(leaktest.Main(m.Run)) }
