package isnil_test

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/internal/isnil"
)

func TestNil(t *testing.T) {
	var rc *redis.Client
	var uc redis.UniversalClient = rc
	var fn func()
	cases := []struct {
		name string
		v    any
		want bool
	}{
		{"untyped nil", nil, true},
		{"typed nil pointer in an interface", uc, true},
		{"nil func", fn, true},
		{"live client", redis.NewClient(&redis.Options{}), false},
		{"zero int", 0, false},
		{"empty string", "", false},
	}
	for _, c := range cases {
		if got := isnil.Nil(c.v); got != c.want {
			t.Errorf("%s: Nil = %v, want %v", c.name, got, c.want)
		}
	}
}
