//go:build unix

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/once"
)

// forwarded are the signals run passes on to the command.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// terminating reports whether s ends a wait for the lock (SIGUSR1 and
// SIGUSR2 do not: they are meant for the command).
func terminating(s os.Signal) bool {
	return s != syscall.SIGUSR1 && s != syscall.SIGUSR2
}

// signalStatus is the exit status of a process ended by s: 128+N.
func signalStatus(s os.Signal) int {
	if n, ok := s.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return exitFailure
}

const (
	// releaseTimeout is the budget of what run does once the command has
	// exited: completing its period (--once-per) and the release share
	// it, and the cleanups before exit get finishSlack more.
	releaseTimeout = 5 * time.Second
	// probeTimeout bounds the check that tells "held by another" from
	// "Redis unreachable" after an acquire that ended without the lock,
	// counted from the end of the wait; the command's budget bounds it too.
	probeTimeout = 250 * time.Millisecond
	// groupPoll is how often run looks for the command's process group to
	// be gone after a lost lease.
	groupPoll = 20 * time.Millisecond
)

// run is the run command.
func (g *globals) run(args []string) int {
	fs := g.flagSet("run")
	ttl := fs.Duration("ttl", defaultTTL, "lease ttl")
	wait := fs.Duration("wait", 0, "how long to wait for the lock")
	grace := fs.Duration("grace", defaultGrace, "SIGTERM to SIGKILL delay")
	period := fs.Duration("once-per", 0, "run at most once per period (once.go)")
	var n permits
	fs.Var(&n, "permits", "take a permit of semaphore NAME of N permits (semaphore.go)")

	head, command, dashes := args, []string(nil), false
	if i := slices.Index(args, "--"); i >= 0 {
		head, command, dashes = args[:i], args[i+1:], true
	}
	pos, err := parseArgs(fs, head)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return g.help()
	case err != nil:
		return g.usageError("run: %v", err)
	case !dashes && len(pos) == 0:
		return g.usageError("run: want NAME -- CMD [ARG...]")
	case !dashes:
		return g.usageError("run: missing -- between NAME and the command")
	case len(pos) != 1:
		return g.usageError("run: want one lock NAME before --, got %d arguments", len(pos))
	case len(command) == 0:
		return g.usageError("run: missing command after --")
	case *ttl < minTTL:
		return g.usageError("run: %v", ttlTooShort(*ttl))
	case n > 0 && *period > 0:
		// once's record is kept per token key, so per slot: N commands
		// would each run once per period.
		return g.usageError("run: --permits and --once-per do not go together: --once-per runs CMD once per period, so one at a time")
	}
	for _, err := range []error{
		checkDuration("--ttl", *ttl, maxTTL),
		checkDuration("--wait", *wait, maxWait),
		checkDuration("--grace", *grace, maxTTL),
		checkDuration("--once-per", *period, maxPeriod),
		checkName("lock name", pos[0]),
		checkPermitNames(pos[0], n),
	} {
		if err != nil {
			return g.usageError("run: %v", err)
		}
	}
	name := pos[0]
	cmd := exec.Command(command[0], command[1:]...)
	if cmd.Err != nil { // not found, before taking the lock
		return g.fail(exitFailure, "run: %v", cmd.Err)
	}

	sigs := make(chan os.Signal, 32)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)

	b, code := g.backend()
	if b == nil {
		return code
	}
	// Taking the lock, claiming the period and, when either fails, the
	// release and the cleanups share one budget: --wait, or --timeout
	// without it, and finishSlack (the package doc's "Time limits").
	timeout := g.timeout
	if *wait > 0 {
		timeout = *wait
	}
	bud := newBudget(timeout)
	op, code := g.newOncePer(b, *period)
	if code == exitOK && n > 0 {
		_, code = g.oneRedis(b, "--permits")
	}
	if code != exitOK {
		closeBy(b, bud.hard)
		return code
	}
	l, code := g.take(b, bud, name, n, *ttl, *wait, sigs)
	if l == nil {
		closeBy(b, bud.hard)
		return code
	}
	var claim *once.Claim
	if op != nil {
		if claim, code = op.claim(g, l.Token(), g.claimBy(bud)); claim == nil {
			g.release(l, bud.hard)
			closeBy(b, bud.hard)
			return code
		}
	}
	cmd.Env = fenceEnv(l.Token(), n > 0)
	code, end := g.supervise(cmd, l, *ttl, *grace, sigs, claim)
	closeBy(b, end.hard)
	return code
}

