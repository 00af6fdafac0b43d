package scaffold

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/emit"
	"github.com/fencelock/fencelock/verifier"
)

// CheckAll is [Kind.Check] for several resources guarded in one step (one
// transaction): if b and ctx are usable and tokens is not empty, it
// validates every resource and token, runs fn with the claims sorted by
// resource (the order every caller guards in, so that two transactions
// never wait for each other's rows in a cycle), and reports one verdict
// per resource to b's hooks: nil for all when fn succeeded; the refusal
// for the resource it names, and for the others an error saying they were
// not written because of it; fn's other errors for all.
func (k *Kind) CheckAll(ctx context.Context, b *Base, tokens map[string]fence.Token, fn func([]Claim) error) (err error) {
	if err := k.Usable(ctx, b); err != nil {
		return err
	}
	if len(tokens) == 0 {
		return k.Invalidf("no resources to guard")
	}
	resources := slices.Sorted(maps.Keys(tokens))
	if b.hooks != nil {
		defer k.reportAll(ctx, b, resources, tokens, time.Now(), &err)
	}
	claims := make([]Claim, len(resources))
	for i, r := range resources {
		if err := b.validate(r, tokens[r]); err != nil {
			return err
		}
		claims[i] = Claim{resource: r, tok: tokens[r]}
	}
	return fn(claims)
}

// reportAll tells b's hooks how a CheckAll that began at start ended, one
// event per resource.
func (k *Kind) reportAll(ctx context.Context, b *Base, resources []string, tokens map[string]fence.Token, start time.Time, err *error) {
	p := recover()
	outcome := *err
	if p != nil {
		outcome = fmt.Errorf("%s: panic: %v", k.Pkg, p)
	}
	refused := refusedResource(outcome)
	for _, r := range resources {
		e := outcome
		if refused != "" && refused != r {
			e = fmt.Errorf("%s: %q not written: the token for %q was refused", k.Pkg, r, refused)
		}
		emit.Verified(b.hooks, ctx, b.name, r, tokens[r], start, e)
	}
	if p != nil {
		panic(p)
	}
}

// refusedResource is the resource a refusal names, or "".
func refusedResource(err error) string {
	var stale *verifier.StaleError
	var foreign *verifier.ForeignError
	switch {
	case errors.As(err, &stale):
		return stale.Resource
	case errors.As(err, &foreign):
		return foreign.Resource
	}
	return ""
}
