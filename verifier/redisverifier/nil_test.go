package redisverifier_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/pgverifier"
	"github.com/fencelock/fencelock/verifier/redisverifier"
	"github.com/fencelock/fencelock/verifier/verifiertest"
)

// nilCtx is a nil context, which every method must refuse rather than panic
// on.
var nilCtx context.Context

// unreachable returns a client of a Redis that does not exist: the checks
// for invalid input come before any I/O, so they answer ErrInvalid and not
// a connection error.
func unreachable(t *testing.T) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1})
	t.Cleanup(func() { c.Close() })
	return c
}

func TestErrInvalid(t *testing.T) {
	assert.ErrorIs(t, redisverifier.ErrInvalid, verifier.ErrInvalid)
	assert.NotEqual(t, verifier.ErrInvalid, redisverifier.ErrInvalid, "a sentinel of its own")
	assert.NotErrorIs(t, redisverifier.ErrInvalid, pgverifier.ErrInvalid)
	assert.NotErrorIs(t, pgverifier.ErrInvalid, redisverifier.ErrInvalid)
	assert.NotErrorIs(t, redisverifier.ErrInvalid, verifier.ErrStale)
}

func TestNewNil(t *testing.T) {
	var (
		nilClient    *redis.Client
		nilCluster   *redis.ClusterClient
		nilRing      *redis.Ring
		nilUniversal redis.UniversalClient = nilClient
	)
	for name, c := range map[string]redis.Scripter{
		"nil Scripter":                               nil,
		"typed nil *redis.Client":                    nilClient,
		"typed nil *redis.ClusterClient":             nilCluster,
		"typed nil *redis.Ring":                      nilRing,
		"typed nil *redis.Client as UniversalClient": nilUniversal,
	} {
		v, err := redisverifier.New(c)
		assert.ErrorIs(t, err, redisverifier.ErrInvalid, name)
		assert.ErrorIs(t, err, verifier.ErrInvalid, name)
		assert.Nil(t, v, name)
	}

	c := unreachable(t)
	for name, opts := range map[string][]redisverifier.Option{
		"nil option":          {nil},
		"nil option after ok": {redisverifier.WithPrefix("p:"), nil},
		"prefix with a brace": {redisverifier.WithPrefix("p:{x}:")},
	} {
		v, err := redisverifier.New(c, opts...)
		assert.ErrorIs(t, err, redisverifier.ErrInvalid, name)
		assert.Nil(t, v, name)
	}
	v, err := redisverifier.New(c, redisverifier.WithPrefix("p:"))
	require.NoError(t, err)
	assert.Equal(t, "p:r", v.Key("r"))
}

// TestMethodsNil calls every method with a nil receiver, a zero Verifier or
// Script, and a nil context: each returns ErrInvalid, before any I/O.
func TestMethodsNil(t *testing.T) {
	ctx := t.Context()
	tok := verifiertest.Tok(1, "a")
	calls := func(v *redisverifier.Verifier, ctx context.Context) map[string]error {
		_, _, highestErr := v.Highest(ctx, "r")
		_, scriptErr := v.NewScript(`return 1`)
		return map[string]error{
			"Claim":     v.Claim(ctx, "r", tok),
			"Set":       v.Set(ctx, "r", tok, "k", "v", 0),
			"HSet":      v.HSet(ctx, "r", tok, "k", "f", "v"),
			"Highest":   highestErr,
			"NewScript": scriptErr,
		}
	}

	var nilV *redisverifier.Verifier
	for name, err := range calls(nilV, ctx) {
		assert.ErrorIs(t, err, redisverifier.ErrInvalid, "%s on a nil *Verifier", name)
	}
	assert.Empty(t, nilV.Key("r"))
	for name, err := range calls(&redisverifier.Verifier{}, ctx) {
		assert.ErrorIs(t, err, redisverifier.ErrInvalid, "%s on a zero Verifier", name)
	}

	v, err := redisverifier.New(unreachable(t))
	require.NoError(t, err)
	for name, err := range calls(v, nilCtx) {
		if name == "NewScript" {
			assert.NoError(t, err, "NewScript takes no context")
			continue
		}
		assert.ErrorIs(t, err, redisverifier.ErrInvalid, "%s with a nil context", name)
	}

	s, err := v.NewScript(`return 1`)
	require.NoError(t, err)
	_, err = s.Run(nilCtx, "r", tok, nil)
	assert.ErrorIs(t, err, redisverifier.ErrInvalid, "Script.Run with a nil context")
	var nilS *redisverifier.Script
	_, err = nilS.Run(ctx, "r", tok, nil)
	assert.ErrorIs(t, err, redisverifier.ErrInvalid, "Run on a nil *Script")
	_, err = new(redisverifier.Script).Run(ctx, "r", tok, nil)
	assert.ErrorIs(t, err, redisverifier.ErrInvalid, "Run on a zero Script")
}
