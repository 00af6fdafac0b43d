// Package lifetime is the one lifetime every lease kind shares: the local
// deadline on the monotonic clock, its timer, Done/Err/Context, the
// keep-alive loop, serialised Refresh/Release/Reissue and the validation
// rule for ttls and keep-alive intervals. A backend (single Redis, Redlock)
// supplies only its Refresh, Release and Reissue calls.
package lifetime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/emit"
	"github.com/fencelock/fencelock/internal/leasectx"
	"github.com/fencelock/fencelock/observe"
)

// Backend is what a lease kind does on its servers.
type Backend interface {
	// Refresh extends the lock, held with tok (the lease's current token),
	// to ttl. An error wrapping the owner's Lost sentinel means the lock is
	// gone, or held with another token; the lease then ends with that
	// error. Any other error leaves the lease as it was.
	Refresh(ctx context.Context, tok fence.Token, ttl time.Duration) error
	// Release gives the lock up.
	Release(ctx context.Context) error
	// Reissue gives the holder a new Seq above both its counter(s) and
	// floor without letting go of the lock. An error wrapping Lost means
	// the lock is gone; the lease then ends with that error.
	Reissue(ctx context.Context, floor uint64) (uint64, error)
}

// Config is what the owning package decides.
type Config struct {
	// Lost and Released are the owner's sentinels: a backend error that
	// wraps Lost ends the lease; Released is a released lease's Err.
	Lost, Released error
	// Invalid wraps argument errors.
	Invalid error
	// DriftFactor is the share of the ttl allowed for clock drift.
	DriftFactor float64
	// KeepAlive is the keep-alive period; 0 means no keep-alive.
	KeepAlive time.Duration
	// TTL is the ttl the keep-alive refreshes with.
	TTL time.Duration
	// Hooks receive the lease's events (refresh, loss, release); Kind
	// names the lease kind in them. Nil Hooks report nothing.
	Hooks *observe.Hooks
	Kind  observe.Kind
	// Pending, if set, counts a release that goes on in the background
	// (its ctx ended first), so that the client's Close waits for it.
	Pending *Pending
}

// Life is one lease's lifetime. Its methods are safe for concurrent use.
type Life struct {
	b   Backend
	cfg Config

	started time.Time // the start of the acquire

	mu sync.Mutex
	// opBusy serialises Refresh, Release and Reissue (see lockOp); opFree
	// is made by a caller that waits for the op, and closed when it ends,
	// so that waiting for it cannot outlive the waiter's context either.
	opBusy   bool
	opFree   chan struct{}
	released bool
	tok      fence.Token
	deadline time.Time // monotonic
	// timer ends the lease at its deadline, from the first moment
	// something waits for that (see arm); until then the deadline is read
	// when asked, so a lease acquired and released never starts one.
	timer   *time.Timer
	claimed bool        // StartClaim's, until a refresh confirmed the lock
	confirm *time.Timer // StartClaim's refresh
	// end is why the lease ended; nil while it lasts.
	end error
	// ctx is cancelled with end as its cause; made by the first caller
	// that asks for it (see ctxLocked).
	ctx    context.Context
	cancel context.CancelCauseFunc
}

// Start begins the lifetime of a lease whose acquire started at start with
// ttl. It starts the keep-alive when cfg asks for one.
func Start(b Backend, tok fence.Token, start time.Time, ttl time.Duration, cfg Config) *Life {
	l := new(Life)
	l.Begin(b, tok, start, ttl, cfg)
	return l
}

// Begin is Start in l, a zero Life that its owner holds by value (one
// allocation fewer). l must not be copied afterwards.
func (l *Life) Begin(b Backend, tok fence.Token, start time.Time, ttl time.Duration, cfg Config) {
	l.b, l.cfg, l.tok, l.started = b, cfg, tok, start
	l.deadline = start.Add(ttl - Drift(ttl, cfg.DriftFactor))
	if cfg.KeepAlive > 0 || cfg.Hooks != nil && cfg.Hooks.Lost != nil {
		// The keep-alive waits for the end, and a loss is reported when
		// it happens.
		l.mu.Lock()
		l.armLocked()
		l.mu.Unlock()
	}
	if cfg.KeepAlive > 0 {
		go l.keepAlive(cfg.TTL, cfg.KeepAlive)
	}
}

