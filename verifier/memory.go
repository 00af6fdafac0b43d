package verifier

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/emit"
	"github.com/fencelock/fencelock/observe"
)

// Memory is a verifier for resources that live inside one process: a map, a
// file the process alone writes, an in-memory cache. It keeps the high-water
// of each resource in memory, so it forgets everything when the process
// exits; use it where the protected data forgets too.
//
// A resource is bound to the lock of the first token accepted for it;
// tokens of other locks are refused with a *ForeignError (see [Memory.Move]).
//
// The zero Memory is ready to use. A Memory must not be copied after first
// use. Its methods are safe for concurrent use. It keeps one small entry per
// resource it has accepted a token for and never drops them.
//
// Like every verifier it trusts its callers (see "A token is not a
// credential" in the package documentation); [Memory.Reset] sets a
// poisoned high-water back.
type Memory struct {
	// Hooks, when set before first use, receive every token the verifier
	// accepts or refuses (verifier "memory"; see package observe).
	Hooks *observe.Hooks
	// ClockBound, when set before first use, refuses tokens whose Seq is
	// more than ClockBound above this process's clock (see
	// [CheckClockBound]; the lease side refuses to lift a counter more than
	// 24h above its server's clock). The default is 0: no bound.
	ClockBound time.Duration

	locks keyLock // serializes Claim and Do per resource

	mu   sync.Mutex
	high map[string]fence.Token
}

var (
	_ Verifier = (*Memory)(nil)
	_ Mover    = (*Memory)(nil)
	_ Resetter = (*Memory)(nil)
)

// NewMemory returns an empty in-memory verifier.
func NewMemory() *Memory { return new(Memory) }

// Claim accepts tok for resource and raises the high-water to it, or
// returns a *StaleError or *ForeignError. See [Verifier] for the errors; a nil m or ctx
// returns an error wrapping [ErrInvalid].
func (m *Memory) Claim(ctx context.Context, resource string, tok fence.Token) error {
	return m.do(ctx, resource, tok, nil)
}

// Do runs write only if tok is accepted for resource, as one step: no other
// Claim or Do for the same resource runs between the check and the end of
// write. The high-water is raised to tok only when write returns nil, so a
// failed write leaves it as it was; Do then returns write's error. A
// refused token returns a *StaleError (or *ForeignError) and write is not
// called.
//
// A nil m, ctx or write returns an error wrapping [ErrInvalid] (to claim
// without a write, use [Memory.Claim]).
//
// Do waits for other calls on the same resource until ctx ends. write must
// not call Claim or Do for the same resource on m: it would wait for itself.
func (m *Memory) Do(ctx context.Context, resource string, tok fence.Token, write func() error) error {
	if write == nil {
		return fmt.Errorf("%w: Memory.Do: nil write function (use Claim to claim without a write)", ErrInvalid)
	}
	return m.do(ctx, resource, tok, write)
}

// do is Do with an optional write.
func (m *Memory) do(ctx context.Context, resource string, tok fence.Token, write func() error) (err error) {
	switch {
	case m == nil:
		return fmt.Errorf("%w: nil *Memory", ErrInvalid)
	case ctx == nil:
		return fmt.Errorf("%w: nil context", ErrInvalid)
	}
	if m.Hooks != nil {
		defer func(start time.Time) {
			if p := recover(); p != nil { // write panicked: nothing was accepted
				emit.Verified(m.Hooks, ctx, observe.VerifierMemory, resource, tok, start, fmt.Errorf("verifier: panic: %v", p))
				panic(p)
			}
			emit.Verified(m.Hooks, ctx, observe.VerifierMemory, resource, tok, start, err)
		}(time.Now())
	}
	if err := ValidateClaim(resource, tok); err != nil {
		return err
	}
	if err := CheckClockBound(resource, tok, m.ClockBound, time.Now()); err != nil {
		return err
	}
	unlock, err := m.locks.lock(ctx, resource)
	if err != nil {
		return err
	}
	defer unlock()

	m.mu.Lock()
	high, seen := m.high[resource]
	m.mu.Unlock()
	if seen && high.Key != tok.Key {
		return &ForeignError{Resource: resource, Token: tok, Lock: high.Key}
	}
	if seen && !tok.Supersedes(high) {
		return &StaleError{Resource: resource, Token: tok, Highest: high.Seq, HighestHolder: high.Holder}
	}
	if write != nil {
		if err := write(); err != nil {
			return err
		}
	}
	m.mu.Lock()
	if m.high == nil {
		m.high = make(map[string]fence.Token)
	}
	m.high[resource] = tok
	m.mu.Unlock()
	return nil
}

// Move binds resource to lock to and forgets its high-water, if it is
// bound to from or to no lock yet; see [Mover]. It waits for a Claim or Do
// in progress on resource until ctx ends.
func (m *Memory) Move(ctx context.Context, resource, from, to string) error {
	switch {
	case m == nil:
		return fmt.Errorf("%w: nil *Memory", ErrInvalid)
	case ctx == nil:
		return fmt.Errorf("%w: nil context", ErrInvalid)
	}
	if err := ValidateMove(resource, from, to); err != nil {
		return err
	}
	unlock, err := m.locks.lock(ctx, resource)
	if err != nil {
		return err
	}
	defer unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if high, seen := m.high[resource]; seen && high.Key != from {
		return &ForeignError{Resource: resource, Token: fence.Token{Key: from}, Lock: high.Key}
	}
	if m.high == nil {
		m.high = make(map[string]fence.Token)
	}
	m.high[resource] = fence.Token{Key: to}
	return nil
}

// Reset sets resource's high-water to to and binds it to lock to.Key,
// whatever they were; see [Resetter] for which token to give. It waits for
// a Claim or Do in progress on resource until ctx ends.
func (m *Memory) Reset(ctx context.Context, resource string, to fence.Token) error {
	switch {
	case m == nil:
		return fmt.Errorf("%w: nil *Memory", ErrInvalid)
	case ctx == nil:
		return fmt.Errorf("%w: nil context", ErrInvalid)
	}
	if err := ValidateReset(resource, to); err != nil {
		return err
	}
	unlock, err := m.locks.lock(ctx, resource)
	if err != nil {
		return err
	}
	defer unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.high == nil {
		m.high = make(map[string]fence.Token)
	}
	m.high[resource] = to
	return nil
}

// Lock returns the lock resource is bound to, or "" if none (or m is nil).
func (m *Memory) Lock(resource string) string {
	if m == nil {
		return ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.high[resource].Key
}

// Highest returns the high-water of resource: the highest Seq accepted and
// the holder that presented it, or 0 and "" if no token was accepted yet
// (or m is nil).
func (m *Memory) Highest(resource string) (seq uint64, holder string) {
	if m == nil {
		return 0, ""
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.high[resource]
	return t.Seq, t.Holder
}
