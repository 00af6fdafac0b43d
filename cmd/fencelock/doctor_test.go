//go:build unix

package main

import (
	"encoding/json"
	"net"
	"strings"
	"testing"

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
	assert.Equal(t, doctor.Danger, rep.Worst)
	require.NotEmpty(t, rep.Findings)
	assert.Equal(t, doctor.CheckEviction, rep.Findings[0].Check)
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
	r := fl(t, "", "doctor", "--redis", "redis://"+addr+"/0?dial_timeout=200ms&max_retries=-1")
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "fencelock: doctor: ")
	assert.Contains(t, r.stderr, addr)
}

func TestDoctorUsage(t *testing.T) {
	for _, args := range [][]string{{"doctor", "extra"}, {"doctor", "--pings", "0"}, {"doctor", "--ttl", "-1s"},
		{"doctor", "--name", "a{b}"}, {"doctor", "--nope"}} {
		r := fl(t, "", on(args...)...)
		assert.Equal(t, exitUsage, r.code, args)
		assert.True(t, strings.HasPrefix(r.stderr, "fencelock: doctor: "), r.stderr)
		assert.Contains(t, r.stderr, "--replica-ack N")
	}
	r := fl(t, "", "doctor", "--help")
	assert.Equal(t, exitOK, r.code)
	assert.Contains(t, r.stdout, "Exit status: 0 no danger finding; 4 a danger finding")
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
