package lockset_test

// Two callers as real processes (the test binary re-executed in a child
// mode) take the same locks, named in opposite orders, in a loop.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lockset"
)

// The caller child's environment.
const (
	callerEnv      = "FENCELOCK_LOCKSET_CALLER" // the caller's id
	callerAddrEnv  = "FENCELOCK_LOCKSET_ADDR"
	callerNamesEnv = "FENCELOCK_LOCKSET_NAMES" // comma-separated, in the caller's order
	callerRoundEnv = "FENCELOCK_LOCKSET_ROUNDS"
)

// callerReport is the one line a caller prints at the end.
type callerReport struct {
	OK       int      `json:"ok"`       // rounds that held the set
	Busy     int      `json:"busy"`     // TryAcquire rounds that found a lock held
	Overlaps int      `json:"overlaps"` // rounds that found the other caller inside
	Errors   []string `json:"errors"`
}

func callerChild() (int, bool) {
	id := os.Getenv(callerEnv)
	if id == "" {
		return 0, false
	}
	rep, err := callerMain(id)
	if err != nil {
		fmt.Fprintln(os.Stderr, "caller:", err)
		return 2, true
	}
	_ = json.NewEncoder(os.Stdout).Encode(rep)
	return 0, true
}

// callerMain takes the set in rounds: waiting (Acquire) in most, trying
// once (TryAcquire) in every third. Inside, it marks the critical section
// with SET NX, which finds the other caller's mark if both are inside.
func callerMain(id string) (callerReport, error) {
	var rep callerReport
	rounds, err := strconv.Atoi(os.Getenv(callerRoundEnv))
	if err != nil {
		return rep, err
	}
	names := strings.Split(os.Getenv(callerNamesEnv), ",")
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv(callerAddrEnv), ContextTimeoutEnabled: true})
	defer rdb.Close()
	locks, err := lease.New(rdb)
	if err != nil {
		return rep, err
	}
	defer locks.Close(context.Background())
	inside := "inside:" + strings.Join(names, "")
	for r := range rounds {
		// A deadlock would end the round at this deadline.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		take := lockset.Acquire
		if r%3 == 2 {
			take = lockset.TryAcquire
		}
		// A 30s ttl with keep-alive: a lock left behind would still be
		// there when the test looks.
		set, err := take(ctx, locks, names, 30*time.Second, lease.WithKeepAlive(0))
		switch {
		case errors.Is(err, lease.ErrNotAcquired) && r%3 == 2 && ctx.Err() == nil:
			rep.Busy++
			cancel()
			continue
		case err != nil:
			rep.Errors = append(rep.Errors, fmt.Sprintf("round %d: %v", r, err))
			cancel()
			continue
		}
		if ok, err := rdb.SetNX(ctx, inside, id, time.Minute).Result(); err != nil || !ok {
			rep.Overlaps++
		}
		time.Sleep(time.Duration(rand.IntN(2000)) * time.Microsecond)
		rdb.Del(ctx, inside)
		if err := set.Release(ctx); err != nil {
			rep.Errors = append(rep.Errors, fmt.Sprintf("round %d: release: %v", r, err))
		}
		rep.OK++
		cancel()
	}
	return rep, nil
}

// TestOppositeOrdersInALoop: two processes take locks a, b and c, one
// naming them a, b, c and the other c, b, a, 150 rounds each, a third of
// them with TryAcquire (which gives up when the other holds one, after
// taking some). No round waits forever (a deadlock would fail it after
// 5s), no two rounds hold the set at once, and once both exit Redis holds
// none of the locks: nothing half-taken was left behind.
func TestOppositeOrdersInALoop(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two processes")
	}
	r := testenv.NewRedis(t)
	exe, err := os.Executable()
	require.NoError(t, err)
	ns := names(t, "a", "b", "c")
	const rounds = 150
	orders := [][]string{ns, {ns[2], ns[1], ns[0]}}
	var cmds []*exec.Cmd
	var outs []*bytes.Buffer
	for i, order := range orders {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), callerEnv+"="+strconv.Itoa(i), callerAddrEnv+"="+r.Addr(),
			callerNamesEnv+"="+strings.Join(order, ","), callerRoundEnv+"="+strconv.Itoa(rounds))
		out := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = out, os.Stderr
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	busy := 0
	for i, cmd := range cmds {
		require.NoError(t, cmd.Wait(), "caller %d", i)
		var rep callerReport
		require.NoError(t, json.Unmarshal(outs[i].Bytes(), &rep), "caller %d: %s", i, outs[i])
		t.Logf("caller %d (%v): %+v", i, orders[i], rep)
		assert.Empty(t, rep.Errors, "caller %d", i)
		assert.Zero(t, rep.Overlaps, "caller %d held the set with the other", i)
		assert.Equal(t, rounds, rep.OK+rep.Busy, "caller %d", i)
		assert.Greater(t, rep.OK, rounds/2, "caller %d", i)
		busy += rep.Busy
	}
	rdb := r.Client()
	defer rdb.Close()
	assert.Empty(t, held(t, rdb, ns...), "locks left behind")
	t.Logf("TryAcquire found the other caller inside %d times", busy)
}
