package election_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/fencelock/fencelock/election"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/verifier"
)

// A whole program: two candidates, one leads at a time; the first one's
// term ends when it resigns, the second wins with a higher term, and the
// storage (an in-memory verifier here) refuses the first one's late write.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	locks, err := lease.New(shared) // shared: a *redis.Client on your Redis
	if err != nil {
		log.Fatal(err)
	}
	elect, err := election.New(locks, "example-leader/"+suffix(), 5*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	store := verifier.NewMemory()

	first, err := elect.Campaign(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("first leads:", first.Leads())
	fmt.Println("write, first term:", store.Claim(ctx, "config", first.Token()))

	won := make(chan *election.Term)
	go func() { // the second candidate waits for its turn
		t, err := elect.Campaign(ctx)
		if err != nil {
			log.Fatal(err)
		}
		won <- t
	}()
	if err := first.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	second := <-won
	defer second.Resign(ctx)
	fmt.Println("second term is higher:", second.Token().Seq > first.Token().Seq)
	fmt.Println("write, second term:", store.Claim(ctx, "config", second.Token()))
	fmt.Println("late write, first term refused:", store.Claim(ctx, "config", first.Token()) != nil)
	// Output:
	// first leads: true
	// write, first term: <nil>
	// second term is higher: true
	// write, second term: <nil>
	// late write, first term refused: true
}
