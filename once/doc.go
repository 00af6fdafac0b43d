// Package once runs a job at most once per period (a day, an hour, a
// scheduler's tick) across hosts, on a fencelock lease.
//
//	l, err := locks.Acquire(ctx, "nightly-report", 30*time.Second, lease.WithKeepAlive(0))
//	if err != nil {
//		return err
//	}
//	defer l.Release(context.WithoutCancel(ctx))
//	err = jobs.Do(ctx, l, 24*time.Hour, report) // errors.Is(err, once.ErrDone): another host ran it
//
// A lease alone only keeps runs from overlapping: three hosts whose cron
// fires at midnight each take the lock in turn and each run the job. A
// [Tracker] (jobs above) records, in Redis, that a run completed, under
// the token of the lease it held, and refuses the next claim until the
// period is over.
//
// [Example] is a whole program; `fencelock run --once-per 24h NAME -- CMD`
// does the same for a command (exit status 6 when already done).
//
// # The rule: the server's clock, from the claim of the last completed run
//
// A run claims the job ([Tracker.Claim]) when it starts and completes it
// ([Claim.Complete]) when the job succeeded. A completed run makes the job
// done until its claim's instant plus the period less a tolerance
// ([WithTolerance], a tenth of the period by default), both read from the
// Redis server's clock (TIME, in the claim's script). A claim before that
// instant is refused with a *[DoneError]; the hosts' clocks take no part.
//
// So a host whose clock is behind, whose cron fires after another host's
// run completed, is refused (the case of gocron #841), and so is a host
// that waited for the lock while the run went on. The next period opens a
// period after the last run's start, not at a calendar boundary: a
// boundary would split the hosts' triggers of one tick when a host's clock
// is a millisecond ahead. Each tick runs once when the hosts' triggers of
// one tick spread (clock offsets, scheduler delays, waits for the lock)
// less than the tolerance, and the tolerance is less than the period minus
// that spread.
//
// # What fencing adds
//
// [Claim.Complete] checks the token in the same script as its write
// (package verifier/redisverifier): once a holder with a newer token has
// claimed the job, an older holder (paused past its lease, say) cannot
// mark the period done, and gets a *verifier.StaleError. An older holder
// whose lease expired while no one claimed after it may still complete:
// no other run started. A run that failed, crashed or lost its lease is
// not recorded, so the next holder runs the job again: "at most once" is
// about completed runs. A job whose writes must land at most once per
// period carries the token to its storage (a verifier), which then refuses
// the writes of the run that lost its lease.
//
// # Keys and limits
//
// The state of job NAME is the hash "fencelock:once:{NAME}" (see
// [StatePrefix]), which expires twice the period plus an hour after its
// last write, and the high-water "fencelock:hw:once:{NAME}", kept like any
// redisverifier high-water. They live on the Redis given to [New]: with
// Redlock, pick one you trust to keep them (a restart without persistence
// forgets that the period was done, and the job runs again). Tokens must
// carry a Seq: Redlock needs WithQuorumFencing.
package once
