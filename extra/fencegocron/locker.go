package fencegocron

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-co-op/gocron/v2"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/sentinel"
	"github.com/fencelock/fencelock/lease"
)

// ErrInvalid is returned, before any I/O, for bad input: a nil client or
// election, a period under MinPeriod, an empty key. It matches lease.ErrInvalid.
var ErrInvalid error = sentinel.New("fencegocron: invalid argument", lease.ErrInvalid)

// Locker is a gocron.Locker for jobs that run once every period on each
// host (a cron schedule or a duration job of that period): each run takes
// the lock of its job and its tick, the time of the run rounded to the
// nearest multiple of period, and keeps it until three quarters of a
// period after the tick, whatever the job's length. A host whose clock is
// off (or whose run starts late) by less than period/4 finds the tick
// taken; hosts round to the same tick while they are off by less than
// period/2.
//
// Ticks are multiples of period counted from the zero time (for a period
// that divides a day, from midnight UTC), and the runs must fall near them:
// a cron job every minute at second 0 or a daily job at 00:00 UTC with
// period 24h does, a daily job at 12:00 UTC does not (half a period off,
// hosts would round to two ticks); nor does a duration job, whose runs
// start when its scheduler does, unless the schedulers start together.
//
// The locks are efficiency locks: a run is skipped when its tick's lock is
// held. A run may outlast its tick's lock, and then overlap the next tick's
// run on another host, unless the job is in gocron's singleton mode. Each
// tick's keys expire within the lease client's counter ttl (1h by default).
type Locker struct {
	c      *lease.Client
	period time.Duration
	now    func() time.Time // the host's clock; tests shift it
}

var _ gocron.Locker = (*Locker)(nil)

// MinPeriod is the shortest period NewLocker takes: a tick's lock lasts
// at least a quarter of it, which must leave validity after the lease's
// drift allowance (2ms plus 1% of the ttl by default).
const MinPeriod = 100 * time.Millisecond

// NewLocker returns a Locker for jobs run once per period.
func NewLocker(c *lease.Client, period time.Duration) (*Locker, error) {
	if c == nil {
		return nil, sentinel.Wrapf(ErrInvalid, "nil lease client")
	}
	if period < MinPeriod {
		return nil, sentinel.Wrapf(ErrInvalid, "period %v is below %v", period, MinPeriod)
	}
	return &Locker{c: c, period: period, now: time.Now}, nil
}

// Lock takes the lock of job key's current tick, without waiting: an error
// wrapping lease.ErrNotAcquired when another host has it, and gocron skips
// the run.
func (l *Locker) Lock(ctx context.Context, key string) (gocron.Lock, error) {
	if l == nil || l.c == nil {
		return nil, sentinel.Wrapf(ErrInvalid, "nil locker")
	}
	if ctx == nil {
		return nil, sentinel.Wrapf(ErrInvalid, "nil context")
	}
	if key == "" {
		return nil, sentinel.Wrapf(ErrInvalid, "empty job key")
	}
	now := l.now()
	tick := now.Round(l.period)
	name := key + "@" + strconv.FormatInt(tick.UnixMilli(), 10)
	if err := fence.ValidateKey(name); err != nil {
		return nil, sentinel.Wrapf(ErrInvalid, "job key: %w", err)
	}
	ttl := tick.Add(l.period * 3 / 4).Sub(now)
	ls, err := l.c.TryAcquire(ctx, name, ttl)
	if err != nil {
		if errors.Is(err, lease.ErrInvalid) {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		return nil, fmt.Errorf("fencegocron: lock %q: %w", name, err)
	}
	return &Lock{l: ls, tick: tick}, nil
}

// Lock is one tick's lock of one job.
type Lock struct {
	l    *lease.Lease
	tick time.Time
}

// Tick returns the tick the lock is for.
func (k *Lock) Tick() time.Time { return k.tick }

// Token returns the lock's token (the lock is per tick, so tokens of
// different ticks come from different counters).
func (k *Lock) Token() fence.Token { return k.l.Token() }

// Unlock lets the lock expire at the end of its tick's window instead of
// releasing it now: a run shorter than the hosts' clock skew must not free
// the tick for a host whose clock is behind. It does no I/O and returns nil.
func (k *Lock) Unlock(context.Context) error { return nil }
