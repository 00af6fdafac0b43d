//go:build unix

package main

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease/doctor"
)

func TestDoctorDanger(t *testing.T) {
	// The shared Redis has no persistence: a restart forgets locks.
	r := fl(t, "", on("doctor")...)
	assert.Equal(t, exitDanger, r.code)
	assert.Contains(t, r.stdout, "DANGER  persistence  ")
	assert.Contains(t, r.stdout, "consequence: ")
	assert.Contains(t, r.stdout, "fix: ")
	assert.Regexp(t, `(?m)^1 danger, \d+ warn, \d+ info$`, r.stdout)
	assert.Empty(t, r.stderr)

	r = fl(t, "", on("doctor", "--json")...)
	assert.Equal(t, exitDanger, r.code)
	var rep doctorReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	require.NotNil(t, rep.Worst)
	assert.Equal(t, doctor.Danger, *rep.Worst)
	assert.True(t, rep.Complete)
	require.NotEmpty(t, rep.Findings)
	assert.Equal(t, doctor.CheckVersion, rep.Findings[0].Check)
	var raw map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &raw))
	assert.Equal(t, "danger", raw["worst"])
}

func TestDoctorEvictionFlags(t *testing.T) {
	s := testenv.NewRedis(t, testenv.RedisOptions{Args: []string{"--appendonly", "yes",
		"--maxmemory", "10mb", "--maxmemory-policy", "allkeys-lru"}})
	r := fl(t, "", "doctor", "--redis", s.URL(), "--json", "--ttl", "5s", "--replica-ack", "1")
	assert.Equal(t, exitDanger, r.code)
	var rep doctorReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	var checks []string
	for _, f := range rep.Findings {
		if f.Severity == doctor.Danger {
			checks = append(checks, f.Check)
		}
	}
	assert.Equal(t, []string{doctor.CheckEviction}, checks)
	// --replica-ack 1 with no replica: acquires would all fail.
	assert.Contains(t, r.stdout, "the leases wait for 1")
}

func TestDoctorHealthy(t *testing.T) {
	s := testenv.NewRedis(t, testenv.RedisOptions{Args: []string{"--appendonly", "yes", "--maxmemory-policy", "noeviction"}})
	r := fl(t, "", "doctor", "--redis", s.URL())
	assert.Equal(t, exitOK, r.code)
	assert.NotContains(t, r.stdout, "DANGER")
	assert.Regexp(t, `(?m)^0 danger, `, r.stdout)
	for _, c := range []string{"eviction", "persistence", "replication", "clock", "latency"} {
		assert.Contains(t, r.stdout, "  "+c+"  "+s.Addr(), "every check reports")
	}
}

func TestDoctorUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	l.Close()
	url := "redis://" + addr + "/0?dial_timeout=200ms&max_retries=-1"
	r := fl(t, "", "doctor", "--redis", url)
	assert.Equal(t, exitUnchecked, r.code)
	assert.Equal(t, "NOT CHECKED: no server answered (why: on stderr); the deployment's health is unknown\n", r.stdout)
	assert.NotContains(t, r.stdout, "0 danger")
	assert.Contains(t, r.stderr, "fencelock: doctor: ")
	assert.Contains(t, r.stderr, addr)

	r = fl(t, "", "doctor", "--redis", url, "--json")
	assert.Equal(t, exitUnchecked, r.code)
	var rep map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	assert.Nil(t, rep["worst"], "nothing checked: no worst severity")
	assert.Equal(t, false, rep["complete"])
	assert.Empty(t, rep["findings"])
	assert.NotEmpty(t, rep["errors"])
}

// TestDoctorIncomplete: one of three Redlock masters is unreachable; the
// two that answer are healthy: status 5, not 0, and stdout says so.
func TestDoctorIncomplete(t *testing.T) {
	var urls []string
	for range 2 {
		urls = append(urls, testenv.NewRedis(t, testenv.RedisOptions{Args: []string{"--appendonly", "yes"}}).URL())
	}
	closed := testenv.ClosedAddr(t)
	urls = append(urls, "redis://"+closed+"/0?dial_timeout=200ms")
	r := fl(t, "", "doctor", "--redis", strings.Join(urls, ","))
	assert.Equal(t, exitUnchecked, r.code)
	assert.Equal(t, 2, strings.Count(r.stdout, "  persistence  "), "the two that answer are checked")
	assert.Regexp(t, `(?m)^0 danger, \d+ warn, \d+ info\nINCOMPLETE: a server could not be checked`, r.stdout)
	assert.Contains(t, r.stderr, closed)

	r = fl(t, "", "doctor", "--redis", strings.Join(urls, ","), "--json")
	assert.Equal(t, exitUnchecked, r.code)
	var rep doctorReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	assert.False(t, rep.Complete)
	require.NotNil(t, rep.Worst)
	assert.NotEqual(t, doctor.Danger, *rep.Worst)
}

func TestDoctorUsage(t *testing.T) {
	for _, args := range [][]string{{"doctor", "extra"}, {"doctor", "--pings", "0"}, {"doctor", "--ttl", "-1s"},
		{"doctor", "--name", "a{b}"}, {"doctor", "--nope"}} {
		r := fl(t, "", on(args...)...)
		assert.Equal(t, exitUsage, r.code, args)
		assert.True(t, strings.HasPrefix(r.stderr, "fencelock: doctor: "), r.stderr)
		assert.Contains(t, r.stderr, "--replica-ack N")
	}
	for _, args := range [][]string{{"doctor", "--help"}, {"help", "doctor"}} {
		r := fl(t, "", args...)
		assert.Equal(t, exitOK, r.code)
		assert.Contains(t, r.stdout, "Exit status: 0 every server checked, no danger finding; 4 a danger finding")
	}
	r := fl(t, "", "doctor")
	assert.Equal(t, exitUsage, r.code, "no --redis, no REDIS_URL")
	r = fl(t, "", "help")
	assert.Contains(t, r.stdout, "doctor [--json]")
}

