package redisverifier

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/isnil"
	"github.com/fencelock/fencelock/internal/luascript"
	"github.com/fencelock/fencelock/observe"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/internal/scaffold"
)

var (
	//go:embed check.lua
	checkSrc string
	//go:embed fenced.lua
	fencedSrc string
	//go:embed custom.lua
	customSrc string
	//go:embed highest.lua
	highestSrc string
	//go:embed move.lua
	moveSrc string
	//go:embed reset.lua
	resetSrc string

	// Run by the SHA-1 the server gives on first use: none is computed
	// here (GODEBUG=fips140=only refuses crypto/sha1).
	fencedScript  = luascript.New(checkSrc+"\n"+fencedSrc, "")
	highestScript = luascript.New(highestSrc, "")
	moveScript    = luascript.New(moveSrc, "")
	resetScript   = luascript.New(resetSrc, "")
)

// DefaultPrefix is the prefix of high-water keys unless [WithPrefix] says
// otherwise.
const DefaultPrefix = "fencelock:hw:"

// Option configures a Verifier. An option checks its own argument; [New]
// returns the first option's error, which wraps [ErrInvalid].
type Option func(*scaffold.Config) error

// kind is this package, to the verifier scaffold.
var kind = &scaffold.Kind{Pkg: "redisverifier", ErrInvalid: ErrInvalid}

// WithHooks reports every token the verifier accepts or refuses to h's
// Verified function (verifier "redis"; see package observe). A nil h is
// invalid. The default is no hooks.
func WithHooks(h *observe.Hooks) Option { return Option(kind.WithHooks(h)) }

// WithClockBound refuses tokens whose Seq is more than bound above this
// process's clock, in microseconds since the Unix epoch, with an error
// wrapping verifier.ErrAhead, before any I/O: for locks whose counters
// follow the clock (lease.WithClockFloor), so that a forged token cannot
// raise a high-water out of the real counter's reach. 24h matches the
// lease side's bound. A negative bound is invalid. The default is 0: no
// bound.
func WithClockBound(bound time.Duration) Option { return Option(kind.WithClockBound(bound)) }

// WithPrefix sets the prefix of the high-water keys: the high-water of
// resource R is the hash PREFIX+R. The prefix must not contain '{' or '}',
// which would make its own hash tag and, in Redis Cluster, move the
// high-water away from the slot of the resource's hash tag (see the package
// documentation). The default is [DefaultPrefix].
func WithPrefix(prefix string) Option {
	return func(c *scaffold.Config) error {
		if strings.ContainsAny(prefix, "{}") {
			return invalid("prefix %q must not contain '{' or '}'", prefix)
		}
		c.Prefix = prefix
		return nil
	}
}

// Verifier is a fencing-token verifier for data kept in Redis. Each
// resource's high-water is a hash in the same Redis, and every fenced write
// is one Lua script that checks the token and makes the write only if the
// token is accepted. It is safe for concurrent use.
type Verifier struct {
	base   scaffold.Base
	rdb    redis.Scripter
	prefix string
}

var (
	_ verifier.Verifier = (*Verifier)(nil)
	_ verifier.Mover    = (*Verifier)(nil)
	_ verifier.Resetter = (*Verifier)(nil)
)

// New returns a verifier that runs its scripts on rdb (a *redis.Client,
// *redis.ClusterClient, *redis.Ring or redis.UniversalClient). The client
// is not closed by the verifier.
//
// It checks that rdb is neither nil nor a typed nil (a nil *redis.Client
// passed as a redis.Scripter), and that no option is nil or was given a bad
// value; otherwise it returns an error wrapping [ErrInvalid]. It does no
// I/O. With no options the prefix is [DefaultPrefix].
func New(rdb redis.Scripter, opts ...Option) (*Verifier, error) {
	if isnil.Nil(rdb) {
		return nil, invalid("New: nil redis client")
	}
	c := scaffold.Config{Prefix: DefaultPrefix}
	if err := scaffold.Apply(kind, &c, opts); err != nil {
		return nil, err
	}
	return &Verifier{base: kind.Base(observe.VerifierRedis, c), rdb: rdb, prefix: c.Prefix}, nil
}

