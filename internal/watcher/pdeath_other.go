//go:build !linux

package watcher

import "os/exec"

// setParentDeathSignal does nothing where the kernel has no parent death
// signal: a delegate outlives a watcher that dies without stopping it.
func setParentDeathSignal(*exec.Cmd) {}
