package testenv

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// ServerEnv is the environment variable that picks the server binary that
// [StartRedis], [StartSentinel] and the others run: a name looked up in PATH
// or a path, e.g. FENCELOCK_REDIS_SERVER=valkey-server. Unset or empty, it
// is redis-server.
const ServerEnv = "FENCELOCK_REDIS_SERVER"

// redisServer returns the path of the server binary name, or, for "", of
// the one ServerEnv names.
func redisServer(name string) (string, error) {
	from := "given"
	if name == "" {
		name, from = os.Getenv(ServerEnv), "from $"+ServerEnv
	}
	if name == "" {
		name = "redis-server"
	}
	bin, err := exec.LookPath(name)
	if err == nil {
		return bin, nil
	}
	if name == "redis-server" {
		return "", notInstalled(name, err)
	}
	return "", fmt.Errorf("%w: %s (%s): %v; for valkey-server run scripts/deps.sh --valkey",
		ErrNotInstalled, name, from, err)
}

// RedisOptions configures a throwaway redis-server.
type RedisOptions struct {
	// Args are extra redis-server arguments, passed after testenv's own
	// (--port, --bind 127.0.0.1, --dir, --save "", --appendonly no, ...) so
	// they override them: e.g. "--appendonly", "yes" turns persistence on,
	// "--maxmemory", "1mb", "--maxmemory-policy", "allkeys-lru" makes eviction
	// easy to provoke. The default is none.
	Args []string
	// Server is the server binary, a name looked up in PATH or a path, e.g.
	// "valkey-server", for a program that runs two kinds side by side. The
	// default ("") is the one [ServerEnv] names.
	Server string
	// Port is the TCP port to listen on; 0 (the default) picks a free one.
	// A fixed port is for a test about that port, such as one proving that
	// nothing connects to Redis's well-known 6379 (in a private network
	// namespace, where it is free): it fails when the port is taken.
	Port int
	// TLS makes the server take TLS connections alone (TLSOnly), and
	// client certificates too (MutualTLS), with certificates that openssl
	// makes in its directory (see [Redis.TLS]). The default is NoTLS.
	TLS TLSMode
}

// Redis is one redis-server process in its own temporary directory, on
// 127.0.0.1 and a port that stays the same across Stop/Kill and Start.
// Its log is redis.log in [Redis.Dir]. Methods are safe for concurrent use.
type Redis struct {
	mu        sync.Mutex
	bin       string
	dir       string
	port      int
	args      []string  // RedisOptions.Args
	tls       *TLSFiles // nil for plaintext
	mutual    bool      // MutualTLS
	replicaOf string    // primary address given to --replicaof on (re)start, "" for a master
	proc      *proc
	closed    bool
}

// StartRedis starts a redis-server with no persistence (unless opt.Args turn
// it on) and waits until it answers PING. The caller must Close it.
func StartRedis(ctx context.Context, opt RedisOptions) (*Redis, error) {
	if opt.Port != 0 {
		return startRedisOn(ctx, opt)
	}
	return startRedis(ctx, opt, "", nil)
}

// startRedisOn starts a server on port, and only there.
func startRedisOn(ctx context.Context, opt RedisOptions) (*Redis, error) {
	port := opt.Port
	bin, err := redisServer(opt.Server)
	if err != nil {
		return nil, err
	}
	// Checked first: the PING that waits for the new server would
	// otherwise be answered by the server that holds the port.
	if !portFree(port) {
		return nil, fmt.Errorf("testenv: 127.0.0.1:%d is taken: %w", port, errAddrInUse)
	}
	r, err := newRedis(ctx, bin, opt, "")
	if err != nil {
		return nil, err
	}
	r.port = port
	if err := r.Start(ctx); err != nil {
		os.RemoveAll(r.dir)
		return nil, err
	}
	return r, nil
}

// newRedis makes a Redis (not started) in a new temporary directory, with
// its certificates when opt asks for TLS.
func newRedis(ctx context.Context, bin string, opt RedisOptions, replicaOf string) (*Redis, error) {
	dir, err := makeTempDir("testenv-redis-")
	if err != nil {
		return nil, err
	}
	r := &Redis{bin: bin, dir: dir, args: opt.Args, replicaOf: replicaOf, mutual: opt.TLS == MutualTLS}
	if opt.TLS != NoTLS {
		if r.tls, err = makeCerts(ctx, dir); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	return r, nil
}

// startRedis starts a server on a port that portOK accepts, retrying on a new
// port when the chosen one was taken before redis-server could bind it.
// opt.Server is the binary, "" for the one ServerEnv names.
func startRedis(ctx context.Context, opt RedisOptions, replicaOf string, portOK func(int) bool) (*Redis, error) {
	bin, err := redisServer(opt.Server)
	if err != nil {
		return nil, err
	}
	r, err := newRedis(ctx, bin, opt, replicaOf)
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		if r.port, err = freePort(portOK); err == nil {
			if err = r.Start(ctx); err == nil {
				return r, nil
			}
			releasePort(r.port)
		}
		if attempt == 5 || !errors.Is(err, errAddrInUse) {
			os.RemoveAll(r.dir)
			return nil, err
		}
	}
}

