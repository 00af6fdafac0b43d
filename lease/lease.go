package lease

import (
	"context"
	"fmt"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/lifetime"
	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/observe"
)

// Interface is what every lease satisfies: *Lease (one Redis) and
// *redlock.Lease (a quorum of Redis masters). Helpers that work with any
// lease kind, such as heal.Write, take it.
type Interface interface {
	// Token is the fencing token to send with every write.
	Token() fence.Token
	// Done closes when the lease ends: its local deadline passed, a
	// refresh found the lock gone, or it was released.
	Done() <-chan struct{}
	// Err is nil while the lease lasts, then why it ended: an error
	// wrapping ErrLost or ErrReleased.
	Err() error
	// Context is cancelled when the lease ends; context.Cause is Err.
	Context() context.Context
	// Held reports whether the lease is held by the local clock: a hint,
	// the resource must check the token.
	Held() bool
	// Deadline is the local deadline on the monotonic clock.
	Deadline() time.Time
	// Refresh extends the lease to ttl from now.
	Refresh(ctx context.Context, ttl time.Duration) error
	// Release gives the lock up; releasing twice returns nil.
	Release(ctx context.Context) error
	// Reissue gives the lease a token above floor without letting go.
	Reissue(ctx context.Context, floor uint64) (fence.Token, error)
}

var _ Interface = (*Lease)(nil)

// Lease is one acquisition of a lock. Its Token is the fencing token to
// send with every write to the protected resource.
//
// The lease keeps a local deadline on the monotonic clock (start of the
// acquire plus ttl minus the drift allowance). Done closes, and Context is
// cancelled, when that deadline passes, when a refresh finds the lock gone,
// or on Release; after that the lease is over for good and Err says why.
// Refresh, Release and Reissue are serialised. Methods are safe for
// concurrent use.
//
// Methods on a nil *Lease do no I/O: Release, Refresh, Reissue and Err
// return an error wrapping ErrInvalid, Held is false and Done is closed, so
// that a Release deferred before the acquire's error was checked is safe.
type Lease struct {
	life *lifetime.Life
}

// nilLife is the lifetime of a nil *Lease.
var nilLife = lifetime.Nil(lifetime.Config{Lost: ErrLost, Released: ErrReleased, Invalid: ErrInvalid})

func (l *Lease) lf() *lifetime.Life {
	if l == nil {
		return nilLife
	}
	return l.life
}

// newLease starts the lifetime of an acquisition that began at start.
func newLease(c *Client, req request, tok fence.Token, start time.Time) *Lease {
	return newClaimedLease(c, req, tok, start, req.ttl)
}

// newClaimedLease is newLease for a lock set for claim, which a fair
// handoff may leave below req.ttl until the lease confirms it
// (lifetime.StartClaim).
func newClaimedLease(c *Client, req request, tok fence.Token, start time.Time, claim time.Duration) *Lease {
	// One allocation for both: they live and die together.
	lb := &struct {
		l Lease
		b backend
	}{b: backend{c: c, keys: req.keys, tok: tok}}
	cfg := c.lifeConfig(req.ttl, req.opt.Interval)
	if claim < req.ttl {
		lb.l.life = lifetime.StartClaim(&lb.b, tok, start, claim, cfg)
	} else {
		lb.l.life = lifetime.Start(&lb.b, tok, start, req.ttl, cfg)
	}
	return &lb.l
}

// lifeConfig is the lifetime configuration of a lease of this client.
func (c *Client) lifeConfig(ttl, keepAlive time.Duration) lifetime.Config {
	return lifetime.Config{Lost: ErrLost, Released: ErrReleased, Invalid: ErrInvalid,
		DriftFactor: c.cfg.DriftFactor, TTL: ttl, KeepAlive: keepAlive,
		Hooks: c.cfg.Hooks, Kind: observe.KindLease, Pending: &c.pending}
}

// Token returns the fencing token of this acquisition (or of its last
// Reissue).
func (l *Lease) Token() fence.Token { return l.lf().Token() }

// Name returns the lock name.
func (l *Lease) Name() string { return l.lf().Token().Key }

// Holder returns the holder id, to save for a re-acquire after a restart
// (see WithHolder).
func (l *Lease) Holder() string { return l.lf().Token().Holder }

