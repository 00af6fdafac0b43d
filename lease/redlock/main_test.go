package redlock_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/lease/redlock"
)

// shared are five independent masters that TestMain starts for the tests,
// examples and benchmarks that neither stop nor pause a server; sharedRDB
// are clients for them. Tests that break servers start their own.
var (
	shared    []*testenv.Redis
	sharedRDB []redis.UniversalClient
)

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	rs, err := testenv.StartRedisN(ctx, 5, testenv.RedisOptions{})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "redlock tests:", err)
		os.Exit(1)
	}
	shared = rs
	var urls []string
	for _, r := range rs {
		sharedRDB = append(sharedRDB, dial(r))
		urls = append(urls, r.URL())
	}
	os.Setenv("REDLOCK_URLS", strings.Join(urls, ",")) // the examples read it, as a program would
	code := m.Run()
	for i, r := range rs {
		sharedRDB[i].Close()
		r.Close()
	}
	os.Exit(code)
}

// dial returns a client for r set up as the package docs advise: it honours
// context deadlines, so calls abandoned at the node timeout end then, and it
// neither retries commands nor dials, since redlock's own attempts do.
func dial(r *testenv.Redis) *redis.Client {
	opt := r.Options()
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = -1
	opt.DialerRetries = 1
	return redis.NewClient(opt)
}

// ownNodes starts n masters only this test uses (it may stop, pause or
// restart them) and returns them with a client for each, closed at cleanup.
func ownNodes(t *testing.T, n int) ([]*testenv.Redis, []redis.UniversalClient) {
	t.Helper()
	rs := testenv.NewRedisN(t, n)
	rdbs := make([]redis.UniversalClient, n)
	for i, r := range rs {
		c := dial(r)
		t.Cleanup(func() { c.Close() })
		rdbs[i] = c
	}
	return rs, rdbs
}

// newLocker returns a redlock client over rdbs. Its node timeout is a
// generous 1s unless opts set one: the default 50ms is easily missed on a
// loaded two-core test machine, and most tests are not about timeouts.
func newLocker(t testing.TB, rdbs []redis.UniversalClient, opts ...redlock.Option) *lease.Client {
	t.Helper()
	opts = append([]redlock.Option{redlock.WithNodeTimeout(time.Second)}, opts...)
	c, err := redlock.New(rdbs, opts...)
	require.NoError(t, err)
	return c
}

// name returns a lock name unique to this test run.
func name(t testing.TB) string {
	return t.Name() + "/" + uuid.NewString()[:8]
}

// ctxFor returns a context that ends with the test or after d.
func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// nodeAddrs returns the addresses of c's nodes, in order, as Inspect names them.
func nodeAddrs(t testing.TB, c *lease.Client) []string {
	t.Helper()
	info, _ := c.Inspect(context.Background(), "redlock-test/nodes")
	var addrs []string
	for _, n := range info.Nodes {
		addrs = append(addrs, n.Addr)
	}
	require.NotEmpty(t, addrs)
	return addrs
}

// quorumOf returns the majority of c's nodes.
func quorumOf(t testing.TB, c *lease.Client) int { return len(nodeAddrs(t, c))/2 + 1 }
