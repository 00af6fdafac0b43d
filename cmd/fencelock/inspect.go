//go:build unix

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/lease"
)

// holding is a lock's holder and counter on one Redis (or the Redlock
// majority's), or a semaphore's slot's.
type holding struct {
	Held    bool   `json:"held"`
	Holder  string `json:"holder,omitempty"`
	Token   string `json:"token,omitempty"` // text form, SEQ:HOLDER:KEY
	Seq     uint64 `json:"seq,omitempty"`
	TTLms   int64  `json:"ttl_ms"`           // -1 when the key has no ttl
	NoTTL   bool   `json:"no_ttl,omitempty"` // the lock's key never expires
	Counter uint64 `json:"counter"`          // LastSeq: the last Seq issued
	// Poisoned: the counter is more than protocol.MaxAhead above the
	// server's clock (see repair-counter).
	Poisoned bool `json:"poisoned,omitempty"`
}

// state is a lock's state on one Redis (or the Redlock majority's).
type state struct {
	holding
	Waiters *int64 `json:"waiters,omitempty"`    // nil when not counted
	Queue   int    `json:"queue"`                // fair waiters with a place (at most 1,000)
	Head    string `json:"queue_head,omitempty"` // the queue's first waiter
}

func stateOf(info lease.Info, waiters int64) state {
	return state{holding: holdingOf(info), Waiters: &waiters, Queue: info.Queued, Head: info.QueueHead}
}

func holdingOf(info lease.Info) holding {
	h := holding{Holder: info.Holder, Counter: info.LastSeq}
	if info.Holder != "" {
		h.Held = true
		h.Token = info.Token.String()
		h.Seq = info.Token.Seq
		h.TTLms = info.TTL.Milliseconds()
		if info.TTL == lease.NoTTL {
			h.TTLms, h.NoTTL = -1, true
		}
	}
	return h
}

// ttl is the lock's remaining ttl as printed.
func (s holding) ttl() string {
	if s.NoTTL {
		return "none (the key never expires: fencelock never sets it so; delete it to free the lock)"
	}
	return ms(s.TTLms).String()
}

