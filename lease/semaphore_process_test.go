package lease_test

// The semaphore with real separate processes: the test binary re-executed
// as a child (see semProcessChild), stopped (SIGSTOP) and killed (SIGKILL)
// at the worst steps, on a redis-server of the test's own.
//
// Two child modes. "semcmd" holds one Semaphore and obeys commands read
// from its stdin, one a line (acquire, release, write, stopwrite),
// answering each with one JSON line (semReport) on its stdout. "semloop"
// takes a permit, holds it a little, releases it, and again, until a
// given instant, and writes what it believed into a file of its own
// (semRecord lines), each line as soon as the belief starts or ends, so
// that a child killed while holding leaves its start behind.
//
// The keys are spelled out here (prefix "fencelock:"), as package lease
// documents them: PREFIX{NAME}#i is slot i's lock, PREFIX{NAME}#queue the
// queue.

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/protocol"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/internal/testenv/faults"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/redisverifier"
)

// The semaphore children's environment, besides process_test.go's
// procAddrEnv, procNameEnv, procTTLEnv and procWaitEnv.
const (
	semPermitsEnv = "FENCELOCK_TEST_PERMITS" // N
	semStoreEnv   = "FENCELOCK_TEST_STORE"   // semcmd: the verifier's Redis host:port
	semRecordEnv  = "FENCELOCK_TEST_RECORD"  // semloop: the file it records its beliefs in
	semUntilEnv   = "FENCELOCK_TEST_UNTIL"   // semloop: when to stop, unix ns
)

// semReport is a semcmd child's answer to one command.
type semReport struct {
	Op       string `json:"op"` // the command; "stopping" before a stopwrite's pause
	Err      string `json:"err,omitempty"`
	Slot     int    `json:"slot"`
	Key      string `json:"key,omitempty"` // the token's Key
	Seq      uint64 `json:"seq,omitempty"`
	Holder   string `json:"holder,omitempty"`
	Held     bool   `json:"held"`               // the lease's Held(), read first
	At       int64  `json:"at"`                 // unix ns, read right after the call returned
	Deadline int64  `json:"deadline,omitempty"` // the lease's Deadline(), unix ns
	Stale    bool   `json:"stale,omitempty"`    // a write refused with verifier.ErrStale
	Highest  uint64 `json:"highest,omitempty"`  // its StaleError's Highest
}

// semRecord is one line of a semloop child's file: a belief that starts
// (End 0: Acquire returned, at From) or ends (End: it stops using the
// permit and goes to release it).
type semRecord struct {
	Slot     int    `json:"slot"`
	Seq      uint64 `json:"seq"`
	From     int64  `json:"from,omitempty"`
	End      int64  `json:"end,omitempty"`
	Deadline int64  `json:"deadline"` // the lease's Deadline(), unix ns, read with From or End
}

// semProcessChild runs a semaphore child mode when procEnv names one (the
// test binary re-executed by startSemChild) and reports whether it did.
func semProcessChild(mode string) (int, bool) {
	var run func() error
	switch mode {
	case "semcmd":
		run = semCmdMain
	case "semloop":
		run = semLoopMain
	default:
		return 0, false
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2, true
	}
	return 0, true
}

// semChildSemaphore opens the child's own go-redis client, lease.Client and
// Semaphore from the environment.
func semChildSemaphore() (*redis.Client, *lease.Semaphore, time.Duration, error) {
	ttl, err1 := time.ParseDuration(os.Getenv(procTTLEnv))
	permits, err2 := strconv.Atoi(os.Getenv(semPermitsEnv))
	if err := errors.Join(err1, err2); err != nil {
		return nil, nil, 0, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(procAddrEnv), ContextTimeoutEnabled: true})
	c, err := lease.New(rdb)
	if err != nil {
		rdb.Close()
		return nil, nil, 0, err
	}
	s, err := c.Semaphore(os.Getenv(procNameEnv), permits)
	if err != nil {
		rdb.Close()
		return nil, nil, 0, err
	}
	return rdb, s, ttl, nil
}

