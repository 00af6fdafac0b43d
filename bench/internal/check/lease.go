package check

import (
	"fmt"
	"time"
)

// Lease is one acquisition of a lock as its holder saw it: the validity
// window the exclusion checker compares. Times are offsets from
// [History.Start]; 0 means "none" (no run records anything at offset 0).
type Lease struct {
	// ID is the lease's index in [History.Leases].
	ID int `json:"id"`
	// Client is the lane it belongs to: a client of the run, or a waiter
	// process of a nemesis (numbered after the clients).
	Client int    `json:"client"`
	Lock   string `json:"lock"`
	// Holder is the acquisition's id in the history (as in [Op.Holder]).
	Holder string `json:"holder,omitempty"`
	// Token is the lock's token (Seq 0 for a lock without one); its Holder
	// is the lock's own holder id, the one the lock's server stores.
	Token Token `json:"token"`
	// Start is when Acquire returned.
	Start time.Duration `json:"start_ns"`
	// Deadline is the lease's local deadline (the lock's Deadline()); 0
	// for a lock that has none, whose window is not judged.
	Deadline time.Duration `json:"deadline_ns,omitempty"`
	// Released is when Release was called; 0 if it never was.
	Released time.Duration `json:"released_ns,omitempty"`
	// Held is what the lease's Held() said when Acquire returned.
	Held bool `json:"held"`
	// Note says where the lease comes from when it is not a plain client's
	// (a waiter process thawed after a pause, say).
	Note string `json:"note,omitempty"`
}

// HolderID is the lock's holder id: Token.Holder, else Holder.
func (l *Lease) HolderID() string {
	if l.Token.Holder != "" {
		return l.Token.Holder
	}
	return l.Holder
}

// End is the end of the validity window: the deadline, or the call of
// Release when that came first. A lease with no deadline ends at its
// release (or never: 0).
func (l *Lease) End() time.Duration {
	switch {
	case l.Deadline == 0:
		return l.Released
	case l.Released != 0 && l.Released < l.Deadline:
		return l.Released
	}
	return l.Deadline
}

// Judged reports whether the exclusion checker compares this window: the
// lock has a local deadline and the window is not empty (a lease whose
// deadline had passed when Acquire returned has no window at all).
func (l *Lease) Judged() bool { return l.Deadline != 0 && l.End() > l.Start }

func (l *Lease) String() string {
	s := fmt.Sprintf("lease #%d c%d", l.ID, l.Client)
	if l.Token.Seq > 0 {
		s += " token " + l.Token.String()
	} else if l.Holder != "" {
		s += " " + l.Holder
	}
	return s + fmt.Sprintf(" [%s, %s]", fmtDur(l.Start), fmtDur(l.End()))
}

// Leave is a waiter that gave up while queued for a lock: a separate
// process, so that its exit is real. Times are offsets from History.Start.
type Leave struct {
	ID     int    `json:"id"`
	Client int    `json:"client"`
	Lock   string `json:"lock"`
	// How it left: "cancel" (its context ended), "sigterm" (its handler
	// ended the context), or "kill" (SIGKILL: it died, its ticket stays
	// until the ticket's own ttl).
	How string `json:"how"`
	// Queued is when it was seen waiting; Left when it was told to leave
	// (or killed); Gone when its process had exited.
	Queued time.Duration `json:"queued_ns"`
	Left   time.Duration `json:"left_ns"`
	Gone   time.Duration `json:"gone_ns"`
	// Closed: the process closed its lock client, which waited for its
	// leave to finish, before it exited. Without that, a leave may still
	// leave its ticket behind.
	Closed bool `json:"closed"`
	// Acquired: the lock reached it before it left, so it did not leave
	// while queued; its lease is in [History.Leases].
	Acquired bool `json:"acquired,omitempty"`
	// Seen is the lock's holders read from the server from Queued until
	// the liveness bound after Gone.
	Seen []Seen `json:"seen,omitempty"`
	// Watched is until when Seen was read.
	Watched time.Duration `json:"watched_ns,omitempty"`
	Note    string        `json:"note,omitempty"`
}

// Clean reports whether the waiter left as a live process does (cancel,
// signal handler) and waited for its leave to finish: it must take its
// ticket with it.
func (l *Leave) Clean() bool { return l.How != "kill" && l.Closed }

