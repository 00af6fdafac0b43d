package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/family"
	"github.com/fencelock/fencelock/internal/holderid"
	"github.com/fencelock/fencelock/internal/lifetime"
	"github.com/fencelock/fencelock/internal/notify"
	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/observe"
)

// single is the strategy of a client on one Redis deployment.
type single struct {
	rdb    redis.UniversalClient
	cfg    *family.Config
	notify *notify.Notifier
	probe  *family.Prober // tells a server that refuses connections from a slow one
	// tr batches the concurrent tries and cleanups of the client's
	// callers into pipelines, and says what each sent.
	tr *family.Transport
}

func newSingle(rdb redis.UniversalClient, cfg *family.Config) *single {
	return &single{rdb: rdb, cfg: cfg, notify: notify.New(rdb), probe: family.NewProber(rdb), tr: family.NewTransport(rdb, true)}
}

// Close stops the transport's senders.
func (s *single) Close(ctx context.Context) error { return s.tr.Close(ctx) }

func (s *single) Kind() observe.Kind { return observe.KindLease }

// release is how holder lets go of a lock of this client.
func (s *single) release(holder string) protocol.Release {
	return protocol.Release{Holder: holder, Fair: s.cfg.Single.Fair, Counter: s.cfg.Counter(), PubSub: s.notify.PubSub()}
}

func (s *single) Inspect(ctx context.Context, name string) (family.State, error) {
	st, err := protocol.Inspect(ctx, s.rdb, s.cfg.Keys(name))
	return family.State{Holder: st.Holder, Seq: st.Seq, TTL: st.PTTL, LastSeq: st.LastSeq, Queued: st.Queued, Head: st.Head}, err
}

func (s *single) Advance(ctx context.Context, name string, floor uint64) (uint64, error) {
	return protocol.Advance(ctx, s.rdb, s.cfg.Keys(name), floor, s.cfg.Counter())
}

// Begin starts an acquisition: one holder id for all its tries, the fair
// queue's identity of the waiter.
func (s *single) Begin(r family.Request) family.Attempt {
	holder := r.Holder
	if holder == "" {
		holder = holderid.New()
	}
	return &singleAttempt{s: s, r: r, keys: s.cfg.Keys(r.Name),
		try: protocol.Try{Holder: holder, TTL: r.TTL, Counter: s.cfg.Counter(), Fair: s.cfg.Single.Fair}}
}

// singleAttempt is one acquisition on one Redis.
type singleAttempt struct {
	s     *single
	r     family.Request
	keys  protocol.Keys
	try   protocol.Try
	tries recent
}

// reacquire: WithHolder, so the holder may have had the lock before.
func (a *singleAttempt) reacquire() bool { return a.r.Holder != "" }

func (a *singleAttempt) grant(seq uint64, start time.Time) *family.Grant {
	tok := fence.Token{Key: a.r.Name, Seq: seq, Holder: a.try.Holder}
	return &family.Grant{Token: tok, Start: start, Backend: &singleLease{s: a.s, keys: a.keys, tok: tok}}
}

func (a *singleAttempt) Try(ctx context.Context) (*family.Grant, family.Miss, error) {
	if a.try.Fair && a.r.Waiting {
		a.try.Attempt = protocol.NewAttempt() // queues the waiter
	}
	start := time.Now()
	a.tries.add(a.try.Attempt, start)
	res, sent, err := a.acquire(ctx)
	if err != nil {
		// A call that may have run may have taken the lock; a.acquire
		// already released what it knows it took (a failed WAIT).
		if sent == family.MayHaveRun && !errors.Is(err, errReleased) {
			a.undo(ctx, protocol.TryResult{})
		}
		if lifetime.Ended(ctx) != nil {
			return nil, family.Miss{}, err
		}
		return nil, family.Miss{Unavailable: true}, fmt.Errorf("lease: acquire %q: %w", a.r.Name, err)
	}
	if !res.Got() {
		m := family.Miss{Remaining: res.PTTL, Queued: res.Outcome == protocol.Reserved}
		if a.try.Fair && a.r.Waiting {
			// Queued: a release hands the lock over and says so; the
			// next try, at most a third of the ticket's life away,
			// renews the ticket and finds a lost message.
			m.Poll = family.Jitter(min(a.s.cfg.MaxBackoff, protocol.TicketTTL/3))
		}
		return nil, m, nil
	}
	if lifetime.Ended(ctx) != nil {
		// A client that does not honour deadlines let the reply in after
		// ctx ended: the caller has gone, so the lock must not stay taken.
		a.undo(ctx, res)
		return nil, family.Miss{}, nil
	}
	return a.grant(res.Seq, start), family.Miss{}, nil
}

