package safety

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/bench/internal/report"
	"github.com/fencelock/fencelock/internal/testenv/faults"
)

// scenario is one failure of Kleppmann's "How to do distributed locking",
// provoked for real. Every round has the same shape: holder A takes the
// lock, reads the set, checks that it still holds the lock, and is then
// held up right before its write; meanwhile the fault takes A's lock away
// and holder B takes it, reads and writes; then A writes. What differs is
// how A is held up, the fault, and (in the handover) the order of the
// writes.
type scenario struct {
	info  report.ScenarioInfo
	a     holdUp
	fault fault
	order order
	// skip is the kinds the scenario cannot provoke, with the reason.
	skip map[string]string
}

// holdUp is how holder A is held up right before its write.
type holdUp int

const (
	stall     holdUp = iota // A, in this process, waits until the round lets it write
	keepAlive               // as stall, refreshing its lock every TTL/3 meanwhile
	sigstop                 // A is a separate process that stops itself with SIGSTOP
)

// order is the order of the two holders' steps.
type order int

const (
	bFirst   order = iota // B acquires, reads and writes; then A writes
	handover              // B acquires and reads; A writes; then B writes
)

// margin is how long past the TTL a scenario waits before it counts a lock
// as expired on the server.
func margin(ttl time.Duration) time.Duration { return ttl/4 + 50*time.Millisecond }

// The node faults: what happens to the one Redis node a fault hits.
var (
	clockJump = nodeFault{hit: func(ctx context.Context, s *site, _ time.Duration) error {
		return s.admin(func(c *redis.Client) error { _, err := faults.ExpireAll(ctx, c); return err })
	}}
	restart = nodeFault{hit: func(ctx context.Context, s *site, _ time.Duration) error {
		return faults.Restart(ctx, s.r)
	}}
	failover = nodeFault{failover: true,
		prepare: func(ctx context.Context, s *site, _ time.Duration) error { return s.fo.LagReplica(ctx) },
		hit:     func(ctx context.Context, s *site, _ time.Duration) error { return s.fo.Promote(ctx) },
		restore: func(ctx context.Context, s *site, _ time.Duration) error { return s.fo.Rejoin(ctx) }}
	serverPause = nodeFault{hit: func(ctx context.Context, s *site, ttl time.Duration) error {
		return faults.PauseFor(ctx, s.server(), ttl+margin(ttl))
	}}
	eviction = nodeFault{
		hit: func(ctx context.Context, s *site, _ time.Duration) error {
			return s.admin(func(c *redis.Client) error { _, err := faults.Evict(ctx, c); return err })
		},
		restore: func(ctx context.Context, s *site, _ time.Duration) error {
			return s.admin(func(c *redis.Client) error { return faults.Unevict(ctx, c) })
		}}
)

var scenarios = []scenario{
	{info: report.ScenarioInfo{Name: "pause", Title: "holder paused past the TTL",
		How: "A is a separate process; after its read and its own lock check it stops itself with SIGSTOP; it gets SIGCONT after B's write, TTL+margin later"},
		a: sigstop, fault: expiry{}},
	{info: report.ScenarioInfo{Name: "delayed-write", Title: "delayed write reaches Postgres after the lease expired",
		How: "A's Postgres connection goes through a TCP proxy that, after A's check, delays every packet to Postgres by 2×TTL; B writes directly meanwhile"},
		a: stall, fault: delayedWrite{}},
	{info: report.ScenarioInfo{Name: "handover", Title: "read-modify-write across a handover",
		How: "A stalls past the TTL after its check; B acquires and reads; A writes; then B writes (claim-before-read vs a check at the write only)"},
		a: stall, fault: expiry{}, order: handover},
	{info: report.ScenarioInfo{Name: "clock-jump", Title: "clock jump on one (Redlock) node",
		How: "early expiry: every key with a TTL on the node is expired at once (PEXPIRE 1 ms), as a forward clock jump does; libfaketime was not usable (it makes redis-server 7.0 fail at start: recursive clock_gettime via jemalloc)"},
		a: stall, fault: clockJump,
		skip: map[string]string{kindTimestamp: timestampClockNote}},
	{info: report.ScenarioInfo{Name: "restart", Title: "Redis restart without persistence",
		How: "SIGKILL and restart of the node (--save \"\", --appendonly no): it comes back empty"},
		a: stall, fault: restart},
	{info: report.ScenarioInfo{Name: "failover", Title: "failover to a lagging replica",
		How: "before A acquires, the replica is paused and the primary drops its link (CLIENT KILL TYPE replica); then the primary is killed, the replica promoted and the clients' proxy pointed at it"},
		a: stall, fault: failover},
	{info: report.ScenarioInfo{Name: "server-pause", Title: "lock server paused past the TTL",
		How: "A keeps its lock alive (refresh every TTL/3) while held up; SIGSTOP on the node for TTL+margin, then SIGCONT: the lock has expired by the server's clock when it resumes, whatever A sent"},
		a: keepAlive, fault: serverPause,
		skip: map[string]string{kindRedlock: redlockRefreshNote, kindRedlockVerifier: redlockRefreshNote}},
	{info: report.ScenarioInfo{Name: "eviction", Title: "counter evicted under memory pressure",
		How: "maxmemory set just above use with allkeys-lru, then filled until every lock key and fencing counter on the node is evicted"},
		a: stall, fault: eviction},
}

// partitionNote ends the How of the node-fault scenarios.
const partitionNote = "; quorum kinds (5 nodes): A is partitioned from two nodes while it acquires (its own proxies to them refuse connections), so it holds exactly three, and the fault hits one of those three (Kleppmann's Redlock example)"

// redlockRefreshNote says why server-pause does not run fencelock's
// redlock: its keep-alive provokes nothing there.
const redlockRefreshNote = "not run for fencelock redlock: its refresh re-sets the key on nodes that lost it, and the refresh A sent while the node was frozen runs first when it resumes, so A keeps its majority and B never gets the lock (measured: B got no lock in every round)"

// timestampClockNote says why clock-jump does not run setnx-getset.
const timestampClockNote = "not run for setnx-getset: its key has no TTL and its expiry is judged by the clients' clocks, so a jump of the server's clock frees nothing"

func init() {
	for i := range scenarios {
		s := &scenarios[i]
		if s.onNode() {
			s.info.How += partitionNote
		}
		seen := map[string]bool{}
		for _, k := range kindNames() {
			if note, ok := s.skip[k]; ok && !seen[note] {
				seen[note] = true
				s.info.How += "; " + note
			}
		}
	}
}

func (s scenario) onNode() bool {
	_, ok := s.fault.(nodeFault)
	return ok
}

// failover reports whether the faulted node is a primary with a replica.
func (s scenario) failover() bool {
	nf, ok := s.fault.(nodeFault)
	return ok && nf.failover
}

func scenarioNames() []string {
	var out []string
	for _, s := range scenarios {
		out = append(out, s.info.Name)
	}
	return out
}

// scenarioNamed returns the scenario called name.
func scenarioNamed(name string) (scenario, error) {
	for _, s := range scenarios {
		if s.info.Name == name {
			return s, nil
		}
	}
	return scenario{}, fmt.Errorf("unknown scenario %q (known: %v)", name, scenarioNames())
}

// kinds is the lock kinds of want the scenario runs.
func (s scenario) kinds(want []string) []string {
	var out []string
	for _, name := range want {
		k, _ := kindNamed(name)
		if k.handoverOnly && s.order != handover {
			continue
		}
		if _, skip := s.skip[name]; skip {
			continue
		}
		out = append(out, name)
	}
	return out
}
