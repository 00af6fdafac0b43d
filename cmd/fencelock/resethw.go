//go:build unix

package main

import (
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strings"

	_ "github.com/go-sql-driver/mysql" // the mysql:// verifier store
	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/pgverifier"
	"github.com/fencelock/fencelock/verifier/redisverifier"
	"github.com/fencelock/fencelock/verifier/sqlverifier"
)

// resetUsage is the reset-highwater part of the help text.
const resetUsage = `  reset-highwater  set RESOURCE's high-water in a verifier's store back to lock NAME's
           state, read from Redis now: the holder's token if NAME is held, else its
           counter with no holder (every older token stays refused, the next
           acquisition is accepted). The way back from a poisoned high-water (a
           made-up token with the largest Seq, 2^53-1) or a forged binding (RESOURCE
           bound to another lock). Prints the lock RESOURCE is bound to and the
           change; changes nothing without --yes, nor when the high-water is not
           above the lock's and RESOURCE is bound to NAME.
             --rebind        bind RESOURCE to NAME when it is bound to another lock
                             (refused without it)
             --verifier URL  the verifier's store: postgres://..., mysql://DSN
                             (mysql://app:pw@tcp(db:3306)/app) or redis://...
                             (default: $FENCELOCK_VERIFIER_URL, which keeps a
                             password out of ps)
             --table T       SQL high-water table, [SCHEMA.]NAME (default fence_tokens)
             --hw-prefix P   redisverifier key prefix (default "` + redisverifier.DefaultPrefix + `")
             --yes           make the change
`

// verifierEnv is the environment variable that reset-highwater reads the
// verifier's store URL from when --verifier is not given: a password in it
// then does not show in ps.
const verifierEnv = "FENCELOCK_VERIFIER_URL"

// highWater is what reset-highwater needs of a verifier: every fencelock
// verifier that keeps its high-water outside the process has both.
type highWater interface {
	verifier.Resetter
	Highest(ctx context.Context, resource string) (uint64, string, error)
	Lock(ctx context.Context, resource string) (string, error)
}

// resetHighWater is the reset-highwater command.
func (g *globals) resetHighWater(args []string) int {
	fs := g.flagSet("reset-highwater")
	store := fs.String("verifier", "", "the verifier's store URL")
	table := fs.String("table", sqlverifier.DefaultTable, "SQL high-water table")
	hwPrefix := fs.String("hw-prefix", redisverifier.DefaultPrefix, "redisverifier key prefix")
	yes := fs.Bool("yes", false, "make the change")
	rebind := fs.Bool("rebind", false, "bind RESOURCE to NAME when it is bound to another lock")
	pos, code := g.parseCommand(fs, args, "NAME RESOURCE")
	if pos == nil {
		return code
	}
	if *store == "" {
		*store = strings.TrimSpace(os.Getenv(verifierEnv))
	}
	if *store == "" {
		return g.usageError("reset-highwater: --verifier URL or %s is required (the store whose high-water to reset)", verifierEnv)
	}
	name, resource := pos[0], pos[1]
	if err := verifier.ValidateResource(resource); err != nil {
		return g.usageError("reset-highwater: resource: %v", err)
	}
	if err := checkPrintable("resource", resource); err != nil {
		return g.usageError("reset-highwater: %v", err)
	}
	b, ctx, done, code := g.session()
	if b == nil {
		return code
	}
	defer done()

	tc, err := g.tls.config()
	if err != nil {
		return g.usageError("reset-highwater: %v", err)
	}
	hw, closeStore, err := openStore(ctx, *store, *table, *hwPrefix, tc)
	var bad *badURLError
	switch {
	case errors.As(err, &bad) || errors.Is(err, verifier.ErrInvalid):
		return g.usageError("reset-highwater: --verifier: %v", err)
	case err != nil:
		return g.fail(exitFailure, "reset-highwater: --verifier: %v", g.timedOut(err))
	}
	defer closeStore()

	// The lock's state now: the reset must not refuse its live holder,
	// nor let in any token the lock issued before.
	v, err := b.inspect(ctx, name)
	if err = g.timedOut(err); err != nil {
		return g.fail(exitFailure, "reset-highwater %q: reading the lock: %v", name, err)
	}
	to := fence.Token{Key: name, Seq: v.Counter}
	if v.Held {
		if to, err = fence.Parse(v.Token); err != nil {
			return g.fail(exitFailure, "reset-highwater %q: the holder's token %q: %v", name, v.Token, err)
		}
	}
	if to.Seq == 0 {
		return g.fail(exitFailure, "reset-highwater %q: the lock has no counter on this Redis (never taken, or its counter was lost; is --redis or --prefix wrong?): nothing to reset to", name)
	}
	seq, holder, err := hw.Highest(ctx, resource)
	if err = g.timedOut(err); err != nil {
		return g.fail(exitFailure, "reset-highwater %q: reading the high-water: %v", resource, err)
	}
	bound, err := hw.Lock(ctx, resource)
	if err = g.timedOut(err); err != nil {
		return g.fail(exitFailure, "reset-highwater %q: reading its lock: %v", resource, err)
	}
	fmt.Fprintf(g.stdout, "resource  %s\nlock      %s\n", resource, v.state.fields())
	fmt.Fprintf(g.stdout, "before    seq=%d holder=%q lock=%q\n", seq, holder, bound)
	foreign := bound != "" && bound != name
	switch {
	case foreign && !*rebind:
		fmt.Fprintf(g.stdout, "after     unchanged: %q is bound to lock %q, not %q\n", resource, bound, name)
		return g.fail(exitFailure, "reset-highwater %q: bound to lock %q, not %q: add --rebind to bind it to %q "+
			"(only when %q's binding is forged or the resource moved to %q for good)", resource, bound, name, name, bound, name)
	case !foreign && seq <= to.Seq:
		fmt.Fprintf(g.stdout, "after     unchanged: the high-water is not above the lock's state\n")
		return exitOK
	}
	// Rebinding resets to the lock's state too: the tokens NAME issued
	// before (a holder paused since) stay refused.
	if !*yes {
		fmt.Fprintf(g.stdout, "after     seq=%d holder=%q lock=%q (not done: add --yes)\n", to.Seq, to.Holder, to.Key)
		return exitOK
	}
	if err := hw.Reset(ctx, resource, to); err != nil {
		return g.fail(exitFailure, "reset-highwater %q: %v", resource, g.timedOut(err))
	}
	fmt.Fprintf(g.stdout, "after     seq=%d holder=%q lock=%q\n", to.Seq, to.Holder, to.Key)
	return exitOK
}

