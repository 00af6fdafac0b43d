package lease_test

// The semaphore's properties with real separate processes (issue 32):
// never more than N holders, a paused holder's write refused once its
// permit passed on, the cost of a killed holder and of a killed waiter,
// FIFO. The children and their harness are in semaphore_child_test.go.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/internal/testenv/faults"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/verifier/redisverifier"
)

// TestSemaphoreProcessNeverMoreThanN: 8 processes take turns on a
// semaphore of 3 (ttl 500ms, each holding 5 to 80ms) for 9s while the test
// freezes random ones for random spells (50ms to 1.25s, so often past the
// ttl), freezes holders on purpose past their ttl, and kills two holders
// (each replaced by a new process). Each child writes down when it
// believed it held a permit: from Acquire's return to the earlier of its
// release and its lease's Deadline(), the lease's own bound of its
// validity (semaphore_beliefs_test.go). At no instant may more than 3 such
// beliefs overlap, nor two on one slot, and each slot's tokens grow in the
// order of its holders. (A freeze between Acquire's return and the child's
// clock read shortens the belief it writes down: it can hide an overlap,
// never make one up; the test logs how many beliefs began past their
// deadline.)
//
// The check can fail: children given 4 permits overlap 4 at once, and a
// belief not cut at the Deadline (a holder frozen past its ttl that goes
// on to its release) overlaps its slot's next holder; the test logs how
// many such overlaps that wrong bound would have counted.
func TestSemaphoreProcessNeverMoreThanN(t *testing.T) {
	r, _ := procRedis(t)
	const (
		permits  = 3
		children = 8
		ttl      = 500 * time.Millisecond
		run      = 9 * time.Second
	)
	n := name(t)
	dir := t.TempDir()
	until := time.Now().Add(run)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, seed))
	upTo := func(d time.Duration) time.Duration { return time.Duration(rnd.Int64N(int64(d))) }

	var files []string // every child's, in the order they started
	start := func() *semChild {
		f := filepath.Join(dir, fmt.Sprintf("child-%d", len(files)))
		files = append(files, f)
		return startSemChild(t, "semloop", r.Addr(), n, permits, ttl,
			semRecordEnv+"="+f, semUntilEnv+"="+strconv.FormatInt(until.UnixNano(), 10))
	}
	kids := make([]*semChild, children)
	kidFile := map[*semChild]string{}
	for i := range kids {
		kids[i] = start()
		kidFile[kids[i]] = files[len(files)-1]
	}
	// holding reports whether k's file ends with a belief that has not
	// ended: read while k is frozen, k holds a permit (as far as it knows).
	holding := func(k *semChild) bool {
		b, err := os.ReadFile(kidFile[k])
		if err != nil {
			return false
		}
		lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
		var last semRecord
		return json.Unmarshal(lines[len(lines)-1], &last) == nil && last.End == 0 && last.Seq != 0
	}
	// One freeze at a time per child: a freeze has an id, and only the
	// freeze that holds a child thaws it, so that no thaw cuts another's
	// short. A freeze may take a child over from another (steal): the
	// other's thaw then does nothing.
	var mu sync.Mutex
	frozen := map[*semChild]int{}
	freezes := 0
	freeze := func(k *semChild, steal bool) int {
		mu.Lock()
		defer mu.Unlock()
		if frozen[k] != 0 && !steal {
			return 0
		}
		freezes++
		frozen[k] = freezes
		return freezes
	}
	thaw := func(k *semChild, id int) {
		mu.Lock()
		defer mu.Unlock()
		if frozen[k] == id {
			k.signal(syscall.SIGCONT)
			delete(frozen, k)
		}
	}
	// findHolder freezes the children in turn until one holds, and
	// returns its index and the freeze that holds it, or -1 if none held.
	// With steal, it looks at the children another freeze holds too.
	findHolder := func(steal bool) (int, int) {
		for _, j := range rnd.Perm(len(kids)) {
			k := kids[j]
			id := freeze(k, steal)
			if id == 0 {
				continue
			}
			k.stop(t)
			if holding(k) {
				return j, id
			}
			thaw(k, id)
		}
		return -1, 0
	}

	var wg sync.WaitGroup
	stops, frozenHolders, kills := 0, 0, 0
	chaosEnd := until.Add(-1500 * time.Millisecond)
	for step := 0; time.Now().Before(chaosEnd); step++ {
		time.Sleep(80*time.Millisecond + upTo(170*time.Millisecond))
		switch {
		case (step >= 8 && kills == 0) || (step >= 25 && kills == 1):
			// A holder killed, frozen first so that it holds when killed
			// (none held: at a later step).
			if j, _ := findHolder(true); j >= 0 {
				kids[j].kill()
				kills++
				kids[j] = start()
				kidFile[kids[j]] = files[len(files)-1]
			}
		case step%5 == 0 && frozenHolders < 4:
			// On purpose: a holder frozen past its ttl, its slot passing
			// on meanwhile.
			if j, id := findHolder(false); j >= 0 {
				frozenHolders++
				k, d := kids[j], 2*ttl+upTo(ttl)
				wg.Go(func() {
					time.Sleep(d)
					thaw(k, id)
				})
			}
		default:
			k := kids[rnd.IntN(len(kids))]
			id := freeze(k, false)
			if id == 0 {
				continue
			}
			stops++
			k.signal(syscall.SIGSTOP)
			d := 50*time.Millisecond + upTo(1200*time.Millisecond)
			wg.Go(func() {
				time.Sleep(d)
				thaw(k, id)
			})
		}
	}
	wg.Wait()
	for _, k := range kids {
		k.signal(syscall.SIGCONT)
	}
	for _, k := range kids {
		k.waitExit(t, 30*time.Second)
	}
	for _, k := range kids {
		require.True(t, k.cmd.ProcessState.Success(), "child %d: %v", k.cmd.Process.Pid, k.cmd.ProcessState)
	}

	var bs []semBelief
	for i, f := range files {
		bs = append(bs, readBeliefs(t, i, f)...)
	}
	cut, unreleased, ended := 0, 0, 0
	for _, b := range bs {
		switch {
		case b.released == 0:
			unreleased++
		case b.released > b.deadline:
			cut++
		}
		if b.from >= b.deadline {
			ended++
		}
	}
	most, at := semMostAtOnce(bs, semBelief.to)
	overlaps := semSlotOverlaps(bs, semBelief.to)
	naiveOverlaps := semSlotOverlaps(bs, semBelief.naiveTo)
	t.Logf("%d permits taken by %d processes; %d random freezes, %d holders frozen past the ttl, %d kills; "+
		"%d beliefs cut by their deadline before their release, %d with no release (killed holding), %d that began past their deadline; "+
		"most at once: %d; beliefs bounded by the release alone (not the deadline) would overlap on a slot %d times",
		len(bs), len(files), stops, frozenHolders, kills, cut, unreleased, ended, most, len(naiveOverlaps))
	assert.LessOrEqual(t, most, permits, "more than %d children believed they held a permit at once: %v", permits, at)
	assert.Empty(t, overlaps, "two children believed they held one slot at once")
	assert.Equal(t, permits, most, "all %d permits held at once at some point", permits)
	assert.GreaterOrEqual(t, len(bs), 50, "few permits taken")
	assert.Positive(t, cut, "no holder was frozen past its deadline: the test froze none at the worst step")
	assert.Equal(t, kills, unreleased, "each kill found its child holding")
	assert.Equal(t, 2, kills)
	slots := map[int]bool{}
	for _, b := range bs {
		slots[b.slot] = true
	}
	assert.Len(t, slots, permits, "every slot used, none other: %v", slots)
}

