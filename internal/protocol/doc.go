// Package protocol owns fencelock's lock protocol on Redis: a lock's keys,
// each Lua script's arguments and replies, the lock's value, the fair
// queue's tickets, the release message and the pub/sub mode, as Go types.
// The lease, redlock, the notifier and the command use it; nothing else
// writes or parses these formats.
//
// # Scripts
//
// Each Lua script is one file in scripts/, readable whole: a header with
// its KEYS, ARGV and reply, then its code. Those files are generated
// (`go generate ./internal/protocol`, command luagen) from the fragments
// beside this file: each script's own (acquire.lua, release_fair.lua, ...)
// and the shared functions it uses (common.lua, publish.lua, queue.lua,
// handoff.lua), which take the scripts' arguments as parameters and read
// no ARGV. A script holds only the functions it uses, and the fair
// scripts' common cases (a free lock with nobody queued, a release with
// nobody queued) return before the functions they do not need are built,
// because Lua builds every function of a script on every call. Edit the
// fragments, never scripts/: luagen's test fails when scripts/ is stale.
// Beside each script luagen writes its SHA-1 (scripts/NAME.sha1), which
// the package runs it by (EVALSHA, then EVAL when the server lacks it;
// package internal/luascript): no SHA-1 is computed at run time, so
// GODEBUG=fips140=only works, and TestScriptHashesInStep checks each hash
// against Redis's SCRIPT LOAD.
//
// # Keys
//
// For lock NAME under PREFIX (see [KeysFor]), all in one Redis Cluster slot:
//
//	PREFIX{NAME}          the lock: "holder:seq", with the lease's ttl
//	PREFIX{NAME}:fence    the counter: the last Seq issued (see the counter rule)
//	PREFIX{NAME}:queue    fair waiters by arrival (sorted set, at most [MaxQueue]); expires with the last ticket
//	PREFIX{NAME}:tickets  fair waiters' tickets (hash, see [Ticket]); likewise
//	PREFIX{NAME}:waiting  exists while the queue may hold a waiter (set with each
//	                      ticket, last): without it a fair try or release skips the queue
//	PREFIX{NAME}:ahead    exists while the counter may be above the server's clock
//	                      (store_counter): without it a try reads no clock, because
//	                      the next Seq, one above the counter, is not above it either
//	PREFIX{NAME}:release  the pub/sub channel: a [Message] per release that wakes or
//	                      hands over (a fair release with nobody queued publishes none)
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
// These are the protocol's properties, stated here once; the model
// (package [github.com/fencelock/fencelock/internal/protocol/model])
// checks them over every interleaving of its bounded configurations, and
// TestModelReplay replays its walks on these scripts. A lease's window
// opens when Acquire returns it and closes at its release or at its local
// deadline, whichever comes first. The deadline is counted from the send
// of the try that won the lock, or, for a handoff, of the last try the
// handoff followed (the try whose ticket the release used, named by the
// message's attempt), plus the ttl minus the drift allowance: the key
// was set after that send, so the deadline comes before the key expires.
// The window cannot open at that send: a try sent while another holder
// had the lock, and run after its release, wins the lock with a send that
// falls inside the other lease's window.
//
//   - Exclusion. The windows of two leases of one lock never overlap,
//     whatever the client's pauses before Acquire returns, the order in
//     which it reads its timers, replies and messages, and the messages
//     delayed, lost or duplicated. A handoff message read late, after
//     newer tries, yields a deadline counted from the old try, which may
//     have passed: the waiter then refreshes once (the refresh must match
//     holder and Seq), and keeps waiting when it finds the lock gone. The
//     one exception is a server that lost its keys (restart, failover):
//     leases from before and after the loss may overlap, and only the
//     verifier, through Order, keeps them apart.
//   - Order. Tokens grow in the order of those windows: a lease carries
//     a token above that of every lease whose window opened before its own
//     (the same token again only for the same holder, a re-acquire), and
//     every Seq the server issues is above every Seq it issued before.
//     The exception is again a loss of keys: a lease whose lock was set
//     before the loss may carry a lower token than one of after it, and
//     the verifier refuses it once the newer token has written.
//   - Counters never go back: see [Counter]. A missing counter, however
//     it went missing, never yields a Seq at or below one issued, as long
//     as the server's clock did not step back by more than the time that
//     passed.
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
//   - A semaphore of N ([Semaphore]) is N such locks, its slots, each with
//     its own counter, sharing one queue: the properties above hold slot by
//     slot, at most N windows are open at once (after N shrank, the new N
//     once the slots past it were let go of), and a slot that is free, or
//     handed to a waiter that died, while a live waiter that can take it
//     heads the queue, is taken within [ClaimTTL] plus that waiter's poll.
//
// Bounded work: no script call's cost grows with what other clients left
// or wrote, because Redis serves no one else meanwhile. The queue holds at
// most [MaxQueue] waiters and a call drops at most [MaxDrop] expired
// tickets (see their doc for what happens past each).
//
// A pause after a lease is returned is Kleppmann's case, which no lock
// protocol can cover: the verifier at the storage does.
package protocol