// acquire runs the acquire script, followed by WAIT when replica
// acknowledgement is on, and says whether it may have run.
func (a *singleAttempt) acquire(ctx context.Context) (protocol.TryResult, family.Sent, error) {
	s := a.s
	if s.cfg.Single.Replicas == 0 {
		return family.Watch(ctx, s.probe, 0, func(ctx context.Context) (protocol.TryResult, family.Sent, error) {
			return family.Send(ctx, s.tr, func(ctx context.Context, c family.Conn) (protocol.TryResult, error) {
				return protocol.Acquire(ctx, c, a.keys, a.try)
			})
		})
	}
	var node protocol.Pipeliner = s.rdb
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		// WAIT has no key: send it down the connection of the lock's master.
		n, err := cc.MasterForKey(ctx, a.keys.Lock)
		if err != nil {
			return protocol.TryResult{}, family.NotSent, err
		}
		node = n
	}
	var acked int64
	// Not batched: WAIT must follow the script down its own connection.
	res, sent, err := family.Watch(ctx, s.probe, 0, family.Plain(func(ctx context.Context) (r protocol.TryResult, err error) {
		r, acked, err = protocol.AcquireAcked(ctx, node, a.keys, a.try, s.cfg.Single.Replicas, s.cfg.Single.AckTimeout)
		return r, err
	}))
	if err != nil && res.Got() { // the script took the lock, WAIT failed
		return protocol.TryResult{}, family.Ran, joinErr(err, errReleased, a.undo(ctx, res))
	}
	if err != nil || !res.Got() || acked >= int64(s.cfg.Single.Replicas) {
		return res, sent, err
	}
	relErr := a.undo(ctx, res)
	return protocol.TryResult{}, family.Ran, joinErr(&notReplicatedError{
		name: a.r.Name, seq: res.Seq, acked: acked, want: s.cfg.Single.Replicas, timeout: s.cfg.Single.AckTimeout,
	}, errReleased, relErr)
}

// errReleased marks an acquire error after which the lock was already
// released, so Try does not release it again.
var errReleased = errors.New("the lock was released again")

// notReplicatedError wraps ErrNotReplicated with the figures.
type notReplicatedError struct {
	name    string
	seq     uint64
	acked   int64
	want    int
	timeout time.Duration
}

func (e *notReplicatedError) Error() string {
	return fmt.Sprintf("%v: %q seq %d: %d of %d replicas acknowledged within %v; released",
		ErrNotReplicated, e.name, e.seq, e.acked, e.want, e.timeout)
}

func (e *notReplicatedError) Unwrap() error { return ErrNotReplicated }

// undo releases what a failed try may have taken: it drops the waiter's
// ticket and deletes (or hands on) the lock if the try took it. res is the
// try's result, the zero one when its reply was lost. A re-acquire releases
// only a lock it took afresh: its holder may have had the lock before and
// still count on it. Each attempt is bounded by releaseTimeout and failed
// ones are retried for as long as the ttl (1s to 30s), because a paused
// server runs the lost acquire only when it resumes; a server that refuses
// connections holds nothing to undo now, so the retries stop. When ctx
// ends first it goes on in the background, and Close waits for it.
func (a *singleAttempt) undo(ctx context.Context, res protocol.TryResult) error {
	passOn := !a.reacquire() || res.Outcome == protocol.Acquired
	if !passOn && !a.try.Fair {
		return nil // nothing to undo: no ticket, and the lock is not ours to give up
	}
	return a.leave(ctx, passOn, res == protocol.TryResult{})
}

