package fencegocron

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/election"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/once"
	"github.com/fencelock/fencelock/verifier"
)

func newClient(t *testing.T) *lease.Client {
	t.Helper()
	c, err := lease.New(shared)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func newLocker(t *testing.T, opts ...Option) *Locker {
	t.Helper()
	jobs, err := once.New(shared)
	require.NoError(t, err)
	l, err := NewLocker(newClient(t), jobs, opts...)
	require.NoError(t, err)
	return l
}

func newScheduler(t *testing.T, opts ...gocron.SchedulerOption) gocron.Scheduler {
	t.Helper()
	s, err := gocron.NewScheduler(opts...)
	require.NoError(t, err)
	t.Cleanup(func() { s.Shutdown() })
	return s
}

func jobName(t *testing.T) string { return t.Name() + "-" + uuid.NewString()[:8] }

// The period is the job's own: on a cron of every second, a job runs
// every second (a Locker given a 10s period ran it once in 5.5s), each
// run with a token of the job's one lock, growing.
func TestLockerKeepsTheSchedule(t *testing.T) {
	l := newLocker(t)
	s := newScheduler(t)
	var mu sync.Mutex
	var toks []fence.Token
	name := jobName(t)
	_, err := l.NewJob(s, gocron.CronJob("* * * * * *", true), func(ctx context.Context) error {
		tok, ok := fence.FromContext(ctx)
		require.True(t, ok, "the run's token is in its context")
		mu.Lock()
		toks = append(toks, tok)
		mu.Unlock()
		return nil
	}, gocron.WithName(name))
	require.NoError(t, err)
	s.Start()
	time.Sleep(5500 * time.Millisecond)
	require.NoError(t, s.Shutdown())

	mu.Lock()
	defer mu.Unlock()
	assert.GreaterOrEqual(t, len(toks), 4, "runs in 5.5s on a cron of every second")
	for i, tok := range toks {
		assert.Equal(t, name, tok.Key)
		if i > 0 {
			assert.Greater(t, tok.Seq, toks[i-1].Seq, "tokens of one job grow")
		}
	}
}

// periodOf reads the period from the schedule, whatever its kind, and
// refuses a schedule without one.
func TestPeriodOf(t *testing.T) {
	s := newScheduler(t)
	add := func(def gocron.JobDefinition) gocron.Job {
		j, err := s.NewJob(def, gocron.NewTask(func() {}))
		require.NoError(t, err)
		return j
	}
	at := gocron.NewAtTimes(gocron.NewAtTime(12, 0, 0))
	jobs := map[gocron.Job]time.Duration{
		add(gocron.DurationJob(300 * time.Millisecond)):                              300 * time.Millisecond,
		add(gocron.CronJob("*/2 * * * * *", true)):                                   2 * time.Second,
		add(gocron.CronJob("0 9 * * 1-5", false)):                                    24 * time.Hour,
		add(gocron.DailyJob(1, at)):                                                  24 * time.Hour,
		add(gocron.WeeklyJob(1, gocron.NewWeekdays(time.Monday, time.Thursday), at)): 72 * time.Hour,
		add(gocron.DurationJob(time.Hour)):                                           time.Hour,
		add(gocron.DurationRandomJob(time.Second, 3*time.Second)):                    time.Second,
	}
	once := add(gocron.OneTimeJob(gocron.OneTimeJobStartDateTime(time.Now().Add(time.Hour))))
	fast := add(gocron.DurationJob(10 * time.Millisecond))
	s.Start()
	for j, want := range jobs {
		got, err := periodOf(j)
		require.NoError(t, err)
		assert.Equal(t, want, got, "%v", j.Schedule())
	}
	_, err := periodOf(once)
	assert.ErrorIs(t, err, ErrInvalid, "a one-time job has no period")
	_, err = periodOf(fast)
	assert.ErrorIs(t, err, ErrInvalid, "below MinPeriod")
}

// A job whose schedule has no period is refused: a one-time job when it
// is made, one whose stop time leaves fewer than 3 runs at its lock (and
// it never runs).
func TestLockerRefusesAJobWithoutPeriod(t *testing.T) {
	l := newLocker(t)
	s := newScheduler(t)
	var ran atomic.Bool
	fn := func(context.Context) error { ran.Store(true); return nil }
	_, err := l.NewJob(s, gocron.OneTimeJob(gocron.OneTimeJobStartImmediately()), fn, gocron.WithName(jobName(t)))
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = l.NewJob(s, gocron.DurationJob(MinPeriod/2), fn, gocron.WithName(jobName(t)))
	assert.ErrorIs(t, err, ErrInvalid)
	assert.Empty(t, s.Jobs(), "the refused jobs are not left in the scheduler")

	lockErr := make(chan error, 1)
	_, err = l.NewJob(s, gocron.DurationJob(time.Second), fn,
		gocron.WithName(jobName(t)),
		gocron.WithStartAt(gocron.WithStartImmediately()),
		gocron.WithStopAt(gocron.WithStopDateTime(time.Now().Add(1500*time.Millisecond))),
		gocron.WithEventListeners(gocron.AfterLockError(func(_ uuid.UUID, _ string, err error) {
			select {
			case lockErr <- err:
			default:
			}
		})))
	require.NoError(t, err)
	s.Start()
	select {
	case err := <-lockErr:
		assert.ErrorIs(t, err, ErrInvalid)
		assert.ErrorIs(t, err, lease.ErrInvalid)
	case <-time.After(10 * time.Second):
		t.Fatal("no lock error")
	}
	assert.False(t, ran.Load())
}

// A job without a name of its own would share its lock with every other
// job: refused, and not left in the scheduler.
func TestLockerNeedsAName(t *testing.T) {
	l := newLocker(t)
	s := newScheduler(t)
	_, err := l.NewJob(s, gocron.DurationJob(time.Second), func(context.Context) error { return nil })
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = l.NewJob(s, gocron.DurationJob(time.Second), func(context.Context) error { return nil }, gocron.WithName("a{b}"))
	assert.ErrorIs(t, err, ErrInvalid)
	assert.Empty(t, s.Jobs())
}

// A run whose lease was lost while it was stuck (its lock expired, as in a
// pause) writes with its token after the next host's run wrote: the
// verifier refuses it, and the run is not recorded as done.
func TestLockerFencesAStaleRun(t *testing.T) {
	var store verifier.Memory
	var value string // the resource, written under store's check
	write := func(ctx context.Context, who string) error {
		tok, _ := fence.FromContext(ctx)
		return store.Do(context.Background(), "report", tok, func() error { value = who; return nil })
	}
	name := jobName(t)
	la, lb := newLocker(t), newLocker(t)
	sa, sb := newScheduler(t), newScheduler(t)

	stuck := make(chan context.Context, 1) // a's first run, once it has its lock
	resume := make(chan struct{})
	staleErr := make(chan error, 1)
	var first atomic.Bool
	_, err := la.NewJob(sa, gocron.CronJob("* * * * * *", true), func(ctx context.Context) error {
		if !first.CompareAndSwap(false, true) {
			return nil // a's later runs write nothing
		}
		stuck <- ctx
		<-resume // stuck, as a paused process is: it does not look at ctx
		err := write(ctx, "a")
		staleErr <- err
		return err
	}, gocron.WithName(name))
	require.NoError(t, err)
	sa.Start()
	var ctxA context.Context
	select {
	case ctxA = <-stuck:
	case <-time.After(10 * time.Second):
		t.Fatal("a did not run")
	}
	tokA, _ := fence.FromContext(ctxA)

	// a's lock expires while it is stuck; b's scheduler takes the job.
	require.NoError(t, shared.Del(context.Background(), lease.DefaultPrefix+"{"+name+"}").Err())
	wrote := make(chan fence.Token, 1)
	_, err = lb.NewJob(sb, gocron.CronJob("* * * * * *", true), func(ctx context.Context) error {
		tok, _ := fence.FromContext(ctx)
		if err := write(ctx, "b"); err != nil {
			return err
		}
		select {
		case wrote <- tok:
		default:
		}
		return nil
	}, gocron.WithName(name))
	require.NoError(t, err)
	sb.Start()
	var tokB fence.Token
	select {
	case tokB = <-wrote:
	case <-time.After(10 * time.Second):
		t.Fatal("b did not run")
	}
	select {
	case <-ctxA.Done():
		assert.ErrorIs(t, context.Cause(ctxA), lease.ErrLost, "a's context ended with its lease")
	case <-time.After(10 * time.Second):
		t.Fatal("a's context outlived its lease")
	}

	close(resume)
	err = <-staleErr
	var stale *verifier.StaleError
	require.ErrorAs(t, err, &stale, "a's late write is refused")
	assert.Equal(t, tokA, stale.Token)
	assert.Equal(t, tokB.Seq, stale.Highest)
	assert.Greater(t, tokB.Seq, tokA.Seq)
	seq, _ := store.Highest("report")
	assert.Equal(t, tokB.Seq, seq)
	require.NoError(t, sa.Shutdown())
	require.NoError(t, sb.Shutdown())
	assert.Equal(t, "b", value)
}

// An Elector's job finds the term's token in its context.
func TestElectorJobGetsTheTerm(t *testing.T) {
	e, err := election.New(newClient(t), "elector-"+uuid.NewString()[:8], 10*time.Second)
	require.NoError(t, err)
	el, err := NewElector(e)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- el.Run(ctx) }()
	defer func() { cancel(); <-done }()

	s := newScheduler(t, gocron.WithDistributedElector(el))
	got := make(chan fence.Token, 1)
	_, err = el.NewJob(s, gocron.DurationJob(100*time.Millisecond), func(ctx context.Context) error {
		tok, ok := fence.FromContext(ctx)
		if ok {
			select {
			case got <- tok:
			default:
			}
		}
		return nil
	})
	require.NoError(t, err)
	s.Start()
	select {
	case tok := <-got:
		assert.Equal(t, el.Term().Token(), tok)
		assert.Positive(t, tok.Seq)
	case <-time.After(15 * time.Second):
		t.Fatal("the leader's job did not run")
	}
}

