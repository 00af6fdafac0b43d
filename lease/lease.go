package lease

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/script"
)

// Lease is one acquisition of a lock. Its Token is the fencing token to
// send with every write to the protected resource.
//
// The lease keeps a local deadline on the monotonic clock (start of the
// acquire plus ttl minus the drift allowance). Done closes when that
// deadline passes, when a refresh finds the lock gone, or on Release; after
// that the lease is over for good and Err says why. Methods are safe for
// concurrent use.
type Lease struct {
	c    *Client
	keys script.Keys
	tok  fence.Token

	mu       sync.Mutex
	deadline time.Time
	timer    *time.Timer
	done     chan struct{}
	err      error
	stopKA   context.CancelFunc // stops keep-alive; nil when off
}

func newLease(c *Client, req request, tok fence.Token, start time.Time) *Lease {
	l := &Lease{c: c, keys: req.keys, tok: tok, done: make(chan struct{})}
	l.deadline = start.Add(req.ttl - c.drift(req.ttl))
	// Under the lock: a deadline already past fires expire at once, and
	// expire must find the timer set.
	l.mu.Lock()
	l.timer = time.AfterFunc(time.Until(l.deadline), l.expire)
	l.mu.Unlock()
	if req.opt.keepAlive {
		every := req.opt.interval
		if every == 0 {
			every = req.ttl / 3
		}
		ctx, cancel := context.WithCancel(context.Background())
		l.stopKA = cancel
		go l.keepAlive(ctx, req.ttl, every)
	}
	return l
}

// Token returns the fencing token of this acquisition (or of its last
// Reissue).
func (l *Lease) Token() fence.Token {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.tok
}

// Name returns the lock name.
func (l *Lease) Name() string { return l.tok.Key }

// Holder returns the holder id, to save for a re-acquire after a restart
// (see WithHolder).
func (l *Lease) Holder() string { return l.tok.Holder }

// Reissue gives this lease a new token, greater than both the lock's
// counter and floor, without letting go of the lock, and returns it. Use it
// when a verifier rejected the lease's token because the storage has seen a
// higher Seq (floor) than Redis remembers: the counter went backwards after
// a restart, failover or eviction. If the lease is no longer held, the
// lease ends and the error wraps ErrLost: then the rejection was deserved.
func (l *Lease) Reissue(ctx context.Context, floor uint64) (fence.Token, error) {
	if floor >= fence.MaxSeq {
		return fence.Token{}, fmt.Errorf("%w: floor %d leaves no room below 2^53-1", ErrInvalid, floor)
	}
	if err := l.Err(); err != nil {
		return fence.Token{}, err
	}
	seq, err := script.Reissue(ctx, l.c.rdb, l.keys, l.tok.Holder, floor)
	if err != nil {
		return fence.Token{}, fmt.Errorf("lease: reissue %q: %w", l.tok.Key, err)
	}
	if seq == 0 {
		l.end(fmt.Errorf("%w: %q is no longer held by %s", ErrLost, l.tok.Key, l.tok.Holder))
		return fence.Token{}, l.Err()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tok.Seq = seq
	return l.tok, nil
}

// Deadline returns the local deadline: past it, the lease must be taken as
// lost even if Redis has not expired the key yet.
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Done returns a channel that closes when the lease ends: its deadline
// passed, a refresh found the lock gone, or it was released.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err returns nil while the lease is held; afterwards an error that wraps
// ErrLost (deadline passed, lock gone) or ErrReleased.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Held reports whether the lease is still held by the local clock. A true
// answer is only a hint: the resource must check the token.
func (l *Lease) Held() bool {
	select {
	case <-l.done:
		return false
	default:
		return time.Now().Before(l.Deadline())
	}
}

// Refresh extends the lease to ttl from now if this holder still has the
// lock. When it does not, the lease ends and the error wraps ErrLost. An
// I/O error leaves the lease as it was (its deadline still runs). Refresh on
// an ended lease returns its Err without I/O.
func (l *Lease) Refresh(ctx context.Context, ttl time.Duration) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("%w: ttl %v is below 1ms", ErrInvalid, ttl)
	}
	if err := l.Err(); err != nil {
		return err
	}
	start := time.Now()
	ok, err := script.Refresh(ctx, l.c.rdb, l.keys, l.tok.Holder, ttl)
	if err != nil {
		return fmt.Errorf("lease: refresh %q: %w", l.tok.Key, err)
	}
	if !ok {
		l.end(fmt.Errorf("%w: %q is no longer held by %s", ErrLost, l.tok.Key, l.tok.Holder))
		return l.Err()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil { // the deadline passed while the refresh was in flight
		return l.err
	}
	l.deadline = start.Add(ttl - l.c.drift(ttl))
	l.timer.Reset(time.Until(l.deadline))
	return nil
}

// Release deletes the lock if this holder still has it, and wakes the
// waiters. It returns an error wrapping ErrLost when the lock had already
// expired or passed to another holder. Releasing twice returns nil. The
// lease ends whatever the outcome: after Release, stop using its token.
func (l *Lease) Release(ctx context.Context) error {
	if l.Err() == ErrReleased {
		return nil
	}
	ok, err := script.Release(ctx, l.c.rdb, l.keys, l.tok.Holder)
	l.end(ErrReleased)
	if err != nil {
		return fmt.Errorf("lease: release %q: %w", l.tok.Key, err)
	}
	if !ok {
		return fmt.Errorf("%w: %q was no longer held by %s at release", ErrLost, l.tok.Key, l.tok.Holder)
	}
	return nil
}

// expire runs when the local deadline passes.
func (l *Lease) expire() {
	l.mu.Lock()
	late := time.Now().Before(l.deadline) // a refresh moved the deadline
	l.mu.Unlock()
	if late {
		return
	}
	l.end(fmt.Errorf("%w: local deadline for %q passed", ErrLost, l.tok.Key))
}

// end closes Done with reason, once.
func (l *Lease) end(reason error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	l.err = reason
	l.timer.Stop()
	if l.stopKA != nil {
		l.stopKA()
	}
	close(l.done)
}

// keepAlive refreshes every period until the lease ends.
func (l *Lease) keepAlive(ctx context.Context, ttl, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// A slow refresh may take until the deadline; after that it is moot.
		rctx, cancel := context.WithDeadline(ctx, l.Deadline())
		_ = l.Refresh(rctx, ttl) // loss ends the lease; I/O errors retry next tick
		cancel()
	}
}
