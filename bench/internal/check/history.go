// Package check records the history of a randomized fault run and checks it
// against the models the fencing design promises: a fenced mutex (accepted
// writes carry growing tokens), no lost updates (every acknowledged increment
// and append survives), a linearizable guarded register (checked with
// porcupine), and, on the lock itself, exclusion (the validity windows of two
// leases of one lock never overlap) and liveness (a waiter that leaves does
// not leave the lock stuck). It also draws the nemesis schedule from a seed and renders a
// run's summary as a text table, JSON and an HTML timeline.
//
// Everything here is pure: no servers, no I/O beyond the writers it is given.
// The runner that drives clients and faults lives elsewhere and calls the
// [Recorder] as its clients work.
package check

import (
	"fmt"
	"time"

	"github.com/fencelock/fencelock/fence"
)

// Kind is what an operation does.
type Kind string

// The operation kinds.
const (
	// KindIncr is a lock-guarded read-modify-write of a counter register: the
	// client reads v and writes v+1. [Op.Value] is the value written (v+1).
	KindIncr Kind = "incr"
	// KindWrite is a blind write of [Op.Value] to a register.
	KindWrite Kind = "write"
	// KindAppend adds the element [Op.Value] to a set resource. Elements must
	// be unique per resource, so each one can be looked for in the final state.
	KindAppend Kind = "append"
	// KindRead reads a resource: [Op.Value] for a register, [Op.Values] for a
	// set.
	KindRead Kind = "read"
)

// IsWrite reports whether operations of kind k change the resource.
func (k Kind) IsWrite() bool { return k == KindIncr || k == KindWrite || k == KindAppend }

// Outcome is how an operation ended, as far as its client knows.
type Outcome string

// The outcomes. An operation still pending when the history is taken is
// reported as unknown.
const (
	// Ok: the operation took effect (a write was acknowledged by the storage).
	Ok Outcome = "ok"
	// Fail: the operation certainly did not take effect (including a write the
	// verifier refused; see [Op.Rejected]).
	Fail Outcome = "fail"
	// Unknown: the operation may or may not have taken effect (timeout, lost
	// reply, crash). Jepsen calls this "info".
	Unknown Outcome = "unknown"
)

// Token is the fencing token an operation carried. It mirrors [fence.Token]
// with JSON tags, and may be the zero-Seq "no token" of an unfenced lock,
// which fence.Token's text form refuses.
type Token struct {
	Key    string `json:"key,omitempty"`
	Seq    uint64 `json:"seq"`
	Holder string `json:"holder,omitempty"`
}

// TokenOf converts a fence token.
func TokenOf(t fence.Token) Token { return Token{Key: t.Key, Seq: t.Seq, Holder: t.Holder} }

// Fence converts t back to a fence token.
func (t Token) Fence() fence.Token { return fence.Token{Key: t.Key, Seq: t.Seq, Holder: t.Holder} }

// Fenced reports whether t is a real token (Seq > 0).
func (t Token) Fenced() bool { return t.Seq > 0 }

// Supersedes reports whether a storage that accepted u may accept t: the
// verifier's rule, t.Seq > u.Seq, or the same Seq from the same holder.
func (t Token) Supersedes(u Token) bool { return t.Fence().Supersedes(u.Fence()) }

func (t Token) String() string {
	if t.Seq == 0 {
		return "unfenced"
	}
	return fmt.Sprintf("%d/%s", t.Seq, short(t.Holder))
}

// Op is one client operation: its invocation and its completion.
//
// Times are offsets from [History.Start] on the recorder's monotonic clock.
type Op struct {
	// ID is the operation's index in [History.Ops], in invocation order.
	ID int `json:"id"`
	// Client is the zero-based number of the client (one lane of the
	// timeline; one process in porcupine's sense: a client runs one
	// operation at a time).
	Client int `json:"client"`
	// Holder is the lease the client held for this operation: one id per
	// acquisition, never reused by the next acquisition of the same client.
	// It defaults to Token.Holder.
	Holder   string `json:"holder,omitempty"`
	Kind     Kind   `json:"kind"`
	Resource string `json:"resource"`
	// Value: for incr and write, the value written; for append, the element;
	// for a register read, the value read.
	Value int64 `json:"value"`
	// Values is what a read of a set returned.
	Values []int64 `json:"values,omitempty"`
	// Token is the fencing token the operation carried (Seq 0 if unfenced).
	Token Token `json:"token"`
	// Start is when the operation was invoked, End when its outcome was
	// known (for unknown outcomes: when the client gave up).
	Start time.Duration `json:"start_ns"`
	End   time.Duration `json:"end_ns"`
	// Outcome is ok, fail or unknown.
	Outcome Outcome `json:"outcome"`
	// Rejected marks a failed write that the verifier refused for its stale
	// or conflicting token.
	Rejected bool `json:"rejected,omitempty"`
	// Commit is the storage-assigned commit order of an acknowledged write
	// (a sequence that grows with every commit on the storage), since wall
	// clock intervals of concurrent writes overlap. 0 if unknown.
	Commit uint64 `json:"commit,omitempty"`
	// Error is the error text of a failed or unknown operation.
	Error string `json:"error,omitempty"`
}

// HolderID is the lease that performed op: Holder, or else Token.Holder.
func (op *Op) HolderID() string {
	if op.Holder != "" {
		return op.Holder
	}
	return op.Token.Holder
}

func (op *Op) String() string {
	var v string
	switch {
	case op.Kind == KindRead && op.Values != nil:
		v = fmt.Sprintf("%d elements", len(op.Values))
	default:
		v = fmt.Sprint(op.Value)
	}
	s := fmt.Sprintf("#%d c%d %s %s %s → %s", op.ID, op.Client, op.Kind, op.Resource, v, op.Outcome)
	if op.Rejected {
		s += " (rejected)"
	}
	if op.Token.Seq > 0 {
		s += " token " + op.Token.String()
	}
	return s
}

// History is every operation of a run, in invocation order.
type History struct {
	// Start is the wall-clock time of the recorder's start; op times are
	// offsets from it.
	Start time.Time `json:"start"`
	Ops   []Op      `json:"ops"`
	// Leases is every acquisition, in the order recorded: when Acquire
	// returned, the lease's local deadline and when Release was called
	// (see [Lease]). The exclusion and liveness checkers read them.
	Leases []Lease `json:"leases,omitempty"`
	// Leaves is the waiters that gave up while queued (see [Leave]).
	Leaves []Leave `json:"leaves,omitempty"`
	// Frozen is the waiters frozen while queued (see [Frozen]).
	Frozen []Frozen `json:"frozen,omitempty"`
}

// Span is the time from Start to the last operation's end.
func (h *History) Span() time.Duration {
	var end time.Duration
	for i := range h.Ops {
		end = max(end, h.Ops[i].End, h.Ops[i].Start)
	}
	for i := range h.Leases {
		end = max(end, h.Leases[i].Start, h.Leases[i].Released)
	}
	for i := range h.Leaves {
		end = max(end, h.Leaves[i].Gone)
	}
	return end
}

// Final is the state of the resources read at the end of a run, after the
// faults healed: the registers' values and the sets' elements.
type Final struct {
	Registers map[string]int64   `json:"registers,omitempty"`
	Sets      map[string][]int64 `json:"sets,omitempty"`
}
