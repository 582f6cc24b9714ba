//go:build !delegate

package main

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"github.com/legate-dev/legate/internal/bench"
)

// With LEGATE_CPUPROFILE=FILE in its environment, any legate command writes
// a pprof CPU profile of its whole run to FILE when it returns (for the
// manager: after SIGTERM). `legate bench throughput --cpuprofile` sets it
// for the manager process it starts.
func init() {
	path := os.Getenv(bench.EnvCPUProfile)
	if path == "" {
		return
	}
	var f *os.File
	cobra.OnInitialize(func() {
		var err error
		if f, err = os.Create(path); err != nil {
			fmt.Fprintf(os.Stderr, "legate: %s: %v\n", bench.EnvCPUProfile, err)
			return
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(os.Stderr, "legate: %s: %v\n", bench.EnvCPUProfile, err)
			f.Close()
			f = nil
		}
	})
	cobra.OnFinalize(func() {
		if f == nil {
			return
		}
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "legate: %s: %v\n", bench.EnvCPUProfile, err)
		}
	})
}
