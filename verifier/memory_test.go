package verifier_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/observe"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/verifiertest"
)

// memoryHarness fences writes to an in-memory log with Memory.Do.
func memoryHarness() verifiertest.Harness {
	m := verifier.NewMemory()
	var mu sync.Mutex
	logs := map[string][]fence.Token{}
	appendLog := func(resource string, tok fence.Token) error {
		mu.Lock()
		defer mu.Unlock()
		logs[resource] = append(logs[resource], tok)
		return nil
	}
	return verifiertest.Harness{
		V: m,
		Highest: func(_ context.Context, resource string) (uint64, string, error) {
			if err := verifier.ValidateResource(resource); err != nil {
				return 0, "", err
			}
			seq, holder := m.Highest(resource)
			return seq, holder, nil
		},
		Write: func(ctx context.Context, resource string, tok fence.Token) error {
			return m.Do(ctx, resource, tok, func() error { return appendLog(resource, tok) })
		},
		Log: func(_ context.Context, resource string) ([]fence.Token, error) {
			mu.Lock()
			defer mu.Unlock()
			return append([]fence.Token(nil), logs[resource]...), nil
		},
		FailWrite: func(ctx context.Context, resource string, tok fence.Token) error {
			return m.Do(ctx, resource, tok, func() error { return errors.New("disk full") })
		},
	}
}

func TestMemory(t *testing.T) {
	verifiertest.Run(t, memoryHarness())
}

func TestMemoryDoRunsOneWriteAtATime(t *testing.T) {
	m := verifier.NewMemory()
	ctx := t.Context()
	inA, releaseA := make(chan struct{}), make(chan struct{})
	doneA := make(chan error, 1)
	go func() {
		doneA <- m.Do(ctx, "r", verifiertest.Tok(1, "a"), func() error {
			close(inA)
			<-releaseA
			return nil
		})
	}()
	<-inA

	// B waits for A's write to end before its own check runs.
	var bRan bool
	doneB := make(chan error, 1)
	go func() {
		doneB <- m.Do(ctx, "r", verifiertest.Tok(2, "b"), func() error { bRan = true; return nil })
	}()
	select {
	case err := <-doneB:
		t.Fatalf("B finished while A was writing: %v", err)
	case <-time.After(50 * time.Millisecond):
	}

	// A token older than A's, arriving while A writes, is rejected once A is
	// done: the check sees A's committed high-water.
	doneOld := make(chan error, 1)
	go func() { doneOld <- m.Claim(ctx, "r", verifiertest.Tok(1, "old")) }()

	close(releaseA)
	require.NoError(t, <-doneA)
	require.NoError(t, <-doneB)
	assert.True(t, bRan)
	assert.ErrorIs(t, <-doneOld, verifier.ErrStale)
	seq, holder := m.Highest("r")
	assert.Equal(t, uint64(2), seq)
	assert.Equal(t, "b", holder)
}

func TestMemoryDoGivesUpWhenContextEnds(t *testing.T) {
	m := verifier.NewMemory()
	hold := make(chan struct{})
	defer close(hold)
	started := make(chan struct{})
	go m.Do(t.Context(), "r", verifiertest.Tok(1, "a"), func() error { close(started); <-hold; return nil })
	<-started

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	err := m.Claim(ctx, "r", verifiertest.Tok(2, "b"))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	seq, _ := m.Highest("r")
	assert.Equal(t, uint64(0), seq, "A has not finished, B gave up")
}

func TestStaleErrorMessages(t *testing.T) {
	older := &verifier.StaleError{Resource: "r", Token: verifiertest.Tok(4, "a"), Highest: 5, HighestHolder: "b"}
	assert.False(t, older.Conflict())
	assert.Equal(t, `verifier: stale token for resource "r": seq 4 (holder "a"), the highest accepted is 5`, older.Error())

	conflict := &verifier.StaleError{Resource: "r", Token: verifiertest.Tok(5, "a"), Highest: 5, HighestHolder: "b"}
	assert.True(t, conflict.Conflict())
	assert.Equal(t, `verifier: conflicting token for resource "r": seq 5 was already accepted from holder "b", not "a"`, conflict.Error())

	wrapped := errors.Join(errors.New("saving order"), conflict)
	assert.ErrorIs(t, wrapped, verifier.ErrStale)
	var se *verifier.StaleError
	require.ErrorAs(t, wrapped, &se)
	assert.Equal(t, uint64(5), se.Highest)
}

// A write that panics is reported to the hooks as an error, not as an
// accepted token, and the high-water stays where it was.
func TestMemoryPanicReportedAsError(t *testing.T) {
	var verdicts []observe.Verdict
	m := &verifier.Memory{Hooks: &observe.Hooks{Verified: func(_ context.Context, e observe.Verified) {
		verdicts = append(verdicts, e.Verdict)
	}}}
	tok := verifiertest.Tok(3, "a")
	func() {
		defer func() { assert.Equal(t, "boom", recover()) }()
		_ = m.Do(t.Context(), "r", tok, func() error { panic("boom") })
	}()
	assert.Equal(t, []observe.Verdict{observe.Error}, verdicts)
	seq, _ := m.Highest("r")
	assert.Zero(t, seq)
}

func TestMemoryClockBound(t *testing.T) {
	m := &verifier.Memory{ClockBound: 24 * time.Hour}
	verifiertest.ClockBound(t, m, 24*time.Hour, func(_ context.Context, res string) uint64 {
		seq, _ := m.Highest(res)
		return seq
	})
}
