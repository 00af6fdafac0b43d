package fencegocron

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/once"
)

// MinPeriod is the shortest period between a job's runs that a Locker
// takes: its lease lasts at most half of it, and must leave validity after
// the lease's drift allowance and room for its keep-alive.
const MinPeriod = 100 * time.Millisecond

// MaxTTL is the longest lease a run holds by default (see WithTTL).
const MaxTTL = 30 * time.Second

// cleanupBound bounds a run's Complete and Release, which go on after
// gocron's context for the job has ended (a shutdown).
const cleanupBound = 5 * time.Second

// Locker runs each scheduled run of a job on one host, and hands the run a
// fencing token in its context. Make jobs with [Locker.NewJob].
//
// A run takes the job's lease (one lock per job, named like the job, kept
// alive while the run lasts) and claims the period on a once.Tracker: a
// run that completed less than a period ago, by the Redis server's clock,
// makes the claim fail and gocron skips the run (a host whose clock is
// behind does not run a tick again). The period is the job's own: the
// shortest gap between its next runs, as gocron schedules them. The hosts'
// triggers of one run must spread (clock offsets, scheduler delays) less
// than the tracker's tolerance, a tenth of the period by default
// (once.WithTolerance).
//
// Tokens of all runs of a job come from one counter, so a verifier at the
// storage refuses the writes of a run whose lease passed to another host.
type Locker struct {
	c    *lease.Client
	jobs *once.Tracker
	ttl  time.Duration
}

// Option configures a Locker.
type Option func(*Locker) error

// WithTTL sets the ttl of the lease a run holds, kept alive at a third of
// it while the run lasts: a host that dies mid-run keeps the job from
// running for up to ttl. The default, 0, means half the job's period, at
// most MaxTTL.
func WithTTL(ttl time.Duration) Option {
	return func(l *Locker) error {
		if ttl < 0 || (ttl > 0 && ttl < MinPeriod/2) {
			return fmt.Errorf("%w: ttl %v, want 0 or at least %v", ErrInvalid, ttl, MinPeriod/2)
		}
		l.ttl = ttl
		return nil
	}
}

// NewLocker returns a Locker whose runs hold leases of c and record their
// completion on jobs (once.New on the same Redis). It does no I/O.
func NewLocker(c *lease.Client, jobs *once.Tracker, opts ...Option) (*Locker, error) {
	if c == nil || jobs == nil {
		return nil, fmt.Errorf("%w: nil lease client or once tracker", ErrInvalid)
	}
	l := &Locker{c: c, jobs: jobs}
	for _, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: nil option", ErrInvalid)
		}
		if err := o(l); err != nil {
			return nil, err
		}
	}
	return l, nil
}

// NewJob adds a job to s that runs fn at most once per scheduled run
// across hosts, like s.NewJob(def, gocron.NewTask(fn), opts...). The job
// needs a name (gocron.WithName), the same on every host: it names its
// lock. fn's context carries the run's token (fence.FromContext) and ends
// when the run's lease is lost or the job stops. A run whose fn returns nil
// is recorded as done for the period; one whose fn fails is not, and a
// host whose trigger of the same run comes later may run it again.
func (l *Locker) NewJob(s gocron.Scheduler, def gocron.JobDefinition, fn func(ctx context.Context) error,
	opts ...gocron.JobOption) (gocron.Job, error) {
	if l == nil || fn == nil {
		return nil, fmt.Errorf("%w: nil locker or job function", ErrInvalid)
	}
	jl := &jobLock{l: l, ready: make(chan struct{})}
	j, err := newJob(s, def, func(ctx context.Context) error { return jl.run(ctx, fn) }, true,
		append(opts[:len(opts):len(opts)], gocron.WithDistributedJobLocker(jl)))
	if err != nil {
		return nil, err
	}
	if err := fence.ValidateKey(j.Name()); err != nil {
		_ = s.RemoveJob(j.ID())
		return nil, fmt.Errorf("%w: job name: %w", ErrInvalid, err)
	}
	if err := periodic(j); err != nil {
		_ = s.RemoveJob(j.ID())
		return nil, err
	}
	jl.job = j
	close(jl.ready)
	return j, nil
}

// jobLock is one job's gocron.Locker: Lock takes the lease and claims the
// period, and hands the run to the job's function through pending (gocron
// calls Lock, then the function, then Unlock, on one goroutine, and the
// job's lease lets one run at a time get that far).
type jobLock struct {
	l     *Locker
	job   gocron.Job
	ready chan struct{} // closed once job is set

	mu      sync.Mutex
	pending *run // locked, not yet taken by the function
}

var _ gocron.Locker = (*jobLock)(nil)

// run is one run of a job that holds its lease and claim.
type run struct {
	lease *lease.Lease
	claim *once.Claim
}