// semCmdMain obeys the commands on stdin until it closes:
//
//	acquire    Acquire(ctx, ttl), ctx ending after procWaitEnv
//	release    Release the lease
//	write      write through the redisverifier with the lease's token: SET
//	           NAME:data to the holder id, resource NAME
//	stopwrite  read Held(), answer "stopping", stop itself (SIGSTOP) until
//	           SIGCONT, then write as above: a holder paused between its
//	           check and its write, as by a GC pause or a page fault
func semCmdMain() error {
	rdb, s, ttl, err := semChildSemaphore()
	if err != nil {
		return err
	}
	defer rdb.Close()
	wait, err := time.ParseDuration(os.Getenv(procWaitEnv))
	if err != nil {
		return err
	}
	var v *redisverifier.Verifier
	if addr := os.Getenv(semStoreEnv); addr != "" {
		store := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer store.Close()
		if v, err = redisverifier.New(store); err != nil {
			return err
		}
	}
	write := func(l *lease.Lease) error {
		if v == nil || l == nil {
			return errors.New("no verifier or no lease")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return v.Set(ctx, s.Name(), l.Token(), s.Name()+":data", l.Holder(), 0)
	}
	out := json.NewEncoder(os.Stdout)
	var l *lease.Lease
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		var err error
		rep := semReport{Op: sc.Text()}
		switch rep.Op {
		case "acquire":
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			l, err = s.Acquire(ctx, ttl)
			cancel()
		case "release":
			if l == nil {
				return errors.New("release: no lease")
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err = l.Release(ctx)
			cancel()
		case "write":
			err = write(l)
		case "stopwrite":
			if err := out.Encode(semReport{Op: "stopping", Held: l.Held(), At: time.Now().UnixNano()}); err != nil {
				return err
			}
			faults.StopSelf()
			err = write(l)
		default:
			return fmt.Errorf("unknown command %q", rep.Op)
		}
		rep.At = time.Now().UnixNano()
		if err != nil {
			rep.Err = err.Error()
			var se *verifier.StaleError
			if errors.As(err, &se) {
				rep.Stale, rep.Highest = errors.Is(err, verifier.ErrStale), se.Highest
			}
		}
		if l != nil {
			rep.Held = l.Held()
			rep.Key, rep.Seq, rep.Holder = l.Token().Key, l.Token().Seq, l.Holder()
			rep.Deadline = l.Deadline().UnixNano()
			_, rep.Slot, _ = lease.ParsePermitName(l.Name())
		}
		if err := out.Encode(rep); err != nil {
			return err
		}
	}
	return sc.Err()
}

// semLoopMain takes a permit, holds it 5 to 80ms, releases it, waits up to
// 20ms, and again, until semUntilEnv; it records each belief in its file
// (semRecord), each line written at once, with one write(2).
func semLoopMain() error {
	rdb, s, ttl, err := semChildSemaphore()
	if err != nil {
		return err
	}
	defer rdb.Close()
	until, err := strconv.ParseInt(os.Getenv(semUntilEnv), 10, 64)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(os.Getenv(semRecordEnv), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	record := func(r semRecord) error {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		_, err = f.Write(append(b, '\n'))
		return err
	}
	ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, until))
	defer cancel()
	for ctx.Err() == nil {
		l, err := s.Acquire(ctx, ttl)
		from := time.Now()
		if err != nil {
			if ctx.Err() == nil {
				fmt.Fprintln(os.Stderr, "acquire:", err)
				time.Sleep(10 * time.Millisecond)
			}
			continue
		}
		_, slot, _ := lease.ParsePermitName(l.Name())
		r := semRecord{Slot: slot, Seq: l.Token().Seq, From: from.UnixNano(), Deadline: l.Deadline().UnixNano()}
		if err := record(r); err != nil {
			return err
		}
		time.Sleep(5*time.Millisecond + rand.N(75*time.Millisecond))
		r.From, r.End, r.Deadline = 0, time.Now().UnixNano(), l.Deadline().UnixNano()
		if err := record(r); err != nil {
			return err
		}
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
		l.Release(rctx) // ErrLost after a pause past the ttl: nothing to do
		rcancel()
		time.Sleep(rand.N(20 * time.Millisecond))
	}
	return nil
}

