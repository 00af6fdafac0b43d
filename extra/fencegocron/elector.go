package fencegocron

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/fencelock/fencelock/election"
	"github.com/fencelock/fencelock/internal/sentinel"
)

// ErrNotLeader is returned by IsLeader when this process does not lead.
var ErrNotLeader = errors.New("fencegocron: not the leader")

// Elector is a gocron.Elector on an election: Run campaigns in the
// background, and IsLeader says whether this process's term lasts.
type Elector struct {
	e *election.Election

	mu   sync.Mutex
	term *election.Term // the current or last term; nil before the first
}

var _ gocron.Elector = (*Elector)(nil)

// NewElector returns an Elector on e. Call Run to campaign.
func NewElector(e *election.Election) (*Elector, error) {
	if e == nil {
		return nil, sentinel.Wrapf(ErrInvalid, "nil election")
	}
	return &Elector{e: e}, nil
}

// campaignRetry is the pause after a campaign that failed with an error
// other than its context's (Redis unreachable, say).
const campaignRetry = time.Second

// Run campaigns until ctx ends, and again each time a term ends. When ctx
// ends it resigns the current term (bounded by a few seconds) and returns
// ctx's error.
func (el *Elector) Run(ctx context.Context) error {
	if el == nil {
		return sentinel.Wrapf(ErrInvalid, "nil elector")
	}
	if ctx == nil {
		return sentinel.Wrapf(ErrInvalid, "nil context")
	}
	for {
		term, err := el.e.Campaign(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(campaignRetry):
			}
			continue
		}
		el.mu.Lock()
		el.term = term
		el.mu.Unlock()
		select {
		case <-term.Done():
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_ = term.Resign(rctx) // a failure leaves the lock to its ttl
			cancel()
			return ctx.Err()
		}
	}
}

// IsLeader returns nil while this process's term lasts by its clock, and
// an error wrapping ErrNotLeader otherwise.
func (el *Elector) IsLeader(context.Context) error {
	if el.Term().Leads() {
		return nil
	}
	return ErrNotLeader
}

// Term returns the current term (or the last one, ended), nil before the
// first. A job sends its Token with its writes.
func (el *Elector) Term() *election.Term {
	if el == nil {
		return nil
	}
	el.mu.Lock()
	defer el.mu.Unlock()
	return el.term
}
