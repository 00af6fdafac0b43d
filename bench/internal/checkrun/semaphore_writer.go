package checkrun

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/bench/internal/check"
	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/heal"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/pgverifier"
)

// The semaphore workload's writer process (semaphore.go is the parent's
// side): it takes a permit, appends 2-5 unique elements to its slot's set,
// then releases the permit and queues again; one JSON line per step, so
// that the parent records each write before it is sent (a killed writer's
// last write stays unknown, never unseen). It stops when its stdin closes.

// SemWriterEnv is the environment variable that makes the process a writer
// of the semaphore workload: main (or TestMain) calls RunSemWriter with it.
const SemWriterEnv = "FENCELOCK_CHECK_SEM_WRITER"

// semWriterSpec is what a writer process is told.
type semWriterSpec struct {
	Redis string `json:"redis"`
	DSN   string `json:"dsn"`
	// PgAddr is the writer's own proxy to PostgreSQL, which the
	// delay-write fault slows down ("": the DSN's address).
	PgAddr  string        `json:"pg_addr,omitempty"`
	Name    string        `json:"name"` // the semaphore
	Permits int           `json:"permits"`
	Sets    []string      `json:"sets"` // the resource of each slot
	TTL     time.Duration `json:"ttl"`
	Client  int           `json:"client"`
	// Fenced: the writes go through pgverifier with the permit's token
	// (and heal.Write); else they check Held() and write in one statement.
	Fenced bool `json:"fenced"`
}

// semLine is one line a writer prints. Ev is "wait" (an Acquire begins),
// "nogot" (it failed: Err), "got" (a permit: ID, Slot, Token, At,
// Deadline, Held), "invoke" (an append is about to run: Op, Elem, Token),
// "done" (its Outcome: ok with Commit, rejected, fail or unknown; Token
// the last it carried) and "released" (Release called At, Err its error).
type semLine struct {
	Ev       string      `json:"ev"`
	ID       string      `json:"id,omitempty"` // the acquisition: "c3.7"
	Slot     int         `json:"slot"`
	Token    check.Token `json:"token"`
	At       int64       `json:"at,omitempty"` // Unix ns
	Deadline int64       `json:"deadline,omitempty"`
	Held     bool        `json:"held,omitempty"`
	Op       int         `json:"op,omitempty"`
	Elem     int64       `json:"elem,omitempty"`
	Outcome  string      `json:"outcome,omitempty"`
	Commit   int64       `json:"commit,omitempty"`
	Err      string      `json:"err,omitempty"`
}

// semWriter is the writer process's state.
type semWriter struct {
	spec semWriterSpec
	db   *pgxpool.Pool
	ver  *pgverifier.Verifier
	out  *json.Encoder
	rng  *rand.Rand
	ops  int
}

// querier is what a read-modify-write runs on: a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// RunSemWriter runs a writer process with the JSON spec.
func RunSemWriter(spec string) error { return runSemWriter(spec, os.Stdin, os.Stdout) }

