package election

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/lease"
)

// Term is one leadership: from the Campaign that won it until it is lost or
// resigned. Its Token is the term, to send with every write a leader makes:
// a verifier refuses the writes of a deposed leader, whose token is older.
// Methods are safe for concurrent use; on a nil *Term, Token is zero, Done
// is closed and the others return an error wrapping ErrInvalid.
type Term struct {
	e *Election
	l *lease.Lease

	mu    sync.Mutex // serialises Resign
	tried bool       // the lease was released once (it ends for good then)
	done  bool       // a Resign got a final answer: nothing left to remove
}

// Token returns the term: a fencing token above every earlier term's.
func (t *Term) Token() fence.Token {
	if t == nil {
		return fence.Token{}
	}
	return t.l.Token()
}

// Context returns a context that ends when the term ends: lost (at the
// lease's local deadline, which falls before the lock expires in Redis by
// the drift allowance, so before another term can start) or resigned.
// context.Cause is Err. Lead under it.
func (t *Term) Context() context.Context {
	if t == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(invalid("nil term"))
		return ctx
	}
	return t.l.Context()
}

// Done closes when the term ends.
func (t *Term) Done() <-chan struct{} {
	if t == nil {
		return (*lease.Lease)(nil).Done()
	}
	return t.l.Done()
}

// Err is nil while the term lasts; afterwards an error wrapping
// lease.ErrLost or lease.ErrReleased.
func (t *Term) Err() error {
	if t == nil {
		return invalid("nil term")
	}
	return t.l.Err()
}

// Deadline returns the term's local deadline (it moves with each refresh):
// past it the term is over, even in a process that has not noticed yet.
func (t *Term) Deadline() time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.l.Deadline()
}

// Leads reports whether the term still lasts by the local clock. It is a
// hint for what to do next, not a guard: the term's token is the guard.
func (t *Term) Leads() bool { return t != nil && t.l.Held() }

// Resign ends the term: its context ends at once, and the lock is deleted
// if this term still holds it, so that another campaign can win without
// waiting for the ttl. It never removes a newer leader (the delete compares
// the holder id, fresh for each term). Resign is idempotent: after it
// returned nil, it returns nil without I/O. After an error (Redis did not
// answer), the term has ended but its lock may still be in Redis: call
// Resign again to retry the delete, or leave it to expire within the ttl.
// A term already lost resigns with nil.
func (t *Term) Resign(ctx context.Context) error {
	if t == nil {
		return invalid("nil term")
	}
	if ctx == nil {
		return invalid("nil context")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.done {
		return nil
	}
	var err error
	if !t.tried {
		t.tried = true
		err = t.l.Release(ctx)
	} else {
		err = t.retry(ctx)
	}
	if err != nil && !errors.Is(err, lease.ErrLost) {
		return fmt.Errorf("election: resign %q: %w", t.e.name, err)
	}
	t.done = true // released, or someone else's lock already: final
	return nil
}

// retry deletes the lock again after a Release whose answer was an error:
// the lease ends for good at its first Release, so the holder id is used to
// get a lease on the same lock back, if it still has it, and release that.
func (t *Term) retry(ctx context.Context) error {
	tok := t.l.Token()
	info, err := t.e.c.Inspect(ctx, t.e.name)
	if err != nil {
		return err
	}
	if info.Holder != tok.Holder {
		return nil // expired, or a newer leader: nothing of ours to remove
	}
	// Between Inspect and here the lock may have expired; then this takes
	// the free lock under the old holder id, for the instant until the
	// Release below (a term no one leads under).
	l, err := t.e.c.TryAcquire(ctx, t.e.name, t.e.ttl, lease.WithHolder(tok.Holder))
	if errors.Is(err, lease.ErrNotAcquired) {
		return nil // a newer leader
	}
	if err != nil {
		return err
	}
	return l.Release(ctx)
}
