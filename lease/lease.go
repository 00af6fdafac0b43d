package lease

import (
	"context"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/lifetime"
)

// Lease is one acquisition of a lock, of either kind. Its Token is the
// fencing token to send with every write to the protected resource.
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
	life lifetime.Life
}

// nilLife is the lifetime of a nil *Lease.
var nilLife = lifetime.Nil(lifetime.Config{Lost: ErrLost, Released: ErrReleased, Invalid: ErrInvalid})

func (l *Lease) lf() *lifetime.Life {
	if l == nil {
		return nilLife
	}
	return &l.life
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
// key may outlive the local deadline). A node that did not answer is
// retried in the background, until the ttl or until it refuses
// connections; Client.Close waits for that.
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
