package lifetime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fencelock/fencelock/internal/sentinel"
)

// DriftFloor is added to every drift allowance, as in the Redlock
// description: it covers the millisecond resolution of Redis expiries.
const DriftFloor = 2 * time.Millisecond

// MinKeepAlive is the shortest keep-alive period accepted: below it the
// refreshes would load Redis for no gain (a 1ns period made 17k refresh
// scripts a second).
const MinKeepAlive = 10 * time.Millisecond

// Drift is the clock-drift allowance for ttl: ttl×factor + DriftFloor.
func Drift(ttl time.Duration, factor float64) time.Duration {
	return time.Duration(float64(ttl)*factor) + DriftFloor
}

// Validity is what a ttl leaves after the drift allowance.
func Validity(ttl time.Duration, factor float64) time.Duration {
	return ttl - Drift(ttl, factor)
}

// CheckTTL is the one ttl rule: a ttl must be at least a millisecond (the
// resolution of Redis expiries) and leave positive validity after the drift
// allowance, or the lease would be dead on arrival.
func CheckTTL(ttl time.Duration, factor float64) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("ttl %v is below 1ms", ttl)
	}
	if v := Validity(ttl, factor); v <= 0 {
		return fmt.Errorf("ttl %v leaves no validity after the drift allowance %v", ttl, Drift(ttl, factor))
	}
	return nil
}

// CheckDriftFactor is the one drift-factor rule: f in [0, 0.5).
func CheckDriftFactor(f float64) error {
	if !(f >= 0 && f < 0.5) {
		return fmt.Errorf("drift factor %v is outside [0, 0.5)", f)
	}
	return nil
}

// KeepAliveEvery returns the keep-alive period for ttl: every, or when every
// is 0 the default ttl/3 (at least MinKeepAlive). The period must be at
// least MinKeepAlive and shorter than the validity of the ttl, or the lease
// would expire between two refreshes.
func KeepAliveEvery(ttl, every time.Duration, factor float64) (time.Duration, error) {
	if every == 0 {
		every = max(ttl/3, MinKeepAlive)
	}
	if every < MinKeepAlive {
		return 0, fmt.Errorf("keep-alive interval %v is below the floor %v", every, MinKeepAlive)
	}
	if v := Validity(ttl, factor); every >= v {
		return 0, fmt.Errorf("keep-alive interval %v must be shorter than the validity %v of the ttl %v", every, v, ttl)
	}
	return every, nil
}

// Ended returns ctx.Err() once ctx has ended, and
// context.DeadlineExceeded as soon as ctx's deadline has passed even if ctx
// has not noticed yet: go-redis sets a socket's deadline to the context's,
// and the socket can time out a moment before the context's own timer, so
// a call can fail "i/o timeout" while ctx.Err() is still nil. The caller
// must still learn that its context ended.
func Ended(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// WithCtx returns err joined with Ended(ctx) when ctx has ended and err
// does not say so already; err otherwise.
func WithCtx(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if ce := Ended(ctx); ce != nil && !errors.Is(err, ce) {
		return sentinel.Join(err, ce)
	}
	return err
}

// Cleanup bounds: each attempt of a cleanup gets its own timeout, and
// failed attempts are retried with backoff (cleanupMinBackoff doubling up to
// cleanupMaxBackoff) until the overall bound passes.
const (
	cleanupMinBackoff = 20 * time.Millisecond
	cleanupMaxBackoff = 500 * time.Millisecond
	// CleanupMin and CleanupMax clamp the overall bound of a cleanup that
	// undoes an acquire: the lock's ttl, within these limits.
	CleanupMin = time.Second
	CleanupMax = 30 * time.Second
)

// CleanupBound is how long the cleanup after a failed acquire of ttl keeps
// trying: a paused server may run the lost acquire only when it resumes, so
// a single attempt made while it is paused would leave the lock for its
// whole ttl. Past the bound the key expires on its own within ttl.
func CleanupBound(ttl time.Duration) time.Duration {
	return min(max(ttl, CleanupMin), CleanupMax)
}

// Detach runs cleanup, a best-effort call after a failed or abandoned
// request, under contexts of its own: each attempt bounded by attempt,
// failed attempts retried with backoff until bound has passed. It waits for
// the first attempt only while ctx lives, and returns that attempt's error;
// when ctx ends first, Detach returns nil at once. Either way the retries go
// on in the background. So a cleanup never makes a call outlive its context,
// and it is not dropped either.
func Detach(ctx context.Context, attempt, bound time.Duration, cleanup func(context.Context) error) error {
	return detach(ctx, attempt, bound, cleanup, func() {})
}

func detach(ctx context.Context, attempt, bound time.Duration, cleanup func(context.Context) error, finish func()) error {
	first := make(chan error, 1)
	go func() {
		defer finish()
		end := time.Now().Add(bound)
		bg := context.WithoutCancel(ctx)
		backoff := cleanupMinBackoff
		for n := 0; ; n++ {
			actx, cancel := context.WithTimeout(bg, min(attempt, time.Until(end)))
			err := cleanup(actx)
			cancel()
			if n == 0 {
				first <- err
			}
			if err == nil || time.Until(end) < backoff {
				return
			}
			time.Sleep(backoff)
			backoff = min(2*backoff, cleanupMaxBackoff)
		}
	}()
	select {
	case err := <-first:
		return err
	case <-ctx.Done():
		return nil
	}
}

// Pending counts a client's background cleanups, so that the client's
// Close can wait for them before its process exits. The zero value is
// ready to use.
type Pending struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0; nil while nobody waits
}

// Detach is the package's Detach, counted until its retries end.
func (p *Pending) Detach(ctx context.Context, attempt, bound time.Duration, cleanup func(context.Context) error) error {
	return detach(ctx, attempt, bound, cleanup, p.hold())
}

// Go runs f in a goroutine of its own, counted until f returns; on a nil p
// it is not counted.
func (p *Pending) Go(f func()) {
	done := p.hold()
	go func() {
		defer done()
		f()
	}()
}

// hold counts one more cleanup and returns the func that ends it; on a nil
// p it counts nothing.
func (p *Pending) hold() func() {
	if p == nil {
		return func() {}
	}
	p.mu.Lock()
	p.n++
	p.mu.Unlock()
	return p.done
}

func (p *Pending) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n--; p.n == 0 && p.idle != nil {
		close(p.idle)
		p.idle = nil
	}
}

// Wait waits until no cleanup is running, or until ctx ends (then it
// returns ctx.Err()).
func (p *Pending) Wait(ctx context.Context) error {
	p.mu.Lock()
	if p.n == 0 {
		p.mu.Unlock()
		return nil
	}
	if p.idle == nil {
		p.idle = make(chan struct{})
	}
	idle := p.idle
	p.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Count returns how many cleanups are running.
func (p *Pending) Count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}
