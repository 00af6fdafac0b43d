package doctor_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease/doctor"
)

// server starts a redis-server with args and returns a client for it.
func server(t *testing.T, args ...string) *redis.Client {
	t.Helper()
	r := testenv.NewRedis(t, testenv.RedisOptions{Args: args})
	return client(t, r)
}

func client(t *testing.T, r *testenv.Redis) *redis.Client {
	t.Helper()
	opt := r.Options()
	opt.ContextTimeoutEnabled = true
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

// replicated starts a primary with a replica, both with args.
func replicated(t *testing.T, args ...string) (primary, replica *testenv.Redis) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	p, r, err := testenv.StartReplicated(ctx, testenv.RedisOptions{Args: args})
	require.NoError(t, err)
	t.Cleanup(func() { r.Close(); p.Close() })
	return p, r
}

func check(t *testing.T, rdb redis.UniversalClient, opts ...doctor.Option) []doctor.Finding {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	fs, err := doctor.Check(ctx, rdb, opts...)
	require.NoError(t, err)
	for _, f := range fs {
		t.Logf("%-6s %-14s %v %s | %s | %s", f.Severity, f.Check, f.Servers, f.Finding, f.Consequence, f.Fix)
	}
	return fs
}

// only returns the findings of check.
func only(fs []doctor.Finding, check string) []doctor.Finding {
	return slices.DeleteFunc(slices.Clone(fs), func(f doctor.Finding) bool { return f.Check != check })
}

// on returns the finding of check that holds for server.
func on(t *testing.T, fs []doctor.Finding, check, server string) doctor.Finding {
	t.Helper()
	got := slices.DeleteFunc(only(fs, check), func(f doctor.Finding) bool { return !slices.Contains(f.Servers, server) })
	return one(t, got, check)
}

// one returns the single finding of check, of severity sev if given.
func one(t *testing.T, fs []doctor.Finding, check string, sev ...doctor.Severity) doctor.Finding {
	t.Helper()
	got := only(fs, check)
	if len(sev) > 0 {
		got = slices.DeleteFunc(got, func(f doctor.Finding) bool { return f.Severity != sev[0] })
	}
	require.Len(t, got, 1, "findings of %s", check)
	f := got[0]
	assert.NotEmpty(t, f.Finding)
	if f.Severity > doctor.Info {
		assert.NotEmpty(t, f.Consequence, "a %s finding states its consequence", f.Severity)
		assert.NotEmpty(t, f.Fix, "a %s finding states its fix", f.Severity)
	}
	return f
}

func TestWellConfigured(t *testing.T) {
	rdb := server(t, "--appendonly", "yes", "--maxmemory", "100mb", "--maxmemory-policy", "noeviction")
	fs := check(t, rdb, doctor.WithTTL(30*time.Second))
	assert.Less(t, doctor.Worst(fs), doctor.Danger)
	var checks []string
	for _, f := range fs {
		checks = append(checks, f.Check)
		assert.Equal(t, []string{rdb.Options().Addr}, f.Servers)
	}
	// Every per-server check reports, in order.
	assert.Equal(t, []string{doctor.CheckVersion, doctor.CheckEviction, doctor.CheckPersistence, doctor.CheckReplication,
		doctor.CheckClock, doctor.CheckLatency, doctor.CheckAuth, doctor.CheckTransport, doctor.CheckCounters}, checks)
	assert.Regexp(t, `^(redis|valkey) \d+\.\d+`, one(t, fs, doctor.CheckVersion, doctor.Info).Finding)
	assert.Contains(t, one(t, fs, doctor.CheckAuth, doctor.Warn).Finding, "default user has no password")
	assert.Contains(t, one(t, fs, doctor.CheckTransport, doctor.Info).Finding, "plaintext, on this host")
	assert.Equal(t, doctor.Info, one(t, fs, doctor.CheckPersistence).Severity, "AOF everysec")
	assert.Equal(t, doctor.Info, one(t, fs, doctor.CheckEviction).Severity)
	assert.Equal(t, doctor.Info, one(t, fs, doctor.CheckClock).Severity, "same host, same clock")
	// Loopback round trips are far below a 30s lease's allowance, unless the
	// machine is very busy: latency is never Danger anyway.
	assert.NotEqual(t, doctor.Danger, one(t, fs, doctor.CheckLatency).Severity)
}

