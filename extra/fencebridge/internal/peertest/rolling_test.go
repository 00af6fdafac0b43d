package peertest_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/extra/fencebridge"
	"github.com/fencelock/fencelock/extra/fencebridge/redislockbridge"
	"github.com/fencelock/fencelock/extra/fencebridge/redsyncbridge"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
)

// The kinds of process in a rolling switch.
const (
	kindOld    = "old"    // the old library alone, as before the switch
	kindBridge = "bridge" // the first deploy: fencebridge
	kindNew    = "new"    // the second deploy: fencelock alone
)

const (
	lockName = "reports/nightly"
	ttl      = time.Second
	work     = 3 * time.Millisecond // how long a holder works under the lock
)

// hold is one interval during which a worker held the lock and worked.
type hold struct {
	kind            string
	worker          int
	start, end      time.Time
	deadline        time.Time // the end of the lock's validity by the local clock
	concurrentEntry bool      // another worker was inside when this one entered
}

func (h hold) String() string {
	return fmt.Sprintf("%s#%d [%s, %s]", h.kind, h.worker, h.start.Format("15:04:05.000000"), h.end.Format("15:04:05.000000"))
}

// recorder collects the holds of every worker, and the errors no lock
// contention explains.
type recorder struct {
	inside atomic.Int32
	mu     sync.Mutex
	holds  []hold
	errs   []error
}

// held records one hold: the worker works for `work` under the lock.
func (r *recorder) held(kind string, worker int, deadline time.Time) {
	h := hold{kind: kind, worker: worker, deadline: deadline, start: time.Now()}
	h.concurrentEntry = r.inside.Add(1) > 1
	time.Sleep(work)
	r.inside.Add(-1)
	h.end = time.Now()
	r.mu.Lock()
	r.holds = append(r.holds, h)
	r.mu.Unlock()
}

// waitHold waits until worker of kind (any worker of kind if worker < 0)
// begins a hold after since, and returns when it began; after 10s it fails
// the test (no process of kind gets the lock in a mixed fleet) and returns
// since.
func (r *recorder) waitHold(t *testing.T, kind string, worker int, since time.Time) time.Time {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		r.mu.Lock()
		for _, h := range r.holds {
			if h.kind == kind && (worker < 0 || h.worker == worker) && h.start.After(since) {
				r.mu.Unlock()
				return h.start
			}
		}
		r.mu.Unlock()
	}
	t.Errorf("%s#%d held the lock not once in 10s after %v", kind, worker, since.Format("15:04:05.000000"))
	return since
}

