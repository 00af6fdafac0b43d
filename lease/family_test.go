package lease_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lease/redlock"
)

// Shared options configure both kinds, and both constructors return the
// one *lease.Client.
func TestSharedOptionsServeBothKinds(t *testing.T) {
	// Clients for ports nobody listens on: New does no I/O.
	var nodes []*redis.Client
	for _, addr := range []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"} {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
		t.Cleanup(func() { rdb.Close() })
		nodes = append(nodes, rdb)
	}
	shared := []lease.SharedOption{
		lease.WithPrefix("p:"), lease.WithDriftFactor(0.02), lease.WithBackoff(time.Millisecond, time.Second),
		lease.WithClockFloor(true), lease.WithCounterTTL(time.Minute),
	}
	var single []lease.Option
	var quorum []redlock.Option
	for _, o := range shared {
		single, quorum = append(single, o), append(quorum, o)
	}
	var c *lease.Client
	c, err := lease.New(nodes[0], append(single, lease.WithFair(false))...)
	require.NoError(t, err)
	require.NotNil(t, c)
	c, err = redlock.New(nodes, append(quorum, redlock.WithQuorumFencing(true))...)
	require.NoError(t, err)
	require.NotNil(t, c)

	// A bad shared option, a nil one: ErrInvalid from either.
	_, err = redlock.New(nodes, lease.WithCounterTTL(-1))
	assert.ErrorIs(t, err, lease.ErrInvalid)
	_, err = redlock.New(nodes, nil)
	assert.ErrorIs(t, err, lease.ErrInvalid)
	_, err = lease.New(nodes[0], nil)
	assert.ErrorIs(t, err, lease.ErrInvalid)
	_, err = lease.New(nodes[0], lease.WithHooks(nil))
	assert.ErrorIs(t, err, lease.ErrInvalid)
}

// TestWrongKindDoesNotCompile: an option of one kind given to the other
// kind's New is a compile error, not a run-time one. The program is
// type-checked by the go command through an overlay, inside this module.
func TestWrongKindDoesNotCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	for name, call := range map[string]string{
		"WithFair to redlock.New":           `redlock.New([]*redis.Client{}, lease.WithFair(false))`,
		"WithReplicaAck to redlock.New":     `redlock.New([]*redis.Client{}, lease.WithReplicaAck(1, time.Second))`,
		"WithQuorumFencing to lease.New":    `lease.New(redis.NewClient(nil), redlock.WithQuorumFencing(true))`,
		"WithNodeTimeout to lease.New":      `lease.New(redis.NewClient(nil), redlock.WithNodeTimeout(time.Second))`,
		"WithForceNodeCount to lease.New":   `lease.New(redis.NewClient(nil), redlock.WithForceNodeCount())`,
		"WithWakeup to lease.New":           `lease.New(redis.NewClient(nil), redlock.WithWakeup(false))`,
		"control: a shared option compiles": `redlock.New([]*redis.Client{}, lease.WithPrefix("p:"))`,
	} {
		t.Run(name, func(t *testing.T) {
			src := `package main

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lease/redlock"
)

var _ = time.Second
var _ = redlock.New[*redis.Client]
var _ = lease.New

func main() { _, _ = ` + call + ` }
`
			dir := t.TempDir()
			file := filepath.Join(dir, "main.go")
			require.NoError(t, os.WriteFile(file, []byte(src), 0o644))
			pkg := filepath.Join(root, "lease", "zz_wrongkind")
			overlay, err := json.Marshal(map[string]any{"Replace": map[string]string{filepath.Join(pkg, "main.go"): file}})
			require.NoError(t, err)
			ov := filepath.Join(dir, "overlay.json")
			require.NoError(t, os.WriteFile(ov, overlay, 0o644))
			cmd := exec.Command("go", "build", "-overlay", ov, "-o", os.DevNull, "./lease/zz_wrongkind")
			cmd.Dir = root
			out, err := cmd.CombinedOutput()
			if strings.HasPrefix(name, "control") {
				require.NoError(t, err, "%s", out)
				return
			}
			require.Error(t, err, "it compiled")
			assert.Contains(t, string(out), "does not implement", "%s", out)
		})
	}
}
