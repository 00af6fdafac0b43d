package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lease/redlock"
	"github.com/fencelock/fencelock/verifier"
)

// The examples read their masters from REDLOCK_URLS (the test sets it to
// the five Redis masters TestMain starts); pass your own independent ones.
// They allow each node a whole second (the default is 50ms) only because
// the machine that runs them may be busy.

func ExampleNew() {
	var nodes []*redis.Client
	for _, url := range strings.Split(os.Getenv("REDLOCK_URLS"), ",") {
		opt, err := redis.ParseURL(url)
		if err != nil {
			panic(err)
		}
		nodes = append(nodes, redis.NewClient(&redis.Options{
			Addr:                  opt.Addr,
			ContextTimeoutEnabled: true, // a node that misses the node timeout is let go at once
			MaxRetries:            -1,   // redlock's next attempt is the retry
			DialerRetries:         1,
		}))
	}
	defer func() {
		for _, n := range nodes {
			n.Close()
		}
	}()

	locks, err := redlock.New(nodes,
		redlock.WithNodeTimeout(50*time.Millisecond),
		redlock.WithQuorumFencing(true),
	)
	if err != nil {
		panic(err)
	}
	info, err := locks.Inspect(context.Background(), "example:any")
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d nodes, majority %d\n", len(info.Nodes), len(info.Nodes)/2+1)
	// Output: 5 nodes, majority 3
}

func Example_tryAcquire() {
	ctx := context.Background()
	var nodes []*redis.Client
	for _, url := range strings.Split(os.Getenv("REDLOCK_URLS"), ",") {
		opt, err := redis.ParseURL(url)
		if err != nil {
			panic(err)
		}
		opt.ContextTimeoutEnabled, opt.MaxRetries, opt.DialerRetries = true, -1, 1
		nodes = append(nodes, redis.NewClient(opt))
		defer nodes[len(nodes)-1].Close()
	}
	locks, _ := redlock.New(nodes, redlock.WithNodeTimeout(time.Second))
	l, err := locks.TryAcquire(ctx, "example:nightly-report", 30*time.Second)
	if err != nil {
		panic(err)
	}
	defer l.Release(ctx)

	fmt.Println("holding", l.Name(), "until about", time.Until(l.Deadline()).Round(time.Second))

	_, err = locks.TryAcquire(ctx, "example:nightly-report", 30*time.Second)
	fmt.Println("second try:", errors.Is(err, lease.ErrNotAcquired))
	// Output:
	// holding example:nightly-report until about 30s
	// second try: true
}

func Example_acquire() {
	ctx := context.Background()
	var nodes []*redis.Client
	for _, url := range strings.Split(os.Getenv("REDLOCK_URLS"), ",") {
		opt, err := redis.ParseURL(url)
		if err != nil {
			panic(err)
		}
		opt.ContextTimeoutEnabled, opt.MaxRetries, opt.DialerRetries = true, -1, 1
		nodes = append(nodes, redis.NewClient(opt))
		defer nodes[len(nodes)-1].Close()
	}
	locks, _ := redlock.New(nodes, redlock.WithQuorumFencing(true), redlock.WithNodeTimeout(time.Second))
	first, _ := locks.TryAcquire(ctx, "example:rebuild-index", 30*time.Second)

	go func() {
		time.Sleep(20 * time.Millisecond)
		first.Release(ctx) // each node publishes a release: the waiter wakes at once
	}()

	wctx, cancel := context.WithTimeout(ctx, 5*time.Second) // how long to wait at most
	defer cancel()
	second, err := locks.Acquire(wctx, "example:rebuild-index", 30*time.Second)
	if err != nil {
		panic(err)
	}
	defer second.Release(ctx)
	fmt.Println("second token is newer:", second.Token().Newer(first.Token()))
	// Output: second token is newer: true
}

// A correctness lock needs the storage to check the token: with quorum
// fencing, redlock's tokens increase, so a verifier can reject a holder
// whose lease ran out while it was paused.
func Example_leaseToken() {
	ctx := context.Background()
	var nodes []*redis.Client
	for _, url := range strings.Split(os.Getenv("REDLOCK_URLS"), ",") {
		opt, err := redis.ParseURL(url)
		if err != nil {
			panic(err)
		}
		opt.ContextTimeoutEnabled, opt.MaxRetries, opt.DialerRetries = true, -1, 1
		nodes = append(nodes, redis.NewClient(opt))
		defer nodes[len(nodes)-1].Close()
	}
	locks, _ := redlock.New(nodes, redlock.WithQuorumFencing(true), redlock.WithNodeTimeout(time.Second))
	store := verifier.NewMemory() // stands in for the storage's own check
	write := func(tok fence.Token) error {
		return store.Do(ctx, "example:balance", tok, func() error { return nil /* the write */ })
	}

	old, _ := locks.TryAcquire(ctx, "example:account-7", 30*time.Second)
	old.Release(ctx) // or: its lease ran out during a long GC pause
	newer, _ := locks.TryAcquire(ctx, "example:account-7", 30*time.Second)
	defer newer.Release(ctx)

	fmt.Println("new holder writes:", write(newer.Token()))
	fmt.Println("old holder rejected:", errors.Is(write(old.Token()), verifier.ErrStale))
	// Output:
	// new holder writes: <nil>
	// old holder rejected: true
}

func Example_keepAlive() {
	ctx := context.Background()
	var nodes []*redis.Client
	for _, url := range strings.Split(os.Getenv("REDLOCK_URLS"), ",") {
		opt, err := redis.ParseURL(url)
		if err != nil {
			panic(err)
		}
		opt.ContextTimeoutEnabled, opt.MaxRetries, opt.DialerRetries = true, -1, 1
		nodes = append(nodes, redis.NewClient(opt))
		defer nodes[len(nodes)-1].Close()
	}
	locks, _ := redlock.New(nodes, redlock.WithNodeTimeout(time.Second))
	l, err := locks.TryAcquire(ctx, "example:long-job", time.Second, lease.WithKeepAlive(0))
	if err != nil {
		panic(err)
	}
	defer l.Release(ctx)

	select {
	case <-time.After(1500 * time.Millisecond): // the job, longer than the ttl
		fmt.Println("still held:", l.Err() == nil)
	case <-l.Done(): // refresh found the lock gone: stop working
		fmt.Println("lost:", l.Err())
	}
	// Output: still held: true
}
