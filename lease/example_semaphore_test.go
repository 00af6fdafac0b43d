package lease_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/migrations"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/pgverifier"
)

// ExampleSemaphore is a whole program: 8 workers share the 3 permits of one
// semaphore, and each writes to PostgreSQL through pgverifier with its
// permit's token. A permit is a slot with its own tokens, named
// lease.PermitName (NAME#slot); the resource a holder writes is named for
// its permit, so the verifier guards each slot as it guards a lock: a holder
// whose permit passed on cannot write after the slot's next holder did.
// (The test sets REDIS_URL and DATABASE_URL to servers it starts.)
func ExampleSemaphore() {
	ctx := context.Background()
	opt, err := redis.ParseURL(os.Getenv("REDIS_URL"))
	if err != nil {
		panic(err)
	}
	opt.ContextTimeoutEnabled = true // context deadlines bound socket reads
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	locks, err := lease.New(rdb)
	if err != nil {
		panic(err)
	}
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	if _, err := migrations.Apply(ctx, pool); err != nil { // the verifier's table
		panic(err)
	}
	// A row per permit: what its holders wrote (say, one of 3 export lanes).
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS example_lanes
		(permit text PRIMARY KEY, writes int NOT NULL); TRUNCATE example_lanes`); err != nil {
		panic(err)
	}
	v, err := pgverifier.New(pool)
	if err != nil {
		panic(err)
	}
	// write adds one to the permit's row, in one round trip with the guard
	// that refuses a token older than its slot's newest.
	write := func(ctx context.Context, l *lease.Lease) error {
		_, err := v.Exec(ctx, l.Name(), l.Token(), `INSERT INTO example_lanes VALUES ($1, 1)
			ON CONFLICT (permit) DO UPDATE SET writes = example_lanes.writes + 1`, l.Name())
		return err
	}

	const permits, workers = 3, 8
	exports, err := locks.Semaphore("example:exports", permits)
	if err != nil {
		panic(err)
	}
	var (
		mu            sync.Mutex
		holding, most int
		wg            sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			l, err := exports.Acquire(ctx, 10*time.Second) // waits in line while all 3 are held
			if err != nil {
				panic(err)
			}
			mu.Lock()
			holding++
			most = max(most, holding)
			mu.Unlock()
			time.Sleep(10 * time.Millisecond) // the work
			if err := write(l.Context(), l); err != nil {
				panic(err)
			}
			mu.Lock()
			holding--
			mu.Unlock()
			if err := l.Release(ctx); err != nil { // hands the permit to the next in line
				panic(err)
			}
		})
	}
	wg.Wait()
	var writes int
	if err := pool.QueryRow(ctx, `SELECT sum(writes) FROM example_lanes`).Scan(&writes); err != nil {
		panic(err)
	}
	fmt.Println("writes:", writes, "- never more than 3 holders:", most <= permits)

	// A holder pauses (GC, SIGSTOP) past its ttl while the other permits are held.
	slow, err := exports.Acquire(ctx, 200*time.Millisecond)
	if err != nil {
		panic(err)
	}
	fmt.Println("slow writes:", write(slow.Context(), slow))
	others := make([]*lease.Lease, 2)
	for i := range others {
		if others[i], err = exports.Acquire(ctx, time.Minute); err != nil {
			panic(err)
		}
	}
	fmt.Println("permits:", slow.Name(), others[0].Name(), others[1].Name())
	next, err := exports.Acquire(ctx, time.Minute) // waits until slow's ttl ends
	if err != nil {
		panic(err)
	}
	fmt.Println("next:", next.Name(), "newer token:", next.Token().Newer(slow.Token()))
	fmt.Println("next writes:", write(next.Context(), next))
	// slow resumes and writes before it looks at its lease (slow.Err()).
	err = write(ctx, slow)
	fmt.Println("slow's late write refused:", errors.Is(err, verifier.ErrStale))

	for _, l := range append(others, next) {
		if err := l.Release(ctx); err != nil {
			panic(err)
		}
	}
	fmt.Println("slow's release:", errors.Is(slow.Release(ctx), lease.ErrLost))
	info, err := exports.Inspect(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("holders left:", len(info.Holders))
	// Output:
	// writes: 8 - never more than 3 holders: true
	// slow writes: <nil>
	// permits: example:exports#0 example:exports#1 example:exports#2
	// next: example:exports#0 newer token: true
	// next writes: <nil>
	// slow's late write refused: true
	// slow's release: true
	// holders left: 0
}