// b returns v's scaffold; nil for a nil v.
func (v *Verifier) b() *scaffold.Base {
	if v == nil {
		return nil
	}
	return &v.base
}

// Key returns the Redis key that holds the high-water of resource; "" for a
// nil *Verifier.
func (v *Verifier) Key(resource string) string {
	if v == nil {
		return ""
	}
	return v.prefix + resource
}

// Claim checks tok for resource and raises the resource's high-water to it,
// with no other write. See [verifier.Verifier] for the errors.
func (v *Verifier) Claim(ctx context.Context, resource string, tok fence.Token) error {
	_, err := v.run(ctx, fencedScript, resource, tok, nil, "claim")
	return err
}

// Set runs SET key value (with PX ttl when ttl > 0) only if tok is accepted
// for resource, and raises the high-water in the same script.
// A negative ttl returns an error wrapping [ErrInvalid].
func (v *Verifier) Set(ctx context.Context, resource string, tok fence.Token, key string, value any, ttl time.Duration) error {
	if ttl < 0 {
		return invalid("Set: negative ttl %v", ttl)
	}
	if ttl > 0 && ttl < time.Millisecond {
		ttl = time.Millisecond
	}
	_, err := v.run(ctx, fencedScript, resource, tok, []string{key}, "set", value, ttl.Milliseconds())
	return err
}

// HSet runs HSET key field value [field value ...] only if tok is accepted
// for resource, and raises the high-water in the same script. fieldValues
// must be one or more field/value pairs, else the error wraps [ErrInvalid].
func (v *Verifier) HSet(ctx context.Context, resource string, tok fence.Token, key string, fieldValues ...any) error {
	if len(fieldValues) == 0 || len(fieldValues)%2 != 0 {
		return invalid("HSet wants field/value pairs, got %d values", len(fieldValues))
	}
	_, err := v.run(ctx, fencedScript, resource, tok, []string{key}, append([]any{"hset"}, fieldValues...)...)
	return err
}

// Highest returns the high-water of resource: the highest Seq it accepted
// and the holder that presented it, or 0 and "" if it has none.
func (v *Verifier) Highest(ctx context.Context, resource string) (seq uint64, holder string, err error) {
	if err := kind.Usable(ctx, v.b()); err != nil {
		return 0, "", err
	}
	if err := verifier.ValidateResource(resource); err != nil {
		return 0, "", err
	}
	seq, holder, _, err = v.highest(ctx, resource)
	return seq, holder, err
}

// Lock returns the lock resource is bound to, or "" if none.
func (v *Verifier) Lock(ctx context.Context, resource string) (string, error) {
	if err := kind.Usable(ctx, v.b()); err != nil {
		return "", err
	}
	if err := verifier.ValidateResource(resource); err != nil {
		return "", err
	}
	_, _, lock, err := v.highest(ctx, resource)
	return lock, err
}

// highest reads the high-water of resource and its lock.
func (v *Verifier) highest(ctx context.Context, resource string) (seq uint64, holder, lock string, err error) {
	reply, err := highestScript.Run(ctx, v.rdb, []string{v.Key(resource)}).Slice()
	if err != nil {
		return 0, "", "", fmt.Errorf("redisverifier: high-water of %q: %w", resource, err)
	}
	if len(reply) != 3 {
		return 0, "", "", fmt.Errorf("redisverifier: high-water of %q: unexpected reply %v", resource, reply)
	}
	lock, _ = reply[2].(string)
	if reply[0] == nil {
		return 0, "", lock, nil
	}
	seq, holder, err = parseHigh(reply[0], reply[1])
	if err != nil {
		return 0, "", "", fmt.Errorf("redisverifier: high-water of %q: %w", resource, err)
	}
	return seq, holder, lock, nil
}