// semChild is a running semaphore child.
type semChild struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	reports chan semReport
	exited  chan struct{} // closed once it was reaped
	mu      sync.Mutex    // guards stderr, dead
	stderr  bytes.Buffer
	dead    bool // killed: signal it no more (its pid may be reused once reaped)
}

func (c *semChild) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stderr.Write(p)
}

// startSemChild starts the test binary in child mode on semaphore n of
// permits on the Redis at addr, with env added (KEY=value).
func startSemChild(t *testing.T, mode, addr, n string, permits int, ttl time.Duration, env ...string) *semChild {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	c := &semChild{reports: make(chan semReport, 16), exited: make(chan struct{})}
	c.cmd = exec.Command(exe, "-test.run=^$")
	c.cmd.Env = append(append(os.Environ(),
		procEnv+"="+mode, procAddrEnv+"="+addr, procNameEnv+"="+n,
		semPermitsEnv+"="+strconv.Itoa(permits), procTTLEnv+"="+ttl.String()), env...)
	c.cmd.Stderr = c
	c.in, err = c.cmd.StdinPipe()
	require.NoError(t, err)
	out, err := c.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, c.cmd.Start())
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var rep semReport
			if err := json.Unmarshal(sc.Bytes(), &rep); err != nil {
				c.Write([]byte("stdout: " + sc.Text() + "\n"))
				continue
			}
			c.reports <- rep
		}
		c.cmd.Wait()
		close(c.exited)
	}()
	t.Cleanup(func() {
		c.kill()
		<-c.exited
		c.mu.Lock()
		defer c.mu.Unlock()
		if s := c.stderr.String(); s != "" {
			t.Logf("child %d (%s) stderr:\n%s", c.cmd.Process.Pid, mode, s)
		}
	})
	return c
}

// send writes one command to the child's stdin.
func (c *semChild) send(t *testing.T, cmd string) {
	t.Helper()
	_, err := io.WriteString(c.in, cmd+"\n")
	require.NoError(t, err, "command %q", cmd)
}

// next waits for the child's next answer, which must be to op.
func (c *semChild) next(t *testing.T, op string, timeout time.Duration) semReport {
	t.Helper()
	select {
	case rep := <-c.reports:
		require.Equal(t, op, rep.Op, "the child answered %+v", rep)
		return rep
	case <-c.exited:
		t.Fatalf("child exited (%v) before answering %q", c.cmd.ProcessState, op)
	case <-time.After(timeout):
		t.Fatalf("no answer to %q within %v", op, timeout)
	}
	panic("unreachable")
}

// signal sends sig unless the child was killed.
func (c *semChild) signal(sig syscall.Signal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dead {
		c.cmd.Process.Signal(sig)
	}
}

// kill sends SIGKILL (once) and returns the instant it was sent.
func (c *semChild) kill() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dead {
		c.dead = true
		c.cmd.Process.Kill()
	}
	return time.Now()
}

// stop freezes the child and waits until it is frozen.
func (c *semChild) stop(t *testing.T) {
	t.Helper()
	c.signal(syscall.SIGSTOP)
	require.True(t, faults.WaitStopped(t.Context(), c.cmd.Process.Pid, 5*time.Second), "child %d stopped", c.cmd.Process.Pid)
}

func (c *semChild) waitExit(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-c.exited:
	case <-time.After(timeout):
		t.Fatalf("child %d did not exit within %v", c.cmd.Process.Pid, timeout)
	}
}

func semSlotKey(n string, slot int) string { return "fencelock:{" + n + "}#" + strconv.Itoa(slot) }
func semQueueKey(n string) string          { return "fencelock:{" + n + "}#queue" }

// semWaitQueued waits until the semaphore's queue holds want waiters and
// returns them, head first.
func semWaitQueued(t *testing.T, rdb redis.UniversalClient, n string, want int) []string {
	t.Helper()
	var q []string
	require.Eventually(t, func() bool {
		var err error
		q, err = rdb.ZRange(t.Context(), semQueueKey(n), 0, -1).Result()
		return err == nil && len(q) == want
	}, 20*time.Second, 2*time.Millisecond, "%d waiters in %s", want, semQueueKey(n))
	return q
}

