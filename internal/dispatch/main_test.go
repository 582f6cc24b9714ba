package dispatch

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the tests, then fails the run if any goroutine is left
// behind: every goroutine the service starts has an owner that waits for
// it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
