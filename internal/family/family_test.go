package family

import (
	"errors"
	"testing"
	"time"
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
