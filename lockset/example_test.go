package lockset_test

import (
	"context"
	"fmt"
	"time"

	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lockset"
)

// Two transfers in opposite directions take the same two locks, in the
// same order, one after the other; neither waits for the other forever.
func Example() {
	ctx := context.Background()
	locks, err := lease.New(exampleRedis()) // a go-redis client with ContextTimeoutEnabled: true
	if err != nil {
		panic(err)
	}
	defer locks.Close(ctx)
	a, b := "accounts/"+exampleSuffix()+"/1", "accounts/"+exampleSuffix()+"/2"
	for _, names := range [][]string{{a, b}, {b, a}} {
		set, err := lockset.Acquire(ctx, locks, names, 10*time.Second, lease.WithKeepAlive(0))
		if err != nil {
			panic(err)
		}
		tokens := set.Tokens()
		fmt.Println("holding", len(tokens), "locks, taken in order:", set.Names()[0] < set.Names()[1])
		// ... the transfer, with tokens[a] and tokens[b] checked by the storage
		if err := set.Release(ctx); err != nil {
			panic(err)
		}
	}
	// Output:
	// holding 2 locks, taken in order: true
	// holding 2 locks, taken in order: true
}
