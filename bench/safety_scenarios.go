package main

import (
	"context"
	"fmt"
	"time"
)

// scenario is one failure of Kleppmann's "How to do distributed locking",
// provoked for real. Every round has the same shape: holder A takes the
// lock, reads the set, checks that it still holds the lock, and is then
// held up right before its write; meanwhile the fault takes A's lock away
// and holder B takes it, reads and writes; then A writes. (In the handover
// scenario B reads before A writes and writes after.) The fault is what
// differs.
type scenario struct {
	info ScenarioInfo
	// nodeFault: the fault hits one Redis node. The quorum kinds then
	// get Kleppmann's partition: A acquires while two of the five nodes
	// are paused, so it holds exactly three, and the fault hits one of
	// those three, leaving three free nodes for B.
	nodeFault bool
	failover  bool // the faulted node is a primary with a replica behind a proxy
	delayDB   bool // A's Postgres link goes through the delaying proxy
	process   bool // A is a separate process, stopped with SIGSTOP
	handover  bool // B reads before A writes and writes after
	keepAlive bool // A refreshes its lock every TTL/3 while held up
	// skip is the kinds the scenario cannot provoke, with the reason.
	skip map[string]string
	// prepare runs before A acquires, inject while A is held up, restore
	// after the round.
	prepare, restore func(ctx context.Context, c *cellEnv) error
	inject           func(ctx context.Context, c *cellEnv) error
}

// margin is how long past the TTL a scenario waits before it counts a lock
// as expired on the server.
func margin(ttl time.Duration) time.Duration { return ttl/4 + 50*time.Millisecond }

var safetyScenarios = []scenario{
	{
		info: ScenarioInfo{Name: "pause", Title: "holder paused past the TTL",
			How: "A is a separate process; after its read and its own lock check it stops itself with SIGSTOP; it gets SIGCONT after B's write, TTL+margin later"},
		process: true,
	},
	{
		info: ScenarioInfo{Name: "delayed-write", Title: "delayed write reaches Postgres after the lease expired",
			How: "A's Postgres connection goes through a TCP proxy that, after A's check, delays every packet to Postgres by 2×TTL; B writes directly meanwhile"},
		delayDB: true,
	},
	{
		info: ScenarioInfo{Name: "handover", Title: "read-modify-write across a handover",
			How: "A stalls past the TTL after its check; B acquires and reads; A writes; then B writes (claim-before-read vs a check at the write only)"},
		handover: true,
	},
	{
		info: ScenarioInfo{Name: "clock-jump", Title: "clock jump on one (Redlock) node",
			How: "early expiry: every key with a TTL on the node is expired at once (PEXPIRE 1 ms), as a forward clock jump does; libfaketime was not usable (it makes redis-server 7.0 fail at start: recursive clock_gettime via jemalloc)"},
		nodeFault: true,
		inject: func(ctx context.Context, c *cellEnv) error {
			_, err := c.topo.faulted().jumpClock(ctx)
			return err
		},
	},
	{
		info: ScenarioInfo{Name: "restart", Title: "Redis restart without persistence",
			How: "SIGKILL and restart of the node (--save \"\", --appendonly no): it comes back empty"},
		nodeFault: true,
		inject: func(ctx context.Context, c *cellEnv) error {
			return c.topo.faulted().restart(ctx)
		},
	},
	{
		info: ScenarioInfo{Name: "failover", Title: "failover to a lagging replica",
			How: "before A acquires, the replica is paused and the primary drops its link (CLIENT KILL TYPE replica); then the primary is killed, the replica promoted and the clients' proxy pointed at it"},
		nodeFault: true, failover: true,
		prepare: func(ctx context.Context, c *cellEnv) error {
			return c.topo.faulted().lagReplica(ctx)
		},
		inject: func(ctx context.Context, c *cellEnv) error {
			return c.topo.faulted().failover(ctx)
		},
		restore: func(ctx context.Context, c *cellEnv) error {
			return c.topo.faulted().rejoin(ctx)
		},
	},
	{
		info: ScenarioInfo{Name: "server-pause", Title: "lock server paused past the TTL",
			How: "A keeps its lock alive (refresh every TTL/3) while held up; SIGSTOP on the node for TTL+margin, then SIGCONT: the lock has expired by the server's clock when it resumes, whatever A sent"},
		nodeFault: true, keepAlive: true,
		skip: map[string]string{
			kindRedlock:         redlockRefreshNote,
			kindRedlockVerifier: redlockRefreshNote,
		},
		inject: func(ctx context.Context, c *cellEnv) error {
			return c.topo.faulted().pauseFor(ctx, c.ttl+margin(c.ttl))
		},
	},
	{
		info: ScenarioInfo{Name: "eviction", Title: "counter evicted under memory pressure",
			How: "maxmemory set just above use with allkeys-lru, then filled until every lock key and fencing counter on the node is evicted"},
		nodeFault: true,
		inject: func(ctx context.Context, c *cellEnv) error {
			_, err := c.topo.faulted().evict(ctx)
			return err
		},
		restore: func(ctx context.Context, c *cellEnv) error {
			return c.topo.faulted().unevict(ctx)
		},
	},
}

// partitionNote ends the How of the node-fault scenarios.
const partitionNote = "; quorum kinds (5 nodes): A is partitioned from two nodes while it acquires (its own proxies to them refuse connections), so it holds exactly three, and the fault hits one of those three (Kleppmann's Redlock example)"

func init() {
	for i := range safetyScenarios {
		if safetyScenarios[i].nodeFault {
			safetyScenarios[i].info.How += partitionNote
		}
		if safetyScenarios[i].skip != nil {
			safetyScenarios[i].info.How += "; " + redlockRefreshNote
		}
	}
}

// redlockRefreshNote says why server-pause does not run fencelock's
// redlock: its keep-alive provokes nothing there.
const redlockRefreshNote = "not run for fencelock redlock: its refresh re-sets the key on nodes that lost it, and the refresh A sent while the node was frozen runs first when it resumes, so A keeps its majority and B never gets the lock (measured: B got no lock in every round)"

// scenarioNamed returns the scenario called name.
func scenarioNamed(name string) (scenario, error) {
	for _, s := range safetyScenarios {
		if s.info.Name == name {
			return s, nil
		}
	}
	var names []string
	for _, s := range safetyScenarios {
		names = append(names, s.info.Name)
	}
	return scenario{}, fmt.Errorf("unknown scenario %q (known: %v)", name, names)
}

// kindsFor is the lock kinds a scenario runs.
func (s scenario) kinds(want []string) []string {
	var out []string
	for _, k := range want {
		if k == kindWriteOnly && !s.handover {
			continue
		}
		if _, skip := s.skip[k]; skip {
			continue
		}
		out = append(out, k)
	}
	return out
}
