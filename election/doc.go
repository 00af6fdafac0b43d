// Package election elects one leader among processes, with a term that is a fencing token.
//
//	locks, err := lease.New(rdb) // a go-redis client with ContextTimeoutEnabled: true
//	e, err := election.New(locks, "reports-leader", 10*time.Second)
//	term, err := e.Campaign(ctx) // blocks until this process leads
//	if err != nil {
//		return err
//	}
//	defer term.Resign(context.WithoutCancel(ctx))
//	err = lead(term.Context(), term.Token()) // every write carries the term; a verifier checks it
//
// Each term is a [fence.Token] above every earlier term's, so a verifier at
// the storage refuses the writes of a deposed leader, however long it was
// paused. A leader is the holder of a lease (package lease) with keep-alive:
//
//   - [Election.Campaign] blocks until this process leads, and returns its [Term].
//   - [Term.Context] ends when leadership is lost: at the lease's local
//     deadline, which comes before the lock expires in Redis by the drift
//     allowance, so before any other campaign can win. A process that was
//     paused (GC, SIGSTOP) may still act after its term ended, before it
//     notices; its writes carry the old term and the verifier refuses them.
//   - [Term.Resign] gives leadership up at once. It never removes a newer
//     leader (the delete compares the term's holder id, fresh for each
//     term) and can be retried after an error (unlike etcd's
//     Election.Resign, etcd issue #22123).
//   - [Election.Leader] reads who leads; [Election.Observe] streams new
//     terms, which only grow.
//
// A leader that dies without resigning is replaced within the ttl plus a
// campaigner's wake-up (its backoff, see lease.WithBackoff). Observe polls:
// a new term is seen within one poll interval plus a round trip.
//
// Unlike client-go's leaderelection, which says it does not fence, the
// term here is meant to travel with every write: the leadership check
// belongs at the storage, not in the leader. The election's lock is an
// ordinary lease lock named like the election, so lease.Client.Inspect and
// `fencelock inspect` show it. The whole program is the package Example.
package election
