package transport

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestSentOf pins the one rule: every failure is either surely not run or
// may have run, never neither.
func TestSentOf(t *testing.T) {
	dial := &net.OpError{Op: "dial", Err: errors.New("connection refused")}
	read := &net.OpError{Op: "read", Err: errors.New("connection reset")}
	for _, c := range []struct {
		err  error
		want Sent
	}{
		{nil, Ran},
		{redis.Error(proto("ERR boom")), Ran},
		{dial, NotSent},
		{redis.ErrPoolTimeout, NotSent},
		{redis.ErrClosed, NotSent},
		{read, MayHaveRun},
		{context.DeadlineExceeded, MayHaveRun},
		{context.Canceled, MayHaveRun},
		{errors.New("EOF"), MayHaveRun},
	} {
		if got := SentOf(c.err); got != c.want {
			t.Errorf("SentOf(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

type proto string

func (p proto) Error() string { return string(p) }
func (p proto) RedisError()   {}

func TestCallSkipsAnEndedContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	called := false
	_, sent, err := Call(ctx, func(context.Context) (int, error) { called = true; return 1, nil })
	if called || sent != NotSent || !errors.Is(err, context.Canceled) {
		t.Fatalf("called %v, sent %v, err %v", called, sent, err)
	}
}

func TestUnreachableSeesARefusedPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	if NewProber(rdb).Unreachable(context.Background()) {
		t.Fatal("a listening port reported unreachable")
	}
	ln.Close()
	p := NewProber(rdb)
	if !p.Unreachable(context.Background()) {
		t.Fatal("a closed port reported reachable")
	}
	if de := p.Probe(context.Background()); !errors.Is(de, syscall.ECONNREFUSED) || de.Addr != addr {
		t.Fatalf("probe = %v", de)
	}
}
