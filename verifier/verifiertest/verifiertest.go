// Package verifiertest is the conformance kit every fencelock verifier
// passes against its real storage.
//
//	func TestConformance(t *testing.T) {
//		v := mystore.NewVerifier(...)
//		verifiertest.Run(t, verifiertest.Harness{V: v, Highest: ..., Write: ..., Log: ..., FailWrite: ...})
//	}
//
// It checks the acceptance rule, the conflict rule, one lock per resource,
// claim before read, moving a resource to another lock, malformed input and
// hostile names, 32 concurrent writers, a failed write that must not
// raise the high-water, and the reset of a poisoned high-water (the
// verifier must be a verifier.Resetter). To prove a verifier of your own,
// adapt it with a [Harness] in a test, as above, and call [Run].
//
// Every test uses resource names of its own (see [Resource]), so the
// harness may share one store across them. The kit imports testify.
package verifiertest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/verifier"
)

// Harness adapts one verifier to the suite.
type Harness struct {
	// V is the verifier under test.
	V verifier.Verifier
	// Highest reads the stored high-water of resource (0, "" if none).
	Highest func(ctx context.Context, resource string) (uint64, string, error)
	// Write makes a fenced write: in one atomic step with the check of tok,
	// it appends tok to resource's log in the storage.
	Write func(ctx context.Context, resource string, tok fence.Token) error
	// Log returns the tokens Write appended for resource, in the order the
	// storage applied them (Key is not compared).
	Log func(ctx context.Context, resource string) ([]fence.Token, error)
	// FailWrite is Write whose write step fails after the check passed; it
	// returns the write's error, or the check's.
	FailWrite func(ctx context.Context, resource string, tok fence.Token) error
}

// Run runs every test of the suite as a subtest.
func Run(t *testing.T, h Harness) {
	requireHarness(t, h)
	t.Run("Acceptance", func(t *testing.T) { Acceptance(t, h) })
	t.Run("ForeignLock", func(t *testing.T) { ForeignLock(t, h) })
	t.Run("ClaimBeforeRead", func(t *testing.T) { ClaimBeforeRead(t, h) })
	t.Run("Move", func(t *testing.T) { Move(t, h) })
	t.Run("Invalid", func(t *testing.T) { Invalid(t, h) })
	t.Run("HostileNames", func(t *testing.T) { HostileNames(t, h) })
	t.Run("Concurrent", func(t *testing.T) { Concurrent(t, h, 32, 16) })
	t.Run("FailedWrite", func(t *testing.T) { FailedWrite(t, h) })
	t.Run("Reset", func(t *testing.T) { Reset(t, h) })
}

func requireHarness(t *testing.T, h Harness) {
	t.Helper()
	require.NotNil(t, h.V, "Harness.V")
	require.NotNil(t, h.Highest, "Harness.Highest")
	require.NotNil(t, h.Write, "Harness.Write")
	require.NotNil(t, h.Log, "Harness.Log")
	require.NotNil(t, h.FailWrite, "Harness.FailWrite")
}

// Lock is the lock the suite's tokens belong to; see [Tok].
const Lock = "verifiertest"

// Tok returns a token for the suite's lock.
func Tok(seq uint64, holder string) fence.Token {
	return fence.Token{Key: Lock, Seq: seq, Holder: holder}
}

// Resource returns a resource name unique to this test and call.
func Resource(t testing.TB, suffix string) string {
	t.Helper()
	return fmt.Sprintf("%s/%s/%d", t.Name(), suffix, rand.Uint64())
}

// RequireStale asserts that err is a *StaleError for tok with the given
// high-water, and returns it.
func RequireStale(t testing.TB, err error, tok fence.Token, highSeq uint64, highHolder string) *verifier.StaleError {
	t.Helper()
	require.ErrorIs(t, err, verifier.ErrStale)
	var se *verifier.StaleError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, tok, se.Token, "token in the error")
	assert.Equal(t, highSeq, se.Highest, "highest seq in the error")
	assert.Equal(t, highHolder, se.HighestHolder, "highest holder in the error")
	assert.Equal(t, tok.Seq == highSeq, se.Conflict(), "Conflict()")
	return se
}

func requireHighest(t testing.TB, h Harness, resource string, seq uint64, holder string) {
	t.Helper()
	gotSeq, gotHolder, err := h.Highest(context.Background(), resource)
	require.NoError(t, err)
	require.Equal(t, seq, gotSeq, "stored high-water seq of %q", resource)
	require.Equal(t, holder, gotHolder, "stored high-water holder of %q", resource)
}

func logLen(t testing.TB, h Harness, resource string) int {
	t.Helper()
	l, err := h.Log(context.Background(), resource)
	require.NoError(t, err)
	return len(l)
}

