// Command httpstore runs a tiny key-value storage service whose writes are
// fenced by verifier.NewMiddleware, and clients that send their lease's token
// in the Fence-Token header. A client that paused past its lease gets 409
// Conflict (with the highest token the key has seen) instead of overwriting
// a newer client's value; a malformed token gets 400 and a missing one 428.
//
//	REDIS_URL=redis://localhost:6379/0 go run ./examples/httpstore
//
// It uses the Redis at REDIS_URL for the leases. Left unset, dev.go (not
// part of the example) starts a throwaway redis-server.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/lease"
	"github.com/fencelock/fencelock/verifier"
)

const ttl = 200 * time.Millisecond

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

// store is the storage service: GET and PUT /kv/KEY. PUT is fenced; the
// middleware runs writes to one key one at a time.
type store struct {
	mu   sync.Mutex
	data map[string]string
}

func (s *store) handler() (http.Handler, error) {
	fenced, err := verifier.NewMiddleware(verifier.NewMemory())
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("PUT /kv/", fenced(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.data[r.URL.Path] = string(body)
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})))
	mux.HandleFunc("GET /kv/", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		v, ok := s.data[r.URL.Path]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, v)
	})
	return mux, nil
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb, err := connectRedis(ctx, os.Getenv("REDIS_URL"))
	if err != nil {
		return err
	}
	defer rdb.Close()
	locks, err := lease.New(rdb)
	if err != nil {
		return err
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	h, err := (&store{data: map[string]string{}}).handler()
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Shutdown(context.WithoutCancel(ctx))
	url := "http://" + ln.Addr().String() + "/kv/config"
	fmt.Printf("storage service on %s; PUT /kv/KEY is fenced by verifier.NewMiddleware\n\n", ln.Addr())

	lockName := fmt.Sprintf("httpstore/%d/config", os.Getpid())
	client1, err := locks.TryAcquire(ctx, lockName, ttl)
	if err != nil {
		return err
	}
	fmt.Printf("client 1 holds the lease, token %s\n", client1.Token())
	put(ctx, "client 1 writes", url, "v1 from client 1", client1.Token().String())

	fmt.Printf("client 1 pauses for %v; its lease (ttl %v) expires\n", 2*ttl, ttl)
	time.Sleep(2 * ttl)
	client2, err := locks.TryAcquire(ctx, lockName, 10*time.Second)
	if err != nil {
		return err
	}
	defer client2.Release(context.WithoutCancel(ctx))
	fmt.Printf("client 2 takes the lease, token %s\n", client2.Token())
	put(ctx, "client 2 writes", url, "v2 from client 2", client2.Token().String())

	put(ctx, "client 1 wakes and writes", url, "v3 from client 1 (stale)", client1.Token().String())
	put(ctx, "a client sends garbage", url, "v4", "12:not a token")
	put(ctx, "a client sends no token", url, "v5", "")

	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("\nGET /kv/config -> %q: only the current holder's write landed\n", body)
	return nil
}

// put sends PUT url with value and, unless empty, the token header, and
// prints the answer.
func put(ctx context.Context, who, url, value, token string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, strings.NewReader(value))
	if err != nil {
		log.Fatal(err)
	}
	if token != "" {
		req.Header.Set(fence.Header, token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("  %s %q -> %s", who, value, resp.Status)
	if h := resp.Header.Get(verifier.HighestHeader); h != "" {
		fmt.Printf(" (%s: %s)", verifier.HighestHeader, h)
	}
	if len(body) > 0 {
		fmt.Printf("\n      %s", strings.TrimSpace(string(body)))
	}
	fmt.Println()
}

// connectRedis returns a client for the Redis at url, set up as fencelock's
// README recommends, once it answers PING.
func connectRedis(ctx context.Context, url string) (*redis.Client, error) {
	if url == "" {
		return nil, errors.New("REDIS_URL is not set (e.g. redis://localhost:6379/0)")
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	opt.ContextTimeoutEnabled = true // context deadlines bound socket reads
	rdb := redis.NewClient(opt)
	if err := rdb.Ping(ctx).Err(); err != nil {
		rdb.Close()
		return nil, fmt.Errorf("REDIS_URL=%s: %w", url, err)
	}
	return rdb, nil
}
