//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/fencelock/fencelock/lease"
)

// --permits N: run and inspect on the semaphore NAME of N permits
// (lease.Semaphore) rather than on the lock NAME.

// permits is the --permits flag: N, from 1 to lease.MaxPermits; 0 when it
// was not given (a lock). A value out of range fails the flag's parse, so
// it is a usage error before any I/O.
type permits int

func (p *permits) String() string { return strconv.Itoa(int(*p)) }

func (p *permits) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("not a number")
	}
	if n < 1 || n > lease.MaxPermits {
		return fmt.Errorf("want 1 to %d", lease.MaxPermits)
	}
	*p = permits(n)
	return nil
}

// checkPermitNames reports why the permits' names of semaphore name
// (NAME#i, the keys of their tokens) cannot be used: the last is the
// longest.
func checkPermitNames(name string, n permits) error {
	if n == 0 {
		return nil
	}
	return checkName("semaphore name", lease.PermitName(name, int(n)-1))
}

// oneRedis returns b as one Redis deployment, for what needs one (flag,
// such as --once-per), or nil and the status of the usage error it
// reported for Redlock.
func (g *globals) oneRedis(b backend, flag string) (*single, int) {
	s, ok := b.(*single)
	if !ok {
		return nil, g.usageError("%s: %s needs one Redis deployment, not Redlock's several --redis servers", g.cmd, flag)
	}
	return s, exitOK
}

// acquirePermit takes a permit of semaphore name of n permits with
// keep-alive, once or, to wait, until ctx ends.
func acquirePermit(ctx context.Context, c *lease.Client, name string, n permits, ttl time.Duration, wait bool) (*lease.Lease, error) {
	sem, err := c.Semaphore(name, int(n))
	switch {
	case err != nil:
		return nil, err
	case wait:
		return sem.Acquire(ctx, ttl, lease.WithKeepAlive(0))
	}
	return sem.TryAcquire(ctx, ttl, lease.WithKeepAlive(0))
}

// semView is what inspect --permits prints.
type semView struct {
	Name string `json:"name"`
	Mode string `json:"mode"` // "semaphore"
	// Permits is N as given; ServerPermits is N as the last call on the
	// server wrote it (0 when none did), which a release goes by.
	Permits       int          `json:"permits"`
	ServerPermits int          `json:"server_permits"`
	Holders       []permitView `json:"holders"`
	Queue         int          `json:"queue"`                   // waiters with a place (at most 1,000)
	Waiters       []string     `json:"queue_waiters,omitempty"` // the first (at most 100), in order
}

// permitView is one held permit: its slot's holder and counter.
type permitView struct {
	Slot int `json:"slot"`
	holding
}

// queueShown is how many of the queue's first waiters inspect prints (its
// JSON has them all).
const queueShown = 5

func (v semView) print(w io.Writer) {
	fmt.Fprintf(w, "semaphore %s\npermits   %d, %d held", v.Name, v.Permits, len(v.Holders))
	if v.ServerPermits != 0 && v.ServerPermits != v.Permits {
		fmt.Fprintf(w, " (the last call on the server had %d: slots from %d up are not read)", v.ServerPermits, v.Permits)
	}
	fmt.Fprintln(w)
	for _, h := range v.Holders {
		fmt.Fprintf(w, "%-9s %s\n", "slot "+strconv.Itoa(h.Slot), h.fields())
	}
	fmt.Fprintf(w, "queue     %d", v.Queue)
	if len(v.Waiters) > 0 {
		first := v.Waiters[:min(len(v.Waiters), queueShown)]
		quoted := make([]string, len(first))
		for i, id := range first {
			quoted[i] = strconv.Quote(id)
		}
		fmt.Fprintf(w, " (first %s", strings.Join(quoted, ", "))
		if v.Queue > len(first) {
			fmt.Fprintf(w, ", %d more", v.Queue-len(first))
		}
		fmt.Fprint(w, ")")
	}
	fmt.Fprintln(w)
}

// inspectSemaphore is inspect --permits n: it prints semaphore name's
// holders and queue, and returns the exit status.
func (g *globals) inspectSemaphore(ctx context.Context, b backend, name string, n permits, asJSON bool) int {
	s, code := g.oneRedis(b, "--permits")
	if s == nil {
		return code
	}
	v, err := s.inspectSemaphore(ctx, name, n)
	if err = g.timedOut(err); err != nil {
		return g.fail(exitFailure, "inspect %q: %v", name, err)
	}
	if asJSON {
		printJSON(g.stdout, v)
	} else {
		v.print(g.stdout)
	}
	return exitOK
}

// inspectSemaphore reads semaphore name of n permits.
func (s *single) inspectSemaphore(ctx context.Context, name string, n permits) (semView, error) {
	sem, err := s.c.Semaphore(name, int(n))
	if err != nil {
		return semView{}, err
	}
	info, err := sem.Inspect(ctx)
	if err != nil {
		return semView{}, err
	}
	v := semView{Name: name, Mode: "semaphore", Permits: int(n), ServerPermits: info.Permits,
		Holders: make([]permitView, len(info.Holders)), Queue: info.Queued, Waiters: info.Queue}
	for i, h := range info.Holders {
		v.Holders[i] = permitView{Slot: h.Slot, holding: holdingOf(h.Info)}
	}
	if len(v.Holders) == 0 {
		return v, nil
	}
	limit, err := counterLimit(ctx, s.rdb)
	if err != nil {
		return semView{}, err
	}
	for i := range v.Holders {
		v.Holders[i].Poisoned = v.Holders[i].Counter > limit
	}
	return v, nil
}
