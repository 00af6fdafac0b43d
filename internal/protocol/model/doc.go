// Package model is an explicit-state model checker for the fair lock
// protocol: the scripts of package protocol (scripts/acquire_fair.lua,
// release_fair.lua, leave.lua, refresh.lua, advance.lua) and the waiting
// loop of lease/wait.go; and, with Config.Permits, for the fenced
// semaphore (sem_acquire.lua, release_fair.lua and refresh.lua on a slot,
// sem_leave.lua; see "The semaphore" below). It is pure Go and needs no Redis,
// so the protocol's properties are checked in every `go test` run, in
// seconds.
//
// # Why a model
//
// The failures that matter need a particular schedule: a message read
// after a timer, a reply that arrives after the lock expired, a client
// paused between two steps. Tests against a real server hit such
// schedules by luck. The model enumerates them: [Check] visits every
// state reachable within a bound, breadth first, so a violation comes
// with one of the shortest schedules that produce it; [Walk] and [Walks]
// follow seeded random schedules further than exhaustive search reaches,
// and a seed replays its walk step for step.
//
// # The abstraction
//
// Time is discrete: one tick is "a while", and the server clock reads
// tick*1000 µs, so INCR (one per acquisition) never overtakes it. The
// lock's ttl, the ticket lifetime and the waiter's poll interval are a
// few ticks (Config.TTL, TicketTTL, Poll). Everything else happens
// between ticks, in any order:
//
//   - The server is one Redis: the lock key (holder, seq, expiry), the
//     counter (value, optional expiry), and the queue of holder ids with
//     their tickets (expiry, and in Fixed the attempt that renewed it),
//     both queue keys expiring together. Keys expire as ticks pass. A
//     restart loses all of them and executes nothing more in that tick.
//   - The network holds requests (a try, release, leave or refresh), their
//     replies, and handoff messages, as unordered sets: any one may be
//     taken next, so delays and reordering are free. Handoff messages may
//     also be lost or duplicated within a budget (a semaphore's wake-ups
//     lost only).
//   - A client runs Acquire calls one after the other (Config.Acquisitions),
//     each as wait.go does: send a try (recording its send tick under a
//     fresh attempt id), block on the reply, and on "held" or "queued"
//     wait for a handoff message or the timer, then try again. A client
//     that takes no step is paused; its timer then fires late, and when it
//     runs again its timer and old messages are all ready, in any order.
//     A waiter may give up (its leave is sent; Old may also exit without
//     sending it) or be killed (it stops; its requests may still arrive):
//     a process that exits without Client.Close, its leave unsent, is a
//     killed one to the server.
//   - A release hands the lock to the queue's head for the claim window,
//     min(TTL, TicketTTL), as the ticket says (queue.lua). The handed
//     lease counts that window and, when it is below the ttl, sends its
//     confirm (a refresh to the ttl, lifetime.StartClaim) at any moment
//     while it is live; the confirm's reply moves its deadline.
//   - Each Acquire has its own holder id, as in lease by default. With
//     Config.ReuseHolder a client keeps one id (lease.WithHolder): its
//     leave then only dequeues (leave.lua without pass-on), and its next
//     Acquire starts once its release has run (a re-acquire waits for the
//     client's background cleanups, a release among them).
//   - The counter follows next_seq: one more than the counter, lifted to
//     the clock with Config.ClockFloor; a missing counter starts at the
//     clock (the old rule, Config.OldCounter: at 1 when it has no ttl). Advance
//     lifts it to the highest seq issued or above the clock; under the new
//     rule the counter then lives at least until the clock passes it.
//
// Each step corresponds to code:
//
//	model step             real code
//	try sent / run         c.try in wait.go / acquire_fair.lua
//	reply read             c.try returning: newLease from sent (over already: try again), or wait
//	timer fires            the timer case of wait's select, then c.try
//	handoff read           the w.Wake() case: handedOff, maybe its refresh
//	confirm sent / run     lifetime.StartClaim's refresh / refresh.lua
//	refresh run            refresh.lua (Fixed: holder and seq must match)
//	release sent / run     Lease.Release / release_fair.lua
//	leave sent / run       wait's deferred c.leave / leave.lua
//	Advance                advance.lua
//
// Two reductions keep the search small without losing behaviours: a
// "held" or "queued" reply is read as soon as the server sends it (a
// waiter that read it later could do nothing a waiter from now cannot:
// its timer would only fire later), and states that differ only by the
// names of the clients are one state (they run the same code).
//
// # The variants
//
// Old is the protocol before the fix (main up to a292fb4): the handoff message is "holder:seq", and the
// lease's deadline counts from the waiter's last sent try. If that try
// was sent after the handoff, and the handed lock expired before the try
// ran (so the try only queued again behind a new holder), the waiter
// takes a lock it no longer has: two holders. [Check] finds this in a few
// ticks; see TestOldFindsTwoHolders for the trace.
//
// OldHandoff is Fixed with the handoff of main before the claim (up to
// d88ac01): the lock handed over for the waiter's whole ttl. A waiter
// that died then keeps it for that ttl; see TestOldHandoffStrands.
//
// Fixed carries the ticket's attempt in the message: the attempt of the
// try that last renewed the waiter's ticket, which ran before the
// handoff, so a deadline counted from its send is below the key's expiry.
// A waiter ignores an attempt it did not send in this Acquire (a message
// from an earlier Acquire under the same holder id, lease.WithHolder).
// When the deadline leaves less than half the ttl, it refreshes first,
// and that refresh must match the whole lock value, holder and seq: a
// refresh by holder alone (refresh.lua before the fix, Config.RefreshByHolder)
// lets a handoff message read late renew a lock that its holder got
// again, later, with a newer token, and the lease then carries the older
// token after another client's newer one (property (b) fails).
//
// # Properties
//
// The properties are stated once, in package protocol's doc ("What must
// always hold", [github.com/fencelock/fencelock/internal/protocol]); this
// is how the model observes them.
//
// (a) Exclusion: a client's window is the phase holding with a deadline
// not yet passed (Acquire returned the lease, it was not released); the
// deadline is counted from the send of the try the lease followed, as
// readReply and readHandoff do. No two clients are in their windows at
// once on locks of the same server epoch (a restart begins an epoch).
//
// (b) Order: checked where a seq is issued (nextSeq: above every seq
// issued before, across expiries and restarts) and where a lease is
// gotten (grant: above every token gotten before in its epoch or an
// earlier one, the same token only for the same holder).
//
// (c) Liveness: once every client is out of Acquire and holds nothing,
// and no request is in flight, for Config.LivenessBound ticks (default
// TTL + TicketTTL), no lock key and no live ticket is left. And a waiter
// that died costs the live waiters a bound independent of its ttl: a lock
// a release handed to a holder id that no live Acquire can take any more
// (killed, exited, or given up) is gone within Config.StrandBound ticks
// of the handoff (default TicketTTL), unless a request of that holder id
// set it again since (a try or refresh that arrived after its process
// died, which acts for it as a holder's would: the documented limit).
//
// # The semaphore
//
// With Config.Permits = N (1 to 3) the same clients, network, time and
// queue drive a semaphore: the server has N slots, each a lock key with
// its own counter (the lock is slot 0 of the same structure), and the
// permits key, which a try writes with its client's N when the key holds
// another or is missing, with the counter's ttl (Config.CounterTTL; none
// with 0): it lapses a counter ttl after the last try that changed it,
// however busy the semaphore is. The scripts differ from the lock's only
// in what they do with slots (serverTry, serverRelease, passSlot,
// handOff): a try re-acquires the holder's slot among the first N, or
// past N up to the N the key held before the try (own_slot: a slot a
// client with a larger N handed over); it queues when none of the first N
// is free, and otherwise takes the first free one when the queue has no
// live head or the caller is it, then hands every other free slot below
// its N to the next live waiters, each with a message naming the slot. A
// release or leave (which finds the leaver's slot among the first
// max(N, the key's N)) hands its slot on, unless the slot is at or past
// the key's N (the semaphore shrank): then it is deleted; or unless the
// key is missing: then the slot is deleted and a plain wake-up ("") is
// published, handing nothing over, which every waiter gets (one message
// per listening client, under its holder id; one pending at most, as
// notify keeps it) and on which it tries again at once; their tries write
// the key again. A release with nobody queued takes release_fair.lua's
// short path: it deletes its slot and publishes nothing. Wake-ups may be
// lost within the Losses budget, not duplicated. A waiter builds its
// lease for the slot a message names, whatever its own N (the slot's keys
// are the name's), and releases, refreshes and confirms that slot. A
// semaphore of one is the fair lock: TestSemaphoreOfOneIsTheLock explores
// the same number of states either way.
//
// Config.NewPermits and NewClients change N while the clients run: the
// last NewClients clients ask for NewPermits. Each try writes its own N,
// so the permits key goes back and forth as the old and new clients try,
// as it does in a rolling deploy.
//
// The properties, as the model observes them for a semaphore:
//
// (a) Exclusion: no two windows on one slot in one server epoch; no more
// windows in an epoch than the largest N; once the semaphore shrank (the
// permits key holds NewPermits, and every slot from NewPermits up was let
// go of, or seen free, since the key last went to or below it: the ghost
// surplus), no more than NewPermits in the server's epoch; and no holder
// id has two slots at once (one Acquire, one permit: a second slot would
// be lost to the waiters until its key expires).
//
// (b) Order, per slot: every seq a slot's key is given is above every seq
// it was given before, and a live lease carries a token above every token
// of its slot gotten live before (the same one only for the same holder).
//
// (c) Liveness: the lock's two bounds hold for every slot (all quiet; a
// slot handed to a waiter that died is free within StrandBound of the
// handoff), and no permit is stranded: a slot that is free, or held by a
// holder id that no live Acquire can take, while the live head of the
// queue is a waiter that can take it (in its wait, with tries left, and
// its N above the slot), is taken, by a try or a handoff, within
// Config.FreeBound ticks (the ghost free): by default the claim window
// plus Poll, the time a slot handed to a waiter killed before it read the
// message stays set, plus the next poll of the waiter behind. The bound
// is tight: one tick less fails (TestSemaphoreMutantsFail). It bounds time
// that passes when nothing is pending: a tick taken while a request or
// reply is in flight, a waiter's timer is due, or a waiter has a message
// to read, is a pause (of the server, the network or a client), which no
// bound can cover, and the count starts again (prompt). A waiter that died
// at the head of the queue costs the others its ticket's lifetime,
// TicketTTL, as for the lock; it is not the live head, and the count
// waits for it.
//
// Across a change of N, a waiter may be handed a slot at or past its own
// N (handed while the permits key held a larger N). Its next try finds
// that slot while the key still holds an N above it. When the key went
// below the slot in between (a client with a smaller N tried, or the key
// lapsed), the try scans its own N only, and takes a free slot there under
// the same holder id: two slots, the one it does not use set for the
// claim window. (a) catches it; TestSemaphoreOneSlotPerHolder gives the
// shortest schedules, which the scripts of 8f782bf still allow (package
// protocol's TestSemaphoreHolderHasOneSlot runs them on Redis). And a free
// slot at or past the N of the queue's live head waits for that head to
// be served: its tries do not see the slot, and the waiters with a larger
// N behind it are told it is reserved. That lasts until a slot below the
// head's N frees, which the properties allow: the no-strand count leaves
// such a slot out.
//
// The semaphore's mutants, which must fail: SharedCounter (a handoff takes
// its token from slot 0's counter: a slot's tokens go back, (b)) and
// HandSurplus (a release hands on a slot past the permits key's N: after
// the shrink as many hold it as before, (a)).
//
// # Tied to the scripts
//
// The model re-describes the scripts; [Replay] hands a walk's server
// steps, with the model's keys before and after each, to package
// protocol's TestModelReplay, which runs the same calls on a real Redis
// and compares the keys after every step (its doc says what is and is
// not compared); TestModelReplaySemaphore does the same for a semaphore's
// walks, slot by slot, and compares what InspectSemaphore reads. A change
// to a script that the model does not share, or the other way round,
// fails there.
//
// # Bounds
//
// Exhaustive search is bounded by the horizon (ticks), the clients (up to
// 4), the Acquires per client, the tries per Acquire, and the fault
// budgets. TestFixedHolds runs three clients over four to six ticks (ttl
// 2 to 5, ticket lifetime 2 or 3, poll 1, three tries per Acquire), each
// kind of fault in at least one configuration, plus two clients with two
// Acquires each under one holder id, with the ttl at or below the ticket
// lifetime (the claim is the whole ttl) and above it (the claim and its
// confirm): one to eight million states each. Result.Events shows that the
// paths that matter (handoff, handoff refresh, its failure, claim,
// confirm, ...) were taken. TestFixedWalks adds 20,000 seeded walks over
// 30 ticks with four clients, three Acquires each and every kind of
// fault, and 10,000 more with the ttl above the ticket lifetime.
//
// For the semaphore, TestSemaphoreHolds runs two permits with three
// clients over three or four ticks (the claim with a death and duplicates;
// drift, a leave and a loss; a restart, with a permits key that lapses a
// tick after it is written), three permits with four clients over two
// ticks, and three clients of which one asks for one permit and two for
// two: a third of a million to 1.8 million states each.
// TestSemaphoreOneSlotPerHolder runs two to one with two clients of one
// and with the key lapsing, a million states each. TestSemaphoreWalks adds
// 15,000 walks over 30 ticks with four clients, three Acquires each and
// every kind of fault: three permits, the claim, and three permits
// shrinking to two.
//
// The waiting and ahead keys (see package protocol's doc) are not modelled:
// each only lets a script skip a read (the queue, the clock) whose result
// it implies, so the scripts' replies and writes are the model's either
// way, which the replay checks with them in place.
//
// The model's queue (at most 12 waiters) stays below protocol.MaxDrop and
// MaxQueue, so live_head drops every expired ticket at once there, as the
// model's liveHead does; the bounds are tested on a real Redis
// (TestBoundedWorkHostileQueue, TestFullQueue).
//
// Nothing here covers a pause after Acquire returns (Kleppmann's case,
// the verifier's job), clock drift between client and server beyond
// Config.Drift, a refresh that fails with an I/O error (handedOff then
// returns no lease and the waiter tries again, a step the model has), or
// more than one Redis. A try whose
// reply is lost is a give-up while the try is in flight: Acquire fails
// and leaves, and the try may still run later.
package model
