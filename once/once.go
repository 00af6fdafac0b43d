package once

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/isnil"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/verifier/redisverifier"
)

var (
	//go:embed claim.lua
	claimBody string
	//go:embed complete.lua
	completeBody string
)

// StatePrefix is the prefix of a job's state key: the hash
// "fencelock:once:{NAME}" (claim, claimed_at, done_until, done_by). Its
// high-water is redisverifier's, "fencelock:hw:once:{NAME}"; both share the
// lock's hash tag, hence one Redis Cluster slot.
const StatePrefix = "fencelock:once:"

// MaxPeriod is the longest period: ten years of 365 days. The state key
// lives twice the period plus an hour, which must fit a time.Duration.
const MaxPeriod = 10 * 365 * 24 * time.Hour

// Option configures a [Tracker].
type Option func(*config) error

type config struct {
	tolerance time.Duration
}

// WithTolerance sets how much sooner than a whole period after the last
// completed run's claim the next run may claim the job: it absorbs the
// spread of the hosts' triggers of one tick (clock offsets, scheduler
// jitter, the wait for the lock). It must be below each period it is used
// with. The default, 0, means a tenth of the period.
func WithTolerance(d time.Duration) Option {
	return func(c *config) error {
		if d < 0 {
			return invalid("WithTolerance(%v): negative", d)
		}
		c.tolerance = d
		return nil
	}
}

// Tracker records, in Redis, when each job last completed a run, under the
// fencing token of the lease the run held. It is safe for concurrent use.
type Tracker struct {
	claim, complete *redisverifier.Script
	tolerance       time.Duration
}

// New returns a Tracker that keeps its state on rdb (use the Redis that
// hands out the leases, or with Redlock any Redis you trust to keep it; see
// the package documentation). It does no I/O. A nil rdb or a nil or invalid
// option returns an error wrapping [ErrInvalid].
func New(rdb redis.Scripter, opts ...Option) (*Tracker, error) {
	if isnil.Nil(rdb) {
		return nil, invalid("New: nil redis client")
	}
	var c config
	for i, o := range opts {
		if o == nil {
			return nil, invalid("New: option %d is nil", i)
		}
		if err := o(&c); err != nil {
			return nil, err
		}
	}
	v, err := redisverifier.New(rdb)
	if err != nil {
		return nil, fmt.Errorf("once: %w", err)
	}
	t := &Tracker{tolerance: c.tolerance}
	if t.claim, err = v.NewScript(claimBody); err != nil {
		return nil, err
	}
	if t.complete, err = v.NewScript(completeBody); err != nil {
		return nil, err
	}
	return t, nil
}

// Claim is a run of a job that may go ahead: its token claimed the period.
type Claim struct {
	t      *Tracker
	tok    fence.Token
	period time.Duration
	window time.Duration
	// At is the server's clock when the claim was made: the period of a
	// run that completes starts here.
	At time.Time
}

// Claim claims the job tok.Key for a run with tok, the token of a lease on
// that lock the caller holds, unless a run completed in this period (see
// the package documentation for the rule). It returns the claim, or a
// *[DoneError] (errors.Is(err, [ErrDone])) when the job is done until a
// later instant, or a *verifier.StaleError when a holder with a newer token
// claimed the job already (the caller's lease is gone). Once claimed, run
// the job and call [Claim.Complete].
func (t *Tracker) Claim(ctx context.Context, tok fence.Token, period time.Duration) (*Claim, error) {
	window, err := t.check(ctx, period)
	if err != nil {
		return nil, err
	}
	if err := tok.Validate(); err != nil {
		return nil, invalid("Claim: token %v: %w (a lease made without a counter, such as Redlock's without quorum fencing, has no token to claim with)", tok, err)
	}
	reply, err := t.claim.Run(ctx, resource(tok.Key), tok, []string{stateKey(tok.Key)}, keyTTL(period).Milliseconds())
	if err != nil {
		return nil, fmt.Errorf("once: claim %q: %w", tok.Key, err)
	}
	r, err := ints(reply)
	if err != nil {
		return nil, fmt.Errorf("once: claim %q: %w", tok.Key, err)
	}
	switch {
	case len(r) == 3 && r[0] == 0:
		return nil, &DoneError{Name: tok.Key, Until: time.UnixMicro(r[1]), Now: time.UnixMicro(r[2])}
	case len(r) == 2 && r[0] == 1:
		return &Claim{t: t, tok: tok, period: period, window: window, At: time.UnixMicro(r[1])}, nil
	}
	return nil, fmt.Errorf("once: claim %q: unexpected reply %v", tok.Key, reply)
}