func TestDoctorCluster(t *testing.T) {
	c := testenv.NewCluster(t, 3)
	url := "redis+cluster://" + strings.Join(c.Addrs(), ",")
	r := fl(t, "", "doctor", "--redis", url, "--prefix", "jobs:", "--name", "nightly", "--json")
	assert.Equal(t, exitDanger, r.code, "testenv's servers have no persistence")
	var rep doctorReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	var slot, pubsub *doctor.Finding
	for i, f := range rep.Findings {
		switch f.Check {
		case doctor.CheckSlot:
			slot = &rep.Findings[i]
		case doctor.CheckPubSub:
			pubsub = &rep.Findings[i]
		case doctor.CheckPersistence:
			assert.ElementsMatch(t, c.Addrs(), f.Servers, "one finding for the three masters")
		}
	}
	require.NotNil(t, slot)
	assert.Contains(t, slot.Finding, "jobs:{nightly}")
	require.NotNil(t, pubsub)
	assert.Equal(t, doctor.Info, pubsub.Severity)
}

func TestDoctorRedlock(t *testing.T) {
	var urls []string
	for range 3 {
		urls = append(urls, testenv.NewRedis(t, testenv.RedisOptions{Args: []string{"--appendonly", "yes"}}).URL())
	}
	r := fl(t, "", "doctor", "--redis", strings.Join(urls, ","))
	assert.Equal(t, exitOK, r.code)
	assert.Equal(t, 3, strings.Count(r.stdout, "  persistence  "), "each master is checked")
}

// TestDoctorRefused: an ACL user without CONFIG, or without INFO, makes
// the run incomplete (status 5), naming the check and the permission; on
// the same server with full rights it finds the danger.
func TestDoctorRefused(t *testing.T) {
	s := testenv.NewRedis(t) // no persistence: danger with full rights
	admin := s.Client()
	defer admin.Close()
	ctx := t.Context()
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "noconfig", "on", ">pw", "+@all", "-config").Err())
	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "noinfo", "on", ">pw", "+@all", "-info").Err())

	r := fl(t, "", "doctor", "--redis", s.URL())
	assert.Equal(t, exitDanger, r.code, "full rights: no persistence")

	r = fl(t, "", "doctor", "--redis", "redis://noconfig:pw@"+s.Addr()+"/0")
	assert.Equal(t, exitUnchecked, r.code)
	assert.Contains(t, r.stdout, "INCOMPLETE: a server refused a check")
	assert.Contains(t, r.stderr, "persistence check not run: the server refused CONFIG GET")
	assert.Contains(t, r.stderr, "+config|get")

	r = fl(t, "", "doctor", "--redis", "redis://noinfo:pw@"+s.Addr()+"/0", "--json")
	assert.Equal(t, exitUnchecked, r.code)
	var rep doctorReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), r.stdout)
	assert.False(t, rep.Complete)
	assert.Contains(t, r.stderr, "eviction check not run: the server refused INFO")
	assert.Contains(t, r.stderr, "+info")
	assert.NotContains(t, r.stdout, "no server answered")
}

// TestMinimalACL: the ACL that docs/operating.md gives fencelock is
// enough to take, wait for, inspect and release a lock; and a user
// without +@scripting is not.
func TestMinimalACL(t *testing.T) {
	s := testenv.NewRedis(t)
	admin := s.Client()
	defer admin.Close()
	ctx := t.Context()
	// As docs/operating.md gives it.
	rules := []any{"ACL", "SETUSER", "fencelock", "on", ">pw", "resetkeys", "resetchannels", "~fencelock:*", "&fencelock:*",
		"-@all", "+@read", "+@write", "+@scripting", "+@pubsub", "+@connection", "+@fast"}
	require.NoError(t, admin.Do(ctx, rules...).Err())
	url := "redis://fencelock:pw@" + s.Addr() + "/0"
	name := lockName(t)

	dir := t.TempDir()
	h, _ := holder(t, dir, "--redis", url, "run", name)
	w := start(t, "", "--redis", url, "run", "--wait", "20s", name, "--", "true") // waits on pub/sub
	require.Eventually(t, func() bool {
		v := inspectJSON(t, "--redis", url, name)
		return v.Waiters != nil && *v.Waiters == 1
	}, 15*time.Second, 50*time.Millisecond, "the waiter subscribed")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stop"), nil, 0o644))
	assert.Equal(t, 0, h.wait(t).code)
	assert.Equal(t, 0, w.wait(t).code)
	v := inspectJSON(t, "--redis", url, name)
	assert.False(t, v.Held)
	assert.NotZero(t, v.Counter)

	require.NoError(t, admin.Do(ctx, "ACL", "SETUSER", "noscript", "on", ">pw", "~fencelock:*", "&fencelock:*",
		"+@read", "+@write", "+@pubsub", "+@connection", "+@fast").Err())
	r := fl(t, "", "--redis", "redis://noscript:pw@"+s.Addr()+"/0", "run", name, "--", "true")
	assert.NotEqual(t, 0, r.code)
	assert.Contains(t, r.stderr, "NOPERM")
}
