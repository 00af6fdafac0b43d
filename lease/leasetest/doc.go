// Package leasetest is the conformance kit every fencelock lease kind
// passes against real redis-servers.
//
//	func TestLeasetest(t *testing.T) {
//		leasetest.Run(t, leasetest.Harness{Servers: 1, New: newClient, NotAcquired: lease.ErrNotAcquired, ...})
//	}
//
// It checks that no call outlives its context (frozen servers, closed
// ports), releasing twice, releasing a lost lease, loss at the ttl,
// keep-alive, re-entry under a saved holder id, Reissue above a floor, nil
// and bad input, and exclusion with tokens growing in hold order under
// contention.
//
// To prove a lease kind, adapt it with a [Harness] in a test and call
// [Run]. A *lease.Client of either kind of this module is adapted by
// [ClientOf]:
//
//	func TestLeasetest(t *testing.T) {
//		leasetest.Run(t, leasetest.Harness{
//			Servers: 1,
//			New: func(t testing.TB, addrs []string) leasetest.Client {
//				rdb := redis.NewClient(&redis.Options{Addr: addrs[0],
//					ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
//				t.Cleanup(func() { rdb.Close() })
//				c, err := lease.New(rdb)
//				require.NoError(t, err)
//				return leasetest.ClientOf(c)
//			},
//			NilClient:   leasetest.ClientOf(nil),
//			NilLease:    (*lease.Lease)(nil),
//			NotAcquired: lease.ErrNotAcquired,
//			Lost:        lease.ErrLost,
//			Released:    lease.ErrReleased,
//			Invalid:     lease.ErrInvalid,
//		})
//	}
//
// A kind of another module builds a [Client] of its own functions, turning
// [Opts] into its options, and returns leases that satisfy [Lease].
//
// The kit starts the redis-servers itself (redis-server must be on PATH),
// on free loopback ports, and hands their addresses to [Harness.New]: one
// set shared by the tests that leave the servers alone, and sets of their
// own for the tests that freeze (SIGSTOP) or kill them. A lease kind of
// another module passes too, as long as it runs on redis-servers it is
// given by address; REDIS_URL is not used, because the kit must be free to
// break its servers. Every test uses lock names of its own.
//
// [Run] runs them all, in a few seconds, as subtests (go test -run
// 'TestLeasetest/Loss' runs one). The kit imports testify.
package leasetest
