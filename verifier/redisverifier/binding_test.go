package redisverifier_test

import (
	"context"
	"github.com/fencelock/fencelock/verifier/redisverifier"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/verifiertest"
)

// A high-water written before locks were recorded has no lock: it keeps
// its Seq, and adopts the lock of the next token it accepts.
func TestLegacyHighWaterAdoptsLock(t *testing.T) {
	ctx := t.Context()
	v := newVerifier(t, rdb)
	res := verifiertest.Resource(t, "legacy")
	require.NoError(t, rdb.HSet(ctx, v.Key(res), "seq", "7", "holder", "a").Err())

	other6 := verifiertest.TokOf("other", 6, "b")
	verifiertest.RequireStale(t, v.Claim(ctx, res, other6), other6, 7, "a")
	lock, err := v.Lock(ctx, res)
	require.NoError(t, err)
	assert.Empty(t, lock, "a refused token binds nothing")

	require.NoError(t, v.Claim(ctx, res, verifiertest.TokOf("orders/1", 8, "b")))
	lock, err = v.Lock(ctx, res)
	require.NoError(t, err)
	assert.Equal(t, "orders/1", lock)
	other9 := verifiertest.TokOf("other", 9, "c")
	verifiertest.RequireForeign(t, v.Claim(ctx, res, other9), res, other9, "orders/1")
}

// Errors in a fenced script carry the body's own line numbers.
func TestScriptErrorLines(t *testing.T) {
	ctx := t.Context()
	v := newVerifier(t, rdb)
	res := verifiertest.Resource(t, "r")
	for body, line := range map[string]string{
		"retrun 1": "user_script:1:",
		"local x = 1\nlocal y = 2\nreturn x + * 1":  "user_script:3:",
		"local x = 1\nreturn redis.call('NOPE', 1)": "user_script:2.",
		"\n\n\nerror('mine')":                       "user_script:4:",
	} {
		s, err := v.NewScript(body)
		require.NoError(t, err)
		_, err = s.Run(ctx, res, verifiertest.Tok(1, "a"), []string{"k:" + res})
		require.Error(t, err, "%q", body)
		assert.Contains(t, err.Error(), line, "%q", body)
		assert.NotErrorIs(t, err, verifier.ErrStale)
	}
	seq, _, err := v.Highest(ctx, res)
	require.NoError(t, err)
	assert.Zero(t, seq, "no failed script raised the high-water")
}

func TestClockBound(t *testing.T) {
	v := newVerifier(t, rdb, redisverifier.WithClockBound(24*time.Hour))
	verifiertest.ClockBound(t, v, 24*time.Hour, func(ctx context.Context, res string) uint64 {
		seq, _, err := v.Highest(ctx, res)
		require.NoError(t, err)
		return seq
	})
	_, err := redisverifier.New(rdb, redisverifier.WithClockBound(-time.Second))
	assert.ErrorIs(t, err, verifier.ErrInvalid)
}
