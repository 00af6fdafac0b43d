package lockset

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/isnil"
	"github.com/fencelock/fencelock/internal/leasectx"
	"github.com/fencelock/fencelock/internal/sentinel"
	"github.com/fencelock/fencelock/lease"
)

// ErrInvalid is returned, before any I/O, for bad input: a nil client or
// context, no names, an invalid lock name, a method called on a nil Set.
// It wraps lease.ErrInvalid.
var ErrInvalid error = sentinel.New("lockset: invalid argument", lease.ErrInvalid)

func invalid(format string, args ...any) error { return sentinel.Wrapf(ErrInvalid, format, args...) }

// Set is several leases held as one: taken in one order, all or none, with
// one context that ends when any of them ends. It is safe for concurrent
// use.
type Set struct {
	names  []string
	leases []*lease.Lease // in names' order
	ctx    context.Context
	cancel context.CancelCauseFunc
	mu     sync.Mutex
	stops  []func() bool
}

// Acquire takes the locks names as one: in their canonical order (sorted,
// duplicates dropped), so that two callers that want overlapping sets never
// wait for each other in a cycle; each waits, like [lease.Client.Acquire],
// until it is free or ctx ends. opts apply to every lease (with
// lease.WithKeepAlive, the keep-alive of each).
//
// All or nothing: when a lock cannot be taken (ctx ended, an error), or a
// lock taken earlier is lost while a later one is awaited, Acquire
// releases what it took and returns an error naming the lock, which wraps
// the lease's (errors.Is(err, lease.ErrNotAcquired), and ctx.Err() when it
// ended). A lock lost meanwhile gives one sentence, such as `lockset: "a"
// expired while waiting for "b"`, wrapping lease.ErrNotAcquired and
// lease.ErrLost. The releases go on in the background when ctx has ended
// (see lease.Lease.Release). Give a ttl that outlasts the wait for the
// later locks, or a keep-alive.
func Acquire(ctx context.Context, c *lease.Client, names []string, ttl time.Duration, opts ...lease.AcquireOption) (*Set, error) {
	return take(ctx, c, names, ttl, opts, (*lease.Client).Acquire)
}

// TryAcquire is [Acquire] without waiting: it tries each lock once, in the
// canonical order, and when one is held by another holder releases those
// it took and returns that lock's error (errors.Is(err,
// lease.ErrNotAcquired); a *lease.HeldError says for how long).
func TryAcquire(ctx context.Context, c *lease.Client, names []string, ttl time.Duration, opts ...lease.AcquireOption) (*Set, error) {
	return take(ctx, c, names, ttl, opts, (*lease.Client).TryAcquire)
}

type acquireFunc func(*lease.Client, context.Context, string, time.Duration, ...lease.AcquireOption) (*lease.Lease, error)

func take(ctx context.Context, c *lease.Client, names []string, ttl time.Duration, opts []lease.AcquireOption, acquire acquireFunc) (*Set, error) {
	switch {
	case ctx == nil:
		return nil, invalid("nil context")
	case isnil.Nil(c):
		return nil, invalid("nil *lease.Client")
	case len(names) == 0:
		return nil, invalid("no lock names")
	}
	sorted := slices.Compact(slices.Sorted(slices.Values(names)))
	for _, n := range sorted {
		if err := fence.ValidateKey(n); err != nil {
			return nil, invalid("lock name %q: %v", n, err)
		}
	}
	s := &Set{names: sorted}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	s.ctx = leasectx.With(s.ctx, s.deadline) // the verifiers bound a transaction by it
	// The waits end when ctx does, or when a lock taken already is lost.
	wait, stopWait := context.WithCancelCause(ctx)
	defer stopWait(nil)
	stopLink := context.AfterFunc(s.ctx, func() { stopWait(context.Cause(s.ctx)) })
	defer stopLink()
	for _, n := range sorted {
		l, err := acquire(c, wait, n, ttl, opts...)
		if err == nil {
			s.add(n, l)
			continue
		}
		if lost := s.lostWhile(n, ctx, err); lost != nil {
			err = lost
		} else {
			err = fmt.Errorf("lockset: %q: %w", n, err)
		}
		_ = s.Release(ctx) // the locks taken; in the background if ctx ended
		return nil, err
	}
	if err := s.lostWhile(sorted[len(sorted)-1], ctx, nil); err != nil { // lost right after the last acquire
		_ = s.Release(ctx)
		return nil, err
	}
	return s, nil
}

