package scaffold

import (
	"context"
	"fmt"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/emit"
	"github.com/fencelock/fencelock/internal/sentinel"
	"github.com/fencelock/fencelock/observe"
	"github.com/fencelock/fencelock/verifier"
)

// Kind is one verifier package, as the scaffold needs to know it: one
// package-level value per package.
type Kind struct {
	// Pkg prefixes the package's errors: "pgverifier".
	Pkg string
	// ErrInvalid is the package's sentinel for bad input; it wraps
	// verifier.ErrInvalid.
	ErrInvalid error
}

// Invalidf returns an error wrapping the package's ErrInvalid.
func (k *Kind) Invalidf(format string, args ...any) error {
	return sentinel.Wrapf(k.ErrInvalid, format, args...)
}

// Base is the part of a verifier the scaffold keeps: its name in hook
// events and its hooks. A verifier holds one by value; the zero Base is a
// verifier not made by its constructor.
type Base struct {
	name  string
	hooks *observe.Hooks
	bound time.Duration // Config.ClockBound
}

// Base returns the Base of a verifier named name in hook events, configured
// by c.
func (k *Kind) Base(name string, c Config) Base {
	return Base{name: name, hooks: c.Hooks, bound: c.ClockBound}
}

// Usable returns an error wrapping the package's ErrInvalid if b is nil (a
// method called on a nil verifier), b was not made by [Kind.Base] (a zero
// verifier) or ctx is nil; else nil. It does no I/O and reports nothing.
func (k *Kind) Usable(ctx context.Context, b *Base) error {
	switch {
	case b == nil:
		return k.Invalidf("nil *Verifier")
	case b.name == "":
		return k.Invalidf("Verifier not made by New")
	case ctx == nil:
		return k.Invalidf("nil context")
	}
	return nil
}

// Claim is a resource and a token that passed verifier.ValidateClaim. Only
// [Kind.Check] makes one, so a function that takes a Claim need not, and
// cannot, validate them again.
type Claim struct {
	resource string
	tok      fence.Token
}

// Resource returns the claim's resource name.
func (c Claim) Resource() string { return c.resource }

// Token returns the claim's token.
func (c Claim) Token() fence.Token { return c.tok }

// Check is one call that checks a token (a Claim, a Guard, a fenced write):
// if b and ctx are usable, it validates resource and tok, runs fn with the
// resulting Claim, and reports the outcome to b's hooks once, as the
// verifier's verdict. A panic in fn is reported as an error and goes on. An
// unusable b or ctx returns an error wrapping ErrInvalid, unreported; an
// invalid resource or token is reported, and fn does not run.
func (k *Kind) Check(ctx context.Context, b *Base, resource string, tok fence.Token, fn func(Claim) error) (err error) {
	if err := k.Usable(ctx, b); err != nil {
		return err
	}
	if b.hooks != nil {
		defer k.report(ctx, b, resource, tok, time.Now(), &err)
	}
	if err := b.validate(resource, tok); err != nil {
		return err
	}
	return fn(Claim{resource: resource, tok: tok})
}

// validate checks a claim before any I/O: its resource and token, and the
// token against b's clock bound.
func (b *Base) validate(resource string, tok fence.Token) error {
	if err := verifier.ValidateClaim(resource, tok); err != nil {
		return err
	}
	return verifier.CheckClockBound(resource, tok, b.bound, time.Now())
}

// report tells b's hooks how a check that began at start ended.
func (k *Kind) report(ctx context.Context, b *Base, resource string, tok fence.Token, start time.Time, err *error) {
	if p := recover(); p != nil {
		// A panic in the caller's function rolled the transaction back:
		// report an error, not the nil *err, and go on panicking.
		emit.Verified(b.hooks, ctx, b.name, resource, tok, start, fmt.Errorf("%s: panic: %v", k.Pkg, p))
		panic(p)
	}
	emit.Verified(b.hooks, ctx, b.name, resource, tok, start, *err)
}
