package testenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Sentinel is one redis-server in sentinel mode, in its own temporary
// directory, on 127.0.0.1, monitoring one primary under a master name with
// quorum 1 (it alone decides failovers). Its config is sentinel.conf and its
// log sentinel.log in [Sentinel.Dir]. Methods are safe for concurrent use.
//
// Sentinel reconfigures the servers itself (REPLICAOF on failover), behind
// the back of their [Redis] values: a [Redis] restarted after a failover
// comes back with the role it was started with, and Sentinel corrects it
// again after a while.
type Sentinel struct {
	mu     sync.Mutex
	bin    string
	dir    string
	port   int
	master string
	proc   *proc
	closed bool
}

// sentinelDebug shortens Sentinel's fixed periods (SENTINEL DEBUG, Redis 7+)
// so tests do not wait for its production timings: INFO every 1s instead of
// 10s, and an old primary still claiming to be a master is turned into a
// replica after 4*publish-period (2s) instead of 8s. Older servers reject
// the command; then the defaults stay.
var sentinelDebug = []any{"info-period", 1000, "publish-period", 500}

// StartSentinel starts a sentinel monitoring primary as masterName, with
// down-after-milliseconds 500 and failover-timeout 2000, and waits until it
// answers SENTINEL get-master-addr-by-name and knows the replicas the
// primary has at that moment. The caller must Close it.
func StartSentinel(ctx context.Context, primary *Redis, masterName string) (*Sentinel, error) {
	if masterName == "" || strings.ContainsAny(masterName, " \t\r\n\"'") {
		return nil, fmt.Errorf("testenv: bad sentinel master name %q", masterName)
	}
	bin, err := redisServer("")
	if err != nil {
		return nil, err
	}
	dir, err := makeTempDir("testenv-sentinel-")
	if err != nil {
		return nil, err
	}
	s := &Sentinel{bin: bin, dir: dir, master: masterName}
	for attempt := 1; ; attempt++ {
		if s.port, err = freePort(nil); err == nil {
			if err = s.start(ctx, primary); err == nil {
				break
			}
			releasePort(s.port)
		}
		if attempt == 5 || !errors.Is(err, errAddrInUse) {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if err := s.waitReady(ctx, primary); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Sentinel) confPath() string { return filepath.Join(s.dir, "sentinel.conf") }
func (s *Sentinel) logPath() string  { return filepath.Join(s.dir, "sentinel.log") }

// start writes a fresh sentinel.conf (Sentinel rewrites it, so it must be
// a writable file) and starts the process, waiting until it answers PING.
func (s *Sentinel) start(ctx context.Context, primary *Redis) error {
	conf := strings.Join([]string{
		"port " + strconv.Itoa(s.port),
		"bind 127.0.0.1",
		"daemonize no",
		`logfile ""`,
		fmt.Sprintf("dir %q", s.dir),
		"sentinel resolve-hostnames no",
		"sentinel announce-hostnames no",
		fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 1", s.master, primary.Port()),
		fmt.Sprintf("sentinel down-after-milliseconds %s 500", s.master),
		fmt.Sprintf("sentinel failover-timeout %s 2000", s.master),
		"",
	}, "\n")
	if err := os.WriteFile(s.confPath(), []byte(conf), 0o644); err != nil {
		return fmt.Errorf("testenv: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	offset := fileSize(s.logPath())
	p, err := startProc(s.bin, []string{s.confPath(), "--sentinel"}, s.dir, s.logPath(), nil)
	if err != nil {
		return err
	}
	s.proc = p
	if err := waitPing(ctx, s.Addr(), nil, p); err != nil {
		p.kill()
		return startError("redis sentinel on "+s.Addr(), s.logPath(), offset, err)
	}
	return nil
}

// waitReady applies sentinelDebug and waits until the sentinel reports the
// primary's address and lists, as usable, every replica connected to it.
func (s *Sentinel) waitReady(ctx context.Context, primary *Redis) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	sc := s.client()
	defer sc.Close()
	_ = sc.Process(ctx, redis.NewStatusCmd(ctx, append([]any{"SENTINEL", "DEBUG"}, sentinelDebug...)...))

	pc := primary.Client()
	defer pc.Close()
	var last error
	for {
		if last = s.ready(ctx, sc, pc); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return startError("redis sentinel on "+s.Addr(), s.logPath(), 0, fmt.Errorf("%w (last: %v)", ctx.Err(), last))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (s *Sentinel) ready(ctx context.Context, sc *redis.SentinelClient, pc *redis.Client) error {
	addr, err := sc.GetMasterAddrByName(ctx, s.master).Result()
	if err != nil {
		return fmt.Errorf("get-master-addr-by-name: %w", err)
	}
	if len(addr) != 2 {
		return fmt.Errorf("get-master-addr-by-name: %q", addr)
	}
	info, err := pc.Info(ctx, "replication").Result()
	if err != nil {
		return fmt.Errorf("primary INFO replication: %w", err)
	}
	want, _ := strconv.Atoi(infoField(info, "connected_slaves"))
	if want == 0 {
		return nil
	}
	replicas, err := sc.Replicas(ctx, s.master).Result()
	if err != nil {
		return fmt.Errorf("SENTINEL REPLICAS: %w", err)
	}
	usable := 0
	for _, r := range replicas {
		if f := r["flags"]; f == "slave" && r["master-link-status"] == "ok" {
			usable++
		}
	}
	if usable < want {
		return fmt.Errorf("sentinel knows %d usable of %d replicas", usable, want)
	}
	return nil
}

// infoField returns the value of "name:value" in an INFO reply, "" if absent.
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

// Addr returns "127.0.0.1:port" of the sentinel.
func (s *Sentinel) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Dir returns the sentinel's directory (sentinel.conf, sentinel.log).
func (s *Sentinel) Dir() string { return s.dir }

func (s *Sentinel) client() *redis.SentinelClient {
	return redis.NewSentinelClient(&redis.Options{Addr: s.Addr(), DialTimeout: time.Second})
}

// FailoverClient returns a new go-redis client for the master that this
// sentinel reports for masterName, with a 1s dial timeout; it follows
// failovers (+switch-master). The caller closes it.
func (s *Sentinel) FailoverClient(masterName string) *redis.Client {
	return redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    masterName,
		SentinelAddrs: []string{s.Addr()},
		DialTimeout:   time.Second,
	})
}

// MasterAddr returns the address the sentinel reports for the monitored
// master (SENTINEL get-master-addr-by-name).
func (s *Sentinel) MasterAddr(ctx context.Context) (string, error) {
	sc := s.client()
	defer sc.Close()
	addr, err := sc.GetMasterAddrByName(ctx, s.master).Result()
	if err != nil {
		return "", fmt.Errorf("testenv: SENTINEL get-master-addr-by-name %s: %w", s.master, err)
	}
	if len(addr) != 2 {
		return "", fmt.Errorf("testenv: SENTINEL get-master-addr-by-name %s: %q", s.master, addr)
	}
	return net.JoinHostPort(addr[0], addr[1]), nil
}

// Failover runs SENTINEL FAILOVER and waits (at most 15s, or until ctx
// ends) until the sentinel reports a different master address and that
// server reports role:master. It retries while the sentinel has no replica
// it may promote yet (-NOGOODSLAVE) or a failover is already running.
//
// SENTINEL FAILOVER (Redis 7) is a forced failover, not the coordinated
// FAILOVER command: the old primary is not paused, so writes it has not
// replicated yet are lost. The old primary keeps running as a master until
// the sentinel turns it into a replica of the new one, a few seconds later
// (about 2s with the shortened periods, ~10s on servers without SENTINEL
// DEBUG); Failover does not wait for that.
func (s *Sentinel) Failover(ctx context.Context) (newMaster string, err error) {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	old, err := s.MasterAddr(ctx)
	if err != nil {
		return "", err
	}
	sc := s.client()
	defer sc.Close()
	for {
		err = sc.Failover(ctx, s.master).Err()
		if err == nil {
			break
		}
		if !strings.HasPrefix(err.Error(), "NOGOODSLAVE") && !strings.HasPrefix(err.Error(), "INPROG") {
			return "", fmt.Errorf("testenv: SENTINEL FAILOVER %s: %w", s.master, err)
		}
		select {
		case <-ctx.Done():
			return "", s.failoverError(fmt.Errorf("%w (SENTINEL FAILOVER: %v)", ctx.Err(), err))
		case <-time.After(50 * time.Millisecond):
		}
	}
	var last error
	for {
		addr, err := s.MasterAddr(ctx)
		switch {
		case err != nil:
			last = err
		case addr == old:
			last = fmt.Errorf("sentinel still reports %s", old)
		default:
			if last = isMaster(ctx, addr); last == nil {
				return addr, nil
			}
		}
		select {
		case <-ctx.Done():
			return "", s.failoverError(fmt.Errorf("%w (last: %v)", ctx.Err(), last))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (s *Sentinel) failoverError(err error) error {
	return fmt.Errorf("testenv: failover of %s by sentinel %s: %w\n--- %s (tail) ---\n%s",
		s.master, s.Addr(), err, s.logPath(), logTail(s.logPath(), 0))
}

// isMaster checks that the server at addr reports role:master.
func isMaster(ctx context.Context, addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, MaxRetries: -1})
	defer c.Close()
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return fmt.Errorf("INFO replication on %s: %w", addr, err)
	}
	if role := infoField(info, "role"); role != "master" {
		return fmt.Errorf("%s reports role:%s", addr, role)
	}
	return nil
}

// Close kills the sentinel if it runs and removes its directory; it is
// idempotent.
func (s *Sentinel) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.proc.kill()
	releasePort(s.port)
	return os.RemoveAll(s.dir)
}

// NewSentinel starts a sentinel monitoring primary as masterName, closed
// when the test ends (before the servers of an earlier NewReplicated, so it
// does not fail over a server that is being shut down).
func NewSentinel(t testing.TB, primary *Redis, masterName string) *Sentinel {
	t.Helper()
	ctx, cancel := startCtx(t)
	defer cancel()
	s, err := StartSentinel(ctx, primary, masterName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