// claimBy is when the period's claim must end: by the end of the budget
// of taking the lock, or probeTimeout after it was taken if that is later
// (a lock taken at the very end of --wait), but never past the budget's
// hard end, nor --timeout from now.
func (g *globals) claimBy(bud budget) time.Time {
	now := time.Now()
	return earliest(bud.hard, earliest(now.Add(g.timeout), latest(bud.end, now.Add(probeTimeout))))
}

// take acquires the lock (with n > 0, a permit of the semaphore), waiting
// up to wait (until bud.end); a terminating signal ends the wait. It
// returns the lease, or nil and the exit status.
func (g *globals) take(b backend, bud budget, name string, n permits, ttl, wait time.Duration, sigs <-chan os.Signal) (*lease.Lease, int) {
	ctx, cancel := bud.ctx()
	defer cancel()
	type result struct {
		l   *lease.Lease
		err error
	}
	res := make(chan result, 1)
	go func() {
		l, err := b.acquire(ctx, name, n, ttl, wait > 0)
		res <- result{l, err}
	}()
	var r result
	for done := false; !done; {
		select {
		case r = <-res:
			done = true
		case s := <-sigs:
			if !terminating(s) {
				continue
			}
			cancel()
			if r = <-res; r.l != nil {
				g.release(r.l, bud.hard)
			}
			return nil, g.fail(signalStatus(s), "run: %v while waiting for %q", s, name)
		}
	}
	if r.err != nil {
		return nil, g.notAcquired(b, bud, name, n, wait, r.err)
	}
	// A terminating signal that came just before the lock did: do not
	// start the command.
	for {
		select {
		case s := <-sigs:
			if terminating(s) {
				g.release(r.l, bud.hard)
				return nil, g.fail(signalStatus(s), "run: %v while taking %q", s, name)
			}
			continue
		default:
		}
		break
	}
	return r.l, exitOK
}

// notAcquired reports a failed acquire and returns its exit status: 3 when
// another holder has the lock (or every permit of semaphore name of n
// permits is held), 2 for bad input, 1 when Redis failed.
func (g *globals) notAcquired(b backend, bud budget, name string, n permits, wait time.Duration, err error) int {
	switch {
	case errors.Is(err, lease.ErrInvalid):
		return g.usageError("run: %v", err)
	case !errors.Is(err, lease.ErrNotAcquired):
		return g.fail(exitFailure, "run: %v", err)
	}
	var held *lease.HeldError
	if !errors.As(err, &held) {
		// The acquire's context ended, or Redlock got no majority: the
		// lock may be held, or Redis may be unreachable (go-redis can hide
		// a dial error behind the deadline). Ask, briefly: a Redis that
		// answers does so in milliseconds, and a frozen one must not keep
		// run past its budget. (For a semaphore too: any answer will do.)
		ctx, cancel := context.WithDeadline(context.Background(), earliest(bud.hard, latest(bud.end, time.Now()).Add(probeTimeout)))
		defer cancel()
		if _, perr := b.inspect(ctx, name); perr != nil {
			if errors.Is(perr, context.DeadlineExceeded) {
				perr = fmt.Errorf("no answer in time: %w", perr)
			}
			return g.fail(exitFailure, "run: %v; Redis: %v", err, perr)
		}
	}
	switch {
	case wait > 0 && n > 0:
		return g.fail(exitNotAcquired, "run: all %d permits of %q are held: not acquired within %v (%v)", n, name, wait, err)
	case wait > 0:
		return g.fail(exitNotAcquired, "run: %q is held by another holder: not acquired within %v (%v)", name, wait, err)
	}
	return g.fail(exitNotAcquired, "run: %v", err)
}

// release releases l by at and returns the error; a release cut short
// leaves the lock to expire after its ttl.
func (g *globals) release(l *lease.Lease, at time.Time) error {
	ctx, cancel := context.WithDeadline(context.Background(), at)
	defer cancel()
	return l.Release(ctx)
}

