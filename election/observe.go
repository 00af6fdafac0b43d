package election

import (
	"context"
	"time"

	"github.com/fencelock/fencelock/fence"
)

// Observe returns a channel that receives the leader's term each time a new
// term is seen, and closes when ctx ends. It reads the lock every poll
// interval (WithPoll; DefaultPoll), so a term is seen within one interval
// plus one round trip of its start if it lasts that long; a term shorter
// than that may be missed. Terms only grow on the channel: a term not above
// the last one sent (a stale read, or a counter that went back in Redis) is
// never sent, the same rule a verifier applies. The current leader, if any,
// is sent first. A term may be one no process led under: a Campaign whose
// context ended just as it won releases the lock at once. A failed read is retried at the next interval. A receiver
// that falls behind gets the newest term, not every one in between.
func (e *Election) Observe(ctx context.Context) (<-chan fence.Token, error) {
	if e == nil {
		return nil, invalid("nil election")
	}
	if ctx == nil {
		return nil, invalid("nil context")
	}
	ch := make(chan fence.Token, 1)
	go e.observe(ctx, ch)
	return ch, nil
}

func (e *Election) observe(ctx context.Context, ch chan fence.Token) {
	defer close(ch)
	tick := time.NewTicker(e.cfg.poll)
	defer tick.Stop()
	var last fence.Token
	for {
		if tok, err := e.Leader(ctx); err == nil && tok.Seq > last.Seq {
			last = tok
			select { // keep only the newest term for a slow receiver
			case <-ch:
			default:
			}
			ch <- tok
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
