package model

import (
	"fmt"
	"strings"
)

// Variant selects the client's handling of a handoff message.
type Variant uint8

const (
	// Old is the protocol as lease/wait.go had it before the fix: the message is
	// "holder:seq", and the lease counts its deadline from the client's
	// last sent try, whichever try that was.
	Old Variant = iota
	// Fixed carries the ticket's attempt in the message; the lease counts
	// from the send of that attempt, the one the handoff followed.
	Fixed
)

func (v Variant) String() string {
	if v == Old {
		return "Old"
	}
	return "Fixed"
}

// Config bounds one model run. Times are in ticks; the zero value of a
// field takes the default given in its comment.
type Config struct {
	Variant Variant

	Clients      int // waiting clients, 2..4; default 3
	Acquisitions int // Acquire calls per client, one after the other, 1..3; default 1
	MaxTries     int // tries per Acquire, 1..4 (a bound on the search); default 3

	TTL       int // lease ttl; default 2
	TicketTTL int // fair ticket lifetime; default 3
	Poll      int // a queued waiter's timer (ticketTTL/3 in lease/wait.go); default 1
	Drift     int // drift allowance subtracted from a lease's deadline; 0 or 1
	Horizon   int // last tick explored; default 8

	// Fault budgets per run. Losses apply to messages (handoffs, and a
	// semaphore's wake-ups), Duplicates to handoff messages; Leaves counts
	// waiters that give up; Deaths counts SIGKILLs (a client stops for
	// good, anywhere but between Acquires).
	Losses, Duplicates, Restarts, Leaves, Deaths, Advances int

	// ReuseHolder gives each client one holder id for all its Acquires, as
	// lease.WithHolder does, so a handoff message from an earlier Acquire
	// names the current one too. Otherwise every Acquire has its own id
	// (the default in lease).
	ReuseHolder bool

	// Counter knobs, as the scripts' counter ttl and clock floor arguments: ClockFloor lifts
	// every next seq to the server clock in µs; CounterTTL (ticks, 0 =
	// never) lets the counter expire. OldCounter restores the old rules: a
	// missing counter without ttl starts at 1, and Advance on a missing
	// counter ignores the clock. AdvanceAhead, when > 0, lets Advance lift
	// the counter that many ticks' worth of µs above the clock.
	ClockFloor   bool
	CounterTTL   int
	OldCounter   bool
	AdvanceAhead int

	// LivenessBound is property (c)'s bound in ticks: once every client has
	// been out of Acquire, holding nothing, with no request in flight, for
	// this long, no lock key and no live ticket may be left. The default
	// is TTL + TicketTTL; the checker's own tests shorten it to see (c)
	// fail.
	LivenessBound int
	// StrandBound is property (c)'s bound for a waiter that died: a lock a
	// release handed to a holder id that no live Acquire can take any more
	// (its client was killed, or exited, or gave that Acquire up) is free
	// again within this many ticks of the handoff. The default is
	// TicketTTL, the claim window: a bound that does not grow with the ttl.
	StrandBound int

	// OldHandoff is the handoff of main before the claim (up to d88ac01):
	// the release sets the lock for the waiter's whole ttl, and the waiter
	// counts its lease with it. A waiter that died then strands the lock
	// for its ttl, and (c) fails when the ttl is above StrandBound. Old
	// implies it.
	OldHandoff bool

	// Mutations of Fixed that must fail, for the checker's own tests.
	// SkipAttemptCheck takes a handoff's attempt even when it was sent in
	// an earlier Acquire. RefreshByHolder lets the handoff's refresh pass
	// on a lock that has the holder but another seq (refresh.lua before the fix);
	// Fixed's refresh matches the whole lock value, holder and seq.
	// ClaimFullDeadline counts a claimed handoff's lease with the whole
	// ttl, though the key was set for the claim only: two holders.
	SkipAttemptCheck  bool
	RefreshByHolder   bool
	ClaimFullDeadline bool

	// Permits, from 1 to 3, checks a fenced semaphore of that many
	// permits instead of the fair lock (0): sem_acquire.lua, release_fair.lua
	// on its slots and sem_leave.lua on N slots, each a lock with its own counter,
	// sharing the one queue (see the package doc's "The semaphore"). It
	// needs Variant Fixed, and Advances 0: Advance is a lock's.
	Permits int
	// NewPermits and NewClients change the semaphore's N while its clients
	// run: the last NewClients clients (at least one, fewer than Clients)
	// ask for NewPermits permits, the others for Permits. Each try writes
	// its N into the permits key (when it holds another), which a release
	// reads; the key lapses with CounterTTL.
	NewPermits, NewClients int
	// FreeBound is the semaphore's no-strand bound in ticks: a slot that is
	// free, or held by a holder id that no live Acquire can take, while
	// the live head of the queue is a waiter that can take it, is taken
	// (by a try or a handoff) within this many ticks, as long as time
	// passes only once nothing is pending (see the package doc). The
	// default is the claim window plus Poll.
	FreeBound int

	// Mutations of the semaphore that must fail. SharedCounter gives every
	// handoff its token from slot 0's counter, the semaphore's first
	// counter, instead of the slot's own. HandSurplus lets a release hand
	// on a slot at or past the N the last try wrote, as if the semaphore
	// had not shrunk.
	SharedCounter bool
	HandSurplus   bool
}

const (
	maxClients  = 4
	maxAcq      = 3
	maxTries    = 4
	maxAttempts = maxAcq * maxTries
	maxEpochs   = 4 // restarts + 1
	maxSlots    = 3 // a semaphore's permits
)