// Complete records that the claimed run completed: the job is done until
// the claim's instant plus the period less the tolerance, by the server's
// clock. It is checked against the token in the same script: when a holder
// with a newer token has claimed the job since (this run's lease was lost
// and the job passed on), nothing is recorded and Complete returns a
// *verifier.StaleError. Completing again is harmless.
func (c *Claim) Complete(ctx context.Context) error {
	if c == nil || c.t == nil {
		return invalid("Complete on a Claim not made by Tracker.Claim")
	}
	if ctx == nil {
		return invalid("Complete: nil context")
	}
	name := c.tok.Key
	reply, err := c.t.complete.Run(ctx, resource(name), c.tok, []string{stateKey(name)},
		c.window.Microseconds(), keyTTL(c.period).Milliseconds())
	if err != nil {
		return fmt.Errorf("once: complete %q: %w", name, err)
	}
	r, err := ints(reply)
	switch {
	case err != nil:
		return fmt.Errorf("once: complete %q: %w", name, err)
	case len(r) == 1 && r[0] == 0:
		return fmt.Errorf("%w: %q, token %v", ErrNotClaimed, name, c.tok)
	case len(r) == 2 && r[0] == 1:
		return nil
	}
	return fmt.Errorf("once: complete %q: unexpected reply %v", name, reply)
}

// Do runs job at most once per period under l, a lease the caller holds on
// the job's lock: it claims the period with l's token, runs job with a
// context that ends with ctx or when l is lost, and, if job returns nil,
// completes the claim. It returns a *[DoneError] when the job was done this
// period (job did not run), job's error, or Complete's (the job ran but is
// not recorded: another holder will run it again). The caller releases l.
func (t *Tracker) Do(ctx context.Context, l *lease.Lease, period time.Duration, job func(ctx context.Context) error) error {
	switch {
	case isnil.Nil(l):
		return invalid("Do: nil lease")
	case job == nil:
		return invalid("Do: nil job")
	}
	c, err := t.Claim(ctx, l.Token(), period)
	if err != nil {
		return err
	}
	jobCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The job stops when the lease ends (its cause is the lease's Err).
	stop := context.AfterFunc(l.Context(), func() { cancel(context.Cause(l.Context())) })
	defer stop()
	if err := job(jobCtx); err != nil {
		return err
	}
	return c.Complete(ctx)
}

// check validates t, ctx and period, and returns the period's window.
func (t *Tracker) check(ctx context.Context, period time.Duration) (time.Duration, error) {
	switch {
	case t == nil || t.claim == nil:
		return 0, invalid("Tracker not made by New")
	case ctx == nil:
		return 0, invalid("nil context")
	case period <= 0:
		return 0, invalid("period %v is not positive", period)
	case period < time.Millisecond:
		return 0, invalid("period %v is below a millisecond", period)
	case period > MaxPeriod:
		return 0, invalid("period %v is above MaxPeriod, %v", period, MaxPeriod)
	}
	tol := t.tolerance
	if tol == 0 {
		tol = period / 10
	}
	if tol >= period {
		return 0, invalid("tolerance %v is not below the period %v", tol, period)
	}
	return period - tol, nil
}

// resource is the job's resource name for the high-water: the lock's hash
// tag keeps it in the slot of the state key.
func resource(name string) string { return "once:{" + name + "}" }

// stateKey is the job's state hash.
func stateKey(name string) string { return StatePrefix + "{" + name + "}" }

// keyTTL is how long the state key outlives its last write: long enough
// for a run's job (twice the period, and an hour), short enough that
// abandoned jobs leave nothing behind.
func keyTTL(period time.Duration) time.Duration { return 2*period + time.Hour }

// ints reads a script's array of integers.
func ints(reply any) ([]int64, error) {
	arr, ok := reply.([]any)
	if !ok {
		return nil, fmt.Errorf("unexpected reply %T", reply)
	}
	out := make([]int64, len(arr))
	for i, v := range arr {
		switch n := v.(type) {
		case int64:
			out[i] = n
		case string:
			x, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				return nil, err
			}
			out[i] = x
		default:
			return nil, errors.New("unexpected reply element")
		}
	}
	return out, nil
}
