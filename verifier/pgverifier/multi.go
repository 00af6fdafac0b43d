package pgverifier

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/isnil"
	"github.com/fencelock/fencelock/verifier/internal/scaffold"
)

// WithTxAll is [Verifier.WithTx] for several resources, each with its
// token (tokens maps a resource to its token; lockset.Set.Tokens gives one
// per lock): in one transaction it guards every resource, in the order of
// their names, then runs fn, and commits. A transfer between two accounts
// guards both and writes both, or neither.
//
// When one token is refused, fn is not called, the transaction rolls back
// (no high-water moves) and WithTxAll returns that resource's
// *verifier.StaleError or *verifier.ForeignError. fn's error and a failed
// commit are returned as WithTx returns them. An empty tokens or a nil fn
// returns an error wrapping [ErrInvalid], and nothing is claimed.
func (v *Verifier) WithTxAll(ctx context.Context, tokens map[string]fence.Token, fn func(tx pgx.Tx) error) error {
	return kind.CheckAll(ctx, v.b(), tokens, func(cs []scaffold.Claim) error {
		if fn == nil {
			return invalid("WithTxAll: nil function")
		}
		tx, err := v.begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(context.WithoutCancel(ctx)) // a no-op after the commit
		for _, c := range cs {
			if err := v.guard(ctx, tx, c); err != nil {
				return err
			}
		}
		if err := fn(tx); err != nil {
			return err
		}
		if err := tx.Commit(ctx); err != nil {
			return kind.CommitFailed(ctx, fmt.Sprintf("%d resources", len(cs)), err)
		}
		return nil
	})
}

// GuardAll is [Verifier.Guard] for several resources on q, the caller's
// transaction: it runs the guard of each, in the order of their names, and
// returns the first refusal or error (the guards before it then hold their
// rows until the transaction ends: roll it back). An empty tokens or a nil
// q returns an error wrapping [ErrInvalid].
func (v *Verifier) GuardAll(ctx context.Context, q Querier, tokens map[string]fence.Token) error {
	return kind.CheckAll(ctx, v.b(), tokens, func(cs []scaffold.Claim) error {
		if isnil.Nil(q) {
			return invalid("GuardAll: nil Querier")
		}
		for _, c := range cs {
			if err := v.guard(ctx, q, c); err != nil {
				return err
			}
		}
		return nil
	})
}
