package fencegocron_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"

	"github.com/fencelock/fencelock/election"
	"github.com/fencelock/fencelock/extra/fencegocron"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
)

// A whole program: a scheduler that runs its job only while this process
// leads, and sends the term with the job's writes. Run it on several hosts;
// one runs the job.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb, stop, err := testenv.RedisOrStart(ctx) // your *redis.Client
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	locks, err := lease.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	e, err := election.New(locks, "reports-leader-"+uuid.NewString()[:8], 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	elector, err := fencegocron.NewElector(e)
	if err != nil {
		log.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(ctx)
	ran := make(chan struct{})
	go elector.Run(runCtx)
	defer stopRun()

	s, err := gocron.NewScheduler(gocron.WithDistributedElector(elector))
	if err != nil {
		log.Fatal(err)
	}
	_, err = s.NewJob(gocron.DurationJob(100*time.Millisecond), gocron.NewTask(func() {
		term := elector.Term().Token() // send it with the job's writes
		if term.Seq > 0 {
			select {
			case ran <- struct{}{}:
			default:
			}
		}
	}))
	if err != nil {
		log.Fatal(err)
	}
	s.Start()
	defer s.Shutdown()
	<-ran
	fmt.Println("the leader ran the job")
	// Output: the leader ran the job
}
