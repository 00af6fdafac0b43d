package fencegocron

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/fencelock/fencelock/election"
)

// Elector is a gocron.Elector on an election: Run campaigns in the
// background, and IsLeader says whether this process's term lasts. Jobs
// made with [Elector.NewJob] get the term's token in their context.
type Elector struct {
	e *election.Election

	mu   sync.Mutex
	term *election.Term // the current or last term; nil before the first
}

var _ gocron.Elector = (*Elector)(nil)

// NewElector returns an Elector on e. Call Run to campaign.
func NewElector(e *election.Election) (*Elector, error) {
	if e == nil {
		return nil, fmt.Errorf("%w: nil election", ErrInvalid)
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
		return fmt.Errorf("%w: nil elector", ErrInvalid)
	}
	if ctx == nil {
		return fmt.Errorf("%w: nil context", ErrInvalid)
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
// first. Its Token is what a job made with NewJob finds in its context.
func (el *Elector) Term() *election.Term {
	if el == nil {
		return nil
	}
	el.mu.Lock()
	defer el.mu.Unlock()
	return el.term
}

// NewJob adds a job to s that runs fn while this process leads, like
// s.NewJob(def, gocron.NewTask(fn), opts...) on a scheduler made with
// gocron.WithDistributedElector(el). fn's context carries the term's token
// (fence.FromContext), to send with the job's writes, and ends when the
// term ends or the job stops. A run that finds the term over returns
// ErrNotLeader without calling fn.
func (el *Elector) NewJob(s gocron.Scheduler, def gocron.JobDefinition, fn func(ctx context.Context) error,
	opts ...gocron.JobOption) (gocron.Job, error) {
	if el == nil || fn == nil {
		return nil, fmt.Errorf("%w: nil elector or job function", ErrInvalid)
	}
	return newJob(s, def, func(ctx context.Context) error {
		term := el.Term()
		if !term.Leads() {
			return ErrNotLeader
		}
		return runUnder(ctx, term.Context(), term.Token(), fn)
	}, false, opts)
}
