//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/protocol"
)

// repairUsage is the repair-counter part of the help text.
const repairUsage = `  repair-counter  lower lock NAME's counter to the server's clock when it is poisoned:
           more than ` + aheadText + ` above the server's clock (a forged or mistyped advance, a
           forged token through heal.Write), which no counter that follows the clock
           reaches. Refused while NAME is held. Prints the change; changes nothing
           without --yes. Afterwards, reset-highwater each resource whose high-water is
           above the new counter (its verifier accepted the poisoned tokens).
             --yes           make the change
`

// aheadText is protocol.MaxAhead as the help text and the doc say it.
const aheadText = "24h"

// counterRepair is what repair-counter found and did on one Redis.
type counterRepair struct {
	Addr    string `json:"addr"`
	Counter uint64 `json:"counter"` // before
	Limit   uint64 `json:"limit"`   // the server's clock + protocol.MaxAhead, in µs
	Held    bool   `json:"held"`
	After   uint64 `json:"after"`
	Done    bool   `json:"done"`
}

// poisoned reports whether the counter is above the limit.
func (r counterRepair) poisoned() bool { return r.Counter > r.Limit }

// errCounterMoved: the lock or its counter changed during the repair.
var errCounterMoved = errors.New("the lock or its counter changed during the repair; run it again")

// repairCounter is the repair-counter command.
func (g *globals) repairCounter(args []string) int {
	fs := g.flagSet("repair-counter")
	yes := fs.Bool("yes", false, "make the change")
	pos, code := g.parseCommand(fs, args, "NAME")
	if pos == nil {
		return code
	}
	name := pos[0]
	b, ctx, done, code := g.session()
	if b == nil {
		return code
	}
	defer done()

	keys := protocol.KeysFor(g.prefix, name)
	fmt.Fprintf(g.stdout, "lock      %s\n", name)
	status := exitOK
	for _, rdb := range redisOf(b) {
		r, err := repairOn(ctx, rdb, keys, *yes)
		if err = g.timedOut(err); err != nil {
			status = g.fail(exitFailure, "repair-counter %q on %s: %v%s", name, r.Addr, err, transactionHint(err))
			continue
		}
		fmt.Fprintf(g.stdout, "node      %s counter=%d limit=%d (the server's clock + %s)\n", r.Addr, r.Counter, r.Limit, aheadText)
		switch {
		case !r.poisoned():
			fmt.Fprintf(g.stdout, "after     unchanged: not poisoned\n")
		case r.Held:
			fmt.Fprintf(g.stdout, "after     unchanged: the lock is held\n")
			status = g.fail(exitFailure, "repair-counter %q on %s: the lock is held, with a token from the poisoned counter: "+
				"run again once it is released (or its ttl ran out)", name, r.Addr)
		case !r.Done:
			fmt.Fprintf(g.stdout, "after     about %d, the server's clock (not done: add --yes)\n", r.Limit-uint64(protocol.MaxAhead/time.Microsecond))
		default:
			fmt.Fprintf(g.stdout, "after     %d\n", r.After)
			fmt.Fprintf(g.stdout, "next      reset-highwater %s RESOURCE for each resource whose high-water is above %d\n", name, r.After)
		}
	}
	return status
}

// transactionHint names the permission repair-counter needs beyond
// fencelock's own ACL when the server refused it one (an EXECABORT wraps
// the NOPERM).
func transactionHint(err error) string {
	if !strings.Contains(err.Error(), "NOPERM") {
		return ""
	}
	return "; repair-counter needs +@transaction (WATCH, MULTI, EXEC) beside fencelock's own ACL (docs/operating.md)"
}

// redisOf returns the Redis clients of b: one, or a Redlock's masters.
func redisOf(b backend) []redis.UniversalClient {
	switch b := b.(type) {
	case *single:
		return []redis.UniversalClient{b.rdb}
	case *quorum:
		return b.rdbs
	}
	return nil
}

// addrOf names rdb in messages.
func addrOf(rdb redis.UniversalClient) string {
	if c, ok := rdb.(*redis.Client); ok {
		return c.Options().Addr
	}
	return "deployment"
}

// repairOn reads the counter, the server's clock and whether the lock is
// held, in one optimistic transaction (WATCH) on the lock's keys; with
// yes, a poisoned counter of a free lock is set to the server's clock
// (its ttl kept: the next acquire sets it again).
func repairOn(ctx context.Context, rdb redis.UniversalClient, keys protocol.Keys, yes bool) (counterRepair, error) {
	r := counterRepair{Addr: addrOf(rdb)}
	err := rdb.Watch(ctx, func(tx *redis.Tx) error {
		counter, err := tx.Get(ctx, keys.Counter).Uint64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("read the counter: %w", err)
		}
		now, err := tx.Time(ctx).Result()
		if err != nil {
			return fmt.Errorf("read the server's clock: %w", err)
		}
		held, err := tx.Exists(ctx, keys.Lock).Result()
		if err != nil {
			return err
		}
		r.Counter, r.Limit, r.Held, r.After = counter, protocol.CounterLimit(now), held > 0, counter
		if !r.poisoned() || r.Held || !yes {
			return nil
		}
		to := protocol.Micros(now)
		_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, keys.Counter, to, redis.KeepTTL)
			return nil
		})
		if err == nil {
			r.After, r.Done = to, true
		}
		return err
	}, keys.Lock, keys.Counter)
	if errors.Is(err, redis.TxFailedErr) {
		err = errCounterMoved
	}
	return r, err
}

// poisoned reports whether counter is more than protocol.MaxAhead above
// rdb's clock.
func poisoned(ctx context.Context, rdb redis.UniversalClient, counter uint64) (bool, error) {
	if counter == 0 {
		return false, nil
	}
	limit, err := counterLimit(ctx, rdb)
	return counter > limit, err
}

// counterLimit is the highest counter that is not poisoned: protocol.MaxAhead
// above rdb's clock.
func counterLimit(ctx context.Context, rdb redis.UniversalClient) (uint64, error) {
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("read the server's clock: %w", err)
	}
	return protocol.CounterLimit(now), nil
}

// poisonNote is what inspect prints after a poisoned counter.
func poisonNote(p bool) string {
	if !p {
		return ""
	}
	return " POISONED: more than " + aheadText + " above the server's clock (fencelock repair-counter)"
}
