package lifetime

import (
	"context"
	"time"

	"github.com/fencelock/fencelock/fence"
)

// StartClaim is Start for a lock that is set for claim only, less than
// cfg.TTL, until its holder confirms it: a fair handoff (see
// protocol.ClaimTTL), which frees the lock after the claim when the waiter
// it went to has died. The deadline counts claim from start; when half of
// the claim's validity is left, a refresh to cfg.TTL, in the background
// and with the lease's token, confirms the lock and moves the deadline as
// Refresh does (an I/O error tries again while the claim lasts; a lock
// found gone ends the lease). A lease released or refreshed before then
// never sends it, so a short hold costs nothing more.
func StartClaim(b Backend, tok fence.Token, start time.Time, claim time.Duration, cfg Config) *Life {
	l := new(Life)
	l.BeginClaim(b, tok, start, claim, cfg)
	return l
}

// BeginClaim is StartClaim in l, as Begin is Start.
func (l *Life) BeginClaim(b Backend, tok fence.Token, start time.Time, claim time.Duration, cfg Config) {
	l.Begin(b, tok, start, claim, cfg)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.armLocked() // the claim's refresh waits for the end
	if l.end == nil {
		l.claimed = true
		l.confirm = time.AfterFunc(time.Until(l.deadline)-Validity(claim, cfg.DriftFactor)/2, l.confirmClaim)
	}
}

// confirmClaim is StartClaim's refresh.
func (l *Life) confirmClaim() {
	for {
		l.mu.Lock()
		d, claimed := l.deadline, l.claimed
		l.mu.Unlock()
		if !claimed || l.Err() != nil {
			return // refreshed already, or over
		}
		ctx, cancel := context.WithDeadline(l.Context(), d)
		err := l.refresh(ctx, l.cfg.TTL, true)
		cancel()
		if err == nil || l.Err() != nil {
			return
		}
		select { // an I/O error: again, while the claim lasts
		case <-l.Done():
			return
		case <-time.After(min(time.Until(d)/4, 100*time.Millisecond)):
		}
	}
}

// stopConfirm stops StartClaim's refresh before it fires; l.mu is held.
func (l *Life) stopConfirm() {
	if l.confirm != nil {
		l.confirm.Stop()
	}
}
