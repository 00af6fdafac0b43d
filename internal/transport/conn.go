package transport

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// Conn is what a call sent through a Transport runs on: the script calls
// (redis.Script.Run's EVALSHA, then EVAL on NOSCRIPT) and the pipelines of
// the lease protocol.
type Conn interface {
	redis.Scripter
	Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error)
}

// Send runs op on a Conn of t under ctx, unless ctx has already ended, and
// returns what op's calls did to the server. Of several calls (EVALSHA,
// then EVAL after NOSCRIPT), the last one's Sent counts, unless an earlier
// one may have run. A call whose reply came but which op could not read
// (a malformed reply) may have done anything: MayHaveRun. op must not use
// its Conn after it returns: the Conn serves the next Send.
func Send[T any](ctx context.Context, t *Transport, op func(context.Context, Conn) (T, error)) (T, Sent, error) {
	return SendClaimed(ctx, t, nil, op)
}

// SendClaimed is Send for a caller that may stop waiting before its ctx
// ends (redlock's fan-out, once the outcome is settled) and must then know
// whether the call went out: each call op makes goes out only if claim
// reports true at the moment it does (under the transport's lock when it
// is taken into a pipeline), and is dropped, not sent, otherwise. claim
// must keep reporting true once it has.
func SendClaimed[T any](ctx context.Context, t *Transport, claim func() bool, op func(context.Context, Conn) (T, error)) (T, Sent, error) {
	if err := ctx.Err(); err != nil {
		var zero T
		return zero, NotSent, errors.Join(err, errSkipped)
	}
	c, _ := t.conns.Get().(*conn)
	if c == nil {
		c = new(conn)
	}
	*c = conn{t: t, claim: claim}
	v, err := op(ctx, c)
	sent := c.sent
	*c = conn{}
	t.conns.Put(c)
	if sent == Ran && err != nil && SentOf(err) != Ran {
		sent = MayHaveRun
	}
	return v, sent, err
}

// conn is one Send's Conn: it records what its calls did.
type conn struct {
	t     *Transport
	claim func() bool // nil: every call may go out
	sent  Sent        // NotSent until a call is made
}

// errDropped is the error of a call that its claim refused.
var errDropped = errors.New("not sent: the caller stopped waiting")

// note records what one call did.
func (c *conn) note(s Sent) {
	if c.sent != MayHaveRun {
		c.sent = s
	}
}

// script runs one script command: directly through the client's own
// method (viaClient), or queued as the command go-redis would build from
// name, script (or sha), keys and args, which only a queued call builds.
func (c *conn) script(ctx context.Context, viaClient func() *redis.Cmd, name, script string, keys []string, args []any) *redis.Cmd {
	direct, counted := c.t.direct()
	if direct {
		if counted {
			defer c.t.undirect()
		}
		if c.claim != nil && !c.claim() {
			cmd := redis.NewCmd(ctx, scriptArgs(name, script, keys, args)...)
			cmd.SetErr(errDropped)
			return cmd
		}
		cmd := viaClient()
		sent := SentOf(cmd.Err())
		c.note(sent)
		if sent == MayHaveRun && atDeadline(ctx) {
			// As a batched caller's: its context's error, not the socket
			// timeout that fired a moment before.
			<-ctx.Done()
			cmd.SetErr(ctx.Err())
		}
		return cmd
	}
	a := scriptArgs(name, script, keys, args)
	cmd := redis.NewCmd(ctx, a...)
	sent, err := c.t.wait(ctx, []redis.Cmder{cmd}, c.claim)
	c.note(sent)
	if err != nil {
		// cmd may still be written by a sender: the caller gets another.
		cmd = redis.NewCmd(ctx, a...)
		cmd.SetErr(err)
	}
	return cmd
}

// scriptArgs is a script command as go-redis builds it: name, script or
// sha, the key count, the keys, the arguments.
func scriptArgs(name, script string, keys []string, args []any) []any {
	a := make([]any, 0, 3+len(keys)+len(args))
	a = append(a, name, script, len(keys))
	for _, k := range keys {
		a = append(a, k)
	}
	return append(a, args...)
}

func (c *conn) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return c.script(ctx, func() *redis.Cmd { return c.t.rdb.Eval(ctx, script, keys, args...) }, "eval", script, keys, args)
}

func (c *conn) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return c.script(ctx, func() *redis.Cmd { return c.t.rdb.EvalSha(ctx, sha1, keys, args...) }, "evalsha", sha1, keys, args)
}

func (c *conn) EvalRO(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return c.script(ctx, func() *redis.Cmd { return c.t.rdb.EvalRO(ctx, script, keys, args...) }, "eval_ro", script, keys, args)
}

func (c *conn) EvalShaRO(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return c.script(ctx, func() *redis.Cmd { return c.t.rdb.EvalShaRO(ctx, sha1, keys, args...) }, "evalsha_ro", sha1, keys, args)
}

// ScriptExists and ScriptLoad are the client's own, not batched (Script.Run
// uses neither).
func (c *conn) ScriptExists(ctx context.Context, hashes ...string) *redis.BoolSliceCmd {
	return c.t.rdb.ScriptExists(ctx, hashes...)
}

func (c *conn) ScriptLoad(ctx context.Context, script string) *redis.StringCmd {
	return c.t.rdb.ScriptLoad(ctx, script)
}

// Pipelined runs the commands fn queues together, in order: directly
// through the client's Pipelined, or batched with the calls of other
// goroutines. Like go-redis's, it returns the commands and the first error
// among them; when ctx ends first they are fresh commands of the same
// kinds carrying ctx's error (plain *redis.Cmd for kinds other than those
// of Cmd, BoolCmd, IntCmd, StatusCmd, StringCmd and DurationCmd).
func (c *conn) Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	direct, counted := c.t.direct()
	if direct {
		if counted {
			defer c.t.undirect()
		}
		if c.claim != nil && !c.claim() {
			return nil, errDropped
		}
		cmds, err := c.t.rdb.Pipelined(ctx, fn)
		if len(cmds) > 0 {
			c.note(replied(cmds))
		}
		return cmds, err
	}
	cmds, err := c.t.record(fn)
	if err != nil || len(cmds) == 0 {
		return nil, err
	}
	sent, werr := c.t.wait(ctx, cmds, c.claim)
	c.note(sent)
	if werr != nil {
		left := make([]redis.Cmder, len(cmds))
		for i, cmd := range cmds {
			left[i] = freshCmd(ctx, cmd)
			left[i].SetErr(werr)
		}
		cmds = left
	}
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil {
			return cmds, err
		}
	}
	return cmds, nil
}

// freshCmd returns a new command of cmd's kind with its arguments, for a
// caller that left: cmd itself may still be written by a sender.
func freshCmd(ctx context.Context, cmd redis.Cmder) redis.Cmder {
	args := cmd.Args() // set when cmd was made, only read since
	switch cmd.(type) {
	case *redis.BoolCmd:
		return redis.NewBoolCmd(ctx, args...)
	case *redis.IntCmd:
		return redis.NewIntCmd(ctx, args...)
	case *redis.StatusCmd:
		return redis.NewStatusCmd(ctx, args...)
	case *redis.StringCmd:
		return redis.NewStringCmd(ctx, args...)
	case *redis.DurationCmd:
		return redis.NewDurationCmd(ctx, time.Millisecond, args...)
	}
	return redis.NewCmd(ctx, args...)
}
