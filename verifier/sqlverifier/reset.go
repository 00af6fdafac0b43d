package sqlverifier

import (
	"context"
	"errors"
	"fmt"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/internal/scaffold"
)

var _ verifier.Resetter = (*Verifier)(nil)

// Reset sets resource's high-water to to and binds it to lock to.Key,
// whatever they were; see [verifier.Resetter] for which token to give. It
// is one statement on the verifier's DB, committed at once; it waits for a
// transaction that holds the resource's row. Invalid arguments return an
// error wrapping [ErrInvalid] (or verifier.ErrInvalidResource for the
// resource name), before any I/O.
func (v *Verifier) Reset(ctx context.Context, resource string, to fence.Token) error {
	if err := kind.Usable(ctx, v.b()); err != nil {
		return err
	}
	if err := verifier.ValidateReset(resource, to); err != nil {
		if errors.Is(err, verifier.ErrInvalid) {
			return fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		return err
	}
	release, err := v.turn.take(ctx)
	if err != nil {
		return err
	}
	defer release()
	if _, err := v.db.ExecContext(ctx, v.sql.reset, scaffold.ResetArgs(resource, to)...); err != nil {
		return fmt.Errorf("sqlverifier: reset %q: %w", resource, v.noTable.Explain(err))
	}
	return nil
}
