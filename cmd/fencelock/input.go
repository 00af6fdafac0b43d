//go:build unix

package main

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/once"
)

// Bad input is refused before any I/O, with a usage error (status 2):
// names that would print as something else, URLs that would reach a server
// nobody named or make go-redis panic, and durations past their ceilings.

const (
	// maxTTL is the ceiling of --ttl (run and doctor), --grace and
	// --timeout. A holder that crashed keeps its lock for up to its ttl,
	// and the keep-alive makes a long command need no long ttl.
	maxTTL = time.Hour
	// maxWait is the ceiling of run --wait.
	maxWait = 24 * time.Hour
	// maxPeriod is the ceiling of run --once-per: once's.
	maxPeriod = once.MaxPeriod
)

// checkName reports why s, a lock name (what is "lock name", "--name", ...),
// cannot be used: fence.ValidateKey's reasons, and characters that do not
// print, which would make inspect's output lie (a newline forges a line, a
// right-to-left override reverses one).
func checkName(what, s string) error {
	if err := fence.ValidateKey(s); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return checkPrintable(what, s)
}

// checkPrintable reports a character of s that does not print (a space
// does).
func checkPrintable(what, s string) error {
	if i := strings.IndexFunc(s, notPrintable); i >= 0 {
		return fmt.Errorf("%s %q: a character that does not print (a control character, %U) at byte %d", what, s, []rune(s[i:])[0], i)
	}
	return nil
}

// notPrintable reports a rune that does not print: control and format
// characters, and every space but ' '.
func notPrintable(r rune) bool { return !unicode.IsPrint(r) }

// checkDuration reports a duration flag outside [0, ceiling].
func checkDuration(flag string, d, ceiling time.Duration) error {
	switch {
	case d < 0:
		return fmt.Errorf("%s must not be negative, got %v", flag, d)
	case d > ceiling:
		return fmt.Errorf("%s %v is above its ceiling, %v", flag, d, ceiling)
	}
	return nil
}

// poolCeiling bounds go-redis's connection counts in a URL.
const poolCeiling = 1000

// urlIntLimits are the integer URL options go-redis takes without a bound
// (a negative pool_size panics in go-redis, a huge one exhausts memory),
// with the range fencelock accepts: 0 is go-redis's default, -1 where
// go-redis gives it a meaning (no retries, no pipeline pool).
var urlIntLimits = map[string][2]int{
	"pool_size":                  {0, poolCeiling},
	"min_idle_conns":             {0, poolCeiling},
	"max_idle_conns":             {0, poolCeiling},
	"max_active_conns":           {0, poolCeiling},
	"max_concurrent_dials":       {0, poolCeiling},
	"pipeline_pool_size":         {-1, poolCeiling},
	"pipeline_read_buffer_size":  {0, 16 << 20},
	"pipeline_write_buffer_size": {0, 16 << 20},
	"max_retries":                {-1, 100},
	"dialer_retries":             {-1, 100},
	"max_redirects":              {-1, 100},
	"failing_timeout_seconds":    {0, 3600},
}

// checkRedisURL reports, before go-redis parses raw (scheme://rest), what
// fencelock refuses in it: an empty host (go-redis would dial localhost:
// an unset variable in redis://${HOST}:6379 must not lock this host's own
// Redis), and an integer option outside urlIntLimits. The error does not
// quote raw's secrets.
func checkRedisURL(scheme, rest string) error {
	query := ""
	if i := strings.IndexByte(rest, '?'); i >= 0 {
		rest, query = rest[:i], rest[i+1:]
	}
	if scheme != "unix" {
		authority := rest
		if at := strings.LastIndexByte(authority, '@'); at >= 0 {
			authority = authority[at+1:]
		}
		if i := strings.IndexByte(authority, '/'); i >= 0 {
			authority = authority[:i]
		}
		for _, h := range strings.Split(authority, ",") { // go-redis refuses an empty addr= itself
			if host(h) == "" {
				return errors.New("empty host (an unset variable?): fencelock never guesses its server")
			}
		}
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil // go-redis says what is wrong, redacted
	}
	for name, vals := range q {
		limits, ok := urlIntLimits[name]
		if !ok {
			continue
		}
		for _, v := range vals {
			n, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("%s=%q: not an integer", name, v)
			}
			if n < limits[0] || n > limits[1] {
				return fmt.Errorf("%s=%d: fencelock takes %d to %d", name, n, limits[0], limits[1])
			}
		}
	}
	return nil
}

// host is the host of HOST[:PORT] or [IPv6][:PORT].
func host(hostport string) string {
	if strings.HasPrefix(hostport, "[") {
		h, _, _ := strings.Cut(hostport[1:], "]")
		return h
	}
	h, _, _ := strings.Cut(hostport, ":")
	return h
}