// Nil is the lifetime behind a nil lease (a caller that deferred Release
// before checking the acquire's error): ended, with an error wrapping
// cfg.Invalid as its Err and as the error of every call, and no I/O.
func Nil(cfg Config) *Life {
	return &Life{cfg: cfg, released: true, end: fmt.Errorf("%w: nil lease (did its acquire fail?)", cfg.Invalid)}
}

// Token returns the current token.
func (l *Life) Token() fence.Token {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tok
}

// Deadline returns the local deadline.
func (l *Life) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Done closes when the lease ends.
func (l *Life) Done() <-chan struct{} { return l.Context().Done() }

// Context is cancelled when the lease ends; its cause is Err.
func (l *Life) Context() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armLocked()
	return l.ctxLocked()
}

// ctxLocked returns the lease's context, made now if nobody asked for it
// before (cancelled at once when the lease has ended). l.mu is held.
func (l *Life) ctxLocked() context.Context {
	if l.ctx == nil {
		l.ctx, l.cancel = context.WithCancelCause(context.Background())
		l.ctx = leasectx.With(l.ctx, l.Deadline) // the storage bounds a transaction by it
		if l.end != nil {
			l.cancel(l.end)
		}
	}
	return l.ctx
}

// Err is nil while the lease lasts, then why it ended.
func (l *Life) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.passedLocked() // a timer may fire late: the deadline is what counts
	return l.end
}

// armLocked starts the timer that ends the lease at its deadline, for a
// caller that waits for the end (Done, Context, a refresh in flight, the
// keep-alive, a claim, a Lost hook); a deadline already past ends it now.
// l.mu is held, so that expire, which takes it, finds the timer set.
func (l *Life) armLocked() {
	if l.timer != nil || l.passedLocked() {
		return
	}
	l.timer = time.AfterFunc(time.Until(l.deadline), l.expire)
}

// passedLocked ends the lease as lost when its deadline has passed, as
// the timer would, and reports whether the lease has ended. l.mu is held.
func (l *Life) passedLocked() bool {
	if l.end == nil && !time.Now().Before(l.deadline) {
		l.endLocked(fmt.Errorf("%w: %q: local deadline passed", l.cfg.Lost, l.tok.Key))
	}
	return l.end != nil
}

// Held reports whether the lease has not ended and its deadline is ahead.
func (l *Life) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.end == nil && time.Now().Before(l.deadline)
}

// Refresh validates ttl, asks the backend to extend the lock and moves the
// deadline to the start of the refresh + ttl − drift.
func (l *Life) Refresh(ctx context.Context, ttl time.Duration) error {
	return l.refresh(ctx, ttl, false)
}

