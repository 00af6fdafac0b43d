// Package protocol owns fencelock's lock protocol on Redis: a lock's keys,
// each Lua script's arguments and replies, the lock's value, the fair
// queue's tickets, the release message and the pub/sub mode, as Go types.
// The lease, redlock, the notifier and the command use it; nothing else
// writes or parses these formats. Lua lives in the .lua files beside this
// one. common.lua, publish.lua, queue.lua and handoff.lua hold the shared
// functions; each script is composed of the ones it uses, and the fair
// scripts' common cases (a free lock with nobody queued, a release with
// nobody queued) return before the functions they do not need are built,
// because Lua builds every function of a script on every call.
//
// # Keys
//
// For lock NAME under PREFIX (see [KeysFor]), all in one Redis Cluster slot:
//
//	PREFIX{NAME}          the lock: "holder:seq", with the lease's ttl
//	PREFIX{NAME}:fence    the counter: the last Seq issued (see the counter rule)
//	PREFIX{NAME}:queue    fair waiters by arrival (sorted set); expires with the last ticket
//	PREFIX{NAME}:tickets  fair waiters' tickets (hash, see [Ticket]); likewise
//	PREFIX{NAME}:release  the pub/sub channel: one [Message] per release
//
// # Steps
//
//   - Try ([Acquire]): acquire.lua, or acquire_fair.lua for a fair lock. One
//     round trip: a free lock is taken with the next Seq; a lock the holder
//     has already is re-acquired (its ttl reset, the same Seq). A fair try
//     that does not get the lock queues the holder with a [Ticket] naming
//     the try's [Attempt].
//   - Release ([Release]): release.lua deletes the lock and publishes a plain
//     wake-up; release_fair.lua hands the lock, with the next Seq, to the
//     live head of the queue for the ticket's ttl, the claim window
//     ([ClaimTTL]: at most [TicketTTL]), and publishes a handoff [Message]
//     naming the head and the attempt of its ticket. The head's lease
//     counts the claim window and confirms the lock to its whole ttl with
//     its first refresh (lifetime.StartClaim).
//   - Leave ([Leave]): a fair waiter that gives up drops its ticket, and
//     hands the lock on if it was handed to it meanwhile.
//   - Refresh, Reissue, Advance, Adopt, Inspect: see their functions.
//
// # What must always hold
//
// These are the properties the package's model (package model beside this
// one) checks over every interleaving of its bounded configurations:
//
//   - Exclusion. The validity windows of two leases of one lock never
//     overlap. A lease's window runs from the send of the try that won the
//     lock (for a handoff: the try whose ticket the release used, named by
//     the message's attempt) to its local deadline, that moment plus the
//     ttl minus the drift allowance, or to its release. So a handoff
//     message read late, after newer tries, yields a lease counted from the
//     old try, which has run out; the waiter then refreshes once, and keeps
//     waiting when the refresh finds the lock gone.
//   - Order. Tokens grow in the order of those windows.
//   - Counters never go back: see [Counter].
//   - Liveness. A lock whose holder and waiters are all gone is free again
//     within the lease's ttl plus [TicketTTL] (a waiter that died holding a
//     ticket may be handed the lock once). A waiter that died never held
//     the lock, so it costs the live waiters a bound that does not grow
//     with its ttl, however it died (cancel or timeout and an exit without
//     Close, a signal, SIGKILL while queued or right after a handoff was
//     published to it): its ticket lives [TicketTTL] without renewal, and
//     a lock released to it is handed over for the claim window only,
//     which it never confirms, so the lock is free again within
//     [ClaimTTL] of the release. A waiter that leaves (cancel, timeout,
//     signal) drops its ticket with [Leave]. The limit: a request that
//     reaches Redis after its process died (a try sent just before, or
//     the refresh of a handoff read late) acts for it as a holder's
//     would, and the lock then lasts that request's ttl.
//
// A pause after a lease is returned is Kleppmann's case, which no lock
// protocol can cover: the verifier at the storage does.
package protocol
