//go:build unix

package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/redisverifier"
)

// poison sets lock name's counter on the Redis at url to seq: what an
// advance to a mistyped number, or heal.Write after a verifier accepted a
// forged token, left behind before they refused to lift a counter that far
// (and what any client with write access to the keys can still do).
func poison(t *testing.T, url, name string, seq uint64) {
	t.Helper()
	o, err := redis.ParseURL(url)
	require.NoError(t, err)
	c := redis.NewClient(o)
	defer c.Close()
	require.NoError(t, c.Set(t.Context(), protocol.KeysFor(defaultPrefix, name).Counter, seq, 0).Err())
}

// TestRepairCounter: a counter poisoned to 2^53-2 (a verifier accepted a
// forged token, and heal.Write lifted the counter past it) retires the
// lock: every acquire after the next fails. inspect says POISONED, doctor
// names it; repair-counter shows the change, and with --yes lowers the
// counter to the server's clock; the lock is taken again, and after
// reset-highwater (the verifier saw the forged token) its holder writes.
// The documented way back, from start to end.
func TestRepairCounter(t *testing.T) {
	ctx := t.Context()
	rdb := redis.NewClient(&redis.Options{Addr: strings.TrimSuffix(strings.TrimPrefix(redisURL, "redis://"), "/0")})
	t.Cleanup(func() { rdb.Close() })
	rv, err := redisverifier.New(rdb)
	require.NoError(t, err)
	name, res := lockName(t), "ledger/"+lockName(t)

	r := fl(t, "", on("run", name, "--", "true")...)
	require.Equal(t, 0, r.code, r.stderr)
	forged := fence.Token{Key: name, Seq: fence.MaxSeq - 1, Holder: "mallory"}
	require.NoError(t, rv.Claim(ctx, res, forged), "a verifier trusts its callers")
	poison(t, redisURL, name, forged.Seq)
	r = fl(t, "", on("run", name, "--", "true")...)
	require.Equal(t, 0, r.code, "one more token fits: 2^53-1")
	r = fl(t, "", on("run", name, "--", "true")...)
	require.NotEqual(t, 0, r.code, "the lock is retired: its counter is at 2^53-1")

	v := inspectJSON(t, on(name)...)
	assert.True(t, v.Poisoned)
	assert.Contains(t, fl(t, "", on("inspect", name)...).stdout, "POISONED")

	r = fl(t, "", on("doctor")...)
	assert.Contains(t, r.stdout, "DANGER  counters  ")
	r = fl(t, "", on("doctor", "--json")...)
	assert.Contains(t, r.stdout, name+" (9007199254740991)") // JSON: not wrapped

	r = fl(t, "", on("repair-counter", name)...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "not done: add --yes")
	assert.Equal(t, fence.MaxSeq, inspectJSON(t, on(name)...).Counter, "unchanged without --yes")

	r = fl(t, "", on("repair-counter", "--yes", name)...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "reset-highwater")
	v = inspectJSON(t, on(name)...)
	assert.False(t, v.Poisoned)
	assert.NotContains(t, fl(t, "", on("doctor", "--json")...).stdout, name)
	assert.LessOrEqual(t, v.Counter, protocol.Micros(time.Now().Add(time.Minute)), "at the server's clock")

	dir := t.TempDir()
	p, text := holder(t, dir, on("run", "--ttl", "20s", name)...)
	tok, err := fence.Parse(text)
	require.NoError(t, err)
	assert.Less(t, tok.Seq, forged.Seq, "the lock is usable again")
	require.ErrorIs(t, rv.Claim(ctx, res, tok), verifier.ErrStale, "the verifier saw the forged token")
	r = fl(t, "", on("reset-highwater", "--verifier", redisURL, "--yes", name, res)...)
	require.Equal(t, 0, r.code, r.stderr)
	require.NoError(t, rv.Claim(ctx, res, tok), "the holder writes again")

	r = fl(t, "", on("repair-counter", "--yes", name)...)
	assert.Equal(t, 0, r.code, "not poisoned: nothing to do")
	assert.Contains(t, r.stdout, "unchanged: not poisoned")
	stopHolder(t, dir, p)
}

