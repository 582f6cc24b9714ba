//go:build !linux

package envguard

import (
	"errors"
	"fmt"
	"os"
)

var errUnsupported = errors.New("not supported on this system (Linux only)")

// Reexec is Linux only: elsewhere it returns an error when there is
// something to take out, and nil otherwise.
func Reexec(r Request) error {
	if _, _, values := r.split(); len(values) == 0 {
		return nil
	}
	return fmt.Errorf("execute the program again without its credentials: %w", errUnsupported)
}

// Receive is Linux only: elsewhere FDEnv set is an error.
func Receive() (Values, bool, error) {
	v, ok := os.LookupEnv(FDEnv)
	if !ok {
		return nil, false, nil
	}
	os.Unsetenv(FDEnv)
	return nil, true, fmt.Errorf("%s=%q: %w; unset it", FDEnv, v, errUnsupported)
}

// Harden is Linux only.
func Harden() error { return fmt.Errorf("mark the process not dumpable: %w", errUnsupported) }

// SealDescriptors is Linux only.
func SealDescriptors() error {
	return fmt.Errorf("mark inherited descriptors close-on-exec: %w", errUnsupported)
}