func TestElectorRunsAndResigns(t *testing.T) {
	e, err := election.New(newClient(t), "elector-"+uuid.NewString()[:8], 10*time.Second)
	require.NoError(t, err)
	el, err := NewElector(e)
	require.NoError(t, err)
	assert.ErrorIs(t, el.IsLeader(context.Background()), ErrNotLeader)
	assert.Nil(t, el.Term())

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- el.Run(ctx) }()
	require.Eventually(t, func() bool { return el.IsLeader(ctx) == nil }, 10*time.Second, 10*time.Millisecond)
	term := el.Term()
	lead, err := e.Leader(context.Background())
	require.NoError(t, err)
	assert.Equal(t, term.Token(), lead)

	cancel()
	assert.ErrorIs(t, <-done, context.Canceled)
	assert.ErrorIs(t, el.IsLeader(context.Background()), ErrNotLeader)
	_, err = e.Leader(context.Background())
	assert.ErrorIs(t, err, election.ErrNoLeader, "Run resigned when its context ended")
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	jobs, err := once.New(shared)
	require.NoError(t, err)
	_, err = NewLocker(nil, jobs)
	assert.ErrorIs(t, err, ErrInvalid)
	assert.ErrorIs(t, err, lease.ErrInvalid)
	_, err = NewLocker(newClient(t), nil)
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = NewLocker(newClient(t), jobs, nil)
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = NewLocker(newClient(t), jobs, WithTTL(time.Millisecond))
	assert.ErrorIs(t, err, ErrInvalid)
	l := newLocker(t)
	s := newScheduler(t)
	_, err = l.NewJob(nil, gocron.DurationJob(time.Second), func(context.Context) error { return nil }, gocron.WithName("x"))
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = l.NewJob(s, nil, func(context.Context) error { return nil }, gocron.WithName("x"))
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = l.NewJob(s, gocron.DurationJob(time.Second), nil, gocron.WithName("x"))
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = (*Locker)(nil).NewJob(s, gocron.DurationJob(time.Second), func(context.Context) error { return nil })
	assert.ErrorIs(t, err, ErrInvalid)

	_, err = NewElector(nil)
	assert.ErrorIs(t, err, ErrInvalid)
	var el *Elector
	assert.ErrorIs(t, el.Run(ctx), ErrInvalid)
	assert.ErrorIs(t, el.IsLeader(ctx), ErrNotLeader)
	_, err = el.NewJob(s, gocron.DurationJob(time.Second), func(context.Context) error { return nil })
	assert.ErrorIs(t, err, ErrInvalid)
	assert.False(t, errors.Is(ErrNotLeader, ErrInvalid))
}
