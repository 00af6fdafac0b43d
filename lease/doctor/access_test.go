package doctor_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease/doctor"
)

// aclUser makes user with password pw and rules on r, and returns a
// client logged in as that user.
func aclUser(t *testing.T, r *testenv.Redis, user, pw string, rules ...string) *redis.Client {
	t.Helper()
	admin := client(t, r)
	args := []any{"ACL", "SETUSER", user, "reset", "on", ">" + pw}
	for _, rule := range rules {
		args = append(args, rule)
	}
	require.NoError(t, admin.Do(t.Context(), args...).Err())
	opt := r.Options()
	opt.Username, opt.Password, opt.ContextTimeoutEnabled = user, pw, true
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestRefused: a check the server refuses with NOPERM is an error that
// names the check and the permission (a key pattern when the refusal is
// about keys), not a finding of health; the checks the user may run still
// report.
func TestRefused(t *testing.T) {
	r := testenv.NewRedis(t, testenv.RedisOptions{Args: []string{"--appendonly", "no", "--save", ""}})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	noConfig := aclUser(t, r, "noconfig", "pw", "+@all", "-config")
	fs, err := doctor.Check(ctx, noConfig)
	require.Error(t, err, "CONFIG refused: the run is not complete")
	assert.ErrorIs(t, err, doctor.ErrRefused)
	var se *doctor.ServerError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, r.Addr(), se.Server)
	var re *doctor.RefusedError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, doctor.CheckPersistence, re.Check)
	assert.Equal(t, "CONFIG GET", re.Command)
	assert.Contains(t, err.Error(), "+config|get")
	assert.NotEmpty(t, only(fs, doctor.CheckEviction), "INFO still answered")
	assert.NotEmpty(t, only(fs, doctor.CheckLatency))

	noInfo := aclUser(t, r, "noinfo", "pw", "+@all", "-info")
	fs, err = doctor.Check(ctx, noInfo)
	require.ErrorAs(t, err, &re)
	assert.Equal(t, "INFO", re.Command)
	assert.Contains(t, err.Error(), "+info")
	for _, c := range []string{doctor.CheckVersion, doctor.CheckEviction, doctor.CheckPersistence} {
		assert.Empty(t, only(fs, c), "%s needs INFO", c)
		assert.Contains(t, err.Error(), c+" check not run")
	}
	assert.NotEmpty(t, only(fs, doctor.CheckClock), "TIME still answered")
	assert.NotEmpty(t, only(fs, doctor.CheckAuth))

	// Every command, but not fencelock's keys: the grant is key access
	// (it said "+get", which the user had).
	require.NoError(t, client(t, r).Set(ctx, "fencelock:{x}:fence", 5, 0).Err())
	otherKeys := aclUser(t, r, "otherkeys", "pw", "+@all", "~other:*")
	_, err = doctor.Check(ctx, otherKeys)
	require.ErrorAs(t, err, &re)
	assert.Equal(t, doctor.CheckCounters, re.Check)
	assert.Equal(t, "GET", re.Command)
	assert.Contains(t, err.Error(), "grant the user access to the keys ~fencelock:*")

	// An I/O failure is not a refusal.
	closed := redis.NewClient(&redis.Options{Addr: testenv.ClosedAddr(t), MaxRetries: -1})
	defer closed.Close()
	_, err = doctor.Check(ctx, closed)
	require.Error(t, err)
	assert.False(t, errors.Is(err, doctor.ErrRefused))
}

// TestAuth: a default user with a password (or turned off) is Info; the
// default user without one is Warn (every server testenv starts), even
// when its ACL refuses PING.
func TestAuth(t *testing.T) {
	r := testenv.NewRedis(t)
	fs := check(t, client(t, r), doctor.WithReplicas(false))
	assert.Contains(t, one(t, fs, doctor.CheckAuth, doctor.Warn).Finding, "no password")

	locked := testenv.NewRedis(t) // testenv's start-up PING needs no password
	require.NoError(t, client(t, locked).ConfigSet(t.Context(), "requirepass", "S3cret").Err())
	opt := locked.Options()
	opt.Password = "S3cret"
	c := redis.NewClient(opt)
	defer c.Close()
	fs = check(t, c, doctor.WithReplicas(false))
	f := one(t, fs, doctor.CheckAuth, doctor.Info)
	assert.Contains(t, f.Finding, "refused (NOAUTH")

	// A default user without a password but without PING answers NOPERM:
	// it is served (here GET on every key), not refused.
	limited := testenv.NewRedis(t)
	admin := client(t, limited)
	require.NoError(t, admin.Do(t.Context(), "ACL", "SETUSER", "fladmin", "on", ">pw", "~*", "&*", "+@all").Err())
	require.NoError(t, admin.Do(t.Context(), "ACL", "SETUSER", "default", "on", "nopass", "-@all", "+get", "~*").Err())
	opt = limited.Options()
	opt.Username, opt.Password = "fladmin", "pw"
	c2 := redis.NewClient(opt)
	defer c2.Close()
	fs = check(t, c2, doctor.WithReplicas(false))
	assert.Contains(t, one(t, fs, doctor.CheckAuth, doctor.Warn).Finding, "no password")
}

