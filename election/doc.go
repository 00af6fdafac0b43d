// Package election elects one leader among processes, with a term that
// fences: each term is a fence.Token above every earlier term's, so a
// verifier at the storage refuses the writes of a deposed leader, however
// long it was paused.
//
// A leader is the holder of a lease (package lease) with keep-alive:
//
//   - Campaign blocks until this process leads, and returns its Term.
//   - Term.Context ends when leadership is lost: at the lease's local
//     deadline, which comes before the lock expires in Redis by the drift
//     allowance, so before any other campaign can win. A process that was
//     paused (GC, SIGSTOP) may still act after its term ended before it
//     notices; its writes carry the old term and the verifier refuses them.
//   - Term.Resign gives leadership up at once; it never removes a newer
//     leader (the delete compares the term's holder id) and can be retried
//     after an error (unlike etcd's Election.Resign, etcd issue #22123).
//   - Leader reads who leads; Observe streams new terms, which only grow.
//
// A leader that dies without resigning is replaced within the ttl (plus a
// campaigner's wake-up, see lease.Client.Acquire). Observe polls; a new term
// is seen within one poll interval.
//
// Unlike client-go's leaderelection, which says it does not fence, the term
// here is meant to travel with every write: the leadership check belongs at
// the storage, not in the leader.
//
// The election's lock is an ordinary lease lock named like the election:
// lease.Client.Inspect shows it and `fencelock inspect` too.
package election