func TestEviction(t *testing.T) {
	for _, tc := range []struct {
		policy string
		want   doctor.Severity
		says   string
	}{
		{"allkeys-lru", doctor.Danger, "any key"},
		{"volatile-ttl", doctor.Danger, "every held lock"},
		{"noeviction", doctor.Info, "noeviction"},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			rdb := server(t, "--maxmemory", "10mb", "--maxmemory-policy", tc.policy)
			f := one(t, check(t, rdb), doctor.CheckEviction)
			assert.Equal(t, tc.want, f.Severity)
			assert.Contains(t, f.Finding, tc.says)
		})
	}
	t.Run("no maxmemory", func(t *testing.T) {
		rdb := server(t, "--maxmemory-policy", "allkeys-lru")
		f := one(t, check(t, rdb), doctor.CheckEviction)
		assert.Equal(t, doctor.Info, f.Severity)
		assert.NotEmpty(t, f.Fix, "says how to stay safe if a maxmemory comes")
	})
}

func TestPersistence(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want doctor.Severity
		says string
	}{
		{"none", []string{"--save", "", "--appendonly", "no"}, doctor.Danger, "no persistence"},
		{"rdb only", []string{"--save", "3600 1", "--appendonly", "no"}, doctor.Danger, "RDB snapshots only"},
		{"fsync no", []string{"--appendonly", "yes", "--appendfsync", "no"}, doctor.Warn, "appendfsync no"},
		{"fsync always", []string{"--appendonly", "yes", "--appendfsync", "always"}, doctor.Info, "appendfsync always"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := one(t, check(t, server(t, tc.args...)), doctor.CheckPersistence)
			assert.Equal(t, tc.want, f.Severity)
			assert.Contains(t, f.Finding, tc.says)
		})
	}
	t.Run("clock floor", func(t *testing.T) {
		rdb := server(t, "--save", "", "--appendonly", "no")
		f := one(t, check(t, rdb), doctor.CheckPersistence)
		assert.Contains(t, f.Consequence, "tokens still grow, unless", "the counter rule and its limit")
	})
}

func TestReplication(t *testing.T) {
	primary, replica := replicated(t, "--appendonly", "yes")
	rdb := client(t, primary)

	f := one(t, check(t, rdb), doctor.CheckReplication)
	assert.Equal(t, doctor.Danger, f.Severity)
	assert.Contains(t, f.Finding, "min-replicas-to-write")
	assert.Contains(t, f.Consequence, "failover")

	f = one(t, check(t, rdb, doctor.WithReplicaAck(1)), doctor.CheckReplication)
	assert.Equal(t, doctor.Info, f.Severity, "the leases wait for the replica")
	f = one(t, check(t, rdb, doctor.WithReplicaAck(2)), doctor.CheckReplication)
	assert.Equal(t, doctor.Warn, f.Severity, "more than there are: acquires fail")

	require.NoError(t, rdb.ConfigSet(t.Context(), "min-replicas-to-write", "1").Err())
	f = one(t, check(t, rdb), doctor.CheckReplication)
	assert.Equal(t, doctor.Warn, f.Severity, "the loss is bounded by the lag")
	assert.Contains(t, f.Finding, "min-replicas-to-write is 1")

	// The replica itself is covered by its primary's finding.
	assert.Empty(t, only(check(t, client(t, replica)), doctor.CheckReplication))
}

func TestSentinel(t *testing.T) {
	primary, _ := replicated(t, "--appendonly", "yes")
	s := testenv.NewSentinel(t, primary, "doctor")
	rdb := s.FailoverClient("doctor")
	t.Cleanup(func() { rdb.Close() })
	fs := check(t, rdb)
	f := one(t, fs, doctor.CheckReplication)
	assert.Equal(t, doctor.Danger, f.Severity)
	assert.Equal(t, []string{primary.Addr()}, f.Servers, "the primary's address, from the server")
}

// TestReplicaPartlyRefused: a replica that refuses one check (CONFIG
// GET) still reports the others: its eviction danger is not dropped for a
// Warn that it could not be checked.
func TestReplicaPartlyRefused(t *testing.T) {
	primary, replica := replicated(t, "--appendonly", "yes")
	rules := []any{"ACL", "SETUSER", "op", "on", ">pw", "~*", "&*", "+@all"}
	require.NoError(t, client(t, primary).Do(t.Context(), rules...).Err())
	rc := client(t, replica)
	require.NoError(t, rc.Do(t.Context(), append(rules, "-config")...).Err())
	require.NoError(t, rc.ConfigSet(t.Context(), "maxmemory-policy", "allkeys-lru").Err())
	require.NoError(t, rc.ConfigSet(t.Context(), "maxmemory", "1gb").Err())
	opt := primary.Options()
	opt.Username, opt.Password = "op", "pw"
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	fs := check(t, rdb)
	var evicting []string
	for _, f := range only(fs, doctor.CheckEviction) {
		if f.Severity == doctor.Danger {
			evicting = append(evicting, f.Servers...)
		}
	}
	assert.Equal(t, []string{replica.Addr()}, evicting)
}

