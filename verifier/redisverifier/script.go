package redisverifier

import (
	"context"
	"strings"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/luascript"
)

// Script is a caller's own Lua write, fenced: each Run checks the token and
// runs the write in one script, only when the token is accepted.
type Script struct {
	v *Verifier
	s *luascript.Script
}

// NewScript fences the Lua code body. body is the inside of a function
//
//	function(KEYS, ARGV, FENCE_SEQ, FENCE_HOLDER) ... end
//
// that sees only the keys and arguments given to [Script.Run] (not the
// high-water key), and the accepted token's Seq (a decimal string) and
// holder, should it want to store them beside the data. What it returns is
// what Run returns. For example
//
//	redis.call('RPUSH', KEYS[1], ARGV[1])
//	return redis.call('LLEN', KEYS[1])
//
// The high-water is raised after body returns, so a body that raises an
// error (redis.error_reply, or a failing redis.call) leaves it as it was;
// Redis does not undo writes the body made before the error, though.
//
// body becomes part of the script's source: pass a constant from your code,
// never text that came from a request. Data goes in Run's keys and args.
// A syntax error in body is reported by the first Run, with body's own line
// numbers ("user_script:2: ..."). body runs as a function of its own: it
// sees only its parameters and Redis' globals, not the script's internals.
//
// NewScript does no I/O. Called on a nil *Verifier, or on one not made by
// [New], it returns an error wrapping [ErrInvalid].
func (v *Verifier) NewScript(body string) (*Script, error) {
	if v == nil || v.rdb == nil {
		return nil, invalid("NewScript on a Verifier not made by New")
	}
	// body starts on the script's first line, so that the line numbers in
	// Redis' errors ("user_script:3: ...") are body's own.
	var src strings.Builder
	src.WriteString("local function write(KEYS, ARGV, FENCE_SEQ, FENCE_HOLDER) ")
	src.WriteString(body)
	src.WriteString("\nend\n")
	src.WriteString(checkSrc)
	src.WriteString("\n")
	src.WriteString(customSrc)
	return &Script{v: v, s: luascript.New(src.String(), "")}, nil
}

// Run runs the script's write with keys and args if tok is accepted for
// resource, raises the high-water, and returns the write's result (as
// go-redis returns script replies: int64, string, []any, nil...). A refused
// token returns a *verifier.StaleError, or a *verifier.ForeignError for a
// token of another lock than the resource's, and the write does not run. In Redis
// Cluster, keys must hash to the same slot as the resource's high-water key
// (see the package documentation). Run on a nil *Script, or on one not made
// by [Verifier.NewScript], returns an error wrapping [ErrInvalid].
func (s *Script) Run(ctx context.Context, resource string, tok fence.Token, keys []string, args ...any) (any, error) {
	if s == nil || s.s == nil {
		return nil, invalid("Run on a Script not made by NewScript")
	}
	return s.v.run(ctx, s.s, resource, tok, keys, args...)
}