// TestSemaphoreProcessPausedHolderRefused: holder A, a child, takes slot
// s (slot 1: this process holds slot 0), writes through a redisverifier
// (on a Redis of its own, the storage), checks Held(), and is frozen
// (SIGSTOP) before its next write, past its ttl. B, here, gets a permit:
// slot s, with a token of s above A's, and writes. A, thawed, writes with
// its old token: refused (verifier.ErrStale, B's Seq the highest), and
// the data is B's.
func TestSemaphoreProcessPausedHolderRefused(t *testing.T) {
	r, rdb := procRedis(t)
	store := testenv.NewRedis(t)
	srdb := store.Client()
	t.Cleanup(func() { srdb.Close() })
	v, err := redisverifier.New(srdb)
	require.NoError(t, err)
	c, err := lease.New(rdb)
	require.NoError(t, err)
	ctx := t.Context()
	n := name(t)
	sem, err := c.Semaphore(n, 2)
	require.NoError(t, err)
	other, err := sem.TryAcquire(ctx, time.Minute)
	require.NoError(t, err)
	require.Equal(t, lease.PermitName(n, 0), other.Name())

	const ttl = time.Second
	a := startSemChild(t, "semcmd", r.Addr(), n, 2, ttl, procWaitEnv+"=10s", semStoreEnv+"="+store.Addr())
	a.send(t, "acquire")
	got := a.next(t, "acquire", 20*time.Second)
	require.Empty(t, got.Err)
	require.True(t, got.Held)
	const s = 1
	require.Equal(t, s, got.Slot)
	require.Equal(t, lease.PermitName(n, s), got.Key)
	a.send(t, "write")
	w := a.next(t, "write", 10*time.Second)
	require.Empty(t, w.Err, "A's first write, its permit held")

	a.send(t, "stopwrite")
	stopping := a.next(t, "stopping", 10*time.Second)
	require.True(t, stopping.Held, "A checked its permit before the write it is paused in")
	// A stops itself: a SIGSTOP from here could land before its SIGCONT
	// handler is in place, and the SIGCONT that thaws it would be lost.
	require.True(t, faults.WaitStopped(ctx, a.cmd.Process.Pid, 5*time.Second), "A stopped")
	thawed := false
	defer func() {
		if !thawed {
			a.signal(syscall.SIGCONT)
		}
	}()

	bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b, err := sem.Acquire(bctx, time.Minute)
	require.NoError(t, err, "B gets a permit once A's ttl ran out")
	gotAt := time.Now()
	assert.Equal(t, lease.PermitName(n, s), b.Name(), "B got the slot A lost")
	assert.Equal(t, got.Key, b.Token().Key)
	assert.Greater(t, b.Token().Seq, got.Seq, "B's token of slot %d is above A's", s)
	assert.False(t, gotAt.Before(unixTime(got.Deadline)), "B got slot %d before A's lease ran out (%v early)", s, unixTime(got.Deadline).Sub(gotAt))
	require.NoError(t, v.Set(ctx, n, b.Token(), n+":data", b.Holder(), 0), "B's write")
	t.Logf("A (seq %d, ttl %v) frozen; B got slot %d (seq %d) %v after A's deadline", got.Seq, ttl, s, b.Token().Seq,
		gotAt.Sub(unixTime(got.Deadline)).Round(time.Millisecond))

	a.signal(syscall.SIGCONT)
	thawed = true
	w = a.next(t, "stopwrite", 10*time.Second)
	t.Logf("A thawed, wrote with seq %d: %q (Held() after: %v)", got.Seq, w.Err, w.Held)
	assert.NotEmpty(t, w.Err, "A's write with its old token was accepted after its slot passed on to B")
	assert.True(t, w.Stale, "A's write refused with verifier.ErrStale: %q", w.Err)
	assert.Equal(t, b.Token().Seq, w.Highest, "the highest accepted is B's")
	assert.False(t, w.Held, "A's lease is over once thawed")
	data, err := srdb.Get(ctx, n+":data").Result()
	require.NoError(t, err)
	assert.Equal(t, b.Holder(), data, "the data is B's")
	require.NoError(t, b.Release(ctx))
	require.NoError(t, other.Release(ctx))
}

