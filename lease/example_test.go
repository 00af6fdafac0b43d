package lease_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/lease"
)

// The examples read the Redis to use from REDIS_URL (the test sets it to
// the Redis TestMain starts); any redis.UniversalClient works (standalone,
// Sentinel or Cluster).

func ExampleClient_TryAcquire() {
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
	l, err := locks.TryAcquire(ctx, "example:report", 30*time.Second)
	if err != nil {
		panic(err)
	}
	defer l.Release(ctx)

	// Send l.Token() with every write to the protected storage.
	fmt.Println("holding", l.Name(), "token seq > 0:", l.Token().Seq > 0)

	_, err = locks.TryAcquire(ctx, "example:report", 30*time.Second)
	fmt.Println("second try:", errors.Is(err, lease.ErrNotAcquired))
	// Output:
	// holding example:report token seq > 0: true
	// second try: true
}

func ExampleClient_Acquire() {
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
	first, _ := locks.TryAcquire(ctx, "example:invoice-42", 30*time.Second)

	go func() {
		time.Sleep(20 * time.Millisecond)
		first.Release(ctx) // publishes a wake-up: the waiter below gets it at once
	}()

	waitCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	second, err := locks.Acquire(waitCtx, "example:invoice-42", 30*time.Second)
	if err != nil {
		panic(err)
	}
	defer second.Release(ctx)
	fmt.Println("second token is newer:", second.Token().Newer(first.Token()))
	// Output: second token is newer: true
}

func ExampleWithKeepAlive() {
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
	l, err := locks.TryAcquire(ctx, "example:job", 300*time.Millisecond, lease.WithKeepAlive(0))
	if err != nil {
		panic(err)
	}
	defer l.Release(ctx)

	select {
	case <-l.Done(): // the lease was lost: stop working, the token is stale
		fmt.Println("lost:", l.Err())
	case <-time.After(time.Second): // the work, longer than the ttl
		fmt.Println("still held after 3 ttls:", l.Err() == nil)
	}
	// Output: still held after 3 ttls: true
}

func ExampleClient_Inspect() {
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
	l, _ := locks.TryAcquire(ctx, "example:inspect", time.Minute)
	defer l.Release(ctx)

	info, err := locks.Inspect(ctx, "example:inspect")
	if err != nil {
		panic(err)
	}
	fmt.Println(info.Holder == l.Holder(), info.Token == l.Token(), info.LastSeq == l.Token().Seq)
	// Output: true true true
}

func ExampleClient_Advance() {
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
	// A verifier reported that the storage has seen Seq 5000 for this lock:
	// the counter went backwards (say, Redis restarted without persistence).
	if _, err := locks.Advance(ctx, "example:advance", 5000); err != nil {
		panic(err)
	}
	l, _ := locks.TryAcquire(ctx, "example:advance", time.Minute)
	defer l.Release(ctx)
	fmt.Println(l.Token().Seq > 5000)
	// Output: true
}

func ExampleWithHolder() {
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
	l, _ := locks.TryAcquire(ctx, "example:restart", time.Minute)
	saved := l.Holder() // persisted by the process before it restarted

	// After the restart: the same holder id gets its lock and token back.
	again, err := locks.TryAcquire(ctx, "example:restart", time.Minute, lease.WithHolder(saved))
	if err != nil {
		panic(err)
	}
	defer again.Release(ctx)
	fmt.Println(again.Token() == l.Token())
	// Output: true
}