// TestRepairCounterHeld: a poisoned counter of a held lock is not lowered:
// the holder's token came from it.
func TestRepairCounterHeld(t *testing.T) {
	name := lockName(t)
	poison(t, redisURL, name, fence.MaxSeq-5)
	dir := t.TempDir()
	p, _ := holder(t, dir, on("run", "--ttl", "20s", name)...)
	r := fl(t, "", on("repair-counter", "--yes", name)...)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "the lock is held")
	assert.Equal(t, fence.MaxSeq-4, inspectJSON(t, on(name)...).Counter, "unchanged")
	stopHolder(t, dir, p)

	r = fl(t, "", on("repair-counter", "--yes", name)...)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.False(t, inspectJSON(t, on(name)...).Poisoned)
}

// TestRepairCounterACL: under fencelock's own ACL (docs/operating.md)
// repair-counter's EXEC is refused; the error names the permission to add,
// and with it the repair goes through.
func TestRepairCounterACL(t *testing.T) {
	name := lockName(t)
	poison(t, redisURL, name, fence.MaxSeq-5)
	o, err := redis.ParseURL(redisURL)
	require.NoError(t, err)
	admin := redis.NewClient(o)
	defer admin.Close()
	user := "repair-" + strings.ToLower(strings.ReplaceAll(name, "/", "-"))
	rules := []any{"ACL", "SETUSER", user, "reset", "on", ">pw", "resetkeys", "resetchannels", "~fencelock:*", "&fencelock:*",
		"-@all", "+@read", "+@write", "+@scripting", "+@pubsub", "+@connection", "+@fast"}
	require.NoError(t, admin.Do(t.Context(), rules...).Err())
	t.Cleanup(func() { admin.Do(context.Background(), "ACL", "DELUSER", user) })
	as := strings.Replace(redisURL, "redis://", "redis://"+user+":pw@", 1)

	r := fl(t, "", "--redis", as, "repair-counter", "--yes", name)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "needs +@transaction")
	assert.True(t, inspectJSON(t, on(name)...).Poisoned, "unchanged")

	require.NoError(t, admin.Do(t.Context(), "ACL", "SETUSER", user, "+@transaction").Err())
	r = fl(t, "", "--redis", as, "repair-counter", "--yes", name)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.False(t, inspectJSON(t, on(name)...).Poisoned)
}

// TestCounterBoundStated: the help text says the bound the code uses.
func TestCounterBoundStated(t *testing.T) {
	d, err := time.ParseDuration(aheadText)
	require.NoError(t, err)
	assert.Equal(t, protocol.MaxAhead, d)
}

// stopHolder ends a holder started in dir and checks it exited 0.
func stopHolder(t *testing.T, dir string, p *proc) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stop"), nil, 0o600))
	require.Equal(t, 0, p.wait(t).code)
}

// TestRepairCounterRedlock: a counter poisoned on every Redlock node is
// marked by inspect and lowered on each node by repair-counter.
func TestRepairCounterRedlock(t *testing.T) {
	var urls []string
	name := lockName(t)
	for _, r := range testenv.NewRedisN(t, 3) {
		urls = append(urls, r.URL())
		poison(t, r.URL(), name, fence.MaxSeq-1)
	}
	flags := []string{"--redis", strings.Join(urls, ",")}
	v := inspectJSON(t, append(flags, name)...)
	assert.True(t, v.Poisoned)
	require.Len(t, v.Nodes, 3)
	for _, n := range v.Nodes {
		assert.True(t, n.Poisoned, n.Addr)
	}
	r := fl(t, "", append(flags, "repair-counter", "--yes", name)...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, 3, strings.Count(r.stdout, "\nafter     1"), r.stdout)
	v = inspectJSON(t, append(flags, name)...)
	assert.False(t, v.Poisoned)
	r = fl(t, "", append(flags, "run", name, "--", "true")...)
	assert.Equal(t, 0, r.code, r.stderr)
}