// openStore connects to the verifier's store named by raw and returns its
// verifier and the function that closes the connection. tc is the
// --tls-* flags' settings, for a rediss:// store.
func openStore(ctx context.Context, raw, table, hwPrefix string, tc *tls.Config) (highWater, func(), error) {
	hw, done, err := openStoreURL(ctx, raw, table, hwPrefix, tc)
	var bad *badURLError
	if errors.As(err, &bad) {
		return nil, nil, &badURLError{redactErr(bad.err, raw, strings.TrimPrefix(raw, "mysql://"))}
	}
	return hw, done, redactErr(err, raw, strings.TrimPrefix(raw, "mysql://"))
}

// openStoreURL is openStore, its errors not yet redacted.
func openStoreURL(ctx context.Context, raw, table, hwPrefix string, tc *tls.Config) (highWater, func(), error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, nil, &badURLError{fmt.Errorf("%q: no scheme (postgres://, mysql://, redis://)", redactURL(raw))}
	}
	tableParts := strings.SplitN(table, ".", 2)
	switch scheme {
	case "postgres", "postgresql":
		cfg, err := pgx.ParseConfig(raw)
		if err != nil {
			return nil, nil, &badURLError{err}
		}
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			return nil, nil, err
		}
		done := func() { // bounded: the store may be the one that froze
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishSlack)
			defer cancel()
			conn.Close(cctx)
		}
		v, err := pgverifier.New(conn, pgverifier.WithTable(tableParts...))
		if err != nil {
			done()
			return nil, nil, err
		}
		return v, done, nil
	case "mysql":
		db, err := sql.Open("mysql", rest)
		if err != nil {
			return nil, nil, &badURLError{err}
		}
		v, err := sqlverifier.New(db, sqlverifier.MySQL, sqlverifier.WithTable(tableParts...))
		if err != nil {
			db.Close()
			return nil, nil, err
		}
		return v, func() { v.Close(); db.Close() }, nil
	case "redis", "rediss", "unix", "redis+cluster", "rediss+cluster", "redis+sentinel", "rediss+sentinel":
		if !strings.HasPrefix(scheme, "rediss") {
			tc = nil // the flags are for TLS stores; a plaintext one is not refused for them
		}
		rdb, err := newRedis(raw, false, tc)
		if err != nil {
			return nil, nil, err
		}
		v, err := redisverifier.New(rdb, redisverifier.WithPrefix(hwPrefix))
		if err != nil {
			rdb.Close()
			return nil, nil, err
		}
		return v, func() { rdb.Close() }, nil
	}
	return nil, nil, &badURLError{fmt.Errorf("%q: unknown scheme %q (postgres://, mysql://, redis://)", redactURL(raw), scheme)}
}