// TestSemaphoreProcessKilledHolder: K, a child, holds slot 1 of 2 (this
// process holds slot 0) with a ttl of 1.5s, and W, another child, waits
// in the queue. K is killed (SIGKILL) as soon as W is queued: W gets
// slot 1 after the kill, not before K's lease ran out, and within
// the ttl of the kill (plus slack for a loaded machine).
func TestSemaphoreProcessKilledHolder(t *testing.T) {
	r, rdb := procRedis(t)
	c, err := lease.New(rdb)
	require.NoError(t, err)
	ctx := t.Context()
	n := name(t)
	sem, err := c.Semaphore(n, 2)
	require.NoError(t, err)
	other, err := sem.TryAcquire(ctx, time.Minute)
	require.NoError(t, err)

	const ttl = 1500 * time.Millisecond
	k := startSemChild(t, "semcmd", r.Addr(), n, 2, ttl, procWaitEnv+"=10s")
	w := startSemChild(t, "semcmd", r.Addr(), n, 2, time.Minute, procWaitEnv+"=30s")
	k.send(t, "acquire")
	kg := k.next(t, "acquire", 20*time.Second)
	require.Empty(t, kg.Err)
	require.Equal(t, 1, kg.Slot)
	w.send(t, "acquire")
	semWaitQueued(t, rdb, n, 1)
	killedAt := k.kill()
	k.waitExit(t, 10*time.Second)

	wg := w.next(t, "acquire", 20*time.Second)
	require.Empty(t, wg.Err, "W got no permit: the killed holder's slot stayed taken")
	took := unixTime(wg.At).Sub(killedAt)
	t.Logf("K held slot 1 (ttl %v) and was killed %v after its Acquire returned; W got slot %d %v after the kill, %v after K's deadline",
		ttl, killedAt.Sub(unixTime(kg.At)).Round(time.Millisecond), wg.Slot, took.Round(time.Millisecond),
		unixTime(wg.At).Sub(unixTime(kg.Deadline)).Round(time.Millisecond))
	assert.Equal(t, 1, wg.Slot, "W got the slot K held")
	assert.Greater(t, wg.Seq, kg.Seq)
	assert.Positive(t, took, "W got K's slot before K was killed")
	assert.False(t, unixTime(wg.At).Before(unixTime(kg.Deadline)), "W got K's slot before K's lease ran out")
	assert.Less(t, took, ttl+2*time.Second, "the killed holder's slot came free %v after the kill, its ttl %v", took, ttl)
	v, err := rdb.Get(ctx, semSlotKey(n, 1)).Result()
	require.NoError(t, err)
	assert.True(t, procHolderOf(v, wg.Holder), "Redis holds W's id on slot 1, has %q", v)
	w.send(t, "release")
	w.next(t, "release", 10*time.Second)
	require.NoError(t, other.Release(ctx))
}

