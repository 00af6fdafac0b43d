// Package fencebridge moves a running fleet from go-redsync/redsync or
// bsm/redislock to fencelock without two holders of a lock at any moment.
//
//	old := redsyncbridge.New(redsync.New(goredis.NewPool(rdb)), redsync.WithExpiry(30*time.Second))
//	locks, err := lease.New(rdb)
//	bridge, err := fencebridge.New(old, locks)
//	l, err := bridge.Acquire(ctx, "reports/nightly", 30*time.Second, fencebridge.WithKeepAlive(0))
//	if err != nil {
//		return err
//	}
//	defer l.Release(context.WithoutCancel(ctx))
//	err = run(l.Context(), l.Token()) // l.Context ends when either lock ends
//
// The old library's lock comes from a module of its own, so that a
// program gets only the peer it used: redsyncbridge.New for
// go-redsync/redsync, redislockbridge.New for bsm/redislock (modules
// github.com/fencelock/fencelock/extra/fencebridge/redsyncbridge and
// .../redislockbridge). A [Lock] has the methods of a *lease.Lease that a
// holder uses, so code written against an interface of them takes either.
//
// The old libraries lock the bare name ("reports/nightly"); fencelock locks
// "fencelock:{reports/nightly}". The two keys never see each other, so a
// process of the old version and one of the new would both hold the lock
// during a rolling deploy. A [Bridge] takes the old library's lock first,
// as the old processes do, and then fencelock's, and holds the lock only
// while both are valid. So a bridge process excludes the old processes
// (through the old key) and the fencelock-only processes (through
// fencelock's key).
//
// # The procedure
//
//  1. Deploy the bridge: every process takes its locks through a Bridge,
//     built from the same old-library setup (the same Redis servers, the same
//     expiry) as the old fleet. Old and bridge processes run side by side.
//  2. Wait until no process of the old version runs any more (the rollout
//     has finished; a process that was stopped or paused is gone, not
//     waiting to resume).
//  3. Deploy fencelock alone: processes use lease.Client directly. Bridge
//     and fencelock-only processes run side by side.
//  4. Remove this module from the build. The old keys expire on their own.
//
// Never run a fencelock-only process while an old one may still run: that is
// the rolling deploy this package exists to avoid. Step 3 may be rolled back
// to step 1, and step 1 to the old version; step 3 may not go straight back
// to the old version.
//
// The bridge promises exclusion as strongly as its weaker part: the old
// library's (an efficiency lock) while old processes run. Put a verifier at
// the storage once step 3 is done: old processes send no fencing tokens.
//
// An acquire that fails after taking the old lock releases it, unless its
// context has ended; then, as with redsync, the old lock is left to expire.
package fencebridge
