//go:build unix

package main

import (
	"errors"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/internal/testenv"
)

// secret is the password every URL of TestNoSecretPrinted carries.
const secret = "S3cretPw"

// TestNoSecretPrinted drives every error path of the command that a URL
// reaches (bad Redis URLs of every form, Redis and the verifier's store
// unreachable or refusing the password, reset-highwater's --verifier and
// its environment form, TLS flags with a plaintext URL) with a password in
// the URL, and finds the password nowhere in stdout or stderr. Before, a
// bad URL was quoted whole (and, until later, one that TLS flags refused).
func TestNoSecretPrinted(t *testing.T) {
	t.Parallel()
	closed := testenv.ClosedAddr(t)
	shared := strings.TrimSuffix(strings.TrimPrefix(redisURL, "redis://"), "/0")
	// A user whose password is known, so that a wrong one is refused.
	rdb := redis.NewClient(&redis.Options{Addr: shared})
	t.Cleanup(func() { rdb.Close() })
	require.NoError(t, rdb.Do(t.Context(), "ACL", "SETUSER", "fltest", "on", ">right-"+secret, "~*", "&*", "+@all").Err())
	t.Cleanup(func() { rdb.Do(t.Context(), "ACL", "DELUSER", "fltest") })
	name := lockName(t)
	require.Equal(t, 0, fl(t, "", on("run", name, "--", "true")...).code, "a lock with a counter, for reset-highwater")

	ca := testenv.NewRedis(t, testenv.RedisOptions{TLS: testenv.TLSOnly}).TLS().CA
	pw := "u:" + secret + "@"
	withCA := func(u string) []string { return []string{"--redis", u, "--tls-ca", ca, "inspect", "x"} }
	bad := func(u string) []string { return []string{"--redis", u, "inspect", "x"} }
	reset := func(store string) []string { return on("reset-highwater", "--verifier", store, name, "res") }
	for _, tc := range []struct {
		what   string
		args   []string
		env    string // REDIS_URL or FENCELOCK_VERIFIER_URL=...
		forbid []string
	}{
		{what: "bad option", args: bad("redis://" + pw + "127.0.0.1:1/0?bogus=1")},
		{what: "bad option in REDIS_URL", args: []string{"inspect", "x"}, env: "REDIS_URL=redis://" + pw + "127.0.0.1:1/0?bogus=1"},
		{what: "bad escape", args: bad("redis://u:" + secret + "%zz@127.0.0.1:1/0"), forbid: []string{"%zz"}},
		{what: "bad escape, password parameter", args: bad("redis://127.0.0.1:1/0?password=" + secret + "%zz"), forbid: []string{"%zz"}},
		{what: "unescaped ? in the password", args: bad("redis://u:" + secret + "?x@127.0.0.1:1/0")},
		{what: "unknown scheme", args: bad("ftp://" + pw + "127.0.0.1:1/")},
		{what: "no scheme", args: bad(pw + "127.0.0.1:1")},
		{what: "URL list", args: bad(pw + "127.0.0.1:1,redis://127.0.0.1:2")},
		{what: "redlock node", args: bad("redis://127.0.0.1:1,redis://" + pw + "127.0.0.1:2/0?bogus=1,redis://127.0.0.1:3")},
		{what: "sentinel without master", args: bad("redis+sentinel://" + pw + "127.0.0.1:1?password=x" + secret)},
		{what: "sentinel bad option", args: bad("redis+sentinel://" + pw + "127.0.0.1:1,127.0.0.1:2?master_name=m&password=x" + secret + "&bogus=1")},
		{what: "sentinel unreachable", args: bad("redis+sentinel://" + pw + closed + "?master_name=m&password=x" + secret + "&dial_timeout=200ms")},
		{what: "cluster bad option", args: bad("redis+cluster://" + pw + "127.0.0.1:1,127.0.0.1:2?bogus=1")},
		{what: "doctor, bad option", args: []string{"--redis", "redis://" + pw + "127.0.0.1:1/0?bogus=1", "doctor"}},
		{what: "run, unreachable", args: []string{"--redis", "redis://" + pw + closed + "/0", "run", "x", "--", "true"}},
		{what: "run --wait, unreachable", args: []string{"--redis", "redis://" + pw + closed + "/0", "run", "--wait", "1s", "x", "--", "true"}},
		{what: "inspect, unreachable", args: bad("redis://" + pw + closed + "/0")},
		{what: "advance, unreachable", args: []string{"--redis", "redis://" + pw + closed + "/0", "advance", "x", "5"}},
		{what: "doctor, unreachable", args: []string{"--redis", "redis://" + pw + closed + "/0", "doctor"}},
		{what: "wrong password", args: bad("redis://fltest:" + secret + "@" + shared + "/0")},
		{what: "doctor, wrong password", args: []string{"--redis", "redis://fltest:" + secret + "@" + shared + "/0", "doctor"}},
		{what: "TLS flags, plaintext URL", args: withCA("redis://" + pw + "127.0.0.1:1/0")},
		{what: "TLS flags, plaintext sentinel URL", args: withCA("redis+sentinel://" + pw + "127.0.0.1:1?master_name=m&password=x" + secret)},
		{what: "TLS flags, plaintext cluster URL", args: withCA("redis+cluster://" + pw + "127.0.0.1:1,127.0.0.1:2")},
		{what: "verifier, unknown scheme", args: reset("pg://" + pw + "h/db")},
		{what: "verifier, no scheme", args: reset(pw + "h/db")},
		{what: "verifier, postgres unreachable", args: reset("postgres://" + pw + closed + "/db?connect_timeout=2")},
		{what: "verifier, postgres bad option", args: reset("postgres://" + pw + "h/db?connect_timeout=soon")},
		{what: "verifier, postgres bad escape", args: reset("postgres://u:" + secret + "%zz@h/db"), forbid: []string{"%zz"}},
		{what: "verifier, postgres password parameter", args: reset("postgres://" + closed + "/db?password=" + secret + "&connect_timeout=2")},
		{what: "verifier, mysql unreachable", args: reset("mysql://" + pw + "tcp(" + closed + ")/db")},
		{what: "verifier, mysql bad DSN", args: reset("mysql://" + pw + "tcp(h")},
		{what: "verifier, redis bad option", args: reset("redis://" + pw + "127.0.0.1:1/0?bogus=1")},
		{what: "verifier, redis wrong password", args: reset("redis://fltest:" + secret + "@" + shared + "/0")},
		{what: "verifier from the environment", args: on("reset-highwater", name, "res"), env: verifierEnv + "=pg://" + pw + "h/db"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			t.Parallel()
			p := startEnv(t, "", tc.env, tc.args...)
			r := p.wait(t)
			assert.NotContains(t, []int{0, -1}, r.code, "the command failed, and did not crash")
			assert.NotContains(t, r.stderr, "goroutine ", "no panic")
			for _, s := range append([]string{secret, url.QueryEscape(secret)}, tc.forbid...) {
				assert.NotContains(t, r.stdout, s)
				assert.NotContains(t, r.stderr, s)
			}
		})
	}
}