// Lock takes the job's lease and claims its period; an error makes gocron
// skip the run.
func (jl *jobLock) Lock(ctx context.Context, name string) (gocron.Lock, error) {
	select {
	case <-jl.ready:
	case <-ctx.Done():
		return nil, fmt.Errorf("fencegocron: %q: %w", name, ctx.Err())
	}
	period, err := periodOf(jl.job)
	if err != nil {
		return nil, err
	}
	ttl := jl.l.ttl
	if ttl == 0 {
		ttl = min(period/2, MaxTTL)
	}
	// gocron's ctx lasts as long as the job: a lock step that outlasts the
	// lease it takes is of no use.
	lctx, cancel := context.WithTimeout(ctx, ttl)
	defer cancel()
	ls, err := jl.l.c.TryAcquire(lctx, name, ttl, lease.WithKeepAlive(0))
	if err != nil {
		return nil, fmt.Errorf("fencegocron: %q: %w", name, err)
	}
	claim, err := jl.l.jobs.Claim(lctx, ls.Token(), period)
	if err != nil {
		err = fmt.Errorf("fencegocron: %q: %w", name, err)
		rctx, cancel := cleanupContext(ctx)
		defer cancel()
		if rerr := ls.Release(rctx); rerr != nil {
			err = fmt.Errorf("%w (its release failed too: %v)", err, rerr)
		}
		return nil, err
	}
	r := &run{lease: ls, claim: claim}
	jl.mu.Lock()
	jl.pending = r
	jl.mu.Unlock()
	return unlock{jl, r}, nil
}

// run runs fn for the run Lock handed over, and completes its claim when
// fn succeeded.
func (jl *jobLock) run(jobCtx context.Context, fn func(context.Context) error) error {
	jl.mu.Lock()
	r := jl.pending
	jl.pending = nil
	jl.mu.Unlock()
	if r == nil {
		return ErrNoLock
	}
	if err := runUnder(jobCtx, r.lease.Context(), r.lease.Token(), fn); err != nil {
		return err
	}
	ctx, cancel := cleanupContext(jobCtx)
	defer cancel()
	if err := r.claim.Complete(ctx); err != nil {
		return fmt.Errorf("fencegocron: %q ran but is not recorded as done: %w", jl.job.Name(), err)
	}
	return nil
}

// unlock is a run's gocron.Lock.
type unlock struct {
	jl *jobLock
	r  *run
}

// Unlock releases the run's lease, after the job's function returned (or
// was not called: gocron's before-run hook failed).
func (u unlock) Unlock(ctx context.Context) error {
	u.jl.mu.Lock()
	if u.jl.pending == u.r {
		u.jl.pending = nil
	}
	u.jl.mu.Unlock()
	rctx, cancel := cleanupContext(ctx)
	defer cancel()
	return u.r.lease.Release(rctx)
}

// cleanupContext is ctx without its cancellation, bounded by cleanupBound.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), cleanupBound)
}

// periodic refuses, before the scheduler has started, the schedules that
// cannot have a period: a one-time job, a duration below MinPeriod. The
// others are checked at each run (periodOf).
func periodic(j gocron.Job) error {
	switch sc := j.Schedule().(type) {
	case gocron.OneTimeJobSchedule:
		return fmt.Errorf("%w: %q: a one-time job has no period to run it once per", ErrInvalid, j.Name())
	case gocron.DurationJobSchedule:
		if sc.Duration < MinPeriod {
			return fmt.Errorf("%w: %q: runs %v apart, want at least %v", ErrInvalid, j.Name(), sc.Duration, MinPeriod)
		}
	case gocron.DurationRandomJobSchedule:
		if sc.Min < MinPeriod {
			return fmt.Errorf("%w: %q: runs at least %v apart, want at least %v", ErrInvalid, j.Name(), sc.Min, MinPeriod)
		}
	}
	return nil
}

// nextRuns is how many of a job's next runs periodOf looks at.
const nextRuns = 6

// periodOf returns the job's period: the shortest gap between its next
// runs as gocron schedules them, leaving out the first (a run started
// at once, or by RunNow, may sit off the schedule); for a random duration
// job, its shortest.
func periodOf(j gocron.Job) (time.Duration, error) {
	if sc, ok := j.Schedule().(gocron.DurationRandomJobSchedule); ok {
		return sc.Min, nil // its next gaps are drawn at random, none shorter
	}
	runs, err := j.NextRuns(nextRuns)
	if err != nil {
		return 0, fmt.Errorf("fencegocron: %q: the schedule: %w", j.Name(), err)
	}
	if len(runs) < 3 {
		return 0, fmt.Errorf("%w: %q: the schedule repeats fewer than 3 times: no period to run it once per", ErrInvalid, j.Name())
	}
	period := time.Duration(0)
	for i := 2; i < len(runs); i++ {
		if gap := runs[i].Sub(runs[i-1]); period == 0 || gap < period {
			period = gap
		}
	}
	if period < MinPeriod {
		return 0, fmt.Errorf("%w: %q: runs %v apart, want at least %v", ErrInvalid, j.Name(), period, MinPeriod)
	}
	return period, nil
}
