package quorum

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/family"
)

var errInvalid = errors.New("invalid")

// strategy returns a strategy on n nodes (no I/O: clients are never used).
func strategy(t *testing.T, n int, quorum bool, timeout time.Duration, one family.OneRedis) (*Strategy, error) {
	t.Helper()
	cfg := family.New("p:", 0.01, time.Millisecond, time.Second, time.Hour)
	cfg.Invalid = errInvalid
	var nodes []*Node
	for range n {
		rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
		t.Cleanup(func() { rdb.Close() })
		nodes = append(nodes, NewNode("n", rdb))
	}
	return New(Config{Shared: &cfg, Name: "k", Nodes: nodes, Quorum: quorum, NodeTimeout: timeout,
		MinNodeTimeout: 50 * time.Millisecond, OneRedis: one})
}

func TestNewNeedsOneRedisForItsOptions(t *testing.T) {
	for _, c := range []struct {
		n      int
		quorum bool
		one    family.OneRedis
		ok     bool
	}{
		{1, false, family.OneRedis{Fair: true}, true},
		{2, false, family.OneRedis{}, false},
		{0, true, family.OneRedis{}, false},
		{3, true, family.OneRedis{}, true},
		{1, true, family.OneRedis{}, true},
		{3, true, family.OneRedis{Fair: true}, false},
		{1, true, family.OneRedis{Replicas: 1, AckTimeout: time.Second}, false},
	} {
		_, err := strategy(t, c.n, c.quorum, 0, c.one)
		if c.ok != (err == nil) || (err != nil && !errors.Is(err, errInvalid)) {
			t.Errorf("%d nodes, quorum %v, %+v: err = %v", c.n, c.quorum, c.one, err)
		}
	}
}

// TestNodeTimeout pins the rule: none on one Redis, an explicit one as
// given, else a tenth of the ttl, at least the minimum.
func TestNodeTimeout(t *testing.T) {
	one, _ := strategy(t, 1, false, 0, family.OneRedis{})
	set, _ := strategy(t, 3, true, 7*time.Millisecond, family.OneRedis{})
	def, _ := strategy(t, 3, true, 0, family.OneRedis{})
	for _, c := range []struct {
		s    *Strategy
		ttl  time.Duration
		want time.Duration
	}{
		{one, 10 * time.Second, 0},
		{set, 10 * time.Second, 7 * time.Millisecond},
		{def, 10 * time.Second, time.Second},
		{def, 100 * time.Millisecond, 50 * time.Millisecond},
		{def, 0, 50 * time.Millisecond},
	} {
		if got := c.s.timeout(c.ttl); got != c.want {
			t.Errorf("timeout(%v) = %v, want %v", c.ttl, got, c.want)
		}
	}
}

// TestDecided: a quorum call stops at once when no quorum can say yes, and
// once a quorum said yes waits a grace for the rest, with the default node
// timeout only.
func TestDecided(t *testing.T) {
	def, _ := strategy(t, 5, true, 0, family.OneRedis{})
	set, _ := strategy(t, 5, true, time.Second, family.OneRedis{})
	yes := Reply[bool]{Val: true, In: true}
	no := Reply[bool]{Val: false, In: true}
	failed := Reply[bool]{Err: errors.New("x"), In: true}
	out := Reply[bool]{}
	isYes := func(v bool) bool { return v }
	for _, c := range []struct {
		s    *Strategy
		rs   []Reply[bool]
		want time.Duration
	}{
		{def, []Reply[bool]{yes, yes, out, out, out}, -1},
		{def, []Reply[bool]{yes, yes, yes, out, out}, 50 * time.Millisecond},
		{set, []Reply[bool]{yes, yes, yes, out, out}, -1},
		{def, []Reply[bool]{no, failed, out, out, out}, -1},
		{def, []Reply[bool]{no, failed, no, out, out}, 0},
		{set, []Reply[bool]{no, failed, no, out, out}, 0},
	} {
		if got := decided(c.s, isYes)(c.rs); got != c.want {
			t.Errorf("decided(%v) = %v, want %v", c.rs, got, c.want)
		}
	}
}
