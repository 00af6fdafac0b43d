//go:build unix

package main

// The command's environment, process group and exit status, for run.

import (
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/lease"
)

// fenceEnv is the command's environment: fencelock's, and the token's
// variables; FENCE_SLOT with permit, and never without it (not one
// inherited from an outer run --permits).
func fenceEnv(tok fence.Token, permit bool) []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "FENCE_SLOT=") })
	env = append(env,
		"FENCE_TOKEN="+tok.String(),
		"FENCE_KEY="+tok.Key,
		"FENCE_SEQ="+strconv.FormatUint(tok.Seq, 10),
		"FENCE_HOLDER="+tok.Holder,
	)
	if _, slot, ok := lease.ParsePermitName(tok.Key); permit && ok {
		env = append(env, "FENCE_SLOT="+strconv.Itoa(slot))
	}
	return env
}

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
