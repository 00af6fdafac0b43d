package sqlverifier

import (
	"context"
	"database/sql"

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
// commit are returned as WithTx returns them; on a *sql.Conn it takes its
// turn as WithTx does. On MySQL the rows of new
// resources are created first, each committed on its own, as WithTx does.
// An empty tokens or a nil fn returns an error wrapping [ErrInvalid], and
// nothing is claimed.
func (v *Verifier) WithTxAll(ctx context.Context, tokens map[string]fence.Token, fn func(tx *sql.Tx) error) error {
	return kind.CheckAll(ctx, v.b(), tokens, func(cs []scaffold.Claim) error {
		if fn == nil {
			return invalid("WithTxAll: nil function")
		}
		return v.inTx(ctx, cs, fn)
	})
}

// GuardAll is [Verifier.Guard] for several resources on q, the caller's
// transaction: it runs the guard of each, in the order of their names, and
// returns the first refusal or error (roll the transaction back then).
// Guard's notes on MySQL apply to each. An empty tokens or a nil q returns
// an error wrapping [ErrInvalid].
func (v *Verifier) GuardAll(ctx context.Context, q Querier, tokens map[string]fence.Token) error {
	return kind.CheckAll(ctx, v.b(), tokens, func(cs []scaffold.Claim) error {
		if isnil.Nil(q) {
			return invalid("GuardAll: nil Querier")
		}
		if c, ok := q.(*sql.Conn); ok && v.turn != nil && c == v.db.(*sql.Conn) {
			release, err := v.turn.take(ctx)
			if err != nil {
				return err
			}
			defer release()
		}
		for _, c := range cs {
			if err := v.guard(ctx, q, c, false); err != nil {
				return err
			}
		}
		return nil
	})
}
