// Package locks builds every lock the bench measures, fencelock's and its
// peers', behind one adapter: a [Lock] takes a key with [Lock.Try] or
// [Lock.Wait] and returns a [Hold], the acquisition as its holder sees it.
// perf times these calls; safety runs its workload under them.
package locks

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/lease"
)

// DefaultTTL is the lock TTL when [Config] gives none.
const DefaultTTL = 10 * time.Second

var (
	// ErrHeld is the error of a Try on a lock another holder has.
	ErrHeld = errors.New("locks: lock is held")
	// ErrNoWait is the error of Wait on a lock with no waiting acquire.
	ErrNoWait = errors.New("locks: no waiting acquire in this lock")
)

// Hold is one acquisition, as its holder sees it.
type Hold interface {
	// Token is the fencing token; ok is false for locks without one.
	Token() (tok fence.Token, ok bool)
	// Held is the holder's own view, without I/O: false when the library
	// knows the lock is gone. Locks with no such check say true.
	Held() bool
	// Refresh extends the lock by its TTL, as a keep-alive does.
	Refresh(ctx context.Context) error
	Release(ctx context.Context) error
}

// Leased is a Hold of a fencelock lease kind; heal.Write takes its lease.
type Leased interface {
	Hold
	Lease() *lease.Lease
}

// Family says where a lock comes from; the reports colour by it.
type Family string

const (
	Fencelock Family = "fencelock"
	Floor     Family = "floor" // hand-rolled on plain Redis commands
	Peer      Family = "peer"  // another lock library
)

// Info describes a lock.
type Info struct {
	Name   string
	Nodes  int // Redis servers it talks to
	Family Family
	Note   string // how it is set up
}

// Lock is one lock kind built on its clients.
type Lock struct {
	Info
	try   func(ctx context.Context, key string) (Hold, error)
	wait  func(ctx context.Context, key string) (Hold, error) // nil: no waiting acquire
	close func()                                              // nil: nothing to free
}

// Try makes one acquisition attempt; it fails when the lock is held.
func (l *Lock) Try(ctx context.Context, key string) (Hold, error) { return l.try(ctx, key) }

// Wait is the library's own waiting acquire, or ErrNoWait.
func (l *Lock) Wait(ctx context.Context, key string) (Hold, error) {
	if l.wait == nil {
		return nil, ErrNoWait
	}
	return l.wait(ctx, key)
}

// CanWait reports whether the lock has a waiting acquire of its own.
func (l *Lock) CanWait() bool { return l.wait != nil }

// Poll tries the lock every lo to hi (uniformly at random) until it gets
// it or ctx ends: a waiting acquire for locks that have none, or whose own
// gives up before ctx does.
func (l *Lock) Poll(ctx context.Context, key string, lo, hi time.Duration) (Hold, error) {
	for {
		h, err := l.try(ctx, key)
		if err == nil {
			return h, nil
		}
		if ctx.Err() != nil {
			return nil, errors.Join(fmt.Errorf("%s: lock not acquired", l.Name), ctx.Err(), err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(lo + rand.N(hi-lo+1)):
		}
	}
}

// Close frees what the lock holds beyond the clients it was given.
func (l *Lock) Close() {
	if l.close != nil {
		l.close()
	}
}

// Clients is what a lock is built on.
type Clients struct {
	Single    redis.UniversalClient   // the single-node server
	Many      []redis.UniversalClient // independent servers for the quorum locks
	SingleOpt redis.Options           // how Single is dialled, for locks with their own client
	Name      string                  // CLIENT SETNAME for clients a lock makes itself; "" for none
}

// Config tunes the locks. The zero value is the bench's perf setup.
type Config struct {
	// TTL is the lock's time to live. The default is DefaultTTL.
	// rueidislock keeps its own KeyValidity (5s).
	TTL time.Duration
	// NodeTimeout is fencelock redlock's per-node timeout; 0 keeps its
	// default.
	NodeTimeout time.Duration
	// QuorumFencing turns on fencelock redlock's quorum fencing.
	QuorumFencing bool
}

func (c Config) ttl() time.Duration {
	if c.TTL > 0 {
		return c.TTL
	}
	return DefaultTTL
}

// Names is every lock, in table order.
var Names = []string{"raw", "naive", "setnx-getset", "lease", "redlock-3", "redlock-5",
	"redsync-1", "redsync-5", "redislock", "rueidislock"}

// FamilyOf is the family of the lock called name, on any server.
func FamilyOf(name string) Family {
	name, _ = SplitServer(name)
	switch name {
	case "raw", "naive", "setnx-getset", "naive-sem":
		return Floor
	case "lease", "redlock-3", "redlock-5", "semaphore":
		return Fencelock
	}
	return Peer
}

// New builds the lock called name on c: its single server, or the first
// nodes of its many.
func New(name string, c Clients, cfg Config) (*Lock, error) {
	need := func(n int) ([]redis.UniversalClient, error) {
		if len(c.Many) < n {
			return nil, fmt.Errorf("%s needs %d independent Redis servers, have %d", name, n, len(c.Many))
		}
		return c.Many[:n], nil
	}
	ttl := cfg.ttl()
	var l *Lock
	var err error
	switch name {
	case "raw":
		l = rawLock(c.Single, ttl)
	case "naive":
		l = naiveLock(c.Single, ttl)
	case "setnx-getset":
		l = timestampLock(c.Single, ttl)
	case "lease":
		l, err = leaseLock(c.Single, ttl)
	case "redlock-3", "redlock-5", "redsync-5":
		var nodes []redis.UniversalClient
		if nodes, err = need(int(name[len(name)-1] - '0')); err != nil {
			return nil, err
		}
		if name == "redsync-5" {
			l = redsyncLock(nodes, ttl)
		} else {
			l, err = redlockLock(nodes, ttl, cfg)
		}
	case "redsync-1":
		l = redsyncLock([]redis.UniversalClient{c.Single}, ttl)
	case "redislock":
		l = redislockLock(c.Single, ttl)
	case "rueidislock":
		l, err = rueidislockLock(c.SingleOpt, c.Name)
	default:
		return nil, fmt.Errorf("unknown lock %q (known: %v)", name, Names)
	}
	if err != nil {
		return nil, err
	}
	l.Name, l.Family = name, FamilyOf(name)
	if !slices.Contains(Names, name) {
		panic("locks: " + name + " missing from Names")
	}
	return l, nil
}
