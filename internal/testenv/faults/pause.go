package faults

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Pausable is a process that can be frozen (SIGSTOP) and thawed (SIGCONT),
// such as a [testenv.Redis].
type Pausable interface {
	Pause() error
	Resume() error
}

// PauseFor freezes p for d (or until ctx ends), then thaws it. Requests
// sent to a frozen server wait in its socket buffer and run when it
// resumes, after its clock has moved on.
func PauseFor(ctx context.Context, p Pausable, d time.Duration) error {
	if err := p.Pause(); err != nil {
		return err
	}
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	return p.Resume()
}

// Pause freezes p until the end of the test (or an earlier Resume).
func Pause(tb testing.TB, p Pausable) {
	tb.Helper()
	if err := p.Pause(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Resume() })
}

// StopSelf stops the calling process with SIGSTOP and returns once it got
// SIGCONT. kill(2) on oneself returns before every thread has stopped, so a
// thread of this process could still act in between; waiting for the
// SIGCONT, which only comes after the stop, closes that gap.
func StopSelf() {
	cont := make(chan os.Signal, 1)
	signal.Notify(cont, syscall.SIGCONT)
	defer signal.Stop(cont)
	syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	<-cont
}

// WaitStopped waits until process pid is stopped (state T in /proc), for
// at most timeout or until ctx ends, and reports whether it saw it so. A
// SIGCONT sent before the stop has landed would leave the process stopped
// for good: send it only after this returned true.
func WaitStopped(ctx context.Context, pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		// pid (comm) state ...: comm may hold spaces; the state follows the last ')'.
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) && s[i+2] == 'T' {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
	return false
}
