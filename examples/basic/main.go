// Command basic shows the fencelock lease: a client acquires a lock and gets
// a fencing token, a second client waits for the same lock, and when the
// first releases it the second is woken at once and gets a higher token.
//
//	REDIS_URL=redis://localhost:6379/0 go run ./examples/basic
//
// It uses the Redis at REDIS_URL. Left unset, dev.go (not part of the
// example) starts a throwaway redis-server, so `go run ./examples/basic`
// needs no setup.
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/lease"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb, err := connectRedis(ctx, os.Getenv("REDIS_URL"))
	if err != nil {
		return err
	}
	defer rdb.Close()
	locks, err := lease.New(rdb)
	if err != nil {
		return err
	}
	name := fmt.Sprintf("demo:basic:%d", os.Getpid())

	first, err := locks.TryAcquire(ctx, name, 10*time.Second)
	if err != nil {
		return err
	}
	fmt.Printf("client 1 holds %q with token %s\n", name, first.Token())

	got := make(chan *lease.Lease)
	errs := make(chan error, 1)
	waitStart := time.Now()
	go func() {
		second, err := locks.Acquire(ctx, name, 10*time.Second)
		if err != nil {
			errs <- err
			return
		}
		got <- second
	}()

	time.Sleep(200 * time.Millisecond)
	if _, err := locks.TryAcquire(ctx, name, time.Second); err != nil {
		fmt.Printf("client 2 is waiting (a try now says: %v)\n", err)
	}
	released := time.Now()
	if err := first.Release(ctx); err != nil {
		return err
	}
	fmt.Println("client 1 released the lock")

	select {
	case second := <-got:
		woke := time.Since(released)
		defer second.Release(ctx)
		fmt.Printf("client 2 got it %v after the release (it waited %v in all), token %s\n",
			woke.Round(time.Microsecond), time.Since(waitStart).Round(time.Millisecond), second.Token())
		fmt.Printf("token %d > %d: a storage that remembers the highest token it saw can now refuse client 1's writes\n",
			second.Token().Seq, first.Token().Seq)
	case err := <-errs:
		return err
	}
	return nil
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
