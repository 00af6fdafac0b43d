package election_test

// Candidates in separate processes (the test binary re-executed in a child
// mode, see child), paused with SIGSTOP, killed with SIGKILL, resigning and
// campaigning in a loop, with a parent that observes and a verifier that
// keeps the writes.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/election"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/redisverifier"
)

// The child's environment.
const (
	childEnv = "ELECTION_TEST_CHILD" // "candidate"
	addrEnv  = "ELECTION_TEST_ADDR"  // Redis host:port
	nameEnv  = "ELECTION_TEST_NAME"  // the election
	ttlEnv   = "ELECTION_TEST_TTL"   // the leader's ttl
	holdEnv  = "ELECTION_TEST_HOLD"  // how long to lead before resigning; 0: until lost
	forEnv   = "ELECTION_TEST_FOR"   // how long to run
)

// writeEvery is how often a child leader writes through the verifier.
const writeEvery = 20 * time.Millisecond

// event is one JSON line a child prints.
type event struct {
	Ev       string `json:"ev"` // won, write, lost, resigned
	Seq      uint64 `json:"seq"`
	Holder   string `json:"holder"`
	At       int64  `json:"at"`       // wall clock, unix ns (one machine: comparable)
	Deadline int64  `json:"deadline"` // the term's local deadline then, unix ns
	OK       bool   `json:"ok"`       // write: accepted
	Stale    bool   `json:"stale"`    // write: refused as stale
	Err      string `json:"err,omitempty"`
}

func child() (int, bool) {
	if os.Getenv(childEnv) != "candidate" {
		return 0, false
	}
	if err := candidate(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2, true
	}
	return 0, true
}

// candidate campaigns, leads (writing its term to the verifier every
// writeEvery, checking its term only after each write, as a leader that
// does not look before it writes), resigns after HOLD, and again, for FOR.
func candidate() error {
	ttl, err1 := time.ParseDuration(os.Getenv(ttlEnv))
	hold, err2 := time.ParseDuration(os.Getenv(holdEnv))
	runFor, err3 := time.ParseDuration(os.Getenv(forEnv))
	if err := errors.Join(err1, err2, err3); err != nil {
		return err
	}
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(addrEnv), MaxRetries: -1})
	defer rdb.Close()
	c, err := lease.New(rdb)
	if err != nil {
		return err
	}
	e, err := election.New(c, os.Getenv(nameEnv), ttl)
	if err != nil {
		return err
	}
	v, err := redisverifier.New(rdb)
	if err != nil {
		return err
	}
	out := json.NewEncoder(os.Stdout)
	emit := func(ev string, term *election.Term, werr error) {
		tok := term.Token()
		e := event{Ev: ev, Seq: tok.Seq, Holder: tok.Holder, At: time.Now().UnixNano(),
			Deadline: term.Deadline().UnixNano(), OK: ev == "write" && werr == nil,
			Stale: errors.Is(werr, verifier.ErrStale)}
		if werr != nil {
			e.Err = werr.Error()
		}
		out.Encode(e)
	}
	ctx, cancel := context.WithTimeout(context.Background(), runFor)
	defer cancel()
	// Campaigns run under a longer context: one that ends just as it wins
	// leaves a term no one led (see Observe), which TestResignCampaignLoop
	// would count.
	campaignCtx, cancelCampaign := context.WithTimeout(context.Background(), runFor+10*time.Second)
	defer cancelCampaign()
	for ctx.Err() == nil {
		term, err := e.Campaign(campaignCtx)
		if err != nil {
			break
		}
		emit("won", term, nil)
		won := time.Now()
		for {
			time.Sleep(writeEvery)
			tok := term.Token()
			emit("write", term, v.Set(context.Background(), "data", tok, "data:"+e.Name(), tok.Seq, 0))
			if term.Err() != nil {
				emit("lost", term, term.Err())
				break
			}
			if hold > 0 && time.Since(won) > hold || ctx.Err() != nil {
				emit("resigned", term, term.Resign(context.Background()))
				break
			}
		}
	}
	return nil
}

// proc is one candidate process and the events it printed.
type proc struct {
	cmd    *exec.Cmd
	events chan event
	mu     sync.Mutex
	all    []event
	stderr strings.Builder
}

