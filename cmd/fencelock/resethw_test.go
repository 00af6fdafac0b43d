//go:build unix

package main

import (
	"context"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/migrations"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/pgverifier"
	"github.com/fencelock/fencelock/verifier/redisverifier"
	"github.com/fencelock/fencelock/verifier/sqlverifier"
)

// store is a verifier the test checks the command against, with the
// --verifier URL that names its store.
type store struct {
	url string
	v   interface {
		verifier.Verifier
		Highest(ctx context.Context, resource string) (uint64, string, error)
	}
}

// TestResetHighWater poisons a resource's high-water with a made-up token
// of Seq fence.MaxSeq, then resets it with the command: while the lock is
// held, to the holder's token (the holder writes again, older tokens stay
// out); once it is free, to its counter with no holder (the last token is
// refused, the next acquisition's accepted). Without --yes nothing
// changes. On a redisverifier store, a PostgreSQL one and a MariaDB one.
func TestResetHighWater(t *testing.T) {
	ctx := t.Context()
	rdb := redis.NewClient(&redis.Options{Addr: strings.TrimSuffix(strings.TrimPrefix(redisURL, "redis://"), "/0")})
	t.Cleanup(func() { rdb.Close() })
	rv, err := redisverifier.New(rdb)
	require.NoError(t, err)

	pg, err := testenv.StartPostgres(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { pg.Close() })
	db, err := sql.Open("pgx", pg.DSN())
	require.NoError(t, err)
	_, err = migrations.ApplySQL(ctx, db, migrations.Postgres)
	db.Close()
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, pg.DSN())
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	pv, err := pgverifier.New(conn)
	require.NoError(t, err)

	maria, err := testenv.StartMariaDB(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { maria.Close() })
	mdb, err := sql.Open("mysql", maria.DSN())
	require.NoError(t, err)
	t.Cleanup(func() { mdb.Close() })
	_, err = migrations.ApplySQL(ctx, mdb, migrations.MySQL)
	require.NoError(t, err)
	mv, err := sqlverifier.New(mdb, sqlverifier.MySQL)
	require.NoError(t, err)

	stores := map[string]store{"redis": {redisURL, rv}, "postgres": {pg.DSN(), pv}, "mysql": {"mysql://" + maria.DSN(), mv}}
	for name, s := range stores {
		t.Run(name, func(t *testing.T) {
			lock, res := lockName(t), "accounts/"+lockName(t)
			requireHigh := func(seq uint64, holder string) {
				t.Helper()
				gotSeq, gotHolder, err := s.v.Highest(ctx, res)
				require.NoError(t, err)
				require.Equal(t, []any{seq, holder}, []any{gotSeq, gotHolder}, "high-water of %s", res)
			}
			reset := func(yes bool) result {
				args := on("reset-highwater", "--verifier", s.url, lock, res)
				if yes {
					args = append(args, "--yes")
				}
				return fl(t, "", args...)
			}

			dir := t.TempDir()
			p, text := holder(t, dir, on("run", "--ttl", "20s", lock)...)
			tok, err := fence.Parse(text)
			require.NoError(t, err)
			require.NoError(t, s.v.Claim(ctx, res, tok))
			mallory := fence.Token{Key: lock, Seq: fence.MaxSeq, Holder: "mallory"}
			require.NoError(t, s.v.Claim(ctx, res, mallory), "a verifier trusts its callers")
			require.ErrorIs(t, s.v.Claim(ctx, res, tok), verifier.ErrStale, "the real holder is locked out")

			r := reset(false)
			require.Equal(t, 0, r.code, r.stderr)
			assert.Contains(t, r.stdout, "not done: add --yes")
			requireHigh(fence.MaxSeq, "mallory")

			r = reset(true)
			require.Equal(t, 0, r.code, r.stderr)
			requireHigh(tok.Seq, tok.Holder)
			require.NoError(t, s.v.Claim(ctx, res, tok), "the live holder writes again")
			older := fence.Token{Key: lock, Seq: tok.Seq - 1, Holder: "older"}
			if older.Seq > 0 {
				require.ErrorIs(t, s.v.Claim(ctx, res, older), verifier.ErrStale)
			}

			// The lock is free: its counter, with no holder.
			require.NoError(t, os.WriteFile(filepath.Join(dir, "stop"), nil, 0o600))
			require.Equal(t, 0, p.wait(t).code)
			require.NoError(t, s.v.Claim(ctx, res, mallory))
			r = reset(true)
			require.Equal(t, 0, r.code, r.stderr)
			requireHigh(tok.Seq, "")
			require.ErrorIs(t, s.v.Claim(ctx, res, tok), verifier.ErrStale, "the last holder's token is refused once its lock is free")
			dir2 := t.TempDir()
			p2, text2 := holder(t, dir2, on("run", "--ttl", "20s", lock)...)
			tok2, err := fence.Parse(text2)
			require.NoError(t, err)
			require.NoError(t, s.v.Claim(ctx, res, tok2), "the next acquisition is accepted")
			require.NoError(t, os.WriteFile(filepath.Join(dir2, "stop"), nil, 0o600))
			require.Equal(t, 0, p2.wait(t).code)

			// Not poisoned: nothing to lower.
			r = reset(true)
			require.Equal(t, 0, r.code, r.stderr)
			assert.Contains(t, r.stdout, "unchanged")
			requireHigh(tok2.Seq, tok2.Holder)
		})
	}
}