// TestSemaphoreProcessKilledWaiter: N=1, held here by H; W1, a child that
// asks for 20s, queues first, and W2, here, second. W1 is killed while
// queued; H releases, which hands the slot to W1, dead, for the claim
// window only (min(ttl, 2s)); W2 gets it within that window, a poll
// (TicketTTL/3) and slack, not after W1's 20s.
func TestSemaphoreProcessKilledWaiter(t *testing.T) {
	r, rdb := procRedis(t)
	hc, err := lease.New(rdb)
	require.NoError(t, err)
	wc, err := lease.New(rdb)
	require.NoError(t, err)
	ctx := t.Context()
	n := name(t)
	hs, err := hc.Semaphore(n, 1)
	require.NoError(t, err)
	ws, err := wc.Semaphore(n, 1)
	require.NoError(t, err)
	h, err := hs.TryAcquire(ctx, time.Minute)
	require.NoError(t, err)

	w1 := startSemChild(t, "semcmd", r.Addr(), n, 1, 20*time.Second, procWaitEnv+"=1m")
	w1.send(t, "acquire")
	w1ID := semWaitQueued(t, rdb, n, 1)[0]
	type result struct {
		l   *lease.Lease
		err error
		at  time.Time
	}
	res := make(chan result, 1)
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	go func() {
		l, err := ws.Acquire(wctx, time.Minute)
		res <- result{l, err, time.Now()}
	}()
	q := semWaitQueued(t, rdb, n, 2)
	require.Equal(t, w1ID, q[0], "W1 at the head")

	w1.kill()
	w1.waitExit(t, 10*time.Second)
	_, err = rdb.ZScore(ctx, semQueueKey(n), w1ID).Result()
	require.NoError(t, err, "the killed W1 is still in the queue")

	require.NoError(t, h.Release(ctx))
	released := time.Now()
	v, err := rdb.Get(ctx, semSlotKey(n, 0)).Result()
	require.NoError(t, err)
	require.True(t, procHolderOf(v, w1ID), "the release handed the slot to the dead W1 (%s); Redis has %q", w1ID, v)
	pttl, err := rdb.PTTL(ctx, semSlotKey(n, 0)).Result()
	require.NoError(t, err)

	got := <-res
	require.NoError(t, got.err, "W2 got no permit: the dead W1's 20s stranded the slot")
	took := got.at.Sub(released)
	bound := min(20*time.Second, protocol.TicketTTL) + protocol.TicketTTL/3
	t.Logf("the slot handed to the dead W1 had ttl %v; W2 got it %v after the release (claim window + poll = %v)",
		pttl, took.Round(time.Millisecond), bound)
	assert.LessOrEqual(t, pttl, protocol.TicketTTL, "the slot handed to W1 has the claim window, not W1's 20s")
	assert.Less(t, took, bound+2*time.Second, "W2 waited for the slot the dead W1 stranded")
	assert.Greater(t, got.l.Token().Seq, handedSeq(t, v), "W2's token after the one handed to W1")
	v, err = rdb.Get(ctx, semSlotKey(n, 0)).Result()
	require.NoError(t, err)
	assert.True(t, procHolderOf(v, got.l.Holder()), "Redis holds W2's id, has %q", v)
	require.NoError(t, got.l.Release(ctx))
}

