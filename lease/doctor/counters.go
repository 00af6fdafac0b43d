package doctor

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/protocol"
)

// Bounds of the counters check, per server: SCAN calls of scanCount keys
// each, so at most scanCalls*scanCount keys are looked at, and the names of
// at most maxNamed poisoned counters are listed.
const (
	scanCalls = 100
	scanCount = 1000
	maxNamed  = 10
)

// poisonedCounter is a counter above its server's clock + the bound.
type poisonedCounter struct {
	name string
	seq  uint64
}

// counterFindings scans the server's lock counters (PREFIX{NAME}:fence,
// and a semaphore slot's, PREFIX{NAME}#i:fence) for poisoned ones: more than protocol.MaxAhead above the server's
// clock, which no counter that follows the clock reaches.
func counterFindings(ctx context.Context, n *redis.Client, cfg *config) ([]Finding, error) {
	now, err := n.Time(ctx).Result()
	if err != nil {
		return nil, refused(CheckCounters, "TIME", fmt.Errorf("TIME: %w", err))
	}
	limit := protocol.CounterLimit(now)
	match := globEscape(cfg.prefix) + "{*:fence"
	var (
		cursor   uint64
		seen     int
		bad      []poisonedCounter
		complete bool
	)
	for range scanCalls {
		var keys []string
		keys, cursor, err = n.Scan(ctx, cursor, match, scanCount).Result()
		if err != nil {
			return nil, refused(CheckCounters, "SCAN", fmt.Errorf("SCAN: %w", err))
		}
		if len(keys) > 0 {
			// GETs, not one MGET: a Cluster node's keys are in many slots.
			p := n.Pipeline()
			gets := make([]*redis.StringCmd, len(keys))
			for i, k := range keys {
				gets[i] = p.Get(ctx, k)
			}
			if _, err := p.Exec(ctx); err != nil && ctx.Err() != nil {
				return nil, ctx.Err()
			}
			for i, g := range gets {
				var reply redis.Error
				switch err := g.Err(); {
				case isNoPerm(err):
					return nil, refusedKeys(CheckCounters, "GET", "~"+globEscape(cfg.prefix)+"*", err)
				case err != nil && !errors.As(err, &reply):
					// A lost connection is no reply: the key was not read,
					// and "no poisoned counter" would not be true.
					return nil, fmt.Errorf("%s check: GET %s: %w", CheckCounters, keys[i], err)
				}
				seq, err := strconv.ParseUint(g.Val(), 10, 64)
				if err != nil {
					continue // gone since, or not a counter (another key that ends so)
				}
				seen++
				if seq > limit {
					bad = append(bad, poisonedCounter{name: lockName(keys[i], cfg.prefix), seq: seq})
				}
			}
		}
		if cursor == 0 {
			complete = true
			break
		}
	}
	scope := fmt.Sprintf("%d lock counters (prefix %q)", seen, cfg.prefix)
	if !complete {
		scope = fmt.Sprintf("the first %d lock counters found in %d SCAN calls (prefix %q)", seen, scanCalls, cfg.prefix)
	}
	if len(bad) == 0 {
		return []Finding{{Check: CheckCounters, Severity: Info,
			Finding: fmt.Sprintf("no poisoned counter among %s", scope)}}, nil
	}
	var names []string
	for i, b := range bad {
		if i == maxNamed {
			names = append(names, fmt.Sprintf("and %d more", len(bad)-maxNamed))
			break
		}
		names = append(names, fmt.Sprintf("%s (%d)", b.name, b.seq))
	}
	return []Finding{{Check: CheckCounters, Severity: Danger,
		Finding: fmt.Sprintf("%d of %s are more than %v above the server's clock (poisoned): %s",
			len(bad), scope, protocol.MaxAhead, strings.Join(names, ", ")),
		Consequence: "A forged or mistyped number lifted them (Advance, heal.Write with a forged token); no counter " +
			"that follows the clock gets there. Their tokens only grow toward 2^53-1, where every acquire of the " +
			"lock fails, and the verifiers that accepted them refuse every holder after a repair.",
		Fix: "fencelock repair-counter --yes NAME for each (once the lock is free), then fencelock " +
			"reset-highwater NAME RESOURCE for each resource whose high-water is above the new counter."}}, nil
}

// lockName returns the lock name in counter key k: NAME for
// PREFIX{NAME}:fence, and a semaphore slot's name NAME#i for
// PREFIX{NAME}#i:fence (names have no braces).
func lockName(k, prefix string) string {
	return strings.Replace(strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(k, prefix), "{"), ":fence"), "}", "", 1)
}

// globEscape escapes the glob characters of SCAN MATCH in s.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