// TestTransport: plaintext to a host that is not this one is Warn; TLS
// is Info; TLS without verification is Warn. The client names a remote
// host, and its dialer reaches the local server.
func TestTransport(t *testing.T) {
	r := testenv.NewRedis(t)
	var d net.Dialer
	remote := redis.NewClient(&redis.Options{Addr: "redis.example.internal:6379",
		Dialer: func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "tcp", r.Addr()) }})
	defer remote.Close()
	fs := check(t, remote, doctor.WithReplicas(false))
	f := one(t, fs, doctor.CheckTransport, doctor.Warn)
	assert.Contains(t, f.Finding, "plaintext to redis.example.internal")

	tr := testenv.NewRedis(t, testenv.RedisOptions{TLS: testenv.TLSOnly})
	fs = check(t, client(t, tr), doctor.WithReplicas(false))
	assert.Contains(t, one(t, fs, doctor.CheckTransport, doctor.Info).Finding, "TLS, server certificate verified")

	opt := tr.Options()
	opt.TLSConfig.RootCAs, opt.TLSConfig.InsecureSkipVerify = nil, true
	skip := redis.NewClient(opt)
	defer skip.Close()
	fs = check(t, skip, doctor.WithReplicas(false))
	assert.Contains(t, one(t, fs, doctor.CheckTransport, doctor.Warn).Finding, "without certificate verification")
}

// TestPoisonedCounter: a counter far above the server's clock (an advance
// to 2^53-2) is Danger, named; one at the clock, or a key of another
// prefix, is not.
func TestPoisonedCounter(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := client(t, r)
	ctx := t.Context()
	fs := check(t, rdb, doctor.WithReplicas(false))
	assert.Contains(t, one(t, fs, doctor.CheckCounters, doctor.Info).Finding, "no poisoned counter among 0 lock counters")

	now := uint64(time.Now().UnixMicro())
	require.NoError(t, rdb.Set(ctx, "fencelock:{fine}:fence", now, 0).Err())
	require.NoError(t, rdb.Set(ctx, "fencelock:{ahead}:fence", now+uint64(time.Hour/time.Microsecond), 0).Err())
	require.NoError(t, rdb.Set(ctx, "other:{x}:fence", uint64(1)<<53-2, 0).Err())
	require.NoError(t, rdb.HSet(ctx, "fencelock:{h}:fence", "a", "b").Err()) // not a counter
	fs = check(t, rdb, doctor.WithReplicas(false))
	assert.Contains(t, one(t, fs, doctor.CheckCounters, doctor.Info).Finding, "no poisoned counter among 2 lock counters")

	require.NoError(t, rdb.Set(ctx, "fencelock:{payroll}:fence", uint64(1)<<53-2, 0).Err())
	fs = check(t, rdb, doctor.WithReplicas(false))
	f := one(t, fs, doctor.CheckCounters, doctor.Danger)
	assert.Contains(t, f.Finding, "payroll (9007199254740990)")
	assert.NotContains(t, f.Finding, "ahead")
	assert.Contains(t, f.Fix, "repair-counter")

	// A semaphore slot's counter is named by the permit's name, which
	// repair-counter takes.
	require.NoError(t, rdb.Set(ctx, "fencelock:{pool}#2:fence", uint64(1)<<53-3, 0).Err())
	fs = check(t, rdb, doctor.WithReplicas(false))
	assert.Contains(t, one(t, fs, doctor.CheckCounters, doctor.Danger).Finding, "pool#2 (9007199254740989)")

	fs = check(t, rdb, doctor.WithReplicas(false), doctor.WithPrefix("other:"))
	assert.Contains(t, one(t, fs, doctor.CheckCounters, doctor.Danger).Finding, "x (9007199254740990)")
}

// failGets is a fault at one exact point: the first pipeline of GETs
// (the counters check's) fails as a lost connection does, every command
// in it with the error; the later calls reach the server.
type failGets struct{ done atomic.Bool }

func (*failGets) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*failGets) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (f *failGets) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) == 0 || cmds[0].Name() != "get" || !f.done.CompareAndSwap(false, true) {
			return next(ctx, cmds)
		}
		err := &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}
		for _, c := range cmds {
			c.SetErr(err)
		}
		return err
	}
}

// TestCountersLostReply: a GET that got no reply (the connection was lost)
// makes the counters check fail, not report "no poisoned counter" over
// the counter it did not read (it did).
func TestCountersLostReply(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := client(t, r)
	require.NoError(t, rdb.Set(t.Context(), "fencelock:{payroll}:fence", uint64(1)<<53-2, 0).Err())
	faulty := client(t, r)
	faulty.AddHook(&failGets{})
	fs, err := doctor.Check(t.Context(), faulty, doctor.WithReplicas(false))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "counters check: GET fencelock:{payroll}:fence: read tcp: connection reset by peer")
	assert.Empty(t, only(fs, doctor.CheckCounters), "no finding from a check that did not run")
}
