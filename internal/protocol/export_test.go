package protocol

import "time"

// WithTicketTTL returns t passing d to the fair try as the ticket's
// lifetime instead of TicketTTL, so that the claim window it writes,
// min(ttl, d), is the model's in TestModelReplay's time scale.
func WithTicketTTL(t Try, d time.Duration) Try {
	t.ticketTTL = d
	return t
}

// ListLent reports whether k's own argument list is lent to a call.
func ListLent(k Keys) bool { return k.cache != nil && k.cache.buf.busy.Load() }