// Frozen is a waiter process frozen (SIGSTOP) while queued for a lock,
// and what the nemesis read from the lock's server meanwhile. Its leases,
// if its Acquire returned one, are in [History.Leases].
type Frozen struct {
	Client int    `json:"client"`
	Lock   string `json:"lock"`
	// Stopped and Thawed are when it was frozen and thawed (SIGCONT).
	Stopped time.Duration `json:"stopped_ns"`
	Thawed  time.Duration `json:"thawed_ns"`
	// Handed is the lock handed to it while frozen: a holder no client had,
	// for a quarter of the ttl at least (empty if none). Taken is the
	// holder that had the lock next.
	Handed Seen `json:"handed"`
	Taken  Seen `json:"taken"`
}

// Seen is one holder of a lock read from its server, and over which span
// of reads it was there.
type Seen struct {
	Holder string        `json:"holder"`
	Seq    uint64        `json:"seq,omitempty"`
	First  time.Duration `json:"first_ns"`
	Last   time.Duration `json:"last_ns"`
}

// LeaseHandle is one recorded acquisition; Released records the call of
// Release.
type LeaseHandle struct {
	r  *Recorder
	id int
}

// Acquired records a lease whose Acquire just returned: the caller fills
// Client, Lock, Holder, Token, Held and Note; deadline is the lease's
// local deadline (the zero Time for a lock without one). ID and Start are
// set by the recorder.
func (r *Recorder) Acquired(l Lease, deadline time.Time) *LeaseHandle {
	start := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	l.ID = len(r.leases)
	l.Start = start
	l.Deadline, l.Released = 0, 0
	if !deadline.IsZero() {
		l.Deadline = max(r.Offset(deadline), 1)
	}
	r.leases = append(r.leases, l)
	if h := l.Token.Holder; h != "" {
		r.holders[h] = l.ID + 1
	}
	if r.lastStart == nil {
		r.lastStart = map[string]time.Duration{}
	}
	r.lastStart[l.Lock] = start
	return &LeaseHandle{r: r, id: l.ID}
}

// Released records that Release is being called now (the first call only).
func (h *LeaseHandle) Released() {
	now := h.r.now()
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	if l := &h.r.leases[h.id]; l.Released == 0 {
		l.Released = max(now, l.Start, 1)
	}
}

// AddLease records a lease whose times are already known (offsets from
// the recorder's start): one a waiter process reported. It returns its id.
func (r *Recorder) AddLease(l Lease) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	l.ID = len(r.leases)
	r.leases = append(r.leases, l)
	if h := l.Token.Holder; h != "" {
		r.holders[h] = l.ID + 1
	}
	return l.ID
}

// AddFrozen records a waiter frozen while queued.
func (r *Recorder) AddFrozen(f Frozen) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frozen = append(r.frozen, f)
}

// AddLeave records a waiter that left the queue. It returns its id.
func (r *Recorder) AddLeave(l Leave) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	l.ID = len(r.leaves)
	r.leaves = append(r.leaves, l)
	return l.ID
}

// KnownHolder reports whether a recorded lease has the lock holder id h
// (its Token.Holder): a holder read from the lock's server that no lease
// has is one no client of the run ever got.
func (r *Recorder) KnownHolder(h string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.holders[h] > 0
}

// HolderLease returns the last recorded lease whose lock holder id
// (Token.Holder) is h.
func (r *Recorder) HolderLease(h string) (Lease, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if id := r.holders[h]; id > 0 {
		return r.leases[id-1], true
	}
	return Lease{}, false
}

// LastAcquired is when the last lease of lock recorded with Acquired
// started (0: none yet): whether the clients are taking the lock in turn.
func (r *Recorder) LastAcquired(lock string) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastStart[lock]
}

// Now is the recorder's clock: the offset from its start.
func (r *Recorder) Now() time.Duration { return r.now() }

// Offset converts an instant to an offset from the recorder's start (on
// the monotonic clock when both carry a reading of it, else the wall
// clock: for instants another process reported).
func (r *Recorder) Offset(t time.Time) time.Duration { return t.Sub(r.start) }