func (r *recorder) fail(err error) {
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

// overlaps returns the pairs of holds whose intervals overlap.
func overlaps(holds []hold) [][2]hold {
	holds = slices.Clone(holds)
	slices.SortFunc(holds, func(a, b hold) int { return a.start.Compare(b.start) })
	var out [][2]hold
	for i := range holds {
		for j := i + 1; j < len(holds) && holds[j].start.Before(holds[i].end); j++ {
			out = append(out, [2]hold{holds[i], holds[j]})
		}
	}
	return out
}

// acquireFunc takes the lock once, waiting at most until ctx ends, and
// returns its deadline and how to release it.
type acquireFunc func(ctx context.Context) (time.Time, func(context.Context) error, error)

// contended reports whether err is what a worker gets when others hold the
// lock for long enough: the old libraries' and fencelock's "not acquired".
func contended(err error) bool {
	var taken *redsync.ErrTaken
	var nodeTaken *redsync.ErrNodeTaken
	return errors.Is(err, redsync.ErrFailed) || errors.As(err, &taken) || errors.As(err, &nodeTaken) ||
		errors.Is(err, redislock.ErrNotObtained) || errors.Is(err, lease.ErrNotAcquired) ||
		errors.Is(err, fencebridge.ErrNotAcquired) || errors.Is(err, context.DeadlineExceeded)
}

// process is one running worker: a process of the fleet, with a client of
// its own.
type process struct {
	stop chan struct{}
	done chan struct{}
}

// start runs a worker that takes the lock, works, releases, again and
// again until stopped. A crashing worker, when stopped, exits while it
// holds the lock, without releasing it (a process killed mid-work).
func start(r *recorder, kind string, worker int, crash bool, acquire acquireFunc) *process {
	p := &process{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			select {
			case <-p.stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			deadline, release, err := acquire(ctx)
			cancel()
			if err != nil {
				if !contended(err) {
					r.fail(fmt.Errorf("%s#%d acquire: %w", kind, worker, err))
				}
				continue
			}
			r.held(kind, worker, deadline)
			select {
			case <-p.stop:
				if crash {
					return
				}
			default:
			}
			ctx, cancel = context.WithTimeout(context.Background(), 3*time.Second)
			if err := release(ctx); err != nil {
				r.fail(fmt.Errorf("%s#%d release: %w", kind, worker, err))
			}
			cancel()
			// Other work between holds: a worker that tried again at once
			// would win an unfair lock (redsync, redislock) again and again.
			time.Sleep(time.Duration(5+rand.IntN(10)) * time.Millisecond)
		}
	}()
	return p
}

func (p *process) halt() {
	close(p.stop)
	<-p.done
}

// fleet makes the workers of one test: each gets its own go-redis client,
// as a process of its own would.
type fleet struct {
	t     *testing.T
	redis *testenv.Redis
	old   func(rdb *redis.Client) (fencebridge.Old, acquireFunc)
}

func (f fleet) client() *redis.Client {
	rdb := f.redis.Client()
	f.t.Cleanup(func() { rdb.Close() })
	return rdb
}

func (f fleet) leases(rdb *redis.Client) *lease.Client {
	locks, err := lease.New(rdb)
	require.NoError(f.t, err)
	f.t.Cleanup(func() { locks.Close(context.Background()) })
	return locks
}

// oldWorker is a process of the old version: the old library alone.
func (f fleet) oldWorker() acquireFunc {
	_, acquire := f.old(f.client())
	return acquire
}

// bridgeWorker is a process of the first deploy.
func (f fleet) bridgeWorker() acquireFunc {
	rdb := f.client()
	old, _ := f.old(rdb)
	b, err := fencebridge.New(old, f.leases(rdb))
	require.NoError(f.t, err)
	return func(ctx context.Context) (time.Time, func(context.Context) error, error) {
		l, err := b.Acquire(ctx, lockName, ttl)
		if err != nil {
			return time.Time{}, nil, err
		}
		return l.Deadline(), l.Release, nil
	}
}

// newWorker is a process of the second deploy: fencelock alone, as the
// README shows it.
func (f fleet) newWorker() acquireFunc {
	locks := f.leases(f.client())
	return func(ctx context.Context) (time.Time, func(context.Context) error, error) {
		l, err := locks.Acquire(ctx, lockName, ttl)
		if err != nil {
			return time.Time{}, nil, err
		}
		return l.Deadline(), l.Release, nil
	}
}

// redsyncFleet: the old fleet used redsync over one Redis, default options
// but the expiry.
func redsyncFleet(rdb *redis.Client) (fencebridge.Old, acquireFunc) {
	rs := redsync.New(goredis.NewPool(rdb))
	opts := []redsync.Option{redsync.WithExpiry(ttl)}
	return redsyncbridge.New(rs, opts...), func(ctx context.Context) (time.Time, func(context.Context) error, error) {
		m := rs.NewMutex(lockName, opts...)
		if err := m.LockContext(ctx); err != nil {
			return time.Time{}, nil, err
		}
		return m.Until(), func(ctx context.Context) error {
			if ok, err := m.UnlockContext(ctx); !ok {
				return fmt.Errorf("redsync unlock: %v", err)
			}
			return nil
		}, nil
	}
}

// redislockFleet: the old fleet used redislock with exponential backoff.
// The old process retries itself (redislock's own retries hide which try
// took the lock, so its validity would be unknown to this test).
func redislockFleet(rdb *redis.Client) (fencebridge.Old, acquireFunc) {
	c := redislock.New(rdb)
	opt := func() *redislock.Options {
		return &redislock.Options{RetryStrategy: redislock.ExponentialBackoff(16*time.Millisecond, 128*time.Millisecond)}
	}
	return redislockbridge.New(c, ttl, opt), func(ctx context.Context) (time.Time, func(context.Context) error, error) {
		retry := opt().RetryStrategy
		for {
			start := time.Now()
			l, err := c.Obtain(ctx, lockName, ttl, nil)
			if err == nil {
				return start.Add(ttl), l.Release, nil
			}
			if !errors.Is(err, redislock.ErrNotObtained) {
				return time.Time{}, nil, err
			}
			select {
			case <-ctx.Done():
				return time.Time{}, nil, err
			case <-time.After(retry.NextBackoff()):
			}
		}
	}
}

// TestRollingSwitch runs the procedure of the package doc on one lock
// name, with three processes (goroutines with a client each) that take the
// lock, work, release and do other work in a loop: the old fleet alone; the
// first deploy replacing old processes by bridge ones one at a time (an old
// one is killed while it holds the lock); the second deploy, once no old
// process runs, replacing bridge processes by fencelock-only ones (a bridge
// one is killed while holding); fencelock alone. No two holds may overlap
// at any moment.
func TestRollingSwitch(t *testing.T) {
	for name, old := range map[string]func(*redis.Client) (fencebridge.Old, acquireFunc){
		"redsync":   redsyncFleet,
		"redislock": redislockFleet,
	} {
		t.Run(name, func(t *testing.T) {
			f := fleet{t: t, redis: testenv.NewRedis(t), old: old}
			r := &recorder{}
			const n, step = 3, 500 * time.Millisecond
			olds, bridges, news := make([]*process, n), make([]*process, n), make([]*process, n)
			for i := range n {
				olds[i] = start(r, kindOld, i, i == 0, f.oldWorker())
			}
			time.Sleep(2 * step)
			// Each deploy starts a process of the new version, and once it has
			// held the lock and a process of the previous version has held it
			// after that (the fleet is mixed), stops that one.
			deploy := func(from, to string, prev, next []*process, crash int, acquire func() acquireFunc) {
				for i := range n {
					started := time.Now()
					next[i] = start(r, to, i, i == crash, acquire())
					first := r.waitHold(t, to, i, started)
					r.waitHold(t, from, -1, first)
					time.Sleep(step)
					prev[i].halt()
				}
			}
			deploy(kindOld, kindBridge, olds, bridges, 1, f.bridgeWorker)
			// The second deploy, once no old process runs.
			deploy(kindBridge, kindNew, bridges, news, -1, f.newWorker)
			time.Sleep(2 * step)
			for _, p := range news {
				p.halt()
			}
			check(t, r)
		})
	}
}

// check asserts that the holds of a rolling switch never overlap, that
// every kind of process held the lock, and that the mixed fleets really
// mixed.
func check(t *testing.T, r *recorder) {
	t.Helper()
	for i, err := range r.errs {
		if i < 5 {
			t.Errorf("an error that no contention explains: %v", err)
		}
	}
	count := map[string]int{}
	first, last := map[string]time.Time{}, map[string]time.Time{}
	for _, h := range r.holds {
		count[h.kind]++
		if f, ok := first[h.kind]; !ok || h.start.Before(f) {
			first[h.kind] = h.start
		}
		if h.start.After(last[h.kind]) {
			last[h.kind] = h.start
		}
		assert.False(t, h.concurrentEntry, "%v entered while another holder was inside", h)
		assert.True(t, h.end.Before(h.deadline), "%v worked past its lock's deadline %v: the machine is too slow for this test's ttl",
			h, h.deadline.Format("15:04:05.000000"))
	}
	t.Logf("holds: %d old, %d bridge, %d new", count[kindOld], count[kindBridge], count[kindNew])
	for _, k := range []string{kindOld, kindBridge, kindNew} {
		assert.GreaterOrEqual(t, count[k], 5, "%s processes held the lock", k)
	}
	mixed := func(before, after string) int {
		n := 0
		for _, h := range r.holds {
			if h.kind == before && h.start.After(first[after]) {
				n++
			}
		}
		return n
	}
	t.Logf("holds in the mixed fleets: %d old after the first bridge one, %d bridge after the first new one",
		mixed(kindOld, kindBridge), mixed(kindBridge, kindNew))
	assert.Positive(t, mixed(kindOld, kindBridge), "old and bridge processes took turns")
	assert.Positive(t, mixed(kindBridge, kindNew), "bridge and new processes took turns")
	o := overlaps(r.holds)
	for i := range min(len(o), 5) {
		t.Errorf("two holders at once: %v and %v", o[i][0], o[i][1])
	}
	assert.Empty(t, o, "overlapping holds")
}

// TestWithoutTheBridgeTwoHold is the rolling deploy of issue 28 that the
// bridge prevents, and the check's control: old processes (redsync) and
// fencelock-only ones side by side on one name hold the lock at the same
// moments, and check's overlap detection sees it.
func TestWithoutTheBridgeTwoHold(t *testing.T) {
	f := fleet{t: t, redis: testenv.NewRedis(t), old: redsyncFleet}
	r := &recorder{}
	var ps []*process
	for i := range 2 {
		ps = append(ps, start(r, kindOld, i, false, f.oldWorker()), start(r, kindNew, i, false, f.newWorker()))
	}
	time.Sleep(time.Second)
	for _, p := range ps {
		p.halt()
	}
	require.Empty(t, r.errs)
	concurrent := 0
	for _, h := range r.holds {
		if h.concurrentEntry {
			concurrent++
		}
	}
	o := overlaps(r.holds)
	t.Logf("%d holds, %d overlapping pairs, %d entries while another was inside", len(r.holds), len(o), concurrent)
	assert.NotEmpty(t, o, "without the bridge, old and new processes hold the lock at once")
	assert.Positive(t, concurrent)
}
