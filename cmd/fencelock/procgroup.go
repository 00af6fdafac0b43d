//go:build unix

package main

// The command's process group and exit status, for run.

import (
	"errors"
	"os/exec"
	"syscall"
)

// exitStatus is the command's exit status: its own, or 128+N when signal N
// ended it.
func exitStatus(err error, g *globals) int {
	if err == nil {
		return exitOK
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return g.fail(exitFailure, "run: %v", err)
}

// signalGroup sends s to the command's process group, or to the command
// alone if it left the group while it has not been reaped (reaped, its pid
// may belong to another process).
func signalGroup(pid int, s syscall.Signal, reaped bool) {
	if err := syscall.Kill(-pid, s); errors.Is(err, syscall.ESRCH) && !reaped {
		_ = syscall.Kill(pid, s)
	}
}

// groupAlive reports whether a process of the command's group is left.
func groupAlive(pid int) bool {
	err := syscall.Kill(-pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