// leave takes the waiter out of the queue and, if passOn, lets go of the
// lock under its holder id, in the background once ctx ends. After a lost
// reply (lost), a leave that found nothing to release is made once more,
// in the background, family.LostCallLag later: the lost call may reach the server
// behind the first leave, which went out on another connection.
func (a *singleAttempt) leave(ctx context.Context, passOn, lost bool) error {
	s := a.s
	leave := func(ctx context.Context, c family.Conn) (bool, error) {
		return protocol.Leave(ctx, c, a.keys, s.release(a.try.Holder), passOn)
	}
	return a.r.Pending.Detach(ctx, releaseTimeout, lifetime.CleanupBound(a.r.TTL), func(ctx context.Context) error {
		released, sent, err := family.Send(ctx, s.tr, func(ctx context.Context, c family.Conn) (bool, error) {
			if err := s.tr.Settle(ctx); err != nil {
				return false, err // not sent: the next attempt settles again
			}
			return leave(ctx, c)
		})
		if err == nil && !released && lost {
			lost = false
			a.r.Pending.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), family.LostCallLag+releaseTimeout)
				defer cancel()
				if family.Sleep(ctx, family.LostCallLag) == nil {
					_, _, _ = family.Send(ctx, s.tr, leave)
				}
			})
		}
		if err != nil && sent != family.Ran && s.probe.Unreachable(ctx) {
			return nil // the server is down: nothing to undo until it is back, and then the ttl does
		}
		return err
	})
}

// Abandon takes a fair waiter that gives up out of the queue and, if the
// lock was handed to it meanwhile, passes the lock on (not a re-acquire's:
// the lock under that holder id may be one it had before).
func (a *singleAttempt) Abandon(ctx context.Context) {
	if a.try.Fair {
		_ = a.leave(ctx, !a.reacquire(), false)
	}
}

// releaseTimeout bounds one attempt of a background cleanup.
const releaseTimeout = time.Second

// singleLease is the single-Redis side of a lease's lifetime.
type singleLease struct {
	s    *single
	keys protocol.Keys
	tok  fence.Token // Key and Holder; Seq is the lifetime's
}

func (b *singleLease) Refresh(ctx context.Context, tok fence.Token, ttl time.Duration) error {
	ok, _, err := family.Send(ctx, b.s.tr, func(ctx context.Context, c family.Conn) (bool, error) {
		return protocol.Refresh(ctx, c, b.keys, tok.Holder, tok.Seq, ttl)
	})
	if err != nil {
		return fmt.Errorf("lease: refresh %q: %w", b.tok.Key, err)
	}
	if !ok {
		return fmt.Errorf("%w: %q is no longer held by %s with Seq %d", ErrLost, tok.Key, tok.Holder, tok.Seq)
	}
	return nil
}

func (b *singleLease) Release(ctx context.Context) error {
	ok, _, err := family.Send(ctx, b.s.tr, func(ctx context.Context, c family.Conn) (bool, error) {
		return protocol.Unlock(ctx, c, b.keys, b.s.release(b.tok.Holder))
	})
	if err != nil {
		return fmt.Errorf("lease: release %q: %w", b.tok.Key, err)
	}
	if !ok {
		return fmt.Errorf("%w: %q was no longer held by %s at release", ErrLost, b.tok.Key, b.tok.Holder)
	}
	return nil
}

func (b *singleLease) Reissue(ctx context.Context, floor uint64) (uint64, error) {
	seq, err := protocol.Reissue(ctx, b.s.rdb, b.keys, b.tok.Holder, floor, b.s.cfg.Counter())
	if err != nil {
		return 0, fmt.Errorf("lease: reissue %q: %w", b.tok.Key, err)
	}
	if seq == 0 {
		return 0, fmt.Errorf("%w: %q is no longer held by %s", ErrLost, b.tok.Key, b.tok.Holder)
	}
	return seq, nil
}