func unixTime(ns int64) time.Time { return time.Unix(0, ns) }

// TestSemaphoreProcessNeverMoreThanN: 8 processes take turns on a
// semaphore of 3 (ttl 500ms, each holding 5 to 80ms) for 9s while the test
// freezes random ones for random spells (50ms to 1.25s, so often past the
// ttl), freezes holders on purpose past their ttl, and kills two (each
// replaced by a new process). Each child writes down when it believed it
// held a permit: from Acquire's return to the earlier of its release and
// its lease's Deadline(), the lease's own bound of its validity. At no
// instant may more than 3 such beliefs overlap, nor two on one slot, and
// each slot's tokens grow in the order of its holders.
//
// The check can fail: children given 4 permits overlap 4 at once, and a
// belief not cut at the Deadline (a holder frozen past its ttl that goes
// on to its release) overlaps its slot's next holder; the test logs how
// many such overlaps that wrong bound would have counted.
func TestSemaphoreProcessNeverMoreThanN(t *testing.T) {
	r, rdb := procRedis(t)
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
	// One freeze at a time per child, so that no thaw cuts another's
	// freeze short.
	var mu sync.Mutex
	frozen := map[*semChild]bool{}
	freeze := func(k *semChild) bool {
		mu.Lock()
		defer mu.Unlock()
		if frozen[k] {
			return false
		}
		frozen[k] = true
		return true
	}
	thaw := func(k *semChild) {
		mu.Lock()
		defer mu.Unlock()
		k.signal(syscall.SIGCONT)
		delete(frozen, k)
	}

	// findHolder freezes the children in turn until one holds and returns
	// its index, frozen, or -1 if none held. With anyFrozen, it looks at
	// the children another freeze holds too (and leaves them frozen).
	findHolder := func(anyFrozen bool) int {
		for _, j := range rnd.Perm(len(kids)) {
			k := kids[j]
			if !freeze(k) {
				if !anyFrozen {
					continue
				}
				k.stop(t) // its SIGSTOP may not have landed yet
				if holding(k) {
					return j
				}
				continue
			}
			k.stop(t)
			if holding(k) {
				return j
			}
			thaw(k)
		}
		return -1
	}

	var wg sync.WaitGroup
	stops, frozenHolders, kills := 0, 0, 0
	chaosEnd := until.Add(-1500 * time.Millisecond)
	for step := 0; time.Now().Before(chaosEnd); step++ {
		time.Sleep(80*time.Millisecond + upTo(170*time.Millisecond))
		i := rnd.IntN(len(kids))
		switch {
		case (step >= 8 && kills == 0) || (step >= 25 && kills == 1):
			// A holder killed, frozen first so that it holds when killed
			// (none held: at a later step).
			if j := findHolder(true); j >= 0 {
				kids[j].kill()
				kills++
				kids[j] = start()
				kidFile[kids[j]] = files[len(files)-1]
			}
		case step%5 == 0 && frozenHolders < 4:
			// On purpose: a holder frozen past its ttl, its slot passing
			// on meanwhile.
			if j := findHolder(false); j >= 0 {
				frozenHolders++
				k, d := kids[j], 2*ttl+upTo(ttl)
				wg.Go(func() {
					time.Sleep(d)
					thaw(k)
				})
			}
		default:
			k := kids[i]
			if !freeze(k) {
				continue
			}
			stops++
			k.signal(syscall.SIGSTOP)
			d := 50*time.Millisecond + upTo(1200*time.Millisecond)
			wg.Go(func() {
				time.Sleep(d)
				thaw(k)
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
	info, err := rdb.ZCard(t.Context(), semQueueKey(n)).Result()
	require.NoError(t, err)
	t.Logf("waiters left in the queue (dead or stopped, until their tickets expire): %d", info)
}

// semBelief is one holding of a permit by a semloop child, as it believed.
type semBelief struct {
	child    int
	slot     int
	seq      uint64
	from     int64 // Acquire returned (unix ns)
	released int64 // it stopped using it to release it; 0 if it was killed holding
	deadline int64 // its lease's Deadline()
}

// to is when the belief ended: its release, or its lease's deadline if
// that came first (or the child was killed holding).
func (b semBelief) to() int64 {
	if b.released == 0 {
		return b.deadline
	}
	return min(b.released, b.deadline)
}

// naiveTo is the wrong bound, for the figure: the release alone, as a
// holder that never looks at its lease's validity believes.
func (b semBelief) naiveTo() int64 {
	if b.released == 0 {
		return b.deadline
	}
	return b.released
}

func (b semBelief) String() string {
	return fmt.Sprintf("child %d slot %d seq %d [%s, %s] (deadline %s, released %s)", b.child, b.slot, b.seq,
		unixTime(b.from).Format("15:04:05.000000"), unixTime(b.to()).Format("15:04:05.000000"),
		unixTime(b.deadline).Format("15:04:05.000000"), unixTime(b.released).Format("15:04:05.000000"))
}

// readBeliefs reads a semloop child's file: each start line followed by
// its end line, but for a last start with no end (killed while holding).
func readBeliefs(t *testing.T, child int, file string) []semBelief {
	t.Helper()
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil // killed before it first held
	}
	require.NoError(t, err)
	var bs []semBelief
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	open := false
	for i, line := range lines {
		if line == "" {
			continue
		}
		var r semRecord
		require.NoError(t, json.Unmarshal([]byte(line), &r), "%s line %d: %q", file, i+1, line)
		if r.End == 0 {
			require.False(t, open, "%s line %d: a start after a start", file, i+1)
			bs = append(bs, semBelief{child: child, slot: r.Slot, seq: r.Seq, from: r.From, deadline: r.Deadline})
			open = true
			continue
		}
		require.True(t, open, "%s line %d: an end with no start", file, i+1)
		last := &bs[len(bs)-1]
		require.True(t, last.slot == r.Slot && last.seq == r.Seq, "%s line %d: the end of another permit than %d/%d", file, i+1, last.slot, last.seq)
		last.released, last.deadline, open = r.End, max(last.deadline, r.Deadline), false
	}
	return bs
}

// semMostAtOnce returns the most beliefs that overlapped at one instant
// (an interval [from, to), empty when to <= from) and those beliefs.
func semMostAtOnce(bs []semBelief, to func(semBelief) int64) (int, []semBelief) {
	type event struct {
		at int64
		up bool
		i  int
	}
	var evs []event
	for i, b := range bs {
		if to(b) > b.from {
			evs = append(evs, event{b.from, true, i}, event{to(b), false, i})
		}
	}
	slices.SortFunc(evs, func(a, b event) int {
		if a.at != b.at {
			return cmp.Compare(a.at, b.at)
		}
		switch { // an end at the instant another begins: no overlap
		case a.up == b.up:
			return 0
		case a.up:
			return 1
		default:
			return -1
		}
	})
	alive := map[int]bool{}
	most, at := 0, []semBelief(nil)
	for _, e := range evs {
		if !e.up {
			delete(alive, e.i)
			continue
		}
		alive[e.i] = true
		if len(alive) > most {
			most, at = len(alive), nil
			for i := range alive {
				at = append(at, bs[i])
			}
		}
	}
	return most, at
}

// semSlotOverlaps returns, for each slot, the beliefs that began before
// the slot's previous belief ended, or with a token not above its.
func semSlotOverlaps(bs []semBelief, to func(semBelief) int64) []string {
	bySlot := map[int][]semBelief{}
	for _, b := range bs {
		if to(b) > b.from {
			bySlot[b.slot] = append(bySlot[b.slot], b)
		}
	}
	var bad []string
	for _, s := range bySlot {
		slices.SortFunc(s, func(a, b semBelief) int { return cmp.Compare(a.from, b.from) })
		for i := 1; i < len(s); i++ {
			if s[i].from < to(s[i-1]) || s[i].seq <= s[i-1].seq {
				bad = append(bad, fmt.Sprintf("%v then %v", s[i-1], s[i]))
			}
		}
	}
	return bad
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