// TestResetHighWaterRefuses: a lock this Redis never issued a token for
// (the wrong --redis or --prefix, say) gives nothing to reset to; a
// missing --verifier or a bad one is a usage error. Nothing changes.
func TestResetHighWaterRefuses(t *testing.T) {
	ctx := t.Context()
	rdb := redis.NewClient(&redis.Options{Addr: strings.TrimSuffix(strings.TrimPrefix(redisURL, "redis://"), "/0")})
	t.Cleanup(func() { rdb.Close() })
	rv, err := redisverifier.New(rdb)
	require.NoError(t, err)
	lock, res := lockName(t), "r/"+lockName(t)
	require.NoError(t, rv.Claim(ctx, res, fence.Token{Key: lock, Seq: fence.MaxSeq, Holder: "mallory"}))

	r := fl(t, "", on("reset-highwater", "--verifier", redisURL, "--yes", lock, res)...)
	assert.Equal(t, exitFailure, r.code)
	assert.Contains(t, r.stderr, "no counter on this Redis")
	seq, _, err := rv.Highest(ctx, res)
	require.NoError(t, err)
	assert.Equal(t, fence.MaxSeq, seq, "unchanged")

	r = fl(t, "", on("reset-highwater", lock, res)...)
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "--verifier URL or FENCELOCK_VERIFIER_URL is required")
	r = fl(t, "", on("reset-highwater", "--verifier", "ftp://x", lock, res)...)
	assert.Equal(t, exitUsage, r.code)
	assert.Contains(t, r.stderr, "unknown scheme")
}

// TestResetHighWaterRebind: a forged token of another lock, sent through
// the HTTP middleware, binds a new resource to that lock, and every real
// holder is refused as foreign. reset-highwater shows the binding and
// refuses to change it without --rebind; with it, the resource is bound
// to the real lock again and its holder writes.
func TestResetHighWaterRebind(t *testing.T) {
	ctx := t.Context()
	rdb := redis.NewClient(&redis.Options{Addr: strings.TrimSuffix(strings.TrimPrefix(redisURL, "redis://"), "/0")})
	t.Cleanup(func() { rdb.Close() })
	rv, err := redisverifier.New(rdb)
	require.NoError(t, err)
	lock, res := lockName(t), "payroll/"+lockName(t)
	mw, err := verifier.NewMiddleware(rv, verifier.WithResource(func(*http.Request) (string, error) { return res, nil }))
	require.NoError(t, err)
	srv := httptest.NewServer(mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})))
	t.Cleanup(srv.Close)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL+"/payroll", nil)
	require.NoError(t, err)
	req.Header.Set(fence.Header, "1:evil:attacker-lock")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "a verifier trusts its callers")

	dir := t.TempDir()
	p, text := holder(t, dir, on("run", "--ttl", "20s", lock)...)
	tok, err := fence.Parse(text)
	require.NoError(t, err)
	require.ErrorIs(t, rv.Claim(ctx, res, tok), verifier.ErrForeign, "the real holder is refused")

	r := fl(t, "", on("reset-highwater", "--verifier", redisURL, "--yes", lock, res)...)
	assert.Equal(t, exitFailure, r.code, "no rebinding without --rebind")
	assert.Contains(t, r.stdout, `lock="attacker-lock"`)
	assert.Contains(t, r.stderr, "--rebind")
	bound, err := rv.Lock(ctx, res)
	require.NoError(t, err)
	assert.Equal(t, "attacker-lock", bound, "unchanged")

	r = fl(t, "", on("reset-highwater", "--verifier", redisURL, "--rebind", lock, res)...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "not done: add --yes")

	r = fl(t, "", on("reset-highwater", "--verifier", redisURL, "--rebind", "--yes", lock, res)...)
	require.Equal(t, 0, r.code, r.stderr)
	bound, err = rv.Lock(ctx, res)
	require.NoError(t, err)
	assert.Equal(t, lock, bound)
	require.NoError(t, rv.Claim(ctx, res, tok), "the real holder writes again")
	require.ErrorIs(t, rv.Claim(ctx, res, fence.Token{Key: "attacker-lock", Seq: 2, Holder: "evil"}), verifier.ErrForeign)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "stop"), nil, 0o600))
	require.Equal(t, 0, p.wait(t).code)
}
