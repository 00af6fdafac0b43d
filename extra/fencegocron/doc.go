// Package fencegocron runs gocron v2 jobs on several hosts, each run on one
// host, and hands each run a fencing token in its context.
//
//	locks, err := lease.New(rdb)
//	jobs, err := once.New(rdb)
//	locker, err := fencegocron.NewLocker(locks, jobs)
//	s, err := gocron.NewScheduler()
//	_, err = locker.NewJob(s, gocron.CronJob("0 * * * *", false), func(ctx context.Context) error {
//		tok, _ := fence.FromContext(ctx) // send it with the job's writes
//		return report(ctx, tok)
//	}, gocron.WithName("reports/hourly")) // the same name on every host
//
// It is a module of its own (github.com/fencelock/fencelock/extra/fencegocron)
// so that the core does not depend on gocron, and it uses the core's public
// API only. The Examples are whole programs.
//
// # Which one
//
// A [Locker] runs each scheduled run of a job once across hosts: a run holds
// the job's lease while it lasts, and its completion is recorded (package
// once) under its token, by the Redis server's clock, for the job's period,
// which the Locker reads from the job's schedule. So a host whose clock is
// behind (gocron #841) does not run a tick again, and a period stated apart
// from the schedule cannot disagree with it.
//
// An [Elector] makes one process the leader for all jobs of its
// schedulers; its term is the token. Ticks that fall while leadership
// changes hands (up to the election's ttl after a leader died) are not run.
//
// # The token
//
// A job made with [Locker.NewJob] or [Elector.NewJob] finds its token with
// fence.FromContext, and its context ends when the run's lease or the term
// is lost. Send the token with the job's writes: a verifier at the storage
// (package verifier) then refuses the writes of a run that lost its lock
// while paused, whose context it did not get to see. Without a verifier
// these are efficiency locks. gocron gives a Locker only the job's name, and
// the task the job's long-lived context, so a job added with s.NewJob and
// gocron.WithDistributedLocker cannot get its token: use NewJob.
package fencegocron