func startCandidate(t *testing.T, addr, name string, ttl, hold, runFor time.Duration) *proc {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	p := &proc{events: make(chan event, 1024)}
	p.cmd = exec.Command(exe, "-test.run=^$")
	p.cmd.Env = append(os.Environ(), childEnv+"=candidate", addrEnv+"="+addr, nameEnv+"="+name,
		ttlEnv+"="+ttl.String(), holdEnv+"="+hold.String(), forEnv+"="+runFor.String())
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		defer close(p.events)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var ev event
			if json.Unmarshal(sc.Bytes(), &ev) != nil {
				continue
			}
			p.mu.Lock()
			p.all = append(p.all, ev)
			p.mu.Unlock()
			select {
			case p.events <- ev:
			default:
			}
		}
		p.cmd.Wait()
	}()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGCONT)
		p.cmd.Process.Kill()
		<-exited
		if s := p.stderr.String(); s != "" {
			t.Logf("child %d stderr:\n%s", p.cmd.Process.Pid, s)
		}
	})
	return p
}

// next waits for p's next event of kind ev.
func (p *proc) next(t *testing.T, ev string, within time.Duration) event {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case e, ok := <-p.events:
			require.True(t, ok, "child exited before %q", ev)
			if e.Ev == ev {
				return e
			}
		case <-timeout:
			t.Fatalf("no %q event within %v", ev, within)
		}
	}
}

// history returns the events p printed so far.
func (p *proc) history() []event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]event(nil), p.all...)
}

// observe collects what an observer in this process sees until the test ends.
func observe(t *testing.T, rdb redis.UniversalClient, name string) func() []fence.Token {
	t.Helper()
	c, err := lease.New(rdb)
	require.NoError(t, err)
	e, err := election.New(c, name, time.Second, election.WithPoll(10*time.Millisecond))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	ch, err := e.Observe(ctx)
	require.NoError(t, err)
	var seen []fence.Token
	done := make(chan struct{})
	go func() {
		defer close(done)
		for tok := range ch {
			seen = append(seen, tok)
		}
	}()
	return func() []fence.Token {
		cancel()
		<-done
		return seen
	}
}

func assertGrowing(t *testing.T, seen []fence.Token) {
	t.Helper()
	for i := 1; i < len(seen); i++ {
		assert.Greater(t, seen[i].Seq, seen[i-1].Seq, "observed term %d went back", i)
	}
}

// A leader SIGSTOPped past its lease: another is elected; when the first
// resumes, its term had ended (by its own deadline) before the new term
// began, and the write it makes before it notices is refused.
func TestPausedLeaderIsFenced(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client()
	t.Cleanup(func() { rdb.Close() })
	name := "paused/" + suffix()
	stopObs := observe(t, rdb, name)
	const ttl = time.Second
	a := startCandidate(t, r.Addr(), name, ttl, 0, time.Minute)
	aWon := a.next(t, "won", 10*time.Second)
	b := startCandidate(t, r.Addr(), name, ttl, 0, time.Minute)
	a.next(t, "write", 5*time.Second)

	require.NoError(t, a.cmd.Process.Signal(syscall.SIGSTOP))
	bWon := b.next(t, "won", 10*ttl)
	bWrite := b.next(t, "write", 5*time.Second)
	require.True(t, bWrite.OK, "the new leader's write: %s", bWrite.Err)
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGCONT))
	aLost := a.next(t, "lost", 10*time.Second)

	assert.Greater(t, bWon.Seq, aWon.Seq)
	assert.Less(t, aLost.Deadline, bWon.At, "the old term's deadline came before the new term began")
	var late int
	for _, ev := range a.history() {
		if ev.Ev == "write" && ev.At > bWrite.At {
			late++
			assert.False(t, ev.OK, "a deposed leader's write landed")
			assert.True(t, ev.Stale, "refused as stale: %s", ev.Err)
		}
	}
	if late == 0 {
		// The pause caught the old leader after its last write's event was
		// stamped: its write in flight is made here instead, with its term.
		old := fence.Token{Key: name, Seq: aWon.Seq, Holder: aWon.Holder}
		err := mustVerifier(t, rdb).Set(context.Background(), "data", old, "data:late", old.Seq, 0)
		assert.ErrorIs(t, err, verifier.ErrStale, "a deposed leader's write is refused")
	}
	high, _, err := mustVerifier(t, rdb).Highest(context.Background(), "data")
	require.NoError(t, err)
	assert.GreaterOrEqual(t, high, bWon.Seq)
	seen := stopObs()
	assertGrowing(t, seen)
	require.NotEmpty(t, seen)
}