// StartRedisN starts n independent masters in parallel, e.g. for Redlock.
// On error the servers already started are closed.
func StartRedisN(ctx context.Context, n int, opt RedisOptions) ([]*Redis, error) {
	rs := make([]*Redis, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range rs {
		wg.Go(func() { rs[i], errs[i] = StartRedis(ctx, opt) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeAll(rs)
		return nil, err
	}
	return rs, nil
}

func closeAll(rs []*Redis) {
	for _, r := range rs {
		if r != nil {
			r.Close()
		}
	}
}

// Addr returns "127.0.0.1:port".
func (r *Redis) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(r.port)) }

// Port returns the TCP port, the same across restarts.
func (r *Redis) Port() int { return r.port }

// URL returns "redis://127.0.0.1:port/0", or "rediss://..." for a TLS
// server.
func (r *Redis) URL() string {
	if r.tls != nil {
		return "rediss://" + r.Addr() + "/0"
	}
	return "redis://" + r.Addr() + "/0"
}

// TLS returns the certificate files of a TLS server, nil for a plaintext
// one.
func (r *Redis) TLS() *TLSFiles { return r.tls }

// Dir returns the server's working directory (RDB, AOF, redis.log).
func (r *Redis) Dir() string { return r.dir }

// Options returns fresh go-redis options for this server, with a 1s dial
// timeout, for callers that want to tune timeouts before redis.NewClient.
// For a TLS server they trust its CA and present the client certificate.
func (r *Redis) Options() *redis.Options {
	o := &redis.Options{Addr: r.Addr(), DialTimeout: time.Second}
	if r.tls != nil {
		o.TLSConfig, _ = r.tls.ClientConfig(true) // the files were read at start
	}
	return o
}

// Client returns a new go-redis client for this server; the caller closes it.
func (r *Redis) Client() *redis.Client { return redis.NewClient(r.Options()) }

// name is the server binary's name for messages: redis-server, valkey-server.
func (r *Redis) name() string { return filepath.Base(r.bin) }

func (r *Redis) logPath() string { return filepath.Join(r.dir, "redis.log") }

// Start (re)starts the server on the same port and directory after Stop or
// Kill and waits until it answers PING (at most 15s, or until ctx ends).
// A replica restarts as a replica of the same primary.
func (r *Redis) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrClosed
	}
	if r.proc.running() {
		return fmt.Errorf("testenv: %s on %s is already running", r.name(), r.Addr())
	}
	args := []string{
		"--port", strconv.Itoa(r.port), "--bind", "127.0.0.1", "--dir", r.dir,
		"--daemonize", "no", "--save", "", "--appendonly", "no",
		// Redis 7 waits 5s for more replicas before a diskless full sync.
		"--repl-diskless-sync-delay", "0",
	}
	if r.tls != nil {
		args = append(args, r.tls.tlsArgs(r.port, r.mutual)...)
	}
	args = append(args, r.args...)
	if r.replicaOf != "" {
		host, port, _ := net.SplitHostPort(r.replicaOf)
		args = append(args, "--replicaof", host, port)
	}
	offset := fileSize(r.logPath())
	p, err := startProc(r.bin, args, r.dir, r.logPath(), nil)
	if err != nil {
		return err
	}
	r.proc = p
	if err := waitPing(ctx, r.Addr(), r.tls, p); err != nil {
		p.kill()
		return startError(r.name()+" on "+r.Addr(), r.logPath(), offset, err)
	}
	return nil
}

// waitPing polls addr with a raw PING until it answers +PONG (not -LOADING),
// over TLS when tf is not nil.
func waitPing(ctx context.Context, addr string, tf *TLSFiles, p *proc) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	var last error
	for {
		if last = ping(ctx, addr, tf); last == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("server exited: %v", p.err)
		case <-ctx.Done():
			return fmt.Errorf("%w (last PING: %v)", ctx.Err(), last)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func ping(ctx context.Context, addr string, tf *TLSFiles) error {
	var d net.Dialer
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	if tf != nil {
		c, err := tf.ClientConfig(true)
		if err != nil {
			conn.Close()
			return err
		}
		tc := tls.Client(conn, c)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return err
		}
		conn = tc
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line = strings.TrimSpace(line); line != "+PONG" {
		return errors.New(line)
	}
	return nil
}

// Stop shuts the server down gracefully with SIGTERM (resuming it first if
// paused) and waits; after 10s it is killed. Like SHUTDOWN, SIGTERM writes an
// RDB only if Args configured save points, and flushes the AOF if enabled.
func (r *Redis) Stop() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc.stop(syscall.SIGTERM, 10*time.Second)
}

// Kill sends SIGKILL and waits for the process to exit: a crash, nothing saved.
func (r *Redis) Kill() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.proc.kill()
	return nil
}

// Pause freezes the server with SIGSTOP: connections stay open and commands
// hang until Resume, like a server stalled by a long fork or a VM pause.
func (r *Redis) Pause() error { return r.signal(syscall.SIGSTOP) }

// Resume continues a paused server with SIGCONT.
func (r *Redis) Resume() error { return r.signal(syscall.SIGCONT) }

func (r *Redis) signal(sig syscall.Signal) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.proc.running() {
		return fmt.Errorf("testenv: %s on %s is not running", r.name(), r.Addr())
	}
	return r.proc.signal(sig)
}

// Close kills the server if it runs and removes its directory. It is
// idempotent and safe after Stop or Kill.
func (r *Redis) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	r.proc.kill()
	releasePort(r.port)
	return os.RemoveAll(r.dir)
}
