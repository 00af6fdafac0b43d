// Package luascript runs a Lua script on Redis by its SHA-1 (EVALSHA, and
// EVAL when the server does not have it yet) without computing SHA-1 in
// this process: go-redis's redis.NewScript hashes at init, which panics
// under GODEBUG=fips140=only. A script's hash is either computed when its
// source was generated (package protocol's luagen writes it beside each
// script) or, for a script made at run time, learned from the server's
// SCRIPT LOAD on first use. Every call goes through the caller's client,
// so its hooks and wrappers see it.
package luascript

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Script is a Lua script and, once known, its SHA-1 hex.
type Script struct {
	src string
	sha atomic.Pointer[string]
}

// New returns the script src whose SHA-1 hex is sha; with sha "" the
// hash is learned from the server on the script's first run.
func New(src, sha string) *Script {
	s := &Script{src: src}
	if sha != "" {
		s.sha.Store(&sha)
	}
	return s
}

// Source is the script's Lua source.
func (s *Script) Source() string { return s.src }

// Hash is the script's SHA-1 hex, "" while it is not known.
func (s *Script) Hash() string {
	if p := s.sha.Load(); p != nil {
		return *p
	}
	return ""
}

// Run runs the script by its hash, and by its source when the server does
// not have it (NOSCRIPT), which also loads it there. A hash not known yet
// is learned with SCRIPT LOAD, except through a pipeline (whose replies
// come later): there the script runs by its source.
func (s *Script) Run(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	sha := s.learn(ctx, c)
	if sha == "" {
		return c.Eval(ctx, s.src, keys, args...)
	}
	r := c.EvalSha(ctx, sha, keys, args...)
	// HasErrorPrefix allocates, even for nil: asked only on an error.
	if err := r.Err(); err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		return c.Eval(ctx, s.src, keys, args...)
	}
	return r
}

// EvalSha queues or runs the script by its hash alone: for a pipeline,
// whose caller loads the script (Load) and sends again on NOSCRIPT. The
// hash must be known (New with a hash, or a Run before).
func (s *Script) EvalSha(ctx context.Context, c redis.Scripter, keys []string, args ...any) *redis.Cmd {
	return c.EvalSha(ctx, s.Hash(), keys, args...)
}

// Load loads the script on the server (SCRIPT LOAD) and keeps its hash.
func (s *Script) Load(ctx context.Context, c redis.Scripter) error {
	sha, err := c.ScriptLoad(ctx, s.src).Result()
	if err == nil && s.Hash() == "" && validHash(sha) {
		s.sha.Store(&sha)
	}
	return err
}

// learn returns the script's hash, loading it to learn it when it is not
// known and c is no pipeline; "" when it is still not known.
func (s *Script) learn(ctx context.Context, c redis.Scripter) string {
	if sha := s.Hash(); sha != "" {
		return sha
	}
	if _, ok := c.(redis.Pipeliner); ok {
		return ""
	}
	_ = s.Load(ctx, c) // on failure the script runs by its source
	return s.Hash()
}

// validHash reports whether h looks like a SHA-1 hex digest.
func validHash(h string) bool {
	if len(h) != 40 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
