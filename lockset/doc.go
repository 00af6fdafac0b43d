// Package lockset takes several fencelock locks as one: a transfer between
// two accounts, a job that touches three tables.
//
//	set, err := lockset.Acquire(ctx, locks, []string{"accounts/7", "accounts/3"}, 10*time.Second)
//	if err != nil {
//		return err
//	}
//	defer set.Release(context.WithoutCancel(ctx))
//	err = v.WithTxAll(ctx, set.Tokens(), func(tx pgx.Tx) error { ... }) // pgverifier guards both
//
// [Example] is a whole program.
//
// The names are taken in one canonical order (sorted, duplicates dropped),
// whatever order the caller gives: two callers that want "a" and "b" both
// take "a" first, so neither holds one lock while it waits for the other's.
// The set is all or nothing: when a lock cannot be taken, the ones taken
// are released before Acquire returns (or in the background, bounded, once
// the caller's context has ended). [Set.Context] ends when any lease ends,
// so work under the set stops when one lock is lost; [Set.Tokens] gives
// each lock's token, for the verifiers' multi-resource guards
// (pgverifier's and sqlverifier's WithTxAll, which guard the resources in
// the same order in one transaction).
//
// The set is no stronger than its leases: a holder that pauses past its
// ttl loses them all, and only the verifiers refuse its writes. The leases
// come from one *lease.Client, of either kind (one Redis, or Redlock).
package lockset
