package doctor

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
)

// defaultSkewLimit is the clock check's limit when the ttl is not known.
const defaultSkewLimit = 100 * time.Millisecond

// checkTiming measures the server's clock against this process's and the
// round trip to it.
func checkTiming(ctx context.Context, n *redis.Client, cfg *config) ([]Finding, error) {
	rtts := make([]time.Duration, 0, cfg.pings)
	for range cfg.pings {
		start := time.Now()
		if err := n.Ping(ctx).Err(); err != nil {
			return nil, refused(CheckLatency, "PING", fmt.Errorf("PING: %w", err))
		}
		rtts = append(rtts, time.Since(start))
	}
	slices.Sort(rtts)
	skew, uncertainty, err := measureSkew(ctx, n)
	if err != nil {
		return nil, refused(CheckClock, "TIME", fmt.Errorf("TIME: %w", err))
	}
	return []Finding{clockFinding(skew, uncertainty, cfg), latencyFinding(rtts, cfg)}, nil
}

// measureSkew returns the server's clock minus this process's, from the
// TIME call with the shortest round trip of three, and its uncertainty
// (half that round trip).
func measureSkew(ctx context.Context, n *redis.Client) (skew, uncertainty time.Duration, err error) {
	best := time.Duration(-1)
	for range 3 {
		start := time.Now()
		server, err := n.Time(ctx).Result()
		rtt := time.Since(start)
		if err != nil {
			return 0, 0, err
		}
		if best < 0 || rtt < best {
			best = rtt
			// The server read its clock somewhere in the round trip; the
			// middle is the best guess.
			skew = server.Sub(start.Add(rtt / 2).Round(0))
		}
	}
	return skew, best / 2, nil
}

func clockFinding(skew, uncertainty time.Duration, cfg *config) Finding {
	limit, of := defaultSkewLimit, "100ms"
	if a := cfg.allowance(); a > 0 {
		limit, of = a, fmt.Sprintf("the drift allowance of a %v lease, %v", cfg.ttl, a)
	}
	f := Finding{Check: CheckClock,
		Finding: fmt.Sprintf("the server's clock is %v %s this host's (±%v)", abs(skew).Round(time.Microsecond),
			aheadBehind(skew), uncertainty.Round(time.Microsecond))}
	if abs(skew) <= uncertainty {
		f.Finding = fmt.Sprintf("the server's clock agrees with this host's within the measurement's ±%v",
			uncertainty.Round(time.Microsecond))
	}
	if abs(skew)-uncertainty <= limit {
		f.Severity = Info
		return f
	}
	f.Severity = Warn
	f.Finding += ", more than " + of
	f.Consequence = "Clocks this far apart are not both synchronized, and a clock set right is often stepped. " +
		"Redis expires keys by its wall clock: a step forward larger than the drift allowance expires locks " +
		"before their holders' deadlines, so a lock vanishes while its holder trusts its lease; a step back, " +
		"or a failover to a server whose clock is behind, can make tokens from the clock go back (the counter rule's limit)."
	f.Fix = "Synchronize the clocks of the Redis servers and the clients with NTP (chrony, systemd-timesyncd), " +
		"slewing rather than stepping."
	return f
}

func latencyFinding(sorted []time.Duration, cfg *config) Finding {
	p99 := sorted[(len(sorted)*99+99)/100-1]
	median := sorted[len(sorted)/2]
	f := Finding{Check: CheckLatency, Severity: Info,
		Finding: fmt.Sprintf("round trip over %d PINGs: median %v, p99 %v", len(sorted),
			median.Round(time.Microsecond), p99.Round(time.Microsecond))}
	a := cfg.allowance()
	if a == 0 || p99 <= a/2 {
		return f
	}
	f.Severity = Warn
	f.Finding += fmt.Sprintf(", more than half the drift allowance of a %v lease (%v)", cfg.ttl, a)
	f.Consequence = "Exclusion still holds: a lease's deadline counts from the send of its request. But every " +
		"acquire and refresh returns with a round trip less of validity, a keep-alive refresh slower than its " +
		"interval is abandoned, and a tail this long, seen in a few PINGs, means slower moments that end leases; " +
		"the drift allowance is a margin for clock rates, not for delays of this size."
	f.Fix = "Raise the lease ttl (and so its allowance), run the clients nearer to Redis, or find what delays " +
		"the server (SLOWLOG, LATENCY DOCTOR, forks for RDB or AOF rewrites)."
	return f
}

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

func aheadBehind(d time.Duration) string {
	if d < 0 {
		return "behind"
	}
	return "ahead of"
}