// TestSemaphoreProcessFIFO: N=2, both held here; 6 children queue one
// after another (each in the queue before the next starts); then one
// permit at a time comes free (this process's two, then each child's
// after it got its own): each goes to the head of the queue, so the
// children get permits in their queue order, and no child gets one out
// of turn.
func TestSemaphoreProcessFIFO(t *testing.T) {
	r, rdb := procRedis(t)
	c, err := lease.New(rdb)
	require.NoError(t, err)
	ctx := t.Context()
	n := name(t)
	sem, err := c.Semaphore(n, 2)
	require.NoError(t, err)
	var mine []*lease.Lease
	for range 2 {
		l, err := sem.TryAcquire(ctx, time.Minute)
		require.NoError(t, err)
		mine = append(mine, l)
	}

	const waiters = 6
	kids := make([]*semChild, waiters)
	ids := []string{}
	for i := range kids {
		kids[i] = startSemChild(t, "semcmd", r.Addr(), n, 2, time.Minute, procWaitEnv+"=1m")
		kids[i].send(t, "acquire")
		q := semWaitQueued(t, rdb, n, i+1)
		require.Equal(t, ids, q[:i], "the queue kept its order")
		ids = q
	}

	var order []int
	last := map[int]uint64{}
	for turn := range waiters {
		if turn < 2 {
			require.NoError(t, mine[turn].Release(ctx))
		} else {
			kids[turn-2].send(t, "release")
			kids[turn-2].next(t, "release", 10*time.Second)
		}
		// Exactly one permit is free: one child answers, and no other.
		who := -1
		require.Eventually(t, func() bool {
			for i, k := range kids {
				if len(k.reports) > 0 {
					who = i
					return true
				}
			}
			return false
		}, 20*time.Second, time.Millisecond, "turn %d: no child got the freed permit", turn)
		rep := kids[who].next(t, "acquire", time.Second)
		require.Empty(t, rep.Err)
		order = append(order, who)
		assert.Equal(t, ids[who], rep.Holder, "child %d's holder id is its place in the queue", who)
		assert.Greater(t, rep.Seq, last[rep.Slot], "slot %d's tokens grow", rep.Slot)
		last[rep.Slot] = rep.Seq
		time.Sleep(50 * time.Millisecond) // room for a second, wrong, answer
		for i, k := range kids {
			select {
			case extra := <-k.reports:
				t.Errorf("turn %d: child %d also answered, one permit free: %+v", turn, i, extra)
			default:
			}
		}
	}
	t.Logf("queue %v; permits went to children %v", ids, order)
	assert.Equal(t, []int{0, 1, 2, 3, 4, 5}, order, "the children got permits in their queue order")
	for _, k := range kids[waiters-2:] {
		k.send(t, "release")
		k.next(t, "release", 10*time.Second)
	}
}