// supervise runs cmd (its environment made by fenceEnv) under lease l (of
// ttl) and returns run's exit status, and the budget of what follows the
// command (releaseTimeout), whose hard end bounds the cleanups before
// exit. With claim (--once-per), a command that succeeded completes it
// before the release.
func (g *globals) supervise(cmd *exec.Cmd, l *lease.Lease, ttl, grace time.Duration, sigs <-chan os.Signal, claim *once.Claim) (int, budget) {
	tok := l.Token()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = sysProcAttr()
	// A lease handed over with a late release message may have little more
	// than half its ttl left: refresh it first, so that the end game below
	// cannot begin before the keep-alive's first refresh (at ttl/3).
	term, shortGrace, margin := endGame(ttl, grace)
	if time.Until(l.Deadline()) < term+ttl/3+margin {
		ctx, cancel := context.WithDeadline(context.Background(), l.Deadline())
		_ = l.Refresh(ctx, ttl) // a failure is the end game's to handle
		cancel()
	}
	if err := l.Err(); err != nil { // lost already (a slow start): do not run
		end := newBudget(releaseTimeout)
		g.release(l, end.end)
		return g.fail(exitLost, "run: lease on %q lost before the command started: %v", tok.Key, err), end
	}
	if err := cmd.Start(); err != nil {
		end := newBudget(releaseTimeout)
		g.release(l, end.end)
		return g.fail(exitFailure, "run: %v", err), end
	}
	pid := cmd.Process.Pid
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var (
		waitErr error
		lost    error
		killAt  time.Time
		kill    <-chan time.Time
		done    = l.Done()
		reaped  bool
	)
	// stop sends SIGTERM to the command's process group and arranges
	// SIGKILL at killAt.
	stop := func(why string, at time.Time) {
		what := "sending SIGTERM to the command"
		if reaped {
			what = "the command has exited; SIGTERM to what is left of its process group"
		}
		fmt.Fprintf(g.stderr, "fencelock: lease on %q %s: %s, SIGKILL in %v\n", tok.Key, why, what, time.Until(at).Round(time.Millisecond))
		signalGroup(pid, syscall.SIGTERM, reaped)
		killAt = at
		kill = time.After(time.Until(at))
	}
	// terminate stops the command of a lease lost at once (lostGrace).
	terminate := func(err error) {
		lost = err
		cut := lostGrace(ttl, grace)
		why := fmt.Sprintf("lost while the command ran (%v)", err)
		if cut < grace {
			why += fmt.Sprintf("; --grace %v shortened to %v: the lock may already have another holder", grace, cut.Round(time.Millisecond))
		}
		stop(why, time.Now().Add(cut))
	}
	// Refreshes that fail bring the deadline near: stop the command so
	// that SIGKILL lands before the deadline, not grace after it.
	warn := time.NewTimer(time.Until(l.Deadline()) - term)
	defer warn.Stop()
	warnC := warn.C
wait:
	for {
		select {
		case waitErr = <-exited:
			reaped = true
			break wait
		case s := <-sigs:
			signalGroup(pid, s.(syscall.Signal), reaped)
		case <-done:
			done = nil
			if lost == nil {
				terminate(l.Err())
			}
		case <-warnC:
			deadline := l.Deadline()
			if d := time.Until(deadline) - term; d > 0 { // a refresh moved the deadline
				warn.Reset(d)
				continue
			}
			warnC = nil
			if lost != nil || l.Err() != nil || !time.Now().Before(deadline) {
				continue // lost already: done has it
			}
			lost = fmt.Errorf("%w: %q: no refresh succeeded, and the local deadline is %v away",
				lease.ErrLost, tok.Key, time.Until(deadline).Round(time.Millisecond))
			why := "is being lost (its refreshes fail)"
			if shortGrace < grace {
				why += fmt.Sprintf("; --grace %v shortened to %v to end the command before the lease's deadline", grace, shortGrace)
			}
			stop(why, deadline.Add(-margin))
		case <-kill:
			kill = nil
			signalGroup(pid, syscall.SIGKILL, reaped)
		}
	}
	if lost == nil {
		select {
		case <-l.Done(): // lost while the command ran, seen only now
			terminate(l.Err())
		default:
		}
	}
	if lost != nil {
		// The command has exited; the rest of its process group gets the
		// rest of the grace period.
		for groupAlive(pid) && time.Now().Before(killAt) {
			time.Sleep(groupPoll)
		}
		signalGroup(pid, syscall.SIGKILL, reaped)
	}

	end := newBudget(releaseTimeout)
	if claim != nil && lost == nil && waitErr == nil {
		if code := complete(g, claim, end.end); code != exitOK {
			g.release(l, end.end)
			return code, end
		}
	}
	relErr := g.release(l, end.end)
	switch {
	case lost != nil:
	case errors.Is(relErr, lease.ErrLost):
		lost = relErr
		fmt.Fprintf(g.stderr, "fencelock: lease on %q lost while the command ran: %v\n", tok.Key, relErr)
	case relErr != nil:
		fmt.Fprintf(g.stderr, "fencelock: release %q: %v (the lock expires after its ttl)\n", tok.Key, relErr)
	}
	if lost != nil {
		return exitLost, end
	}
	return exitStatus(waitErr, g), end
}