func runSemWriter(specJSON string, in io.Reader, stdout io.Writer) error {
	var s semWriterSpec
	if err := json.Unmarshal([]byte(specJSON), &s); err != nil {
		return fmt.Errorf("%s: %w", SemWriterEnv, err)
	}
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: s.Redis, ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
	defer rdb.Close()
	lc, err := lease.New(rdb)
	if err != nil {
		return err
	}
	sem, err := lc.Semaphore(s.Name, s.Permits)
	if err != nil {
		return err
	}
	db, err := clientPool(ctx, s.DSN, s.PgAddr)
	if err != nil {
		return err
	}
	defer db.Close()
	w := &semWriter{spec: s, db: db, out: json.NewEncoder(stdout),
		rng: rand.New(rand.NewPCG(uint64(s.Client), uint64(time.Now().UnixNano())))}
	if w.ver, err = pgverifier.New(db); err != nil {
		return err
	}
	var stopping atomic.Bool
	stop, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // the parent closes stdin to stop us
		bufio.NewReader(in).ReadString(0)
		stopping.Store(true)
		cancel()
	}()
	for n := 1; !stopping.Load(); n++ {
		w.say(semLine{Ev: "wait"})
		actx, cancelAcq := context.WithTimeout(stop, max(2*time.Second, 4*s.TTL))
		l, err := sem.Acquire(actx, s.TTL)
		at := time.Now()
		cancelAcq()
		if err != nil {
			if stop.Err() == nil {
				w.say(semLine{Ev: "nogot", Err: err.Error()})
				time.Sleep(10 * time.Millisecond)
			}
			continue
		}
		id := fmt.Sprintf("c%d.%d", s.Client, n)
		_, slot, _ := lease.ParsePermitName(l.Name())
		w.say(semLine{Ev: "got", ID: id, Slot: slot, Token: check.TokenOf(l.Token()), At: at.UnixNano(),
			Deadline: l.Deadline().UnixNano(), Held: l.Held()})
		for range 2 + w.rng.IntN(4) {
			if stopping.Load() || !w.append(ctx, l, id, slot) {
				break
			}
		}
		rel := semLine{Ev: "released", ID: id, Slot: slot, At: time.Now().UnixNano()}
		rctx, cancelRel := context.WithTimeout(ctx, time.Second)
		if err := l.Release(rctx); err != nil { // expected when the permit was lost
			rel.Err = err.Error()
		}
		cancelRel()
		w.say(rel)
	}
	cctx, cancelClose := context.WithTimeout(ctx, 5*time.Second)
	defer cancelClose()
	return lc.Close(cctx)
}

func (w *semWriter) say(l semLine) { w.out.Encode(l) }

func (w *semWriter) think() { time.Sleep(5*time.Millisecond + rand.N(20*time.Millisecond)) }

// append appends a unique element to slot's set under permit l, as one of
// the run's clients does a step (client.go): check Held(), think (where a
// pause lands most often: after the check, before the write), then the
// read-modify-write with a think between read and write, in
// pgverifier.WithTx through heal.Write (fenced) or in two plain statements.
// It reports whether the write was acknowledged.
func (w *semWriter) append(ctx context.Context, l *lease.Lease, id string, slot int) bool {
	w.ops++
	set := w.spec.Sets[slot]
	tok := check.Token{Key: l.Name(), Holder: id} // unguarded: the slot and the acquisition
	if w.spec.Fenced {
		tok = check.TokenOf(l.Token())
	}
	elem := int64(w.spec.Client)*1_000_000_000 + int64(w.ops)
	w.say(semLine{Ev: "invoke", ID: id, Slot: slot, Op: w.ops, Elem: elem, Token: tok})
	done := semLine{Ev: "done", ID: id, Slot: slot, Op: w.ops, Token: tok}
	defer func() { w.say(done) }()
	if !l.Held() {
		done.Outcome, done.Err = "fail", errLost.Error()
		return false
	}
	w.think()
	octx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var commit int64
	sent := false // the write statement was sent (unguarded), or ran (fenced: the commit decides)
	rmw := func(ctx context.Context, q querier) error {
		var items []int64
		if err := q.QueryRow(ctx, readSetSQL, set).Scan(&items); err != nil {
			return err
		}
		w.think()
		sent = !w.spec.Fenced
		err := q.QueryRow(ctx, writeSetSQL, set, append(slices.Clip(items), elem)).Scan(&commit)
		sent = sent || err == nil
		return err
	}
	var err error
	if w.spec.Fenced {
		err = heal.Write(octx, l, func(ctx context.Context, t fence.Token) error {
			done.Token, sent = check.TokenOf(t), false
			return w.ver.WithTx(ctx, set, t, func(tx pgx.Tx) error { return rmw(ctx, tx) })
		})
	} else {
		err = rmw(octx, w.db)
	}
	var stale *verifier.StaleError
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		done.Outcome, done.Commit = "ok", commit
		return true
	case errors.As(err, &stale):
		done.Outcome = "rejected"
	case sent && !errors.As(err, &pgErr):
		done.Outcome = "unknown" // sent, no reply: it may have committed
	default:
		done.Outcome = "fail"
	}
	done.Err = err.Error()
	return false
}
