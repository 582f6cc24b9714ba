package watcher

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal makes the kernel send the delegate SIGTERM (it
// drains) should the watcher die without stopping it.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
