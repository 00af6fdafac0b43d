// Command ledger runs concurrent money transfers between a few accounts,
// each transfer a read-modify-write under the locks of both accounts
// (package lockset takes them in one order, all or none) and, fenced, in
// one transaction that guards both (pgverifier's WithTxAll), while workers take
// random pauses, some longer than their leases. It runs the workload twice:
// with the Postgres verifier, where the total balance is conserved and the
// stale writes are rejected (and counted), and with the leases alone, where
// a worker that paused past its lease writes balances computed from stale
// reads and money appears or vanishes.
//
//	REDIS_URL=redis://localhost:6379/0 DATABASE_URL=postgres://localhost/mydb go run ./examples/ledger
//
// It uses the Redis at REDIS_URL and the PostgreSQL at DATABASE_URL. Left
// unset, dev.go (not part of the example) starts throwaway servers.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lockset"
	"github.com/fencelock/fencelock/migrations"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/pgverifier"
)

const (
	accounts  = 4
	initial   = 1000 // per account
	workers   = 5
	transfers = 12 // per worker
	ttl       = 100 * time.Millisecond
	longPause = 3 * ttl / 2 // a pause that outlives the lease

	createAccounts = `CREATE TABLE IF NOT EXISTS ledger_accounts (
		run text, id int, balance bigint NOT NULL, PRIMARY KEY (run, id))`
	insertAccount = `INSERT INTO ledger_accounts (run, id, balance) VALUES ($1, $2, $3)`
	readBalance   = `SELECT balance FROM ledger_accounts WHERE run = $1 AND id = $2`
	writeBalance  = `UPDATE ledger_accounts SET balance = $3 WHERE run = $1 AND id = $2`
	sumBalances   = `SELECT sum(balance), min(balance) FROM ledger_accounts WHERE run = $1`
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rdb, err := connectRedis(ctx, os.Getenv("REDIS_URL"))
	if err != nil {
		return err
	}
	defer rdb.Close()
	dsn := os.Getenv("DATABASE_URL")
	if dsn == "" {
		return errors.New("DATABASE_URL is not set (e.g. postgres://user:pass@localhost:5432/mydb)")
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := migrations.Apply(ctx, conn); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, createAccounts); err != nil {
		return err
	}
	locks, err := lease.New(rdb)
	if err != nil {
		return err
	}

	fmt.Printf("%d workers make %d transfers each between %d accounts of %d (total %d).\n",
		workers, transfers, accounts, initial, accounts*initial)
	fmt.Printf("Each transfer locks both accounts (lease ttl %v), reads both balances and writes new ones;\n", ttl)
	fmt.Printf("one in three pauses for %v, before or in the middle of its transaction.\n", longPause)
	for _, fenced := range []bool{true, false} {
		l := ledger{dsn: dsn, locks: locks, fenced: fenced,
			run: fmt.Sprintf("ledger/%d/%s", os.Getpid(), map[bool]string{true: "fenced", false: "unfenced"}[fenced])}
		if err := l.play(ctx, conn); err != nil {
			return err
		}
	}
	return nil
}

// ledger is one run of the workload.
type ledger struct {
	dsn    string
	locks  *lease.Client
	fenced bool
	run    string // prefix of lock and resource names, and the accounts' run

	done, rejected, gaveUp, failed, expired atomic.Int64
}

