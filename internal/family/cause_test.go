package family

import (
	"context"
	"errors"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// dialer fails or succeeds on demand: the fault injected at the dial.
func dialer(fail *bool) redis.DialHook {
	return func(context.Context, string, string) (net.Conn, error) {
		if *fail {
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
		}
		a, b := net.Pipe()
		b.Close()
		return a, nil
	}
}

func TestDialsExplain(t *testing.T) {
	var d Dials
	fail := true
	dial := d.DialHook(dialer(&fail))
	ended := errors.Join(errors.New("lease: not acquired"), context.DeadlineExceeded)

	before := time.Now()
	_, _ = dial(t.Context(), "tcp", "h:1")
	err := d.Explain(ended, before)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("Explain lost a cause: %v", err)
	}
	if want := "(last dial to h:1: connection refused)"; !strings.HasSuffix(err.Error(), want) {
		t.Errorf("Explain = %q, want it to end in %q", err, want)
	}
	if again := d.Explain(err, before); again != err {
		t.Errorf("Explain named the dial twice: %v", again)
	}

	if err := d.Explain(ended, time.Now().Add(time.Millisecond)); err != ended {
		t.Errorf("a dial before the call was named: %v", err)
	}
	if err := d.Explain(errors.New("other"), before); err.Error() != "other" {
		t.Errorf("an error other than the context's was changed: %v", err)
	}
	fail = false
	conn, _ := dial(t.Context(), "tcp", "h:1")
	conn.Close()
	if err := d.Explain(ended, before); err != ended {
		t.Errorf("a dial failure followed by a success was named: %v", err)
	}
	var nilDials *Dials
	if err := nilDials.Explain(ended, before); err != ended {
		t.Errorf("nil Dials changed the error: %v", err)
	}
}

func TestDialsOfOncePerClient(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	if a, b := DialsOf(rdb), DialsOf(rdb); a == nil || a != b {
		t.Errorf("DialsOf gave %p and %p for one client", a, b)
	}
	if DialsOf(redis.NewClusterClient(&redis.ClusterOptions{})) == nil {
		t.Error("no recorder for a cluster client")
	}
}
