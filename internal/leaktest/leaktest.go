// Package leaktest fails a test binary that leaves goroutines behind
// (go.uber.org/goleak), waiting first for the ones that are still ending.
//
// A package's TestMain runs its tests through Main:
//
//	func TestMain(m *testing.M) { os.Exit(leaktest.Main(m.Run)) }
//
// or, in a package whose tests use PostgreSQL (pgtest.Main stops the
// throwaway cluster and closes its own pool before the check):
//
//	func TestMain(m *testing.M) {
//		os.Exit(leaktest.Main(func() int { return pgtest.Main(m) }))
//	}
//
// The package is for tests only: only _test.go files import it, so goleak
// is never linked into a binary (internal/arch checks).
package leaktest

import (
	"fmt"
	"os"
	"time"

	"go.uber.org/goleak"
)

// settle bounds how long Main waits for goroutines that are ending (a
// closed server's connections, a closed database's opener) before it calls
// the ones still running leaks. It is a bound on a wait, not a delay: a
// binary without leaks waits for nothing.
const settle = 10 * time.Second

// Main runs the tests (run is m.Run or a wrapper of it) and, if they all
// passed, returns 1 after printing the stacks of the goroutines that are
// still running when settle has passed. Otherwise it returns run's code.
// opts are goleak's, for goroutines that are not the tests' doing (each
// use should say why).
func Main(run func() int, opts ...goleak.Option) int {
	code := run()
	if code != 0 {
		return code
	}
	deadline := time.Now().Add(settle)
	for {
		// Find itself retries for about half a second.
		err := goleak.Find(opts...)
		if err == nil {
			return code
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "leaktest: the tests passed but left goroutines behind (still running after %v):\n%v\n", settle, err)
			return 1
		}
	}
}
