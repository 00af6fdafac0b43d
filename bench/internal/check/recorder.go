package check

import (
	"slices"
	"sync"
	"time"
)

// Recorder collects operations from concurrent clients. The zero value is
// not usable; call [NewRecorder].
type Recorder struct {
	mu    sync.Mutex
	start time.Time
	now   func() time.Duration
	ops   []Op
	done  []bool

	leases    []Lease
	leaves    []Leave
	frozen    []Frozen
	holders   map[string]int           // lease id + 1 by lock holder id (Token.Holder)
	lastStart map[string]time.Duration // by lock, of Acquired leases
}

// NewRecorder starts a recorder; op times are measured from now on the
// monotonic clock.
func NewRecorder() *Recorder {
	start := time.Now()
	return &Recorder{start: start, now: func() time.Duration { return time.Since(start) }, holders: map[string]int{}}
}

// NewRecorderClock is NewRecorder with a given start and clock, for tests
// and replays: now returns the offset from start.
func NewRecorderClock(start time.Time, now func() time.Duration) *Recorder {
	return &Recorder{start: start, now: now, holders: map[string]int{}}
}

// Handle is one invoked operation; exactly one of Ok, OkRead, Fail, Reject
// or Unknown completes it. Later completions are ignored.
type Handle struct {
	r  *Recorder
	id int
}

// Invoke records the invocation of op: the caller fills Client, Holder,
// Kind, Resource, Token, and Value for writes and appends (an incr's value
// is usually known only after its read: see [Handle.Writing]). ID, Start,
// End and Outcome are set by the recorder.
func (r *Recorder) Invoke(op Op) *Handle {
	r.mu.Lock()
	defer r.mu.Unlock()
	op.ID = len(r.ops)
	op.Start = r.now()
	op.End = 0
	op.Outcome = ""
	op.Values = slices.Clone(op.Values)
	r.ops = append(r.ops, op)
	r.done = append(r.done, false)
	return &Handle{r: r, id: op.ID}
}

// ID is the operation's id in the history.
func (h *Handle) ID() int { return h.id }

// update changes the pending op under the lock; it does nothing once the op
// is complete.
func (h *Handle) update(f func(op *Op)) bool {
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	if h.r.done[h.id] {
		return false
	}
	f(&h.r.ops[h.id])
	return true
}

// complete ends the op with outcome and lets f fill in the rest.
func (h *Handle) complete(outcome Outcome, f func(op *Op)) bool {
	end := h.r.now()
	h.r.mu.Lock()
	defer h.r.mu.Unlock()
	if h.r.done[h.id] {
		return false
	}
	h.r.done[h.id] = true
	op := &h.r.ops[h.id]
	op.End = max(end, op.Start)
	op.Outcome = outcome
	if f != nil {
		f(op)
	}
	return true
}

// Writing records the value an incr is about to write, once its read
// returned. Call it before sending the write, so that an unknown outcome
// still says what might have been written.
func (h *Handle) Writing(value int64) {
	h.update(func(op *Op) { op.Value = value })
}

// SetToken records the token, when the lock was taken after the invocation.
func (h *Handle) SetToken(tok Token) {
	h.update(func(op *Op) { op.Token = tok })
}

// Ok completes a write, incr or append that the storage acknowledged, with
// its storage-assigned commit sequence (0 if the storage has none).
func (h *Handle) Ok(commit uint64) bool {
	return h.complete(Ok, func(op *Op) { op.Commit = commit })
}

// OkRead completes a read with what it returned: one value for a register,
// the elements for a set (pass set=true, so an empty set reads as empty).
func (h *Handle) OkRead(set bool, values ...int64) bool {
	return h.complete(Ok, func(op *Op) {
		if set {
			op.Values = append([]int64{}, values...)
		} else if len(values) > 0 {
			op.Value = values[0]
		}
	})
}

// Fail completes an operation that certainly did not take effect.
func (h *Handle) Fail(err error) bool {
	return h.complete(Fail, func(op *Op) { op.Error = errText(err) })
}

// Reject completes a write that the verifier refused for its token.
func (h *Handle) Reject(err error) bool {
	return h.complete(Fail, func(op *Op) { op.Rejected = true; op.Error = errText(err) })
}

// Unknown completes an operation whose effect is unknown.
func (h *Handle) Unknown(err error) bool {
	return h.complete(Unknown, func(op *Op) { op.Error = errText(err) })
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// History returns a copy of the operations so far. Operations still pending
// are reported as unknown, ending now.
func (r *Recorder) History() History {
	now := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	ops := make([]Op, len(r.ops))
	for i, op := range r.ops {
		op.Values = slices.Clone(op.Values)
		if !r.done[i] {
			op.Outcome = Unknown
			op.End = max(now, op.Start)
			op.Error = "pending when the history was taken"
		}
		ops[i] = op
	}
	leaves := slices.Clone(r.leaves)
	for i := range leaves {
		leaves[i].Seen = slices.Clone(leaves[i].Seen)
	}
	return History{Start: r.start, Ops: ops, Leases: slices.Clone(r.leases), Leaves: leaves, Frozen: slices.Clone(r.frozen)}
}