// Deadline returns the local deadline: past it, the lease must be taken as
// lost even if Redis has not expired the key yet.
func (l *Lease) Deadline() time.Time { return l.lf().Deadline() }

// Done returns a channel that closes when the lease ends: its deadline
// passed, a refresh found the lock gone, or it was released.
func (l *Lease) Done() <-chan struct{} { return l.lf().Done() }

// Context returns a context that is cancelled when the lease ends, whose
// context.Cause is Err. Run the work the lease protects under it (or a
// context merged with it) so that it stops when the lease is lost.
func (l *Lease) Context() context.Context { return l.lf().Context() }

// Err returns nil while the lease is held; afterwards an error that wraps
// ErrLost (deadline passed, lock gone) or ErrReleased.
func (l *Lease) Err() error { return l.lf().Err() }

// Held reports whether the lease is still held by the local clock. A true
// answer is only a hint: the resource must check the token.
func (l *Lease) Held() bool { return l.lf().Held() }

// Refresh extends the lease to ttl from now if this holder still has the
// lock: the new deadline is the start of the refresh + ttl − drift. When it
// does not, the lease ends and the error wraps ErrLost. An I/O error leaves
// the lease as it was (its deadline still runs). Refresh on an ended lease
// returns its Err without I/O. ttl must leave validity after the drift
// allowance, as at acquire.
func (l *Lease) Refresh(ctx context.Context, ttl time.Duration) error {
	return l.lf().Refresh(ctx, ttl)
}

// Release deletes the lock if this holder still has it, and wakes a waiter.
// It returns an error wrapping ErrLost when the lock had already expired or
// passed to another holder. The lease ends whatever the outcome: after
// Release, stop using its token. Releasing again returns nil without I/O,
// whatever the first call found; a lost lease is still released once (its
// key may outlive the local deadline).
func (l *Lease) Release(ctx context.Context) error { return l.lf().Release(ctx) }

// Reissue gives this lease a new token, greater than both the lock's
// counter and floor, without letting go of the lock, and returns it. Use it
// when a verifier rejected the lease's token because the storage has seen a
// higher Seq (floor) than Redis remembers: the counter went backwards after
// a restart, failover or eviction. If the lease is no longer held, the
// lease ends and the error wraps ErrLost: then the rejection was deserved
// (the counter is still lifted to floor, so the next holder gets a larger
// token).
func (l *Lease) Reissue(ctx context.Context, floor uint64) (fence.Token, error) {
	return l.lf().Reissue(ctx, floor)
}

// backend is the single-Redis side of a lease's lifetime.
type backend struct {
	c    *Client
	keys protocol.Keys
	tok  fence.Token // Key and Holder; Seq is the lifetime's
}

func (b *backend) Refresh(ctx context.Context, tok fence.Token, ttl time.Duration) error {
	ok, err := protocol.Refresh(ctx, b.c.rdb, b.keys, tok.Holder, tok.Seq, ttl)
	if err != nil {
		return fmt.Errorf("lease: refresh %q: %w", b.tok.Key, err)
	}
	if !ok {
		return fmt.Errorf("%w: %q is no longer held by %s with Seq %d", ErrLost, tok.Key, tok.Holder, tok.Seq)
	}
	return nil
}

func (b *backend) Release(ctx context.Context) error {
	ok, err := protocol.Unlock(ctx, b.c.rdb, b.keys, b.c.release(b.tok.Holder))
	if err != nil {
		return fmt.Errorf("lease: release %q: %w", b.tok.Key, err)
	}
	if !ok {
		return fmt.Errorf("%w: %q was no longer held by %s at release", ErrLost, b.tok.Key, b.tok.Holder)
	}
	return nil
}

func (b *backend) Reissue(ctx context.Context, floor uint64) (uint64, error) {
	seq, err := protocol.Reissue(ctx, b.c.rdb, b.keys, b.tok.Holder, floor, b.c.counter())
	if err != nil {
		return 0, fmt.Errorf("lease: reissue %q: %w", b.tok.Key, err)
	}
	if seq == 0 {
		return 0, fmt.Errorf("%w: %q is no longer held by %s", ErrLost, b.tok.Key, b.tok.Holder)
	}
	return seq, nil
}
