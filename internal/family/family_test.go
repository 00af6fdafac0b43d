package family

import (
	"errors"
	"testing"
	"time"

	"github.com/fencelock/fencelock/observe"
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

func TestOnlyRefusesTheOtherKind(t *testing.T) {
	set := func(c *Config) error { c.Wakeup = true; return nil }
	c := New(observe.KindLease, errInvalid)
	if err := Apply(&c, []func(*Config) error{Only(observe.KindRedlock, "WithWakeup", set)}); !errors.Is(err, errInvalid) {
		t.Fatalf("err = %v, want invalid", err)
	}
	c = New(observe.KindRedlock, errInvalid)
	if err := Apply(&c, []func(*Config) error{Only(observe.KindRedlock, "WithWakeup", set)}); err != nil || !c.Wakeup {
		t.Fatalf("err = %v, wakeup %v", err, c.Wakeup)
	}
	if err := Apply(&c, []func(*Config) error{nil}); !errors.Is(err, errInvalid) {
		t.Fatalf("nil option: err = %v", err)
	}
}
