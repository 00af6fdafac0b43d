//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/counterbound"
	"github.com/fencelock/fencelock/internal/testenv"
)

// TestRepairCounter: `advance NAME 2^53-2` (a mistyped digit) poisons the
// counter: every later acquire fails. inspect says POISONED;
// repair-counter shows the change, refuses while the lock is held, and
// with --yes lowers the counter to the server's clock, after which the
// lock is taken again and inspect no longer says POISONED.
func TestRepairCounter(t *testing.T) {
	name := lockName(t)
	r := fl(t, "", on("run", name, "--", "true")...)
	require.Equal(t, 0, r.code, r.stderr)
	r = fl(t, "", on("advance", name, strconv.FormatUint(fence.MaxSeq-1, 10))...)
	require.Equal(t, 0, r.code, r.stderr)
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
	assert.LessOrEqual(t, v.Counter, counterbound.Micros(time.Now().Add(time.Minute)), "at the server's clock")

	dir := t.TempDir()
	p, text := holder(t, dir, on("run", "--ttl", "20s", name)...)
	tok, err := fence.Parse(text)
	require.NoError(t, err)
	assert.Less(t, tok.Seq, fence.MaxSeq, "the lock is usable again")

	r = fl(t, "", on("repair-counter", "--yes", name)...)
	assert.Equal(t, 0, r.code, "not poisoned: nothing to do")
	assert.Contains(t, r.stdout, "unchanged: not poisoned")
	stopHolder(t, dir, p)
}

// TestRepairCounterHeld: a poisoned counter of a held lock is not lowered:
// the holder's token came from it.
func TestRepairCounterHeld(t *testing.T) {
	name := lockName(t)
	r := fl(t, "", on("advance", name, strconv.FormatUint(fence.MaxSeq-5, 10))...)
	require.Equal(t, 0, r.code, r.stderr)
	dir := t.TempDir()
	p, _ := holder(t, dir, on("run", "--ttl", "20s", name)...)
	r = fl(t, "", on("repair-counter", "--yes", name)...)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "the lock is held")
	assert.Equal(t, fence.MaxSeq-4, inspectJSON(t, on(name)...).Counter, "unchanged")
	stopHolder(t, dir, p)

	r = fl(t, "", on("repair-counter", "--yes", name)...)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.False(t, inspectJSON(t, on(name)...).Poisoned)
}

// TestCounterBoundStated: the help text says the bound the code uses.
func TestCounterBoundStated(t *testing.T) {
	d, err := time.ParseDuration(aheadText)
	require.NoError(t, err)
	assert.Equal(t, counterbound.Ahead, d)
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
	for _, r := range testenv.NewRedisN(t, 3) {
		urls = append(urls, r.URL())
	}
	flags := []string{"--redis", strings.Join(urls, ",")}
	name := lockName(t)
	r := fl(t, "", append(flags, "advance", name, strconv.FormatUint(fence.MaxSeq-1, 10))...)
	require.Equal(t, 0, r.code, r.stderr)
	v := inspectJSON(t, append(flags, name)...)
	assert.True(t, v.Poisoned)
	require.Len(t, v.Nodes, 3)
	for _, n := range v.Nodes {
		assert.True(t, n.Poisoned, n.Addr)
	}
	r = fl(t, "", append(flags, "repair-counter", "--yes", name)...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, 3, strings.Count(r.stdout, "\nafter     1"), r.stdout)
	v = inspectJSON(t, append(flags, name)...)
	assert.False(t, v.Poisoned)
	r = fl(t, "", append(flags, "run", name, "--", "true")...)
	assert.Equal(t, 0, r.code, r.stderr)
}