// refresh is Refresh, reported as the keep-alive's when keepAlive is set.
func (l *Life) refresh(ctx context.Context, ttl time.Duration, keepAlive bool) (err error) {
	if ctx != nil && l.cfg.Hooks != nil {
		start := time.Now()
		defer func() {
			emit.Refreshed(l.cfg.Hooks, ctx, observe.Refreshed{Kind: l.cfg.Kind, Token: l.Token(), TTL: ttl,
				Took: time.Since(start), KeepAlive: keepAlive, Err: err})
		}()
	}
	if err := CheckTTL(ttl, l.cfg.DriftFactor); err != nil {
		return fmt.Errorf("%w: %w", l.cfg.Invalid, err)
	}
	if ctx == nil {
		return fmt.Errorf("%w: nil context", l.cfg.Invalid)
	}
	if err := l.Err(); err != nil { // ended: its Err, whatever ctx says
		return err
	}
	if err := l.lockOp(ctx); err != nil {
		return err
	}
	defer l.unlockOp()
	if err := l.live(); err != nil {
		return err
	}
	start := time.Now()
	cctx, stop := l.bound(ctx)
	err = l.b.Refresh(cctx, l.Token(), ttl)
	stop()
	if err != nil {
		return l.fail(WithCtx(ctx, err))
	}
	deadline := start.Add(ttl - Drift(ttl, l.cfg.DriftFactor))
	if took := time.Since(start); !time.Now().Before(deadline) {
		return fmt.Errorf("refresh %q took %v, which leaves no validity of the ttl %v; the deadline is unchanged",
			l.tok.Key, took.Round(time.Microsecond), ttl)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.errLocked(); err != nil { // the deadline passed while refreshing
		return err
	}
	if !time.Now().Before(l.deadline) { // it passed, and the timer is late: Held already said lost
		l.endLocked(fmt.Errorf("%w: %q: local deadline passed", l.cfg.Lost, l.tok.Key))
		return l.end
	}
	l.deadline = deadline
	l.claimed = false // the holder set the lock's ttl itself
	if l.timer != nil {
		l.timer.Reset(time.Until(deadline))
	}
	return nil
}

// Release ends the lease and asks the backend to give the lock up. The
// second and later calls return nil without I/O, whatever the first found.
// Ending the lease first cancels a refresh or reissue in flight (the
// keep-alive's, say), so the release waits for it only briefly; if ctx ends
// before it is done, the release goes on in the background.
func (l *Life) Release(ctx context.Context) error {
	if ctx == nil {
		return fmt.Errorf("%w: nil context", l.cfg.Invalid)
	}
	if l.b == nil { // Nil's
		return l.Err()
	}
	l.mu.Lock()
	again := l.released
	l.released = true
	l.mu.Unlock()
	if again {
		return nil
	}
	start := time.Now()
	l.End(l.cfg.Released)
	err := l.lockOp(ctx)
	if err == nil {
		// A free op is taken whatever ctx says: an ended ctx goes to the
		// background.
		if err = Ended(ctx); err != nil {
			l.unlockOp()
		}
	}
	if err != nil {
		l.cfg.Pending.Go(func() {
			_ = l.lockOp(context.Background())
			defer l.unlockOp()
			_ = Detach(context.WithoutCancel(ctx), CleanupMin, CleanupMin, func(ctx context.Context) error {
				if err := l.b.Release(ctx); !errors.Is(err, l.cfg.Lost) {
					return err
				}
				return nil // the lock is gone: a final answer, not to be retried
			})
		})
		l.reportRelease(ctx, start, err)
		return err
	}
	defer l.unlockOp()
	err = WithCtx(ctx, l.b.Release(ctx))
	l.reportRelease(ctx, start, err)
	return err
}

// reportRelease reports the release that began at start.
func (l *Life) reportRelease(ctx context.Context, start time.Time, err error) {
	if l.cfg.Hooks == nil || l.cfg.Hooks.Released == nil {
		return // no hook: spare the token's lock and the clock reads
	}
	emit.Released(l.cfg.Hooks, ctx, observe.Released{Kind: l.cfg.Kind, Token: l.Token(),
		Held: time.Since(l.started), Took: time.Since(start), Err: err})
}

// Reissue asks the backend for a new Seq above floor and makes it the
// token's.
func (l *Life) Reissue(ctx context.Context, floor uint64) (fence.Token, error) {
	if floor >= fence.MaxSeq {
		return fence.Token{}, fmt.Errorf("%w: floor %d leaves no room below 2^53-1", l.cfg.Invalid, floor)
	}
	if ctx == nil {
		return fence.Token{}, fmt.Errorf("%w: nil context", l.cfg.Invalid)
	}
	if err := l.Err(); err != nil { // ended: its Err, whatever ctx says
		return fence.Token{}, err
	}
	if err := l.lockOp(ctx); err != nil {
		return fence.Token{}, err
	}
	defer l.unlockOp()
	if err := l.live(); err != nil {
		return fence.Token{}, err
	}
	// Never below the token the lease has: a low floor must not give a
	// lower token after the counters were lost.
	floor = max(floor, l.Token().Seq)
	cctx, stop := l.bound(ctx)
	seq, err := l.b.Reissue(cctx, floor)
	stop()
	if err != nil {
		return fence.Token{}, l.fail(WithCtx(ctx, err))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.errLocked(); err != nil { // ended while reissuing
		return fence.Token{}, err
	}
	l.tok.Seq = seq
	return l.tok, nil
}
