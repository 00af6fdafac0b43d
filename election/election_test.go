package election_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/election"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lease/redlock"
)

// The lock's keys as package lease documents them (prefix "fencelock:").
func lockKey(name string) string    { return "fencelock:{" + name + "}" }
func counterKey(name string) string { return "fencelock:{" + name + "}:fence" }

func newElection(t *testing.T, c *lease.Client, ttl time.Duration, opts ...election.Option) *election.Election {
	t.Helper()
	e, err := election.New(c, t.Name()+"/"+suffix(), ttl, opts...)
	require.NoError(t, err)
	return e
}

func campaign(t *testing.T, ctx context.Context, e *election.Election) *election.Term {
	t.Helper()
	term, err := e.Campaign(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { term.Resign(context.Background()) })
	return term
}

func TestResignHandsOverToAHigherTerm(t *testing.T) {
	t.Run("one Redis", func(t *testing.T) { resignHandsOver(t, newClient(t)) })
	t.Run("Redlock", func(t *testing.T) {
		// Three masters of its own, quorum fencing: the terms are tokens a
		// verifier checks, as on one Redis.
		var nodes []*redis.Client
		for _, r := range testenv.NewRedisN(t, 3) {
			nodes = append(nodes, testenv.CtxClient(t, r.Addr(), 1))
		}
		c, err := redlock.New(nodes, redlock.WithQuorumFencing(true), redlock.WithNodeTimeout(time.Second))
		require.NoError(t, err)
		resignHandsOver(t, c)
	})
}

func resignHandsOver(t *testing.T, c *lease.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e := newElection(t, c, 10*time.Second)
	first := campaign(t, ctx, e)
	lead, err := e.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, first.Token(), lead)

	won := make(chan *election.Term, 1)
	go func() {
		term, err := e.Campaign(ctx)
		assert.NoError(t, err)
		won <- term
	}()
	select {
	case <-won:
		t.Fatal("a second campaign won while the first term lasted")
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, first.Resign(ctx))
	assert.ErrorIs(t, context.Cause(first.Context()), lease.ErrReleased)
	assert.False(t, first.Leads())
	second := <-won // woken by the release, long before the 10s ttl
	require.NotNil(t, second)
	defer second.Resign(ctx)
	assert.Greater(t, second.Token().Seq, first.Token().Seq)
	assert.NotEqual(t, first.Token().Holder, second.Token().Holder, "each term has its own holder id")
	require.NoError(t, first.Resign(ctx), "resign is idempotent")
	lead, err = e.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, second.Token(), lead, "the repeated resign left the new leader alone")
}

// A term whose lock was lost (deleted here, as an expiry would) resigns
// with nil and leaves the newer leader in place.
func TestResignOfADeposedLeaderKeepsTheNewOne(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e := newElection(t, newClient(t), 10*time.Second)
	old := campaign(t, ctx, e)
	require.NoError(t, shared.Del(ctx, lockKey(e.Name())).Err())
	newer := campaign(t, ctx, e)
	require.Greater(t, newer.Token().Seq, old.Token().Seq)

	require.NoError(t, old.Resign(ctx))
	lead, err := e.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, newer.Token(), lead)
	assert.True(t, newer.Leads())
}

// etcd #22123: a resign whose delete got no answer must be retryable. Redis
// is paused during the first Resign, which fails; the lock is still there,
// unless the release's own retry in the background removed it already once
// Redis resumed; the second Resign removes it if not, and succeeds either
// way.
func TestResignRetriesAfterAnError(t *testing.T) {
	r := testenv.NewRedis(t)
	opt := r.Options()
	opt.MaxRetries = -1
	opt.ContextTimeoutEnabled = true // go-redis ignores ctx deadlines without it
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	c, err := lease.New(rdb)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e := newElection(t, c, 10*time.Second)
	term := campaign(t, ctx, e)

	require.NoError(t, r.Pause())
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	err = term.Resign(short)
	cancelShort()
	require.NoError(t, r.Resume())
	require.Error(t, err, "Redis was paused")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, term.Err(), lease.ErrReleased, "the term ended at the first resign")
	info, err := c.Inspect(ctx, e.Name())
	require.NoError(t, err)
	if info.Holder != "" {
		require.Equal(t, term.Token().Holder, info.Holder, "the failed resign left the lock in Redis")
	}

	require.NoError(t, term.Resign(ctx))
	_, err = e.Leader(ctx)
	assert.ErrorIs(t, err, election.ErrNoLeader, "the retried resign removed the lock")
	require.NoError(t, term.Resign(ctx))
}

func TestCampaignEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e := newElection(t, newClient(t), 10*time.Second)
	campaign(t, ctx, e)
	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelShort()
	term, err := e.Campaign(short)
	assert.Nil(t, term)
	assert.ErrorIs(t, err, lease.ErrNotAcquired)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
}

// Observers see terms only grow, through quick successions and through a
// counter set back in Redis (the term below is never sent).
func TestObserveTermsOnlyGrow(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e := newElection(t, newClient(t), 5*time.Second, election.WithPoll(5*time.Millisecond))
	obsCtx, stopObs := context.WithCancel(ctx)
	ch, err := e.Observe(obsCtx)
	require.NoError(t, err)
	var seen []fence.Token
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for tok := range ch {
			seen = append(seen, tok)
		}
	}()

	var last fence.Token
	for range 20 {
		term, err := e.Campaign(ctx)
		require.NoError(t, err)
		time.Sleep(20 * time.Millisecond) // long enough for a 5ms poll
		last = term.Token()
		require.NoError(t, term.Resign(ctx))
	}
	// The counter goes back (as after a restart without persistence).
	require.NoError(t, shared.Set(ctx, counterKey(e.Name()), 1, 0).Err())
	back := campaign(t, ctx, e)
	require.Less(t, back.Token().Seq, last.Seq)
	lead, err := e.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, back.Token(), lead, "Leader reports what Redis says")
	time.Sleep(100 * time.Millisecond)
	stopObs()
	wg.Wait()

	require.GreaterOrEqual(t, len(seen), 10, "most of 20 terms of 20ms seen with a 5ms poll")
	for i := 1; i < len(seen); i++ {
		assert.Greater(t, seen[i].Seq, seen[i-1].Seq, "term %d went back", i)
	}
	assert.Equal(t, last, seen[len(seen)-1], "the lower term after the counter went back was not sent")
}

func TestBadInput(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	_, err := election.New(nil, "x", time.Second)
	assert.ErrorIs(t, err, election.ErrInvalid)
	_, err = election.New(c, "", time.Second)
	assert.ErrorIs(t, err, election.ErrInvalid)
	_, err = election.New(c, "x", 0)
	assert.ErrorIs(t, err, election.ErrInvalid)
	_, err = election.New(c, "x", time.Second, nil)
	assert.ErrorIs(t, err, election.ErrInvalid)
	_, err = election.New(c, "x", time.Second, election.WithPoll(0))
	assert.ErrorIs(t, err, lease.ErrInvalid)
	_, err = election.New(c, "x", time.Second, election.WithKeepAlive(-1))
	assert.ErrorIs(t, err, election.ErrInvalid)

	e, err := election.New(c, "x-"+suffix(), time.Second, election.WithKeepAlive(2*time.Second))
	require.NoError(t, err)
	_, err = e.Campaign(ctx)
	assert.ErrorIs(t, err, election.ErrInvalid, "a keep-alive longer than the ttl")
	_, err = e.Campaign(nil) //nolint:staticcheck // the nil context is the test
	assert.ErrorIs(t, err, election.ErrInvalid)
	_, err = e.Observe(nil) //nolint:staticcheck
	assert.ErrorIs(t, err, election.ErrInvalid)
	_, err = e.Leader(nil) //nolint:staticcheck
	assert.ErrorIs(t, err, election.ErrInvalid)
	_, err = (*election.Election)(nil).Campaign(ctx)
	assert.ErrorIs(t, err, election.ErrInvalid)

	var term *election.Term
	assert.ErrorIs(t, term.Resign(ctx), election.ErrInvalid)
	assert.ErrorIs(t, term.Err(), election.ErrInvalid)
	assert.True(t, term.Token().IsZero())
	assert.False(t, term.Leads())
	assert.ErrorIs(t, context.Cause(term.Context()), election.ErrInvalid)
	select {
	case <-term.Done():
	default:
		t.Error("a nil term's Done is not closed")
	}
	assert.False(t, errors.Is(election.ErrNoLeader, election.ErrInvalid))
}
