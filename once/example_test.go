package once_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/once"
)

// Three hosts' cron fire at the same tick: the job runs once, and the
// others learn that it is done until the next period.
func Example() {
	ctx := context.Background()
	rdb := exampleRedis() // a go-redis client with ContextTimeoutEnabled: true
	locks, err := lease.New(rdb)
	if err != nil {
		panic(err)
	}
	jobs, err := once.New(rdb)
	if err != nil {
		panic(err)
	}
	name := "nightly-report-" + exampleSuffix()
	for host := 1; host <= 3; host++ {
		l, err := locks.Acquire(ctx, name, 30*time.Second, lease.WithKeepAlive(0))
		if err != nil {
			panic(err)
		}
		err = jobs.Do(ctx, l, 24*time.Hour, func(ctx context.Context) error {
			fmt.Printf("host %d runs the report\n", host)
			return nil
		})
		var done *once.DoneError
		if errors.As(err, &done) {
			fmt.Printf("host %d: already done, next run in about %v\n", host, done.Until.Sub(done.Now).Round(time.Hour))
		} else if err != nil {
			panic(err)
		}
		_ = l.Release(ctx)
	}
	// Output:
	// host 1 runs the report
	// host 2: already done, next run in about 22h0m0s
	// host 3: already done, next run in about 22h0m0s
}