// Move binds resource to lock to and forgets its high-water, provided it
// is bound to from or to no lock yet; otherwise it returns a
// *verifier.ForeignError and changes nothing. See [verifier.Mover]. It is
// one script.
func (v *Verifier) Move(ctx context.Context, resource, from, to string) error {
	if err := kind.Usable(ctx, v.b()); err != nil {
		return err
	}
	if err := verifier.ValidateMove(resource, from, to); err != nil {
		return err
	}
	reply, err := moveScript.Run(ctx, v.rdb, []string{v.Key(resource)}, from, to).Slice()
	if err != nil {
		return fmt.Errorf("redisverifier: move %q: %w", resource, err)
	}
	if ok, _ := reply[0].(int64); ok == 1 {
		return nil
	}
	lock, _ := reply[len(reply)-1].(string)
	return &verifier.ForeignError{Resource: resource, Token: fence.Token{Key: from}, Lock: lock}
}

// Reset sets resource's high-water to to and binds it to lock to.Key,
// whatever they were; see [verifier.Resetter] for which token to give. It
// is one script.
func (v *Verifier) Reset(ctx context.Context, resource string, to fence.Token) error {
	if err := kind.Usable(ctx, v.b()); err != nil {
		return err
	}
	if err := verifier.ValidateReset(resource, to); err != nil {
		return err
	}
	seq := strconv.FormatUint(to.Seq, 10)
	if err := resetScript.Run(ctx, v.rdb, []string{v.Key(resource)}, seq, to.Holder, to.Key).Err(); err != nil {
		return fmt.Errorf("redisverifier: reset %q: %w", resource, err)
	}
	return nil
}

// run executes a fenced script: KEYS = [high-water, keys...], ARGV = [seq,
// holder, lock, args...]. It returns the script's result on acceptance.
func (v *Verifier) run(ctx context.Context, s *luascript.Script, resource string, tok fence.Token, keys []string, args ...any) (reply any, err error) {
	err = kind.Check(ctx, v.b(), resource, tok, func(c scaffold.Claim) error {
		reply, err = v.check(ctx, s, c, keys, args...)
		return err
	})
	return reply, err
}

// check runs s for c, whose resource and token are valid.
func (v *Verifier) check(ctx context.Context, s *luascript.Script, c scaffold.Claim, keys []string, args ...any) (any, error) {
	resource, tok := c.Resource(), c.Token()
	hw := v.Key(resource)
	for _, k := range keys {
		if k == hw {
			return nil, invalid("key %q is the high-water of resource %q", k, resource)
		}
	}
	allKeys := append([]string{hw}, keys...)
	allArgs := append([]any{strconv.FormatUint(tok.Seq, 10), tok.Holder, tok.Key}, args...)
	reply, err := s.Run(ctx, v.rdb, allKeys, allArgs...).Slice()
	if err != nil {
		return nil, fmt.Errorf("redisverifier: resource %q: %w", resource, err)
	}
	if len(reply) == 0 {
		return nil, fmt.Errorf("redisverifier: resource %q: empty script reply", resource)
	}
	if ok, _ := reply[0].(int64); ok == 1 {
		if len(reply) > 1 {
			return reply[1], nil
		}
		return nil, nil
	}
	if code, _ := reply[0].(int64); code == 2 && len(reply) == 2 {
		lock, _ := reply[1].(string)
		return nil, &verifier.ForeignError{Resource: resource, Token: tok, Lock: lock}
	}
	if len(reply) != 3 {
		return nil, fmt.Errorf("redisverifier: resource %q: unexpected script reply %v", resource, reply)
	}
	high, holder, err := parseHigh(reply[1], reply[2])
	if err != nil {
		return nil, fmt.Errorf("redisverifier: resource %q: %w", resource, err)
	}
	return nil, &verifier.StaleError{Resource: resource, Token: tok, Highest: high, HighestHolder: holder}
}

func parseHigh(seqReply, holderReply any) (uint64, string, error) {
	s, _ := seqReply.(string)
	holder, ok := holderReply.(string)
	if s == "0" && ok && holder == "" {
		return 0, "", nil // moved to another lock, no token accepted since
	}
	seq, err := fence.ParseSeq(s)
	if err != nil || !ok {
		return 0, "", errors.Join(fmt.Errorf("corrupt high-water (%v, %v)", seqReply, holderReply), err)
	}
	return seq, holder, nil
}