// lostWhile returns, when a lease of s ended while Acquire waited for lock
// name, one sentence that says which and why, wrapping lease.ErrNotAcquired
// and that lease's error (lease.ErrLost); nil when none ended. The wait's
// own error, err, is kept only when the caller's ctx ended too: else its
// "context canceled" is the set's, not the caller's.
func (s *Set) lostWhile(name string, ctx context.Context, err error) error {
	for _, l := range s.Leases() {
		lerr := l.Err()
		if lerr == nil {
			continue
		}
		msg := fmt.Sprintf("lockset: %q was lost while waiting for %q (%v)", l.Name(), name, lerr)
		if errors.Is(lerr, lease.ErrLost) && !time.Now().Before(l.Deadline()) {
			msg = fmt.Sprintf("lockset: %q expired while waiting for %q: give a ttl that outlasts the wait, or a keep-alive", l.Name(), name)
		}
		errs := []error{lease.ErrNotAcquired, lerr}
		if ctx.Err() != nil && err != nil {
			errs = append(errs, err)
		}
		return &lostError{msg: msg, errs: errs}
	}
	return nil
}

// lostError is a set's acquire that failed because a lease it held ended
// while it waited for the next: its own message, and the errors it wraps.
type lostError struct {
	msg  string
	errs []error
}

func (e *lostError) Error() string   { return e.msg }
func (e *lostError) Unwrap() []error { return e.errs }

// add records l, taken for name, and ends the set's context when l ends.
func (s *Set) add(name string, l *lease.Lease) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leases = append(s.leases, l)
	s.stops = append(s.stops, context.AfterFunc(l.Context(), func() {
		s.cancel(fmt.Errorf("lockset: %q: %w", name, context.Cause(l.Context())))
	}))
}

// deadline is the earliest local deadline of the set's leases.
func (s *Set) deadline() time.Time {
	var d time.Time
	for _, l := range s.Leases() {
		if ld := l.Deadline(); d.IsZero() || ld.Before(d) {
			d = ld
		}
	}
	return d
}

// Names returns the set's lock names in canonical order.
func (s *Set) Names() []string {
	if s == nil {
		return nil
	}
	return slices.Clone(s.names)
}

// Leases returns the set's leases, in the order of [Set.Names].
func (s *Set) Leases() []*lease.Lease {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.leases)
}

// Tokens returns each lock's token by its name: what a verifier's
// multi-resource guard takes when the resources are named like their locks
// (pgverifier's and sqlverifier's WithTxAll).
func (s *Set) Tokens() map[string]fence.Token {
	m := make(map[string]fence.Token, len(s.Leases()))
	for _, l := range s.Leases() {
		m[l.Name()] = l.Token()
	}
	return m
}

// Token returns the token of lock name, and whether the set holds it.
func (s *Set) Token(name string) (fence.Token, bool) {
	tok, ok := s.Tokens()[name]
	return tok, ok
}

// Context returns a context that is cancelled when any of the set's leases
// ends (lost, or released); its cause is that lease's Err, prefixed with
// the lock's name. Pass it to the work done under the locks: given to
// pgverifier's or sqlverifier's WithTxAll, it also has the database end
// the transaction when the earliest lease's deadline passes.
func (s *Set) Context() context.Context {
	if s == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(invalid("nil *Set"))
		return ctx
	}
	return s.ctx
}

// Done is closed when any of the set's leases ends.
func (s *Set) Done() <-chan struct{} { return s.Context().Done() }

// Err returns nil while every lease of the set is held, else why the first
// one ended (wrapping lease.ErrLost or lease.ErrReleased).
func (s *Set) Err() error {
	ctx := s.Context()
	if ctx.Err() == nil {
		return nil
	}
	return context.Cause(ctx)
}

// Held reports whether every lease of the set is held, by its local
// deadline.
func (s *Set) Held() bool {
	for _, l := range s.Leases() {
		if !l.Held() {
			return false
		}
	}
	return s != nil && s.Err() == nil
}

// Release releases every lease of the set and returns their errors,
// joined, each naming its lock (a lease lost meanwhile returns
// lease.ErrLost). The set's context ends first, with lease.ErrReleased.
// When ctx ends first, the releases go on in the background; releasing
// again returns nil.
func (s *Set) Release(ctx context.Context) error {
	if s == nil {
		return invalid("Release on a nil *Set")
	}
	if ctx == nil {
		return invalid("Release: nil context")
	}
	s.mu.Lock()
	for _, stop := range s.stops {
		stop()
	}
	s.stops = nil
	s.mu.Unlock()
	s.cancel(fmt.Errorf("lockset: %w", lease.ErrReleased))
	leases := s.Leases()
	errs := make([]error, len(leases))
	var wg sync.WaitGroup
	for i, l := range leases {
		wg.Go(func() {
			if err := l.Release(ctx); err != nil {
				errs[i] = fmt.Errorf("lockset: %q: %w", l.Name(), err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
