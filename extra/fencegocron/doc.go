// Package fencegocron runs gocron v2 jobs on several hosts, each run on one host.
//
//	locks, err := lease.New(rdb)
//	locker, err := fencegocron.NewLocker(locks, time.Minute) // for jobs run every minute
//	s, err := gocron.NewScheduler(gocron.WithDistributedLocker(locker))
//
// A [Locker] runs each scheduled run of a job on one host; an [Elector]
// runs jobs only on the leader, with a term that fences its writes. It is a
// module of its own (github.com/fencelock/fencelock/extra/fencegocron) so
// that the core does not depend on gocron. The package Example is a whole
// program with the Elector.
//
// # Which one
//
// The Locker is an efficiency lock: each tick's run happens once, and a
// host whose clock is behind (gocron #841: a fast job run again by a host
// whose clock is behind) does not run it again. Its lock is per job and per
// tick, so a host paused while holding one tick does not block the next.
//
// The Elector makes one process the leader for all jobs of its schedulers;
// a job reads the current term with [Elector.Term] and sends its token with
// its writes, so that a verifier refuses a deposed leader's writes. Ticks
// that fall while leadership changes hands (up to the election's ttl after
// a leader died) are not run.
package fencegocron
