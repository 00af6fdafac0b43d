package doctor

import (
	"fmt"
	"strings"
)

// evictionFindings: keys evicted under memory pressure are locks that
// vanish and counters that start over.
func evictionFindings(s serverState) []Finding {
	policy := s.info["maxmemory_policy"]
	maxmem := s.infoInt("maxmemory")
	human := s.info["maxmemory_human"]
	if human == "" {
		human = s.info["maxmemory"]
	}
	const fix = "Set maxmemory-policy noeviction (CONFIG SET maxmemory-policy noeviction, and in redis.conf), " +
		"or keep the locks on a Redis of their own with that policy."
	switch {
	case policy == "":
		return []Finding{{Check: CheckEviction, Severity: Warn,
			Finding:     "INFO does not show maxmemory_policy",
			Consequence: "The doctor cannot tell whether Redis may evict lock and counter keys.",
			Fix:         "Check the eviction policy with your provider: it must be noeviction."}}
	case policy == "noeviction" && maxmem > 0:
		return []Finding{{Check: CheckEviction, Severity: Info,
			Finding: fmt.Sprintf("maxmemory is %s with maxmemory-policy noeviction", human),
			Consequence: "Nothing is evicted; when memory is full, writes fail with OOM, so acquires and " +
				"refreshes fail (a refresh that keeps failing ends its lease) until memory is freed."}}
	case policy == "noeviction":
		return []Finding{{Check: CheckEviction, Severity: Info,
			Finding: "maxmemory-policy is noeviction, without a maxmemory"}}
	case maxmem == 0:
		return []Finding{{Check: CheckEviction, Severity: Info,
			Finding:     fmt.Sprintf("maxmemory-policy is %s but maxmemory is 0 (no limit): nothing is evicted today", policy),
			Consequence: "Setting a maxmemory later would let Redis evict lock and counter keys.",
			Fix:         fix}}
	}
	which := "any key, a held lock or a counter"
	if strings.HasPrefix(policy, "volatile-") {
		which = "keys with a ttl: every held lock (a lock key always has the lease's ttl) and every counter " +
			"(counters have a ttl unless lease.WithCounterTTL(0))"
	}
	return []Finding{{Check: CheckEviction, Severity: Danger,
		Finding: fmt.Sprintf("maxmemory is %s with maxmemory-policy %s: under memory pressure Redis evicts %s", human, policy, which),
		Consequence: "An evicted lock key frees the lock while its holder still trusts its lease: a second " +
			"holder gets it. An evicted counter starts again at the server's clock, so tokens still grow, " +
			"unless the counter had been lifted above the clock (Advance, Reissue, a Redlock write-back): then tokens go back.",
		Fix: fix}}
}

// persistenceFindings: what a restart keeps of locks and counters.
func persistenceFindings(s serverState, cfg *config) []Finding {
	aof := s.info["aof_enabled"] == "1"
	save, saveKnown := s.config("save")
	rdb := strings.TrimSpace(save) != ""
	fsync, fsyncKnown := s.config("appendfsync")
	floor := "Only lease.WithClockFloor(true) keeps tokens growing then, as long as the server's clock does not step back."
	if cfg.clockFloor {
		floor = "The leases' clock floor keeps tokens growing, as long as the server's clock does not step back."
	}
	switch {
	case !aof && !saveKnown:
		return []Finding{{Check: CheckPersistence, Severity: Warn,
			Finding: fmt.Sprintf("AOF is off, and CONFIG GET save failed (%v)", s.confErr),
			Consequence: "Without AOF a crash loses at least the writes since the last RDB snapshot, " +
				"if there are snapshots at all: locks taken since vanish and counters come back behind.",
			Fix: "Turn AOF on (appendonly yes), or allow CONFIG GET so the doctor can read the save points."}}
	case !aof && !rdb:
		return []Finding{{Check: CheckPersistence, Severity: Danger,
			Finding: "no persistence: AOF is off (appendonly no) and there are no RDB save points (save \"\")",
			Consequence: "A restart forgets every lock and counter. A lock still within its ttl is free again " +
				"while its holder trusts its lease. A forgotten counter starts again at the server's clock, so " +
				"tokens still grow, unless it had been lifted above the clock (Advance, Reissue, a Redlock " +
				"write-back): then tokens go back.",
			Fix: "Turn AOF on: CONFIG SET appendonly yes (and appendonly yes in redis.conf), appendfsync everysec or always." +
				wipes(s)}}
	case !aof:
		return []Finding{{Check: CheckPersistence, Severity: Danger,
			Finding: fmt.Sprintf("RDB snapshots only (save %q, appendonly no)", save),
			Consequence: "A crash loses the writes since the last snapshot: locks taken since vanish while " +
				"their holders trust their leases, and counters come back behind the tokens already issued, " +
				"so tokens repeat. " + floor,
			Fix: "Turn AOF on: CONFIG SET appendonly yes (and appendonly yes in redis.conf), appendfsync everysec or always."}}
	case !fsyncKnown:
		return []Finding{{Check: CheckPersistence, Severity: Warn,
			Finding:     fmt.Sprintf("AOF is on, and CONFIG GET appendfsync failed (%v)", s.confErr),
			Consequence: "With appendfsync no, an OS crash or power loss loses up to about 30s of acknowledged writes.",
			Fix:         "Check that appendfsync is everysec or always, or allow CONFIG GET so the doctor can."}}
	case fsync == "no":
		return []Finding{{Check: CheckPersistence, Severity: Warn,
			Finding: "AOF is on with appendfsync no: the OS decides when writes reach the disk",
			Consequence: "A Redis crash loses nothing, but an OS crash or power loss loses up to about 30s of " +
				"acknowledged writes: counters come back behind, so tokens repeat, and locks vanish if the " +
				"server is back within their ttl. " + floor,
			Fix: "CONFIG SET appendfsync everysec (or always), and the same in redis.conf."}}
	case fsync == "everysec":
		return []Finding{{Check: CheckPersistence, Severity: Info,
			Finding: "AOF is on with appendfsync everysec",
			Consequence: "An OS crash or power loss loses up to about 2s of acknowledged writes (a crash of Redis " +
				"alone loses little or nothing: its writes are in the OS): counters may come back behind. " + floor}}
	}
	return []Finding{{Check: CheckPersistence, Severity: Info,
		Finding: fmt.Sprintf("AOF is on with appendfsync %s", fsync)}}
}

