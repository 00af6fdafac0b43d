package check

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Fault names one kind of fault the nemesis injects.
type Fault string

// The faults of the safety set.
const (
	// FaultPauseHolder stops the current lock holder (SIGSTOP-like) for the
	// window, so its lease expires while it still believes it holds it.
	FaultPauseHolder Fault = "pause-holder"
	// FaultDelayWrite holds a holder's write to the storage back for the
	// window, so it lands after the lease expired.
	FaultDelayWrite Fault = "delay-write"
	// FaultRestartRedis kills Redis at the window's start and restarts it
	// empty (no persistence) at its end: the counter goes backwards.
	FaultRestartRedis Fault = "restart-redis-empty"
	// FaultFailover promotes a replica that lags behind the primary at the
	// window's start; the window is the time given to settle.
	FaultFailover Fault = "failover-lagging-replica"
	// FaultPauseRedis stops the Redis server for the window.
	FaultPauseRedis Fault = "pause-redis"
	// FaultEarlyExpiry makes the lock key expire before its ttl (a clock
	// jump on the server) at the window's start.
	FaultEarlyExpiry Fault = "early-expiry"
	// FaultEvict evicts the lock and counter keys (memory pressure) at the
	// window's start.
	FaultEvict Fault = "evict"
	// FaultPauseWaiter freezes a waiter process (SIGSTOP) while it is
	// queued for a fair lock, across a handoff to it, and thaws it after
	// the handed-off lease's ttl ran out and another client took the lock.
	FaultPauseWaiter Fault = "pause-waiter"
	// FaultLeaveQueue makes a waiter process give up while queued (its
	// context ends, SIGTERM, or SIGKILL) and exit.
	FaultLeaveQueue Fault = "leave-queue"
)

// AllFaults is the safety set, in a fixed order.
var AllFaults = []Fault{
	FaultPauseHolder, FaultDelayWrite, FaultRestartRedis, FaultFailover,
	FaultPauseRedis, FaultEarlyExpiry, FaultEvict, FaultPauseWaiter, FaultLeaveQueue,
}

// LosesData reports whether f can make Redis forget a lock (or hand it out
// again before its ttl ran out): a failover to a lagging replica, a restart
// without persistence, eviction, or early expiry (a clock jump). Two
// holders at once after such a fault are Kleppmann's case, which only the
// verifier covers; they are not a lock bug.
func (f Fault) LosesData() bool {
	switch f {
	case FaultRestartRedis, FaultFailover, FaultEvict, FaultEarlyExpiry:
		return true
	}
	return false
}

// ParseFaults reads a comma-separated list of fault names; "all" stands for
// [AllFaults] and "none" or "" for no faults. Duplicates are dropped.
func ParseFaults(s string) ([]Fault, error) {
	var out []Fault
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		switch {
		case f == "" || f == "none":
			continue
		case f == "all":
			out = append(out, AllFaults...)
		case slices.Contains(AllFaults, Fault(f)):
			out = append(out, Fault(f))
		default:
			return nil, fmt.Errorf("unknown fault %q (known: all, none, %s)", f, faultList())
		}
	}
	var uniq []Fault
	for _, f := range out {
		if !slices.Contains(uniq, f) {
			uniq = append(uniq, f)
		}
	}
	return uniq, nil
}

func faultList() string {
	names := make([]string, len(AllFaults))
	for i, f := range AllFaults {
		names[i] = string(f)
	}
	return strings.Join(names, ", ")
}

// Window is one fault injected for a stretch of the run.
type Window struct {
	// Start is the offset from the start of the run.
	Start    time.Duration `json:"start_ns"`
	Duration time.Duration `json:"duration_ns"`
	Fault    Fault         `json:"fault"`
	// Target is a random number from the seed that the runner maps onto its
	// targets (a client, a replica: Target % n), so that a replay picks alike.
	Target uint32 `json:"target"`
	// Detail says what the runner did with the window (which client, which
	// nodes), filled in as it applies it; empty in a bare schedule.
	Detail string `json:"detail,omitempty"`
}

// End is the offset at which the window closes.
func (w Window) End() time.Duration { return w.Start + w.Duration }

// Plan says how to draw a schedule. Zero durations take defaults scaled to
// Duration.
type Plan struct {
	Seed     int64
	Duration time.Duration
	Faults   []Fault
	// Lead is the quiet time at the start (default Duration/10), Tail the
	// quiet time at the end, for the system to heal before the final read
	// (default Duration/10).
	Lead, Tail time.Duration
	// MinLen..MaxLen bounds a window's length (default Duration/40..Duration/15).
	MinLen, MaxLen time.Duration
	// MinGap..MaxGap bounds the quiet time between windows (default as the length).
	MinGap, MaxGap time.Duration
}

func (p Plan) withDefaults() Plan {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&p.Lead, p.Duration/10)
	def(&p.Tail, p.Duration/10)
	def(&p.MinLen, p.Duration/40)
	def(&p.MaxLen, p.Duration/15)
	def(&p.MinGap, p.Duration/40)
	def(&p.MaxGap, p.Duration/15)
	return p
}

// Schedule draws the fault windows of plan: a pure function of the plan.
// Windows do not overlap, are separated by at least MinGap, and lie within
// [Lead, Duration-Tail]. Faults are drawn from shuffled rounds of the set, so
// every fault appears once before any appears twice. No faults, no windows.
func Schedule(plan Plan) ([]Window, error) {
	p := plan.withDefaults()
	switch {
	case p.Duration <= 0:
		return nil, errors.New("schedule: duration must be positive")
	case p.MinLen <= 0 || p.MinLen > p.MaxLen:
		return nil, fmt.Errorf("schedule: bad window length %v..%v", p.MinLen, p.MaxLen)
	case p.MinGap < 0 || p.MinGap > p.MaxGap:
		return nil, fmt.Errorf("schedule: bad gap %v..%v", p.MinGap, p.MaxGap)
	case p.Lead < 0 || p.Tail < 0:
		return nil, errors.New("schedule: negative lead or tail")
	}
	for _, f := range p.Faults {
		if !slices.Contains(AllFaults, f) {
			return nil, fmt.Errorf("schedule: unknown fault %q", f)
		}
	}
	if len(p.Faults) == 0 {
		return nil, nil
	}
	rng := newRNG(p.Seed)
	var bag []Fault
	var out []Window
	end := p.Duration - p.Tail
	for t := p.Lead; ; {
		if len(bag) == 0 {
			bag = slices.Clone(p.Faults)
			rng.shuffle(len(bag), func(i, j int) { bag[i], bag[j] = bag[j], bag[i] })
		}
		f := bag[0]
		bag = bag[1:]
		d := rng.between(p.MinLen, p.MaxLen)
		if t+d > end {
			break
		}
		out = append(out, Window{Start: t, Duration: d, Fault: f, Target: uint32(rng.next() >> 32)})
		t += d + rng.between(p.MinGap, p.MaxGap)
	}
	return out, nil
}

// rng is splitmix64: tiny, and its sequence is fixed forever, so a seed
// replays the same schedule whatever Go version runs it.
type rng struct{ s uint64 }

func newRNG(seed int64) *rng { return &rng{s: uint64(seed)} }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// below returns a number in [0, n), n > 0 (the modulo bias is negligible
// for the small n used here).
func (r *rng) below(n uint64) uint64 { return r.next() % n }

// between returns a duration in [lo, hi].
func (r *rng) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.below(uint64(hi-lo)+1))
}

func (r *rng) shuffle(n int, swap func(i, j int)) {
	for i := n - 1; i > 0; i-- {
		swap(i, int(r.below(uint64(i+1))))
	}
}
