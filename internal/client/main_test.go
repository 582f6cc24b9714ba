package client

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain runs the tests and then, if every test passed, fails the run
// when goroutines are left behind (goleak): a stream or a request that
// outlives its test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