func TestCluster(t *testing.T) {
	c := testenv.NewCluster(t, 3)
	rdb := c.Client()
	t.Cleanup(func() { rdb.Close() })
	fs := check(t, rdb, doctor.WithPrefix("app:"), doctor.WithSampleName("orders"))
	// The same finding on the three masters is reported once.
	p := one(t, fs, doctor.CheckPersistence)
	assert.Len(t, p.Servers, 3)
	assert.ElementsMatch(t, c.Addrs(), p.Servers)
	ps := one(t, fs, doctor.CheckPubSub)
	assert.Equal(t, doctor.Info, ps.Severity)
	assert.Contains(t, ps.Finding, "sharded", "Redis 7 has SSUBSCRIBE")
	slot := one(t, fs, doctor.CheckSlot)
	assert.Equal(t, doctor.Info, slot.Severity)
	assert.Contains(t, slot.Finding, "app:{orders}")
	var clocked []string
	for _, f := range only(fs, doctor.CheckClock) {
		clocked = append(clocked, f.Servers...)
	}
	assert.ElementsMatch(t, c.Addrs(), clocked, "every server's clock is measured")
}

// TestClusterRefused: a cluster whose user may not run COMMAND INFO, or
// CLUSTER KEYSLOT, has that check refused (a RefusedError naming the
// permission), not failed as if no server answered.
func TestClusterRefused(t *testing.T) {
	c := testenv.NewCluster(t, 3)
	base := c.Client()
	opt := base.Options()
	base.Close()
	for _, n := range c.Nodes() {
		admin := client(t, n)
		require.NoError(t, admin.Do(t.Context(), "ACL", "SETUSER", "nocmd", "on", ">pw", "~*", "&*", "+@all", "-command|info").Err())
		require.NoError(t, admin.Do(t.Context(), "ACL", "SETUSER", "noslot", "on", ">pw", "~*", "&*", "+@all", "-cluster|keyslot").Err())
	}
	for _, tc := range []struct{ user, check, command, grant string }{
		{"nocmd", doctor.CheckPubSub, "COMMAND INFO", "+command|info"},
		{"noslot", doctor.CheckSlot, "CLUSTER KEYSLOT", "+cluster|keyslot"},
	} {
		o := *opt
		o.Username, o.Password = tc.user, "pw"
		rdb := redis.NewClusterClient(&o)
		t.Cleanup(func() { rdb.Close() })
		_, err := doctor.Check(t.Context(), rdb, doctor.WithReplicas(false))
		var re *doctor.RefusedError
		require.ErrorAs(t, err, &re, tc.user)
		assert.Equal(t, tc.check, re.Check)
		assert.Equal(t, tc.command, re.Command)
		assert.Contains(t, err.Error(), tc.grant)
	}
}

func TestSkew(t *testing.T) {
	// A server's clock cannot be set from here: a ttl whose allowance is
	// below the measurement's own uncertainty shows the limit applies.
	rdb := server(t)
	fs := check(t, rdb, doctor.WithTTL(time.Second), doctor.WithDriftFactor(0))
	f := one(t, fs, doctor.CheckClock)
	assert.Contains(t, f.Finding, "±")
	assert.Equal(t, doctor.Info, f.Severity, "2ms allowance, skew ~0")
}

func TestUnreachable(t *testing.T) {
	r := testenv.NewRedis(t)
	opt := r.Options()
	opt.ContextTimeoutEnabled, opt.MaxRetries, opt.DialerRetries = true, -1, 1
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	require.NoError(t, r.Kill())
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	start := time.Now()
	fs, err := doctor.Check(ctx, rdb)
	assert.Empty(t, fs)
	var se *doctor.ServerError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, r.Addr(), se.Server)
	assert.Less(t, time.Since(start), 3*time.Second+500*time.Millisecond)
}

func TestContextBounds(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := client(t, r)
	require.NoError(t, r.Pause())
	t.Cleanup(func() { r.Resume() })
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := doctor.Check(ctx, rdb)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), time.Second)
}

func TestInvalid(t *testing.T) {
	for _, o := range []doctor.Option{doctor.WithTTL(-1), doctor.WithDriftFactor(0.5), doctor.WithReplicaAck(-1),
		doctor.WithPrefix("a{"), doctor.WithSampleName(""), doctor.WithPings(0)} {
		_, err := doctor.Check(t.Context(), redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), o)
		assert.ErrorIs(t, err, doctor.ErrInvalid)
	}
}

func TestSeverityJSON(t *testing.T) {
	b, err := json.Marshal(doctor.Finding{Check: doctor.CheckEviction, Severity: doctor.Danger, Finding: "x"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"check":"eviction","severity":"danger","finding":"x"}`, string(b))
	var f doctor.Finding
	require.NoError(t, json.Unmarshal(b, &f))
	assert.Equal(t, doctor.Danger, f.Severity)
	assert.True(t, errors.Is(json.Unmarshal([]byte(`{"severity":"bad"}`), &f), nil) == false)
}
