// Command basic shows the fencelock lease: a client acquires a lock and gets
// a fencing token, a second client waits for the same lock, and when the
// first releases it the second is woken at once and gets a higher token.
//
//	go run ./examples/basic
//
// It starts a throwaway redis-server unless REDIS_URL is set.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/fencelock/fencelock/internal/testenv"
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
	rdb, stop, err := testenv.RedisOrStart(ctx)
	if err != nil {
		return err
	}
	defer stop()
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
