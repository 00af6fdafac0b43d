package lifetime

// The serialised op (refresh, release, reissue take turns) and how a
// lifetime ends: by its deadline, its timer, a failed call or End.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencelock/fencelock/internal/emit"
	"github.com/fencelock/fencelock/observe"
)

// lockOp takes the op, or returns when ctx ends first. A free op is taken
// whatever ctx says.
func (l *Life) lockOp(ctx context.Context) error {
	for {
		l.mu.Lock()
		if !l.opBusy {
			l.opBusy = true
			l.mu.Unlock()
			return nil
		}
		if l.opFree == nil {
			l.opFree = make(chan struct{})
		}
		free := l.opFree
		l.mu.Unlock()
		select {
		case <-free:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// unlockOp ends the op and wakes those that wait for it.
func (l *Life) unlockOp() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.opBusy = false
	if l.opFree != nil {
		close(l.opFree)
		l.opFree = nil
	}
}

// live returns Err, or ends the lease when its deadline has passed but the
// timer has not fired yet: a lease that Held called lost stays lost.
func (l *Life) live() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.errLocked(); err != nil {
		return err
	}
	if !time.Now().Before(l.deadline) {
		l.endLocked(fmt.Errorf("%w: %q: local deadline passed", l.cfg.Lost, l.tok.Key))
		return l.end
	}
	return nil
}

// bound returns ctx, also cancelled when the lease ends: a refresh or
// reissue in flight is moot once the lease was released or lost.
func (l *Life) bound(ctx context.Context) (context.Context, func()) {
	cctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(l.Context(), cancel)
	return cctx, func() { stop(); cancel() }
}

// fail ends the lease when err says the lock is gone, and returns err; or
// the lease's Err when it ended while the call was in flight (a release
// cancelled it).
func (l *Life) fail(err error) error {
	if errors.Is(err, l.cfg.Lost) {
		l.End(err)
		return l.Err()
	}
	if ended := l.Err(); ended != nil {
		return ended
	}
	return err
}

// End ends the lease with reason, once; later calls change nothing. A
// lease whose deadline has passed has ended already, lost, whether or not
// a timer said so.
func (l *Life) End(reason error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.passedLocked() { // passed: lost, whether or not a timer said so yet
		l.endLocked(reason)
	}
}

// endLocked ends the lease with reason unless it has ended, and reports a
// loss (any reason but Released) from a goroutine of its own, since hooks
// must not run under l.mu.
func (l *Life) endLocked(reason error) {
	if l.end != nil {
		return
	}
	l.end = reason
	if l.timer != nil {
		l.timer.Stop()
	}
	l.stopConfirm()
	if l.cancel != nil {
		l.cancel(reason)
	}
	if reason != l.cfg.Released && l.cfg.Hooks != nil && l.cfg.Hooks.Lost != nil {
		e := observe.Lost{Kind: l.cfg.Kind, Token: l.tok, Held: time.Since(l.started), Err: reason}
		go emit.Lost(l.cfg.Hooks, e)
	}
}

func (l *Life) errLocked() error { return l.end }

// expire runs on the timer: the lease is lost once its deadline passed.
func (l *Life) expire() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.end != nil {
		return
	}
	if d := time.Until(l.deadline); d > 0 { // a refresh moved the deadline
		l.timer.Reset(d)
		return
	}
	l.endLocked(fmt.Errorf("%w: %q: local deadline passed", l.cfg.Lost, l.tok.Key))
}
