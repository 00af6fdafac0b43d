package fencegocron

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/election"
	"github.com/fencelock/fencelock/lease"
)

func newClient(t *testing.T) *lease.Client {
	t.Helper()
	c, err := lease.New(shared)
	require.NoError(t, err)
	return c
}

// Two hosts at one tick: the second is refused, also after the first
// unlocked; the next tick is free.
func TestLockerHoldsTheTickAfterUnlock(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	a, err := NewLocker(newClient(t), time.Second)
	require.NoError(t, err)
	b, err := NewLocker(newClient(t), time.Second)
	require.NoError(t, err)
	job := "job-" + uuid.NewString()[:8]
	// a's clock is on time; b's is 300ms behind: it runs 300ms later.
	a.now = func() time.Time { return at }
	b.now = func() time.Time { return at } // its clock reads the tick, 300ms late

	k, err := a.Lock(ctx, job)
	require.NoError(t, err)
	assert.Equal(t, at, k.(*Lock).Tick())
	require.NoError(t, k.Unlock(ctx))
	time.Sleep(300 * time.Millisecond)
	_, err = b.Lock(ctx, job)
	assert.ErrorIs(t, err, lease.ErrNotAcquired, "the tick stays taken after a short run")

	b.now = func() time.Time { return at.Add(time.Second) }
	k, err = b.Lock(ctx, job)
	require.NoError(t, err, "the next tick is another lock")
	assert.Equal(t, at.Add(time.Second), k.(*Lock).Tick())
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
	_, err := NewLocker(nil, time.Second)
	assert.ErrorIs(t, err, ErrInvalid)
	assert.ErrorIs(t, err, lease.ErrInvalid)
	_, err = NewLocker(newClient(t), 0)
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = NewLocker(newClient(t), MinPeriod-1)
	assert.ErrorIs(t, err, ErrInvalid)
	l, err := NewLocker(newClient(t), time.Second)
	require.NoError(t, err)
	_, err = l.Lock(ctx, "")
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = l.Lock(ctx, "a{b}")
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = l.Lock(nil, "job") //nolint:staticcheck // the nil context is the test
	assert.ErrorIs(t, err, ErrInvalid)
	_, err = (*Locker)(nil).Lock(ctx, "job")
	assert.ErrorIs(t, err, ErrInvalid)

	_, err = NewElector(nil)
	assert.ErrorIs(t, err, ErrInvalid)
	var el *Elector
	assert.ErrorIs(t, el.Run(ctx), ErrInvalid)
	assert.ErrorIs(t, el.IsLeader(ctx), ErrNotLeader)
	assert.False(t, errors.Is(ErrNotLeader, ErrInvalid))
}
