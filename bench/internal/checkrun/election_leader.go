package checkrun

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/election"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/pgverifier"
)

// The election workload's leader process (election.go is the parent's
// side): it campaigns, and while it leads appends unique elements to one
// set through pgverifier, a few times per term, then resigns; one JSON
// line per term won and per append. It stops, resigning, when its stdin
// closes.

// LeaderEnv is the environment variable that makes the process a leader
// of the election workload: main (or TestMain) calls RunLeader with it.
const LeaderEnv = "FENCELOCK_CHECK_LEADER"

// leaderSpec is what a leader process is told.
type leaderSpec struct {
	Redis  string        `json:"redis"`
	DSN    string        `json:"dsn"`
	Name   string        `json:"name"` // the election
	Set    string        `json:"set"`  // the resource
	TTL    time.Duration `json:"ttl"`
	Client int           `json:"client"`
}

// leaderLine is one line a leader prints: a term won ("won") or an append
// ("append", with its outcome: ok, rejected, fail or unknown).
type leaderLine struct {
	Ev      string `json:"ev"`
	Client  int    `json:"client"`
	Seq     uint64 `json:"seq"`
	Holder  string `json:"holder"`
	Elem    int64  `json:"elem,omitempty"`
	Outcome string `json:"outcome,omitempty"`
	Commit  int64  `json:"commit,omitempty"`
	Err     string `json:"err,omitempty"`
}

// RunLeader runs a leader process with the JSON spec.
func RunLeader(spec string) error {
	var s leaderSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		return err
	}
	ctx := context.Background()
	rdb := redis.NewClient(&redis.Options{Addr: s.Redis, ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: time.Second, ReadTimeout: 2 * time.Second, WriteTimeout: 2 * time.Second})
	defer rdb.Close()
	locks, err := lease.New(rdb)
	if err != nil {
		return err
	}
	e, err := election.New(locks, s.Name, s.TTL)
	if err != nil {
		return err
	}
	db, err := clientPool(ctx, s.DSN, "")
	if err != nil {
		return err
	}
	defer db.Close()
	ver, err := pgverifier.New(db)
	if err != nil {
		return err
	}
	var stopping atomic.Bool
	stop, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // the parent closes stdin to stop us
		bufio.NewReader(os.Stdin).ReadString(0)
		stopping.Store(true)
		cancel()
	}()
	out := json.NewEncoder(os.Stdout)
	rng := rand.New(rand.NewPCG(uint64(s.Client), uint64(time.Now().UnixNano())))
	think := func() { time.Sleep(5*time.Millisecond + rand.N(20*time.Millisecond)) }
	var n int64
	for !stopping.Load() {
		term, err := e.Campaign(stop)
		if err != nil {
			if stop.Err() == nil {
				time.Sleep(50 * time.Millisecond) // Redis unreachable: try again
			}
			continue
		}
		tok := term.Token()
		out.Encode(leaderLine{Ev: "won", Client: s.Client, Seq: tok.Seq, Holder: tok.Holder})
		for range 3 + rng.IntN(8) {
			if stopping.Load() || !term.Leads() {
				break
			}
			think() // where a pause lands most often: after the check, before the write
			n++
			elem := int64(s.Client)*1_000_000_000 + n
			line := leaderLine{Ev: "append", Client: s.Client, Seq: tok.Seq, Holder: tok.Holder, Elem: elem}
			var commit int64
			wrote := false
			octx, cancelOp := context.WithTimeout(ctx, 15*time.Second)
			err := ver.WithTx(octx, s.Set, tok, func(tx pgx.Tx) error {
				var items []int64
				if err := tx.QueryRow(octx, readSetSQL, s.Set).Scan(&items); err != nil {
					return err
				}
				think()
				err := tx.QueryRow(octx, writeSetSQL, s.Set, append(slices.Clip(items), elem)).Scan(&commit)
				wrote = err == nil
				return err
			})
			cancelOp()
			var pgErr *pgconn.PgError
			switch {
			case err == nil:
				line.Outcome, line.Commit = "ok", commit
			case errors.Is(err, verifier.ErrStale):
				line.Outcome = "rejected"
			case wrote && !errors.As(err, &pgErr):
				line.Outcome = "unknown"
			default:
				line.Outcome = "fail"
			}
			if err != nil {
				line.Err = err.Error()
			}
			out.Encode(line)
		}
		rctx, cancelRes := context.WithTimeout(ctx, time.Second)
		if err := term.Resign(rctx); err != nil {
			fmt.Fprintln(os.Stderr, "resign:", err)
		}
		cancelRes()
	}
	return nil
}
