//go:build unix

package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/testenv"
)

// connections is how many connections r has accepted so far.
func connections(t *testing.T, probe *redis.Client) int64 {
	t.Helper()
	info, err := probe.Info(t.Context(), "stats").Result()
	require.NoError(t, err)
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "total_connections_received:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
			return n
		}
	}
	t.Fatal("no total_connections_received in INFO stats")
	return 0
}

// TestBadInputRefused: bad input is a usage error (status 2) before any
// I/O: the Redis the command would reach gets no connection and no key.
// Control characters in names (a newline forged an inspect line), an empty
// host (go-redis dialled localhost, here the test's own Redis), durations
// past their ceilings or overflowing (--once-per 2562047h ran the command,
// then failed to record it), URL options that made go-redis panic or run
// out of memory, NaN and infinite --drift. Each was accepted before
// (repair-counter's name until its opening became inspect's).
func TestBadInputRefused(t *testing.T) {
	t.Parallel()
	r := testenv.NewRedis(t)
	probe := r.Client()
	t.Cleanup(func() { probe.Close() })
	port := strconv.Itoa(r.Port())
	at := []string{"--redis", r.URL()}
	with := func(u string, args ...string) []string { return append([]string{"--redis", u}, args...) }
	for _, tc := range []struct {
		what string
		args []string
		env  string
	}{
		{"newline in inspect's name", append(at, "inspect", "x\nholder    (free)"), ""},
		{"tab in run's name", append(at, "run", "x\ty", "--", "true"), ""},
		{"escape in advance's name", append(at, "advance", "x\x1b[2J", "5"), ""},
		{"right-to-left override in a name", append(at, "inspect", "x\u202egnp.exe"), ""},
		{"newline in repair-counter's name", append(at, "repair-counter", "x\nholder    (free)"), ""},
		{"newline in reset-highwater's name", append(at, "reset-highwater", "--verifier", r.URL(), "x\ny", "res"), ""},
		{"newline in a resource", append(at, "reset-highwater", "--verifier", r.URL(), "x", "res\nx"), ""},
		{"newline in doctor --name", append(at, "doctor", "--name", "a\nb"), ""},
		{"newline in --prefix", append(at, "--prefix", "p\n", "inspect", "x"), ""},
		{"empty host", with("redis://:"+port+"/0", "inspect", "x"), ""},
		{"empty host in REDIS_URL", []string{"run", "x", "--", "true"}, "REDIS_URL=redis://:" + port + "/0"},
		{"no host", with("redis:///0", "inspect", "x"), ""},
		{"empty host in a cluster", with("redis+cluster://"+r.Addr()+",:"+port, "inspect", "x"), ""},
		{"empty host in a sentinel URL", with("redis+sentinel://:"+port+"?master_name=m", "inspect", "x"), ""},
		{"empty host in a verifier URL", append(at, "reset-highwater", "--verifier", "redis://:"+port+"/0", "x", "res"), ""},
		{"--ttl above the ceiling", append(at, "run", "--ttl", "2h", "x", "--", "true"), ""},
		{"--ttl that overflows", append(at, "run", "--ttl", "2562047h", "x", "--", "true"), ""},
		{"--wait above the ceiling", append(at, "run", "--wait", "25h", "x", "--", "true"), ""},
		{"--grace above the ceiling", append(at, "run", "--grace", "2h", "x", "--", "true"), ""},
		{"--timeout above the ceiling", append(at, "--timeout", "2h", "inspect", "x"), ""},
		{"--once-per that overflows", append(at, "run", "--once-per", "2562047h", "x", "--", "true"), ""},
		{"--once-per above the ceiling", append(at, "run", "--once-per", "87601h", "x", "--", "true"), ""},
		{"negative pool_size", with(r.URL()+"?pool_size=-5", "run", "x", "--", "true"), ""},
		{"huge pool_size", with(r.URL()+"?pool_size=100000000", "run", "x", "--", "true"), ""},
		{"huge min_idle_conns", with(r.URL()+"?min_idle_conns=100000000", "inspect", "x"), ""},
		{"pool_size twice", with(r.URL()+"?pool_size=1&pool_size=-5", "inspect", "x"), ""},
		{"doctor, huge pool_size", with(r.URL()+"?pool_size=100000000", "doctor"), ""},
		{"doctor --drift NaN", append(at, "doctor", "--drift", "NaN"), ""},
		{"doctor --drift Inf", append(at, "doctor", "--drift", "Inf"), ""},
		{"doctor --drift -Inf", append(at, "doctor", "--drift", "-Inf"), ""},
		{"doctor --ttl above the ceiling", append(at, "doctor", "--ttl", "2h"), ""},
		{"--permits 0", append(at, "run", "--permits", "0", "x", "--", "true"), ""},
		{"--permits 65", append(at, "run", "--permits", "65", "x", "--", "true"), ""},
		{"--permits -1", append(at, "run", "--permits", "-1", "x", "--", "true"), ""},
		{"--permits x", append(at, "run", "--permits", "x", "x", "--", "true"), ""},
		{"inspect --permits 0", append(at, "inspect", "--permits", "0", "x"), ""},
		{"inspect --permits 65", append(at, "inspect", "--permits", "65", "x"), ""},
		{"--permits with --once-per", append(at, "run", "--permits", "2", "--once-per", "1h", "x", "--", "true"), ""},
		{"--permits whose names are too long", append(at, "run", "--permits", "64", strings.Repeat("n", fence.MaxKeyLen-2), "--", "true"), ""},
		{"inspect --permits whose names are too long", append(at, "inspect", "--permits", "64", strings.Repeat("n", fence.MaxKeyLen-2)), ""},
	} {
		t.Run(tc.what, func(t *testing.T) {
			before := connections(t, probe)
			res := startEnv(t, "", tc.env, tc.args...).wait(t)
			assert.Equal(t, exitUsage, res.code)
			assert.True(t, strings.HasPrefix(res.stderr, "fencelock: "), "stderr says why")
			assert.NotContains(t, res.stderr, "goroutine ", "no panic")
			assert.Equal(t, before, connections(t, probe), "no connection to Redis")
		})
	}
	n, err := probe.DBSize(t.Context()).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "nothing written")
}