func mustVerifier(t *testing.T, rdb redis.UniversalClient) *redisverifier.Verifier {
	t.Helper()
	v, err := redisverifier.New(rdb)
	require.NoError(t, err)
	return v
}

// A leader SIGKILLed: a waiting candidate leads within the ttl plus its
// wake-up (the documented bound), and not before the dead one's lock ended.
func TestKilledLeaderIsReplacedWithinTheTTL(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client()
	t.Cleanup(func() { rdb.Close() })
	name := "killed/" + suffix()
	stopObs := observe(t, rdb, name)
	const ttl = 2 * time.Second
	a := startCandidate(t, r.Addr(), name, ttl, 0, time.Minute)
	aWon := a.next(t, "won", 10*time.Second)
	b := startCandidate(t, r.Addr(), name, ttl, 0, time.Minute)
	a.next(t, "write", 5*time.Second)
	time.Sleep(300 * time.Millisecond) // b is waiting

	killed := time.Now()
	require.NoError(t, a.cmd.Process.Kill())
	bWon := b.next(t, "won", 3*ttl)
	gap := time.Duration(bWon.At - killed.UnixNano())
	t.Logf("new leader %v after the SIGKILL (ttl %v)", gap, ttl)
	assert.Less(t, gap, ttl+time.Second, "replaced within ttl + 1s")
	assert.Greater(t, bWon.Seq, aWon.Seq)
	time.Sleep(200 * time.Millisecond) // 20 polls
	seen := stopObs()
	assertGrowing(t, seen)
	assert.Equal(t, bWon.Seq, seen[len(seen)-1].Seq)
}

// Two processes resigning and campaigning in a loop: terms grow, never
// overlap, and no write is refused (each leader wrote only in its term).
func TestResignCampaignLoop(t *testing.T) {
	r := testenv.NewRedis(t)
	rdb := r.Client()
	t.Cleanup(func() { rdb.Close() })
	name := "loop/" + suffix()
	stopObs := observe(t, rdb, name)
	const runFor = 4 * time.Second
	ps := []*proc{
		startCandidate(t, r.Addr(), name, 2*time.Second, 60*time.Millisecond, runFor),
		startCandidate(t, r.Addr(), name, 2*time.Second, 60*time.Millisecond, runFor),
	}
	for _, p := range ps {
		select {
		case <-waitExit(p):
		case <-time.After(runFor + 20*time.Second):
			t.Fatal("a candidate did not finish")
		}
	}
	type span struct{ seq, from, to int64 }
	var spans []span
	for i, p := range ps {
		var terms int
		var open *span
		for _, ev := range p.history() {
			switch ev.Ev {
			case "won":
				terms++
				open = &span{seq: int64(ev.Seq), from: ev.At}
			case "write":
				assert.True(t, ev.OK, "child %d: a write refused: %s", i, ev.Err)
				open.to = ev.At
			case "lost":
				t.Errorf("child %d lost term %d: resigned terms only", i, ev.Seq)
			case "resigned":
				assert.Empty(t, ev.Err)
				spans = append(spans, *open)
			}
		}
		assert.Positive(t, terms, "child %d never led", i)
	}
	require.GreaterOrEqual(t, len(spans), 10)
	for i := range spans {
		for j := range spans {
			if spans[i].seq < spans[j].seq {
				assert.Less(t, spans[i].to, spans[j].from, "term %d wrote after term %d began", spans[i].seq, spans[j].seq)
			}
		}
	}
	seen := stopObs()
	assertGrowing(t, seen)
	t.Logf("%d terms, %d observed", len(spans), len(seen))
	seqs := map[int64]bool{}
	for _, s := range spans {
		seqs[s.seq] = true
	}
	for i, tok := range seen {
		assert.True(t, seqs[int64(tok.Seq)], "observed term %d (%d of %d) that no candidate led", tok.Seq, i, len(seen))
	}
}

func waitExit(p *proc) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		for range p.events {
		}
		close(done)
	}()
	return done
}