// norm returns c with defaults filled in, or an error for a bound the
// state's fixed-size arrays cannot hold.
func (c Config) norm() (Config, error) {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.Clients, 3)
	def(&c.Acquisitions, 1)
	def(&c.MaxTries, 3)
	def(&c.TTL, 2)
	def(&c.TicketTTL, 3)
	def(&c.Poll, 1)
	def(&c.Horizon, 8)
	def(&c.LivenessBound, c.TTL+c.TicketTTL)
	def(&c.StrandBound, c.TicketTTL)
	if c.Permits > 0 && c.NewClients == 0 {
		c.NewPermits = c.Permits
	}
	def(&c.FreeBound, c.claim()+c.Poll)
	switch {
	case c.Clients < 2 || c.Clients > maxClients:
		return c, fmt.Errorf("model: Clients %d not in 2..%d", c.Clients, maxClients)
	case c.Acquisitions < 1 || c.Acquisitions > maxAcq:
		return c, fmt.Errorf("model: Acquisitions %d not in 1..%d", c.Acquisitions, maxAcq)
	case c.MaxTries < 1 || c.MaxTries > maxTries:
		return c, fmt.Errorf("model: MaxTries %d not in 1..%d", c.MaxTries, maxTries)
	case c.Restarts >= maxEpochs:
		return c, fmt.Errorf("model: Restarts %d over %d", c.Restarts, maxEpochs-1)
	case c.TTL < 1 || c.TicketTTL < 1 || c.Poll < 1 || c.Drift < 0 || c.Drift >= c.TTL:
		return c, fmt.Errorf("model: bad times %+v", c)
	case c.Horizon > 1000:
		return c, fmt.Errorf("model: Horizon %d over 1000", c.Horizon)
	case c.Permits < 0 || c.Permits > maxSlots || c.NewPermits < 0 || c.NewPermits > maxSlots:
		return c, fmt.Errorf("model: Permits %d, NewPermits %d not in 1..%d", c.Permits, c.NewPermits, maxSlots)
	case c.Permits == 0 && (c.NewPermits != 0 || c.NewClients != 0 || c.SharedCounter || c.HandSurplus):
		return c, fmt.Errorf("model: a semaphore's setting without Permits")
	case c.Permits > 0 && (c.Variant != Fixed || c.OldHandoff || c.Advances > 0):
		return c, fmt.Errorf("model: a semaphore needs Variant Fixed, the claim, and no Advance")
	case c.Permits > 0 && (c.NewClients < 0 || c.NewClients >= c.Clients || c.NewPermits == 0):
		return c, fmt.Errorf("model: NewClients %d with NewPermits %d of %d clients", c.NewClients, c.NewPermits, c.Clients)
	}
	return c, nil
}

// claim is the ttl a handoff sets the lock for: the ticket's, which
// enqueue in queue.lua writes as min(ttl, ticket ttl); Old and OldHandoff
// wrote the whole ttl.
func (c *Config) claim() int {
	if c.Variant == Old || c.OldHandoff {
		return c.TTL
	}
	return min(c.TTL, c.TicketTTL)
}

// sem reports whether the model is a semaphore's.
func (c *Config) sem() bool { return c.Permits > 0 }

// slots is how many slots the server has: the largest N asked for, 1 for
// the lock.
func (c *Config) slots() int { return max(c.Permits, c.NewPermits, 1) }

// permitsOf is the N client c asks for: 1 for the lock.
func (c *Config) permitsOf(client int) int8 {
	switch {
	case !c.sem():
		return 1
	case client >= c.Clients-c.NewClients:
		return int8(c.NewPermits)
	}
	return int8(c.Permits)
}

// shrinks reports whether some clients ask for fewer permits than others
// do, the surplus slots being NewPermits..Permits-1.
func (c *Config) shrinks() bool { return c.sem() && c.NewPermits < c.Permits }

// Property names a checked property.
type Property string

const (
	Exclusion Property = "exclusion" // (a) two live leases of one server epoch at once (a semaphore: of one slot, or more than N; or one holder id with two slots)
	Order     Property = "order"     // (b) a token at or below one granted or issued before (a semaphore: on the same slot)
	// (c) a lock or ticket outlives its bound after all left, a lock handed
	// to a dead waiter outlives StrandBound, or a semaphore's slot waits
	// for its live head past FreeBound
	Liveness Property = "liveness"
)

// Step is one line of a trace: the tick, who acted, what it did, and the
// state after it.
type Step struct {
	Tick   int
	Actor  string
	Action string
	State  string
}

func (s Step) String() string {
	return fmt.Sprintf("t=%-2d %-6s %-44s | %s", s.Tick, s.Actor, s.Action, s.State)
}

// Result is the outcome of a run. Property is empty when every explored
// state and step satisfied all three properties.
type Result struct {
	States      int // distinct states (exhaustive search) or steps (walk)
	Transitions int
	Depth       int // deepest search level, or the walk's length
	Property    Property
	Violation   string // what broke, in words
	Trace       []Step // from the initial state to the violation (a walk: every step)

	// Events counts steps by what they did ("handoff", "refresh lease",
	// ...) over every transition taken, so a test can tell that the paths
	// it means to check were reached at all.
	Events map[string]int
}

// TraceString renders the trace, one step a line.
func (r Result) TraceString() string {
	var b strings.Builder
	for _, s := range r.Trace {
		b.WriteString(s.String())
		b.WriteByte('\n')
	}
	return b.String()
}
