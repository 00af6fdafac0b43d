//go:build linux

package main

import (
	"context"
	"net"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
)

// netnsEnv, set to the fencelock binary's path, tells the test binary that
// TestNoRedisGuessed runs it in a private network namespace.
const netnsEnv = "FENCELOCK_TEST_NETNS_BIN"

// wellKnown is the address a lock tool would guess: Redis's default.
const wellKnown = "127.0.0.1:6379"

// TestNoRedisGuessed: with neither --redis nor REDIS_URL, run, inspect,
// advance and doctor exit 2 with one line and a hint, and a Redis
// listening on 127.0.0.1:6379 sees no connection and no command.
//
// That port is often taken by the host's own Redis, which a test must not
// use: the test then runs itself again in a network namespace of its own
// (unshare --net --map-root-user), where 127.0.0.1:6379 is free and the only
// Redis on it is the test's.
func TestNoRedisGuessed(t *testing.T) {
	if os.Getenv(netnsEnv) == "" && !free(wellKnown) {
		inNetNS(t)
		return
	}
	if os.Getenv(netnsEnv) != "" {
		out, err := exec.Command("ip", "link", "set", "lo", "up").CombinedOutput()
		require.NoError(t, err, "ip link set lo up: %s", out)
	}
	srv := testenv.NewRedis(t, testenv.RedisOptions{Port: 6379})
	require.Equal(t, wellKnown, srv.Addr())
	// One connection, opened before the commands run: what the server
	// counts afterwards is theirs.
	probe := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 1, ContextTimeoutEnabled: true})
	defer probe.Close()
	ctx := t.Context()
	require.NoError(t, probe.ConfigResetStat(ctx).Err())

	hint := regexp.MustCompile(`^fencelock: no Redis given: pass --redis URL or set REDIS_URL \(fencelock never guesses its server\)\nRun 'fencelock help (run|inspect|advance|doctor)' \(or -h\) for usage\.\n$`)
	for _, args := range [][]string{
		{"run", "nightly", "--", "true"},
		{"run", "--wait", "1s", "nightly", "--", "true"},
		{"inspect", "nightly"},
		{"advance", "nightly", "7"},
		{"doctor"},
		{"doctor", "--json"},
	} {
		r := fl(t, "", args...) // REDIS_URL is set empty: unset, as cron leaves it
		assert.Equal(t, exitUsage, r.code, args)
		assert.Regexp(t, hint, r.stderr, args)
		assert.Empty(t, r.stdout, args)
	}
	conns, cmds := served(ctx, t, probe)
	assert.Zero(t, conns, "connections to %s", wellKnown)
	assert.Empty(t, cmds, "commands run on %s", wellKnown)

	// The counts can see a command that does connect.
	r := fl(t, "", "--redis", srv.URL(), "inspect", "nightly")
	require.Equal(t, exitOK, r.code, r.stderr)
	conns, cmds = served(ctx, t, probe)
	assert.Positive(t, conns)
	assert.NotEmpty(t, cmds)
}

// served returns the connections the server accepted since CONFIG
// RESETSTAT, and the commands it ran other than the probe's own.
func served(ctx context.Context, t *testing.T, probe *redis.Client) (int64, []string) {
	t.Helper()
	info, err := probe.Info(ctx, "stats", "commandstats").Result()
	require.NoError(t, err)
	var conns int64 = -1
	var cmds []string
	for _, line := range strings.Split(info, "\r\n") {
		k, v, _ := strings.Cut(line, ":")
		switch {
		case k == "total_connections_received":
			conns = parseInt(t, v)
		case strings.HasPrefix(k, "cmdstat_") && k != "cmdstat_info" && k != "cmdstat_config|resetstat":
			cmds = append(cmds, line)
		}
	}
	require.NotEqual(t, int64(-1), conns, "INFO stats:\n%s", info)
	return conns, cmds
}

func parseInt(t *testing.T, s string) int64 {
	t.Helper()
	var n int64
	for _, c := range s {
		require.True(t, c >= '0' && c <= '9', "not a number: %q", s)
		n = 10*n + int64(c-'0')
	}
	return n
}

// free reports whether addr can be listened on.
func free(addr string) bool {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// inNetNS runs TestNoRedisGuessed again in a network namespace of its own
// and fails if it did not pass there.
func inNetNS(t *testing.T) {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skipf("%s is taken and unshare is not installed: cannot give the test a free %s", wellKnown, wellKnown)
	}
	cmd := exec.CommandContext(t.Context(), unshare, "--net", "--map-root-user",
		os.Args[0], "-test.run=^TestNoRedisGuessed$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), netnsEnv+"="+bin)
	out, err := cmd.CombinedOutput()
	t.Logf("%s is taken here; in a network namespace of its own:\n%s", wellKnown, out)
	require.NoError(t, err)
	require.Contains(t, string(out), "--- PASS: TestNoRedisGuessed")
}
