package fencegocron_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/election"
	"github.com/fencelock/fencelock/extra/fencegocron"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/once"
	"github.com/fencelock/fencelock/verifier"
)

// The examples read the Redis to use from REDIS_URL (the tests set it to
// the Redis they start), as a program would.
func redisClient() *redis.Client {
	opt, err := redis.ParseURL(os.Getenv("REDIS_URL"))
	if err != nil {
		log.Fatal(err)
	}
	opt.ContextTimeoutEnabled = true // context deadlines bound socket reads
	return redis.NewClient(opt)
}

// A whole program: a job run once per scheduled run across the hosts that
// run this program, which sends its run's token with its write, so that
// the storage refuses the writes of a run that lost its lock.
func ExampleLocker_NewJob() {
	rdb := redisClient()
	defer rdb.Close()
	locks, err := lease.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(context.Background())
	jobs, err := once.New(rdb) // records which runs completed
	if err != nil {
		log.Fatal(err)
	}
	locker, err := fencegocron.NewLocker(locks, jobs)
	if err != nil {
		log.Fatal(err)
	}
	s, err := gocron.NewScheduler()
	if err != nil {
		log.Fatal(err)
	}
	defer s.Shutdown()

	var store verifier.Memory // your storage's verifier (pgverifier, sqlverifier, ...)
	wrote := make(chan fence.Token, 1)
	_, err = locker.NewJob(s, gocron.DurationJob(200*time.Millisecond), func(ctx context.Context) error {
		tok, _ := fence.FromContext(ctx) // the run's token
		return store.Do(ctx, "reports/daily", tok, func() error {
			select { // write the report
			case wrote <- tok:
			default:
			}
			return nil
		})
	}, gocron.WithName("reports-"+uuid.NewString()[:8])) // the same name on every host
	if err != nil {
		log.Fatal(err)
	}
	s.Start()
	tok := <-wrote
	fmt.Println("wrote under token seq > 0:", tok.Seq > 0)
	// Output: wrote under token seq > 0: true
}

// A whole program: a scheduler that runs its job only while this process
// leads, and sends the term with the job's writes. Run it on several hosts;
// one runs the job.
func ExampleElector_NewJob() {
	rdb := redisClient()
	defer rdb.Close()
	locks, err := lease.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close(context.Background())
	e, err := election.New(locks, "reports-leader-"+uuid.NewString()[:8], 10*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	elector, err := fencegocron.NewElector(e)
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	campaign := make(chan error, 1)
	go func() { campaign <- elector.Run(ctx) }()
	defer func() { stop(); <-campaign }() // resigns

	s, err := gocron.NewScheduler(gocron.WithDistributedElector(elector))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Shutdown()
	ran := make(chan struct{}, 1)
	_, err = elector.NewJob(s, gocron.DurationJob(100*time.Millisecond), func(ctx context.Context) error {
		term, _ := fence.FromContext(ctx) // send it with the job's writes
		if term.Seq > 0 {
			select {
			case ran <- struct{}{}:
			default:
			}
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	s.Start()
	<-ran
	fmt.Println("the leader ran the job")
	// Output: the leader ran the job
}