// TestNoSecretPrintedWorks: with the password in FENCELOCK_VERIFIER_URL,
// reset-highwater reaches the store, and the right password in a Redis URL
// works (the redaction masks output, not what is used).
func TestNoSecretPrintedWorks(t *testing.T) {
	t.Parallel()
	name := lockName(t)
	require.Equal(t, 0, fl(t, "", on("run", name, "--", "true")...).code)
	r := startEnv(t, "", verifierEnv+"="+redisURL, on("reset-highwater", name, "res")...).wait(t)
	assert.Equal(t, 0, r.code, r.stderr)
	assert.Contains(t, r.stdout, "resource  res")
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"redis://u:pw@h:1/0":                           "redis://u:xxxxx@h:1/0",
		"redis://:pw@h:1/0?dial_timeout=1s":            "redis://:xxxxx@h:1/0?dial_timeout=1s",
		"redis://u@h:1/0":                              "redis://u@h:1/0",
		"redis://h:1/0":                                "redis://h:1/0",
		"redis+sentinel://u:a@b@h:1?password=p&x=1":    "redis+sentinel://u:xxxxx@h:1?password=xxxxx&x=1",
		"redis://u:p/w@h:1/0":                          "redis://u:xxxxx@h:1/0",
		"mysql://app:pw@tcp(db:3306)/app?tls=true":     "mysql://app:xxxxx@tcp(db:3306)/app?tls=true",
		"postgres://h/db?sslpassword=a&password=b":     "postgres://h/db?sslpassword=xxxxx&password=xxxxx",
		"u:pw@h/db":                                    "u:xxxxx@h/db",
		"redis://u:%zz@h:1/0":                          "redis://u:xxxxx@h:1/0",
		"redis://u:pa?ss@h:1/0?password=x":             "redis://u:xxxxx@h:1/0?password=xxxxx",
		"redis://h:1/0?client_name=a@b":                "redis://h:xxxxx@b",
		"rediss+cluster://u:pw@a:1,b:2?read_only=true": "rediss+cluster://u:xxxxx@a:1,b:2?read_only=true",
	} {
		assert.Equal(t, want, redactURL(in), in)
	}
	base := errors.New(`parse "redis://u:S3cret%zz@h": invalid URL escape "%zz"`)
	err := redactErr(base, "redis://u:S3cret%zz@h")
	assert.Equal(t, `parse "redis://u:xxxxx@h": invalid URL escape "xxxxx"`, err.Error())
	assert.ErrorIs(t, err, base)
}

// startEnv is start with one more environment variable, "NAME=VALUE" (or
// none, for "").
func startEnv(t *testing.T, dir, env string, args ...string) *proc {
	t.Helper()
	if env == "" {
		return start(t, dir, args...)
	}
	return startWith(t, dir, append(os.Environ(), "REDIS_URL=", verifierEnv+"=", env), args...)
}
