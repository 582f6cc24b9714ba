package delegate_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a test leaves a goroutine behind: every
// goroutine of an agent (its loops, tasks, deliveries and their helpers)
// has an owner that waits for it before Run returns, and the test
// managers stop theirs before their test ends.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