// replicationFindings: what a failover to a replica can lose.
func replicationFindings(s serverState, cfg *config) []Finding {
	if s.info["role"] != "master" {
		return nil // a replica: its primary's findings cover it
	}
	replicas := s.infoInt("connected_slaves")
	if replicas == 0 {
		if cfg.replicaAck > 0 {
			return []Finding{{Check: CheckReplication, Severity: Warn,
				Finding:     fmt.Sprintf("no replica is connected, and the leases wait for %d (WithReplicaAck)", cfg.replicaAck),
				Consequence: "Every acquire fails with ErrNotReplicated.",
				Fix:         "Connect the replicas, or lower WithReplicaAck to the replicas there are."}}
		}
		return []Finding{{Check: CheckReplication, Severity: Info,
			Finding:     "no replicas",
			Consequence: "No failover can lose writes; what a restart keeps depends on persistence."}}
	}
	minWrite, known := s.config("min-replicas-to-write")
	if !known {
		// INFO shows min_slaves_good_slaves only when min-replicas-to-write is set.
		minWrite = "0"
		if _, ok := s.info["min_slaves_good_slaves"]; ok {
			minWrite = "1"
		}
	}
	lag, _ := s.config("min-replicas-max-lag")
	switch {
	case cfg.replicaAck > int(replicas):
		return []Finding{{Check: CheckReplication, Severity: Warn,
			Finding:     fmt.Sprintf("%s connected, and the leases wait for %d (WithReplicaAck)", nReplicas(replicas), cfg.replicaAck),
			Consequence: "Every acquire fails with ErrNotReplicated until enough replicas are connected.",
			Fix:         "Connect the replicas, or lower WithReplicaAck to the replicas there are."}}
	case cfg.replicaAck > 0:
		return []Finding{{Check: CheckReplication, Severity: Info,
			Finding: fmt.Sprintf("%s; the leases wait for %d on every acquire (WithReplicaAck)", nReplicas(replicas), cfg.replicaAck),
			Consequence: "A failover to a replica that acknowledged keeps the lock and its counter. Refreshes, " +
				"Advance and Reissue are not waited for: a failover can undo the last refresh (the lock then " +
				"expires up to that much sooner) or a counter's last lift."}}
	}
	loses := fmt.Sprintf("%s, replicated asynchronously, and the leases do not use WithReplicaAck", nReplicas(replicas))
	consequence := "A failover can promote a replica that missed the last writes: a lock taken just before " +
		"vanishes while its holder trusts its lease, and its counter comes back behind, so tokens repeat " +
		"(lease.WithClockFloor(true) prevents that, as long as the replica's clock is not behind)."
	if cfg.clockFloor {
		consequence = "A failover can promote a replica that missed the last writes: a lock taken just before " +
			"vanishes while its holder trusts its lease (the clock floor keeps tokens growing)."
	}
	const fix = "Use lease.WithReplicaAck(1, timeout) (fencelock doctor --replica-ack 1 to check with it), and set " +
		"min-replicas-to-write 1 with min-replicas-max-lag so the primary refuses writes no replica receives."
	if minWrite == "0" || minWrite == "" {
		return []Finding{{Check: CheckReplication, Severity: Danger,
			Finding:     loses + ", nor is min-replicas-to-write set",
			Consequence: consequence, Fix: fix}}
	}
	return []Finding{{Check: CheckReplication, Severity: Warn,
		Finding: loses + fmt.Sprintf("; min-replicas-to-write is %s (max lag %ss)", minWrite, lag),
		Consequence: consequence + " min-replicas-to-write only refuses writes when too few replicas are " +
			"connected; it does not wait for them, so it bounds that loss to about the lag, not to zero.",
		Fix: fix}}
}

func nReplicas(n int64) string {
	if n == 1 {
		return "1 replica"
	}
	return fmt.Sprintf("%d replicas", n)
}

// wipes warns a primary without persistence that has replicas.
func wipes(s serverState) string {
	if s.info["role"] != "master" || s.infoInt("connected_slaves") == 0 {
		return ""
	}
	return " Until then, do not let this primary restart on its own (a supervisor, a container restart policy): " +
		"restarted empty, it makes its replicas empty too, before a failover can save the data."
}