// TestInspectNoTTLAndForgedHolder: a lock key without a ttl (made by
// hand) is shown as such, in text and JSON, and a try says the time is
// unknown (before: "ttl 0s", "held ... for -1ms"); a holder id with a
// newline, written by another client, is quoted, not printed as a line.
func TestInspectNoTTLAndForgedHolder(t *testing.T) {
	t.Parallel()
	rdb := redis.NewClient(&redis.Options{Addr: strings.TrimSuffix(strings.TrimPrefix(redisURL, "redis://"), "/0")})
	t.Cleanup(func() { rdb.Close() })
	name := lockName(t)
	key := protocol.KeysFor(defaultPrefix, name).Lock
	require.NoError(t, rdb.Set(t.Context(), key, protocol.LockValue("by-hand", 7), 0).Err())
	t.Cleanup(func() { rdb.Del(t.Context(), key) })

	r := fl(t, "", on("inspect", name)...)
	assert.Contains(t, r.stdout, "\nttl       none (the key never expires")
	v := inspectJSON(t, on(name)...)
	assert.True(t, v.NoTTL)
	assert.Equal(t, int64(-1), v.TTLms)
	r = fl(t, "", on("run", name, "--", "true")...)
	assert.Equal(t, exitNotAcquired, r.code)
	assert.NotContains(t, r.stderr, "-1ms")
	assert.Contains(t, r.stderr, "for a time unknown")

	require.NoError(t, rdb.Set(t.Context(), key, protocol.LockValue("x\nholder    (free)", 7), 0).Err())
	r = fl(t, "", on("inspect", name)...)
	assert.Equal(t, 0, r.code)
	assert.NotContains(t, r.stdout, "\nholder    (free)")
	assert.Contains(t, r.stdout, `holder    "x\nholder    (free)"`)
	var out view
	r = fl(t, "", on("inspect", "--json", name)...)
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &out))
	assert.Equal(t, "x\nholder    (free)", out.Holder, "JSON carries the holder as it is")
}

// TestRedisDownOneLine: with Redis down, each command says so in one line
// on stderr, with the cause, and go-redis's own log lines ("failed to dial
// after N attempts") are not printed beside it.
func TestRedisDownOneLine(t *testing.T) {
	t.Parallel()
	closed := "redis://" + testenv.ClosedAddr(t) + "/0"
	nodes := closed + "," + "redis://" + testenv.ClosedAddr(t) + "/0," + "redis://" + testenv.ClosedAddr(t) + "/0"
	name := lockName(t)
	require.Equal(t, 0, fl(t, "", on("run", name, "--", "true")...).code, "a lock with a counter, for reset-highwater")
	for _, args := range [][]string{
		{"--redis", closed, "run", name, "--", "true"},
		{"--redis", closed, "run", "--wait", "1s", name, "--", "true"},
		{"--redis", closed, "inspect", name},
		{"--redis", closed, "advance", name, "5"},
		{"--redis", closed, "doctor"},
		{"--redis", closed, "reset-highwater", "--verifier", closed, name, "res"},
		{"--redis", redisURL, "reset-highwater", "--verifier", closed, name, "res"},
		{"--redis", nodes, "run", name, "--", "true"},
		{"--redis", nodes, "inspect", name},
	} {
		r := fl(t, "", args...)
		assert.NotEqual(t, 0, r.code, "%q", args)
		assert.Regexp(t, `^fencelock: [^\n]*connection refused[^\n]*\n$`, r.stderr, "%q: one line, with the cause", args)
		assert.NotContains(t, r.stderr, "failed to dial", "%q", args)
	}
}