// Acceptance checks the acceptance rule, through Claim and through Write,
// each case on a resource whose high-water is (5, "a").
func Acceptance(t *testing.T, h Harness) {
	ctx := t.Context()
	cases := []struct {
		name     string
		tok      fence.Token
		accepted bool
	}{
		{"higher seq, other holder", Tok(6, "b"), true},
		{"higher seq, same holder", Tok(6, "a"), true},
		{"same seq, same holder", Tok(5, "a"), true},
		{"highest possible seq", Tok(fence.MaxSeq, "c"), true},
		{"same seq, other holder (conflict)", Tok(5, "b"), false},
		{"lower seq, same holder", Tok(4, "a"), false},
		{"lower seq, other holder", Tok(4, "b"), false},
		{"seq 1", Tok(1, "a"), false},
	}
	for _, path := range []string{"Claim", "Write"} {
		for _, c := range cases {
			t.Run(path+"/"+c.name, func(t *testing.T) {
				res := Resource(t, "r")
				require.NoError(t, h.V.Claim(ctx, res, Tok(5, "a")), "first token on a fresh resource")
				requireHighest(t, h, res, 5, "a")

				var err error
				if path == "Claim" {
					err = h.V.Claim(ctx, res, c.tok)
				} else {
					err = h.Write(ctx, res, c.tok)
				}
				if c.accepted {
					require.NoError(t, err)
					requireHighest(t, h, res, c.tok.Seq, c.tok.Holder)
				} else {
					RequireStale(t, err, c.tok, 5, "a")
					assert.ErrorContains(t, err, res, "the message names the resource")
					requireHighest(t, h, res, 5, "a")
				}
				if path == "Write" {
					want := 0
					if c.accepted {
						want = 1
					}
					assert.Equal(t, want, logLen(t, h, res), "writes that landed")
				}
			})
		}
	}
}

// Invalid checks that malformed tokens and unusable resource names are
// rejected before any I/O, with clear errors, and change nothing.
func Invalid(t *testing.T, h Harness) {
	ctx := t.Context()
	res := Resource(t, "r")
	require.NoError(t, h.Write(ctx, res, Tok(5, "a")))

	require.ErrorIs(t, claimNilContext(h.V, res, Tok(9, "z")), verifier.ErrInvalid, "nil context")
	requireHighest(t, h, res, 5, "a")

	badTokens := map[string]fence.Token{
		"zero token":       {},
		"seq 0":            Tok(0, "z"),
		"seq above 2^53-1": Tok(fence.MaxSeq+1, "z"),
		"seq 2^64-1":       Tok(^uint64(0), "z"),
		"empty holder":     Tok(9, ""),
		"holder with ' ":   Tok(9, "x' OR '1'='1"),
		"holder with NUL":  Tok(9, "x\x00"),
		"empty key":        {Seq: 9, Holder: "z"},
		"key with braces":  {Key: "{x}", Seq: 9, Holder: "z"},
		// PostgreSQL text holds neither: a verifier that sent them would
		// get a driver error (SQLSTATE 22021), not a refusal.
		"key with NUL":            {Key: Lock + "\x00", Seq: 9, Holder: "z"},
		"key of invalid UTF-8":    {Key: Lock + "\xff", Seq: 9, Holder: "z"},
		"key of a lone surrogate": {Key: Lock + "\xed\xa0\x80", Seq: 9, Holder: "z"},
	}
	for name, tok := range badTokens {
		t.Run("token/"+name, func(t *testing.T) {
			err := h.V.Claim(ctx, res, tok)
			require.ErrorIs(t, err, fence.ErrMalformed)
			assert.NotErrorIs(t, err, verifier.ErrStale)
			assert.NotErrorIs(t, err, verifier.ErrForeign)
			require.ErrorIs(t, h.Write(ctx, res, tok), fence.ErrMalformed)
			requireHighest(t, h, res, 5, "a")
			assert.Equal(t, 1, logLen(t, h, res))
		})
	}

	long := strings.Repeat("x", 10<<10)
	badNames := map[string]struct{ name, lookalike string }{
		"empty":         {"", ""},
		"10 kB":         {long, long[:verifier.MaxResourceLen]},
		"NUL":           {res + "\x00tail", res + "tail"},
		"invalid UTF-8": {res + "\xff", ""},
	}
	for name, c := range badNames {
		t.Run("resource/"+name, func(t *testing.T) {
			err := h.V.Claim(ctx, c.name, Tok(99, "z"))
			require.ErrorIs(t, err, verifier.ErrInvalidResource)
			assert.Less(t, len(err.Error()), 200, "the error does not echo a 10 kB name")
			require.ErrorIs(t, h.Write(ctx, c.name, Tok(99, "z")), verifier.ErrInvalidResource)
			if c.lookalike != "" {
				// Nothing was stored under a truncated or NUL-stripped name.
				requireHighest(t, h, c.lookalike, 0, "")
			}
			requireHighest(t, h, res, 5, "a")
		})
	}
}

// claimNilContext calls v.Claim with a nil context and turns a panic into
// an error, so that one verifier's panic fails this test, not the run.
func claimNilContext(v verifier.Verifier, resource string, tok fence.Token) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("Claim(nil, ...) panicked: %v", p)
		}
	}()
	var nilCtx context.Context
	return v.Claim(nilCtx, resource, tok)
}

