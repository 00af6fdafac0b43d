package doctor_test

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease/doctor"
)

func TestConfigDisabled(t *testing.T) {
	// Managed services often refuse CONFIG: what INFO tells is still checked,
	// and what it does not is a Warn, never a silent pass.
	t.Run("no AOF", func(t *testing.T) {
		rdb := server(t, "--rename-command", "CONFIG", "", "--maxmemory", "10mb", "--maxmemory-policy", "allkeys-lru")
		fs := check(t, rdb)
		assert.Equal(t, doctor.Danger, one(t, fs, doctor.CheckEviction).Severity, "INFO memory shows the policy")
		p := one(t, fs, doctor.CheckPersistence)
		assert.Equal(t, doctor.Warn, p.Severity)
		assert.Contains(t, p.Finding, "CONFIG GET save failed")
	})
	t.Run("AOF", func(t *testing.T) {
		rdb := server(t, "--rename-command", "CONFIG", "", "--appendonly", "yes")
		p := one(t, check(t, rdb), doctor.CheckPersistence)
		assert.Equal(t, doctor.Warn, p.Severity)
		assert.Contains(t, p.Finding, "CONFIG GET appendfsync failed")
	})
	t.Run("replicas", func(t *testing.T) {
		primary, _ := replicated(t, "--rename-command", "CONFIG", "", "--appendonly", "yes",
			"--min-replicas-to-write", "1")
		f := one(t, check(t, client(t, primary)), doctor.CheckReplication)
		assert.Equal(t, doctor.Warn, f.Severity, "INFO shows min_slaves_good_slaves when min-replicas-to-write is set")
	})
}

func TestPrimaryWithoutPersistence(t *testing.T) {
	primary, _ := replicated(t, "--save", "", "--appendonly", "no")
	fs := check(t, client(t, primary))
	p := on(t, fs, doctor.CheckPersistence, primary.Addr())
	assert.Equal(t, doctor.Danger, p.Severity)
	assert.Contains(t, p.Fix, "makes its replicas empty too")
	assert.Equal(t, doctor.Danger, one(t, fs, doctor.CheckReplication).Severity)
}

func TestReplicas(t *testing.T) {
	// The replica a failover would promote evicts keys; the primary does not.
	primary := testenv.NewRedis(t, testenv.RedisOptions{Args: []string{"--appendonly", "yes"}})
	replica := testenv.NewRedis(t, testenv.RedisOptions{Args: []string{"--appendonly", "yes",
		"--maxmemory", "10mb", "--maxmemory-policy", "allkeys-lru"}})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	require.NoError(t, replica.ReplicaOf(ctx, primary))
	rdb := client(t, primary)
	require.Eventually(t, func() bool {
		return strings.Contains(rdb.Info(ctx, "replication").Val(), "slave0:")
	}, 10*time.Second, 20*time.Millisecond)

	fs := check(t, rdb)
	e := one(t, only(fs, doctor.CheckEviction), doctor.CheckEviction, doctor.Danger)
	assert.Equal(t, []string{replica.Addr()}, e.Servers)
	assert.Equal(t, doctor.Info, on(t, fs, doctor.CheckEviction, primary.Addr()).Severity)
	on(t, fs, doctor.CheckClock, replica.Addr())

	fs = check(t, rdb, doctor.WithReplicas(false))
	assert.Less(t, doctor.Worst(only(fs, doctor.CheckEviction)), doctor.Danger, "replica not checked")

	// A replica that does not answer is a finding, not a hang.
	require.NoError(t, replica.Pause())
	t.Cleanup(func() { replica.Resume() })
	start := time.Now()
	fs = check(t, rdb)
	assert.Less(t, time.Since(start), 8*time.Second)
	f := on(t, fs, doctor.CheckReplication, replica.Addr())
	assert.Equal(t, doctor.Warn, f.Severity)
	assert.Contains(t, f.Finding, "could not check")
}

func TestLatency(t *testing.T) {
	r := testenv.NewRedis(t, testenv.RedisOptions{Args: []string{"--appendonly", "yes"}})
	addr := slowProxy(t, r.Addr(), 15*time.Millisecond)
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })

	// A 30s lease's allowance (302ms) absorbs 15ms.
	f := one(t, check(t, rdb, doctor.WithTTL(30*time.Second), doctor.WithPings(3)), doctor.CheckLatency)
	assert.Equal(t, doctor.Info, f.Severity)
	assert.Contains(t, f.Finding, "over 3 PINGs")

	// A 1s lease's (12ms) does not.
	fs := check(t, rdb, doctor.WithTTL(time.Second), doctor.WithPings(3))
	f = one(t, fs, doctor.CheckLatency)
	assert.Equal(t, doctor.Warn, f.Severity)
	assert.Contains(t, f.Finding, "drift allowance of a 1s lease (12ms)")
	assert.Less(t, doctor.Worst(fs), doctor.Danger, "latency alone loses no lock")

	// A delay in one direction looks like skew, and the uncertainty
	// (half the round trip) covers it: no false alarm.
	assert.Equal(t, doctor.Info, one(t, fs, doctor.CheckClock).Severity)
}

// slowProxy forwards TCP connections to addr, delaying each chunk the
// server sends by d.
func slowProxy(t *testing.T, addr string, d time.Duration) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", addr)
			if err != nil {
				in.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, in, out)
			mu.Unlock()
			wg.Go(func() { io.Copy(out, in) })
			wg.Go(func() {
				buf := make([]byte, 64<<10)
				for {
					n, err := out.Read(buf)
					if n > 0 {
						time.Sleep(d)
						if _, werr := in.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						in.Close()
						return
					}
				}
			})
		}
	})
	return l.Addr().String()
}
