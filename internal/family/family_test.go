package family

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

var errInvalid = errors.New("invalid")

func TestBackoffDoublesToMax(t *testing.T) {
	b := Backoff{Min: 10 * time.Millisecond, Max: 100 * time.Millisecond}
	for n, want := range []time.Duration{10, 20, 40, 80, 100, 100} {
		want *= time.Millisecond
		for range 50 {
			if d := b.Wait(n); d < want/2 || d > want {
				t.Fatalf("Wait(%d) = %v, want in [%v, %v]", n, d, want/2, want)
			}
		}
	}
	huge := Backoff{Min: time.Nanosecond, Max: 1<<63 - 1}
	if d := huge.Wait(1000); d < huge.Max/2 {
		t.Fatalf("Wait(1000) = %v, want about the max", d)
	}
}

func TestApplyRefusesNilAndForeignOptions(t *testing.T) {
	c := New("fencelock:", 0.01, time.Millisecond, time.Second, time.Hour)
	c.Invalid = errInvalid
	if err := Apply(&c, []any{Set(func(c *Config) error { c.Prefix = "x:"; return nil })}); err != nil || c.Prefix != "x:" {
		t.Fatalf("err = %v, prefix %q", err, c.Prefix)
	}
	if err := Apply(&c, []any{nil}); !errors.Is(err, errInvalid) {
		t.Fatalf("nil option: err = %v", err)
	}
	if err := Apply(&c, []any{"not an option"}); !errors.Is(err, errInvalid) {
		t.Fatalf("foreign option: err = %v", err)
	}
}

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