func (l *ledger) play(ctx context.Context, conn *pgx.Conn) error {
	if l.fenced {
		fmt.Println("\n=== With the verifier: every transaction guards both accounts first (WithTxAll) ===")
	} else {
		fmt.Println("\n=== Leases alone: no verifier ===")
	}
	for id := range accounts {
		if _, err := conn.Exec(ctx, insertAccount, l.run, id, initial); err != nil {
			return err
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Go(func() {
			if err := l.worker(ctx); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}

	var sum, minBal int64
	if err := conn.QueryRow(ctx, sumBalances, l.run).Scan(&sum, &minBal); err != nil {
		return err
	}
	fmt.Printf("in %v: %d transfers committed, %d stale writes rejected, %d gave up (a lock expired while the other was awaited), %d failed otherwise; %d leases expired during a pause\n",
		time.Since(start).Round(time.Millisecond), l.done.Load(), l.rejected.Load(), l.gaveUp.Load(), l.failed.Load(), l.expired.Load())
	verdict := "the invariant holds"
	switch {
	case sum < accounts*initial:
		verdict = fmt.Sprintf("the invariant is broken: %d vanished", accounts*initial-sum)
	case sum > accounts*initial:
		verdict = fmt.Sprintf("the invariant is broken: %d appeared from nowhere", sum-accounts*initial)
	case minBal < 0:
		verdict = "the invariant is broken: an account went negative"
	}
	fmt.Printf("total balance %d (should be %d), lowest account %d: %s\n", sum, accounts*initial, minBal, verdict)
	return nil
}

func (l *ledger) worker(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, l.dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	v, err := pgverifier.New(conn)
	if err != nil {
		return err
	}
	for range transfers {
		from := rand.IntN(accounts)
		to := (from + 1 + rand.IntN(accounts-1)) % accounts
		err := l.transfer(ctx, conn, v, from, to)
		switch {
		case err == nil:
			l.done.Add(1)
		case errors.Is(err, verifier.ErrStale):
			l.rejected.Add(1)
		case errors.Is(err, lease.ErrLost):
			l.gaveUp.Add(1) // one lock expired while the other was awaited
		case ctx.Err() != nil:
			return ctx.Err()
		default:
			l.failed.Add(1) // e.g. a deadlock between stale writers
		}
	}
	return nil
}

func (l *ledger) name(id int) string { return fmt.Sprintf("%s/acct-%d", l.run, id) }

// transfer moves a random amount from one account to another under the
// locks of both (lockset takes them in one order, so that waiters never
// deadlock; the account's lock name is also its resource name).
func (l *ledger) transfer(ctx context.Context, conn *pgx.Conn, v *pgverifier.Verifier, from, to int) error {
	set, err := lockset.Acquire(ctx, l.locks, []string{l.name(from), l.name(to)}, ttl)
	if err != nil {
		return err
	}
	defer set.Release(context.WithoutCancel(ctx)) // ErrLost after a long pause

	pauseBefore, pauseInside := false, false
	switch rand.IntN(6) {
	case 0:
		pauseBefore = true
	case 1:
		pauseInside = true
	}
	if pauseBefore {
		l.sleep(set)
	}

	move := func(tx pgx.Tx) error {
		var balFrom, balTo int64
		if err := tx.QueryRow(ctx, readBalance, l.run, from).Scan(&balFrom); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, readBalance, l.run, to).Scan(&balTo); err != nil {
			return err
		}
		if pauseInside {
			l.sleep(set)
		}
		amount := rand.Int64N(balFrom/2 + 1)
		if _, err := tx.Exec(ctx, writeBalance, l.run, from, balFrom-amount); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, writeBalance, l.run, to, balTo+amount)
		return err
	}
	if !l.fenced {
		return pgx.BeginFunc(ctx, conn, move)
	}
	// Claim before read: WithTxAll guards both accounts with their locks'
	// tokens before move reads them, in one transaction. A newer holder's
	// guard now waits for this transaction; an older holder's is rejected.
	return v.WithTxAll(ctx, set.Tokens(), move)
}

// sleep is a pause that outlives the leases (a GC pause, say).
func (l *ledger) sleep(set *lockset.Set) {
	time.Sleep(longPause)
	if !set.Held() {
		l.expired.Add(1)
	}
}

// connectRedis returns a client for the Redis at url, set up as fencelock's
// README recommends, once it answers PING.
func connectRedis(ctx context.Context, url string) (*redis.Client, error) {
	if url == "" {
		return nil, errors.New("REDIS_URL is not set (e.g. redis://localhost:6379/0)")
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	opt.ContextTimeoutEnabled = true // context deadlines bound socket reads
	rdb := redis.NewClient(opt)
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("REDIS_URL=%s: %w", url, err)
	}
	return rdb, nil
}