// HostileNames checks that names full of quotes, escapes and script syntax
// are stored verbatim and kept apart.
func HostileNames(t *testing.T, h Harness) {
	ctx := t.Context()
	base := Resource(t, "")
	names := []string{
		base + `'; DROP TABLE fence_tokens; --`,
		base + `"; DELETE FROM "fence_tokens`,
		base + `\'\\"$1 %s %d`,
		base + `]] redis.call('FLUSHALL') --[[`,
		base + "{hash}tag}",
		base + " tab\tnewline\n",
		base + "ümlaut ☃ 𝄞",
		base + strings.Repeat("'", verifier.MaxResourceLen-len(base)),
	}
	for i, name := range names {
		require.NoError(t, h.V.Claim(ctx, name, Tok(uint64(10+i), "a")), "name %d", i)
	}
	for i, name := range names {
		requireHighest(t, h, name, uint64(10+i), "a")
		// Each name has its own high-water: an older token is rejected, a
		// token older than a neighbour's but newer than its own is not.
		RequireStale(t, h.V.Claim(ctx, name, Tok(uint64(9+i), "a")), Tok(uint64(9+i), "a"), uint64(10+i), "a")
	}
	require.NoError(t, h.Write(ctx, names[0], Tok(12, "a")))
	requireHighest(t, h, names[0], 12, "a")
	requireHighest(t, h, names[1], 11, "a")
}

// Concurrent runs writers goroutines, each making perWriter fenced writes
// with random tokens on one resource, while a watcher polls the high-water.
// The high-water must never go down, the storage's log of accepted writes
// must be ordered by Seq with no two holders on one Seq, and every
// rejection must be a *StaleError.
func Concurrent(t *testing.T, h Harness, writers, perWriter int) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res := Resource(t, "r")

	var (
		next     atomic.Uint64 // drifts upward so that both outcomes are common
		accepted atomic.Int64
		rejected atomic.Int64
		mu       sync.Mutex
		errs     []error
	)
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}

	watchDone := make(chan struct{})
	stopWatch := make(chan struct{})
	go func() {
		defer close(watchDone)
		var lastSeq uint64
		var lastHolder string
		for {
			select {
			case <-stopWatch:
				return
			default:
			}
			seq, holder, err := h.Highest(ctx, res)
			if err != nil {
				fail(fmt.Errorf("watcher: %w", err))
				return
			}
			if seq < lastSeq || (seq == lastSeq && holder != lastHolder && lastSeq != 0) {
				fail(fmt.Errorf("watcher: high-water went from (%d,%s) to (%d,%s)", lastSeq, lastHolder, seq, holder))
			}
			lastSeq, lastHolder = seq, holder
			time.Sleep(100 * time.Microsecond)
		}
	}()

	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range perWriter {
				seq := uint64(max(1, int64(next.Add(1))-int64(rand.IntN(3*writers))))
				tok := Tok(seq, []string{"a", "b"}[rand.IntN(2)])
				err := h.Write(ctx, res, tok)
				var se *verifier.StaleError
				switch {
				case err == nil:
					accepted.Add(1)
				case errors.As(err, &se):
					rejected.Add(1)
					if se.Token != tok || se.Resource != res || tok.Supersedes(fence.Token{Seq: se.Highest, Holder: se.HighestHolder}) {
						fail(fmt.Errorf("bad StaleError %+v for %v", se, tok))
					}
				default:
					fail(fmt.Errorf("write %v: %w", tok, err))
				}
			}
		})
	}
	wg.Wait()
	close(stopWatch)
	<-watchDone
	require.Empty(t, errs)

	log, err := h.Log(ctx, res)
	require.NoError(t, err)
	require.Len(t, log, int(accepted.Load()), "every accepted write landed, and only those")
	assert.Positive(t, accepted.Load())
	assert.Positive(t, rejected.Load())
	for i := 1; i < len(log); i++ {
		prev, cur := log[i-1], log[i]
		require.True(t, cur.Seq > prev.Seq || cur.Seq == prev.Seq && cur.Holder == prev.Holder,
			"accepted write %d (%d,%s) came after (%d,%s)", i, cur.Seq, cur.Holder, prev.Seq, prev.Holder)
	}
	last := log[len(log)-1]
	requireHighest(t, h, res, last.Seq, last.Holder)
	t.Logf("%d writers: %d accepted, %d rejected", writers, accepted.Load(), rejected.Load())
}

// FailedWrite checks that a write that fails after its token was checked
// does not raise the high-water.
func FailedWrite(t *testing.T, h Harness) {
	ctx := t.Context()
	res := Resource(t, "r")
	require.NoError(t, h.Write(ctx, res, Tok(5, "a")))

	err := h.FailWrite(ctx, res, Tok(7, "b"))
	require.Error(t, err)
	assert.NotErrorIs(t, err, verifier.ErrStale)
	requireHighest(t, h, res, 5, "a")
	assert.Equal(t, 1, logLen(t, h, res))

	require.NoError(t, h.Write(ctx, res, Tok(6, "c")), "the failed token 7 left no trace")
	requireHighest(t, h, res, 6, "c")
	RequireStale(t, h.FailWrite(ctx, res, Tok(5, "a")), Tok(5, "a"), 6, "c")
}
