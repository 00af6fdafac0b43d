package luascript_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/luascript"
	"github.com/fencelock/fencelock/internal/testenv"
)

// recorder is a go-redis hook that records the commands the caller's
// client sends: the scripts go through it, hooks and all.
type recorder struct {
	mu   sync.Mutex
	cmds []string
}

func (r *recorder) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *recorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.mu.Lock()
		r.cmds = append(r.cmds, strings.ToLower(cmd.Name()))
		r.mu.Unlock()
		return next(ctx, cmd)
	}
}
func (r *recorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.mu.Lock()
		for _, c := range cmds {
			r.cmds = append(r.cmds, strings.ToLower(c.Name()))
		}
		r.mu.Unlock()
		return next(ctx, cmds)
	}
}

// take returns the commands recorded since the last take, without a new
// connection's handshake.
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var c []string
	for _, n := range r.cmds {
		if n != "hello" && n != "client" {
			c = append(c, n)
		}
	}
	r.cmds = nil
	return c
}

const src = "return ARGV[1] .. KEYS[1]"

func TestRun(t *testing.T) {
	ctx := t.Context()
	c := testenv.NewRedis(t).Client()
	t.Cleanup(func() { c.Close() })
	rec := &recorder{}
	c.AddHook(rec)
	want, err := c.ScriptLoad(ctx, src).Result()
	require.NoError(t, err)
	require.NoError(t, c.ScriptFlush(ctx).Err())
	rec.take()

	// A known hash: EVALSHA, then EVAL on NOSCRIPT (which loads it).
	s := luascript.New(src, want)
	v, err := s.Run(ctx, c, []string{"k"}, "a").Text()
	require.NoError(t, err)
	assert.Equal(t, "ak", v)
	assert.Equal(t, []string{"evalsha", "eval"}, rec.take())
	_, err = s.Run(ctx, c, []string{"k"}, "a").Text()
	require.NoError(t, err)
	assert.Equal(t, []string{"evalsha"}, rec.take())

	// An unknown hash is learned from the server, once.
	u := luascript.New(src, "")
	assert.Empty(t, u.Hash())
	v, err = u.Run(ctx, c, []string{"k"}, "b").Text()
	require.NoError(t, err)
	assert.Equal(t, "bk", v)
	assert.Equal(t, want, u.Hash(), "SCRIPT LOAD's hash")
	assert.Equal(t, []string{"script", "evalsha"}, rec.take())
	_, err = u.Run(ctx, c, []string{"k"}, "b").Text()
	require.NoError(t, err)
	assert.Equal(t, []string{"evalsha"}, rec.take())

	// Through a pipeline, an unknown hash runs by its source.
	p := luascript.New(src, "")
	var cmd *redis.Cmd
	_, err = c.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		cmd = p.Run(ctx, pipe, []string{"k"}, "c")
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, "ck", cmd.Val())
	assert.Equal(t, []string{"eval"}, rec.take())
	assert.Empty(t, p.Hash())

	// Load learns it too; EvalSha then queues by hash.
	require.NoError(t, p.Load(ctx, c))
	assert.Equal(t, want, p.Hash())
	v, err = p.EvalSha(ctx, c, []string{"k"}, "d").Text()
	require.NoError(t, err)
	assert.Equal(t, "dk", v)
}

// TestRunAllocs: a run by a known hash allocates no more than the
// client's own EVALSHA.
func TestRunAllocs(t *testing.T) {
	ctx := t.Context()
	c := testenv.NewRedis(t).Client()
	t.Cleanup(func() { c.Close() })
	sha, err := c.ScriptLoad(ctx, src).Result()
	require.NoError(t, err)
	s := luascript.New(src, sha)
	keys, args := []string{"k"}, []any{"a"}
	evalSha := testing.AllocsPerRun(100, func() {
		if err := c.EvalSha(ctx, sha, keys, args...).Err(); err != nil {
			t.Fatal(err)
		}
	})
	run := testing.AllocsPerRun(100, func() {
		if err := s.Run(ctx, c, keys, args...).Err(); err != nil {
			t.Fatal(err)
		}
	})
	assert.LessOrEqual(t, run, evalSha, "allocations per run (EVALSHA alone: %.0f)", evalSha)
}
