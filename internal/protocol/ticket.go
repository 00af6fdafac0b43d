package protocol

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// TicketTTL is how long a fair waiter's ticket lives without renewal. A
// waiter renews it with every try, at least every TicketTTL/3, so a waiter
// that died drops out of the queue within TicketTTL.
const TicketTTL = 2 * time.Second

// The fair queue's bounds, so that no script call's cost grows with what
// other clients left in the queue (queue.lua's MAX_QUEUE and MAX_DROP):
//
//   - MaxQueue waiters hold a ticket at once. A waiter that finds the
//     queue full waits without one, polling as a queued waiter does, and
//     queues when a place frees. A longer queue can only have been
//     written by another client than fencelock's scripts: the next fair
//     call drops it whole (UNLINK, freed off Redis's main thread), and the
//     live waiters queue again with their next try.
//   - A call drops at most MaxDrop expired tickets. A release that drops
//     that many without finding a live waiter frees the lock and wakes
//     the waiters, whose tries drop the rest (a try told the head is not
//     known yet tries again within a millisecond), so dead tickets cost
//     the live waiters MaxQueue/MaxDrop quick calls at most.
const (
	MaxQueue = 1000
	MaxDrop  = 100
)

// Ticket is a fair waiter's entry in the lock's tickets hash:
// "expiry_ms:ttl_ms:attempt", written by the fair try (acquire_fair.lua)
// and read by the release that hands the lock on.
type Ticket struct {
	Expires time.Time     // the server's clock, to the millisecond
	TTL     time.Duration // the ttl the lock is handed over with: ClaimTTL of the waiter's
	Attempt Attempt       // the try that wrote the ticket
}

// ClaimTTL is the ttl a fair release hands the lock over with to a waiter
// that asked for ttl: at most TicketTTL, the claim window, as the fair try
// writes it in the ticket (queue.lua's enqueue). A waiter that died holds
// a lock handed to it for that long, not for its ttl; a live one extends
// it to ttl with its first refresh (lifetime.StartClaim), before its lease,
// counted with ClaimTTL, runs out.
func ClaimTTL(ttl time.Duration) time.Duration { return min(ttl, TicketTTL) }

// ParseTicket reads a ticket.
func ParseTicket(s string) (Ticket, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 3 {
		return Ticket{}, fmt.Errorf("protocol: bad ticket %q", s)
	}
	exp, err1 := strconv.ParseInt(parts[0], 10, 64)
	ttl, err2 := strconv.ParseInt(parts[1], 10, 64)
	a, err3 := ParseAttempt(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || ttl <= 0 {
		return Ticket{}, fmt.Errorf("protocol: bad ticket %q", s)
	}
	return Ticket{Expires: time.UnixMilli(exp), TTL: time.Duration(ttl) * time.Millisecond, Attempt: a}, nil
}

// String is the ticket's stored form.
func (t Ticket) String() string {
	return strconv.FormatInt(t.Expires.UnixMilli(), 10) + ":" + strconv.FormatInt(ms(t.TTL), 10) + ":" + t.Attempt.String()
}