// shown is s as printed: quoted when it holds a character that is not
// printable (a holder id written by another client could forge a line).
func shown(s string) string {
	if strings.IndexFunc(s, notPrintable) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

// view is what inspect prints.
type view struct {
	Name string `json:"name"`
	Mode string `json:"mode"` // "single" or "redlock"
	state
	Quorum int        `json:"quorum,omitempty"`
	Nodes  []nodeView `json:"nodes,omitempty"`
	Error  string     `json:"error,omitempty"`
}

type nodeView struct {
	Addr     string `json:"addr"`
	Answered bool   `json:"answered"`
	state
	Error string `json:"error,omitempty"`
}

func (s state) fields() string {
	return fmt.Sprintf("%s waiters=%s queue=%d", s.holding.fields(), waiters(s.Waiters), s.Queue)
}

func (s holding) fields() string {
	var b strings.Builder
	if s.Held {
		ttl := ms(s.TTLms).String()
		if s.NoTTL {
			ttl = "none"
		}
		fmt.Fprintf(&b, "holder=%s token=%s ttl=%s", shown(s.Holder), shown(s.Token), ttl)
	} else {
		b.WriteString("free")
	}
	fmt.Fprintf(&b, " counter=%d", s.Counter)
	if s.Poisoned {
		b.WriteString(" POISONED")
	}
	return b.String()
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

func waiters(n *int64) string {
	if n == nil {
		return "?"
	}
	return fmt.Sprint(*n)
}

func (v view) print(w io.Writer) {
	if v.Mode == "redlock" {
		fmt.Fprintf(w, "lock      %s (redlock, quorum %d of %d)\n", v.Name, v.Quorum, len(v.Nodes))
		fmt.Fprintf(w, "majority  %s\n", v.state.fields())
		for _, n := range v.Nodes {
			if n.Answered {
				fmt.Fprintf(w, "node      %s %s", n.Addr, n.state.fields())
				if n.Error != "" {
					fmt.Fprintf(w, " error: %s", n.Error)
				}
				fmt.Fprintln(w)
				continue
			}
			fmt.Fprintf(w, "node      %s error: %s\n", n.Addr, n.Error)
		}
		return
	}
	fmt.Fprintf(w, "lock      %s\n", v.Name)
	if v.Held {
		fmt.Fprintf(w, "holder    %s\ntoken     %s\nttl       %s\n", shown(v.Holder), shown(v.Token), v.ttl())
	} else {
		fmt.Fprintf(w, "holder    (free)\n")
	}
	fmt.Fprintf(w, "counter   %d%s\nwaiters   %s\n", v.Counter, poisonNote(v.Poisoned), waiters(v.Waiters))
	if v.Queue > 0 {
		fmt.Fprintf(w, "queue     %d (head %q)\n", v.Queue, v.Head)
	}
}

func printJSON(w io.Writer, v any) {
	b, _ := json.MarshalIndent(v, "", "  ")
	fmt.Fprintf(w, "%s\n", b)
}

// inspect is the inspect command.
func (g *globals) inspect(args []string) int {
	fs := g.flagSet("inspect")
	asJSON := fs.Bool("json", false, "print JSON")
	var n permits
	fs.Var(&n, "permits", "inspect semaphore NAME of N permits")
	pos, code := g.parseCommand(fs, args, "NAME")
	if pos == nil {
		return code
	}
	name := pos[0]
	if err := checkPermitNames(name, n); err != nil {
		return g.usageError("inspect: %v", err)
	}
	b, ctx, done, code := g.session()
	if b == nil {
		return code
	}
	defer done()
	if n > 0 {
		return g.inspectSemaphore(ctx, b, name, n, *asJSON)
	}
	v, err := b.inspect(ctx, name)
	err = g.timedOut(err)
	if err != nil && v.Name == "" {
		return g.fail(exitFailure, "inspect %q: %v", name, err)
	}
	if err != nil {
		v.Error = err.Error()
	}
	if *asJSON {
		printJSON(g.stdout, v)
	} else {
		v.print(g.stdout)
	}
	if err != nil {
		return g.fail(exitFailure, "inspect %q: %v", name, err)
	}
	return exitOK
}

// shardNumSub counts the sharded subscribers of channel: PUBSUB
// SHARDNUMSUB on the master of its slot. It is 0 on a client that is not a
// cluster client (fencelock waiters use classic pub/sub there) and on a
// server without sharded pub/sub.
func shardNumSub(ctx context.Context, rdb redis.UniversalClient, channel string) (int64, error) {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		return 0, nil
	}
	node, err := cc.MasterForKey(ctx, channel)
	if err != nil {
		return 0, err
	}
	m, err := node.PubSubShardNumSub(ctx, channel).Result()
	var rerr redis.Error
	if errors.As(err, &rerr) {
		return 0, nil // an error reply: no PUBSUB SHARDNUMSUB, so no sharded waiter
	}
	return m[channel], err
}

// advance is the advance command.
func (g *globals) advance(args []string) int {
	fs := g.flagSet("advance")
	asJSON := fs.Bool("json", false, "print JSON")
	pos, code := g.parseCommand(fs, args, "NAME SEQ")
	if pos == nil {
		return code
	}
	name := pos[0]
	floor, err := fence.ParseSeq(pos[1])
	if err != nil || floor >= fence.MaxSeq {
		return g.usageError("advance: SEQ %q: want a decimal number from 1 to 2^53-2", pos[1])
	}
	b, ctx, done, code := g.session()
	if b == nil {
		return code
	}
	defer done()
	n, err := b.advance(ctx, name, floor)
	if err = g.timedOut(err); err != nil {
		if errors.Is(err, lease.ErrInvalid) {
			return g.usageError("advance %q: %v", name, err)
		}
		return g.fail(exitFailure, "advance %q: %v", name, err)
	}
	if *asJSON {
		printJSON(g.stdout, struct {
			Name    string `json:"name"`
			Counter uint64 `json:"counter"`
		}{name, n})
	} else {
		fmt.Fprintln(g.stdout, n)
	}
	return exitOK
}

// backend connects, reporting a failure and its exit status.
func (g *globals) backend() (backend, int) {
	if g.timeout <= 0 {
		return nil, g.usageError("--timeout must be positive, got %v", g.timeout)
	}
	if err := checkDuration("--timeout", g.timeout, maxTTL); err != nil {
		return nil, g.usageError("%v", err)
	}
	if err := checkPrintable("--prefix", g.prefix); err != nil {
		return nil, g.usageError("%v", err)
	}
	b, err := g.connect()
	var bad *badURLError
	switch {
	case errors.As(err, &bad) || errors.Is(err, lease.ErrInvalid):
		return nil, g.usageError("%v", err)
	case err != nil:
		return nil, g.fail(exitFailure, "%v", err)
	}
	return b, exitOK
}

// timedOut says in err that Redis did not answer within --timeout, when
// that is why err came.
func (g *globals) timedOut(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w (no answer within --timeout %v)", err, g.timeout)
	}
	return err
}
