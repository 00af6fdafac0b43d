package redisverifier_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/redisverifier"
	"github.com/fencelock/fencelock/verifier/verifiertest"
)

// rdb is a client of the throwaway Redis that TestMain starts.
var rdb *redis.Client

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := testenv.StartRedis(ctx, testenv.RedisOptions{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer r.Close()
	rdb = r.Client()
	defer rdb.Close()
	return m.Run()
}

// newVerifier returns a verifier on c, failing the test on an error.
func newVerifier(t testing.TB, c redis.Scripter, opts ...redisverifier.Option) *redisverifier.Verifier {
	t.Helper()
	v, err := redisverifier.New(c, opts...)
	require.NoError(t, err)
	return v
}

// newScript fences body with v, failing the test on an error.
func newScript(t testing.TB, v *redisverifier.Verifier, body string) *redisverifier.Script {
	t.Helper()
	s, err := v.NewScript(body)
	require.NoError(t, err)
	return s
}

// appendLog is a caller's script: it appends "seq:holder" to a list.
const appendLog = `return redis.call('RPUSH', KEYS[1], FENCE_SEQ .. ':' .. FENCE_HOLDER)`

// failAfterWrite writes and then fails.
const failAfterWrite = `
redis.call('SET', KEYS[2], 'half-done')
return redis.error_reply('disk quota exceeded')`

func TestVerifier(t *testing.T) {
	v := newVerifier(t, rdb)
	logScript := newScript(t, v, appendLog)
	failScript := newScript(t, v, failAfterWrite)
	logKey := func(resource string) string { return "log:" + resource }
	verifiertest.Run(t, verifiertest.Harness{
		V:       v,
		Highest: v.Highest,
		Write: func(ctx context.Context, resource string, tok fence.Token) error {
			_, err := logScript.Run(ctx, resource, tok, []string{logKey(resource)})
			return err
		},
		Log: func(ctx context.Context, resource string) ([]fence.Token, error) {
			entries, err := rdb.LRange(ctx, logKey(resource), 0, -1).Result()
			if err != nil {
				return nil, err
			}
			toks := make([]fence.Token, 0, len(entries))
			for _, e := range entries {
				seq, holder, _ := strings.Cut(e, ":")
				n, err := strconv.ParseUint(seq, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("log entry %q: %w", e, err)
				}
				toks = append(toks, fence.Token{Seq: n, Holder: holder})
			}
			return toks, nil
		},
		FailWrite: func(ctx context.Context, resource string, tok fence.Token) error {
			_, err := failScript.Run(ctx, resource, tok, []string{logKey(resource), "other:" + resource})
			return err
		},
	})
}

func TestSet(t *testing.T) {
	ctx := t.Context()
	v := newVerifier(t, rdb, redisverifier.WithPrefix("test-set:"))
	res := verifiertest.Resource(t, "r")
	key := "data:" + res

	require.NoError(t, v.Set(ctx, res, verifiertest.Tok(5, "a"), key, "from 5", 0))
	assert.Equal(t, "from 5", rdb.Get(ctx, key).Val())
	assert.Equal(t, time.Duration(-1), rdb.PTTL(ctx, key).Val(), "no ttl")
	assert.Equal(t, "5", rdb.HGet(ctx, "test-set:"+res, "seq").Val(), "the prefix is used")

	err := v.Set(ctx, res, verifiertest.Tok(4, "b"), key, "from 4", 0)
	verifiertest.RequireStale(t, err, verifiertest.Tok(4, "b"), 5, "a")
	err = v.Set(ctx, res, verifiertest.Tok(5, "b"), key, "from 5b", 0)
	verifiertest.RequireStale(t, err, verifiertest.Tok(5, "b"), 5, "a")
	assert.Equal(t, "from 5", rdb.Get(ctx, key).Val(), "stale writes did not land")

	require.NoError(t, v.Set(ctx, res, verifiertest.Tok(6, "b"), key, 42, time.Minute))
	assert.Equal(t, "42", rdb.Get(ctx, key).Val())
	assert.InDelta(t, time.Minute, rdb.PTTL(ctx, key).Val(), float64(5*time.Second))

	assert.ErrorIs(t, v.Set(ctx, res, verifiertest.Tok(7, "b"), key, "x", -time.Second), redisverifier.ErrInvalid)
	err = v.Set(ctx, res, verifiertest.Tok(7, "b"), v.Key(res), "x", 0)
	assert.ErrorContains(t, err, "is the high-water")
	assert.ErrorIs(t, err, redisverifier.ErrInvalid)
	seq, _, err := v.Highest(ctx, res)
	require.NoError(t, err)
	assert.Equal(t, uint64(6), seq)
}

func TestHSet(t *testing.T) {
	ctx := t.Context()
	v := newVerifier(t, rdb)
	res := verifiertest.Resource(t, "r")
	key := "hash:" + res

	require.NoError(t, v.HSet(ctx, res, verifiertest.Tok(3, "a"), key, "name", "ada", "n", 1))
	err := v.HSet(ctx, res, verifiertest.Tok(2, "a"), key, "name", "eve")
	verifiertest.RequireStale(t, err, verifiertest.Tok(2, "a"), 3, "a")
	assert.Equal(t, map[string]string{"name": "ada", "n": "1"}, rdb.HGetAll(ctx, key).Val())

	assert.ErrorIs(t, v.HSet(ctx, res, verifiertest.Tok(4, "a"), key, "odd"), redisverifier.ErrInvalid)
	assert.ErrorIs(t, v.HSet(ctx, res, verifiertest.Tok(4, "a"), key), redisverifier.ErrInvalid)

	// A failing write (wrong type) leaves the high-water as it was.
	require.NoError(t, rdb.Set(ctx, "string:"+res, "s", 0).Err())
	err = v.HSet(ctx, res, verifiertest.Tok(9, "a"), "string:"+res, "f", "v")
	require.ErrorContains(t, err, "WRONGTYPE")
	seq, _, err := v.Highest(ctx, res)
	require.NoError(t, err)
	assert.Equal(t, uint64(3), seq)
}

func TestScriptResultAndErrors(t *testing.T) {
	ctx := t.Context()
	v := newVerifier(t, rdb)
	res := verifiertest.Resource(t, "r")

	count := newScript(t, v, `
redis.call('SET', KEYS[1], ARGV[1])
return {redis.call('STRLEN', KEYS[1]), ARGV[2], FENCE_SEQ, FENCE_HOLDER, #KEYS, #ARGV}`)
	got, err := count.Run(ctx, res, verifiertest.Tok(8, "h"), []string{"k:" + res}, "hello", "x")
	require.NoError(t, err)
	assert.Equal(t, []any{int64(5), "x", "8", "h", int64(1), int64(2)}, got,
		"the body sees only its own keys and args, and the token")

	noResult := newScript(t, v, `redis.call('DEL', KEYS[1])`)
	got, err = noResult.Run(ctx, res, verifiertest.Tok(8, "h"), []string{"k:" + res})
	require.NoError(t, err)
	assert.Nil(t, got)

	broken := newScript(t, v, `return redis.call('SET', KEYS[1]`)
	_, err = broken.Run(ctx, res, verifiertest.Tok(9, "h"), []string{"k:" + res})
	require.Error(t, err)
	assert.NotErrorIs(t, err, verifier.ErrStale)
	seq, _, err := v.Highest(ctx, res)
	require.NoError(t, err)
	assert.Equal(t, uint64(8), seq, "a script that does not compile changes nothing")
}

// TestCorruptHighWater checks that a high-water that is not a number is an
// error, never read as "no high-water" (which would accept any token).
func TestCorruptHighWater(t *testing.T) {
	ctx := t.Context()
	v := newVerifier(t, rdb)
	res := verifiertest.Resource(t, "r")
	require.NoError(t, rdb.HSet(ctx, v.Key(res), "seq", "lots", "holder", "a").Err())
	err := v.Claim(ctx, res, verifiertest.Tok(1, "a"))
	require.ErrorContains(t, err, "is corrupt")
	assert.NotErrorIs(t, err, verifier.ErrStale)

	require.NoError(t, rdb.Set(ctx, v.Key(res), "not a hash", 0).Err())
	require.ErrorContains(t, v.Claim(ctx, res, verifiertest.Tok(1, "a")), "WRONGTYPE")
}

// TestRedisDown checks that a fenced write to a Redis that is down fails,
// and that one to a Redis that paused waits and then obeys the rule.
func TestRedisDown(t *testing.T) {
	ctx := t.Context()
	r := testenv.NewRedis(t)
	opt := r.Options()
	opt.ReadTimeout, opt.MaxRetries = 200*time.Millisecond, -1
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	v := newVerifier(t, c)
	require.NoError(t, v.Set(ctx, "r", verifiertest.Tok(2, "a"), "k", "v2", 0))

	require.NoError(t, r.Pause())
	err := v.Set(ctx, "r", verifiertest.Tok(3, "a"), "k", "v3", 0)
	require.Error(t, err)
	assert.NotErrorIs(t, err, verifier.ErrStale)
	require.NoError(t, r.Resume())
	// The timed-out SET may or may not have run; either way token 1 is stale.
	verifiertest.RequireStale(t, v.Set(ctx, "r", verifiertest.Tok(1, "a"), "k", "v1", 0), verifiertest.Tok(1, "a"),
		func() uint64 { s, _, _ := v.Highest(ctx, "r"); return s }(), "a")

	require.NoError(t, r.Kill())
	require.Error(t, v.Claim(ctx, "r", verifiertest.Tok(4, "a")))
}
