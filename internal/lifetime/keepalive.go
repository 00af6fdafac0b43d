package lifetime

import (
	"context"
	"time"
)

// keepAlive refreshes every period until the lease ends. Each refresh is
// bounded by the period and by the deadline, so a refresh stuck on a dead
// connection leaves time for another try before the lease is lost.
func (l *Life) keepAlive(ttl, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	done := l.Done()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		bound := time.Now().Add(every)
		if d := l.Deadline(); d.Before(bound) {
			bound = d
		}
		rctx, cancel := context.WithDeadline(l.Context(), bound)
		_ = l.refresh(rctx, ttl, true) // a loss ends the lease; other failures retry next tick
		cancel()
	}
}
