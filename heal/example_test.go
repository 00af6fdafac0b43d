package heal_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/heal"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/verifier"
)

// A Redis without persistence restarts and forgets the lock's counter,
// which had been lifted above the server's clock (the storage had seen
// tokens of another Redis): the next token starts from the clock, below a
// Seq the storage has already accepted, and the verifier rejects it.
// heal.Write sees that the lease still holds the lock, lifts the counter
// past the storage's highest Seq, and the write lands. (A lost counter that
// was not above the clock needs no healing: see the counter rule in
// package lease.)
func ExampleWrite() {
	ctx := context.Background()
	locks, err := lease.New(shared)
	if err != nil {
		panic(err)
	}
	const lock = "example:accounts/7" // the lock and the resource it guards
	if _, err := locks.Advance(ctx, lock, uint64(time.Now().UnixMicro())+1e10); err != nil {
		panic(err)
	}
	balance := 100
	store := verifier.NewMemory()
	debit := func(ctx context.Context, tok fence.Token) error {
		return store.Do(ctx, lock, tok, func() error { balance -= 10; return nil })
	}

	for range 3 {
		l, err := locks.TryAcquire(ctx, lock, time.Minute)
		if err != nil {
			panic(err)
		}
		if err := debit(ctx, l.Token()); err != nil {
			panic(err)
		}
		l.Release(ctx)
	}
	highest, _ := store.Highest(lock)

	// Stands in for a restart without persistence: the counter is gone.
	if err := shared.Del(ctx, "fencelock:{"+lock+"}:fence").Err(); err != nil {
		panic(err)
	}

	l, err := locks.TryAcquire(ctx, lock, time.Minute)
	if err != nil {
		panic(err)
	}
	defer l.Release(ctx)
	fmt.Println("the counter went backwards:", l.Token().Seq <= highest)
	fmt.Println("a plain write is rejected as stale:", errors.Is(debit(ctx, l.Token()), verifier.ErrStale))

	err = heal.Write(ctx, l, debit)
	fmt.Println("heal.Write:", err)
	fmt.Println("new token above the storage's highest:", l.Token().Seq > highest)
	fmt.Println("balance:", balance)
	// Output:
	// the counter went backwards: true
	// a plain write is rejected as stale: true
	// heal.Write: <nil>
	// new token above the storage's highest: true
	// balance: 60
}
