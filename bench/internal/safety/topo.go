package safety

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/testenv"
	"github.com/fencelock/fencelock/internal/testenv/faults"
)

// site is one Redis node as the lock clients see it: a plain server, or,
// for the failover scenario, a primary and a replica behind a proxy that
// plays the part of a virtual IP moving to the promoted replica.
type site struct {
	r  *testenv.Redis   // plain sites
	fo *faults.Failover // failover sites
}

// addr is what lock clients dial.
func (s *site) addr() string {
	if s.fo != nil {
		return s.fo.Addr()
	}
	return s.r.Addr()
}

// server is the site's current primary.
func (s *site) server() *testenv.Redis {
	if s.fo != nil {
		return s.fo.Primary()
	}
	return s.r
}

func (s *site) close() {
	if s.fo != nil {
		s.fo.Close()
		return
	}
	s.r.Close()
}

// admin runs f with a direct client of the site's current primary.
func (s *site) admin(f func(c *redis.Client) error) error {
	c := s.server().Client()
	defer c.Close()
	return f(c)
}

// topology is the Redis servers of one cell: one site for the
// single-node kinds, five for the quorum kinds.
type topology struct {
	sites []*site
}

func (t *topology) addrs() []string {
	out := make([]string, len(t.sites))
	for i, s := range t.sites {
		out[i] = s.addr()
	}
	return out
}

func (t *topology) close() {
	for _, s := range t.sites {
		s.close()
	}
}

// faultedIndex is the site a node fault hits: the only one, or, of five,
// one of the three the first holder gets while the last two are cut off.
func faultedIndex(n int) int {
	if n == 1 {
		return 0
	}
	return 2
}

func (t *topology) faulted() *site { return t.sites[faultedIndex(len(t.sites))] }

// cutOff is the sites the first holder cannot reach in a node-fault
// scenario (the network partition of Kleppmann's Redlock example): none
// for one node, the last two of five.
func (t *topology) cutOff() []*site {
	if len(t.sites) == 1 {
		return nil
	}
	return t.sites[3:]
}

// startTopology starts n servers; with failover the faulted one is a
// primary with a replica, behind a proxy.
func startTopology(ctx context.Context, n int, failover bool) (*topology, error) {
	return startSites(ctx, n, func(i int) bool { return failover && i == faultedIndex(n) })
}

// startSites starts n sites; those for which failover(i) holds are a
// primary with a replica behind a proxy.
func startSites(ctx context.Context, n int, failover func(i int) bool) (*topology, error) {
	t := &topology{}
	for i := range n {
		s := &site{}
		var err error
		if failover(i) {
			s.fo, err = faults.StartFailover(ctx, testenv.RedisOptions{})
		} else {
			s.r, err = testenv.StartRedis(ctx, testenv.RedisOptions{})
		}
		if err != nil {
			t.close()
			return nil, err
		}
		t.sites = append(t.sites, s)
	}
	return t, nil
}
