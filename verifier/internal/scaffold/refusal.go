package scaffold

import (
	"errors"
	"fmt"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/verifier"
)

// Row is a resource's high-water row as read after a guard: the highest
// Seq, its holder, and the lock the resource is bound to ("" for none, or
// no row).
type Row struct {
	Seq    uint64
	Holder string
	Lock   string
}

// errMoved: the row changed between a refusing guard and the read of its
// reason, so the reason is unknown; the guard is worth another try.
var errMoved = errors.New("the high-water changed while its refusal was read; try again")

// maxAttempts bounds the tries of a guard whose refusal could not be
// explained because the row changed in between.
const maxAttempts = 3

// Guard runs a backend's guard for c. try runs the guard statement and
// reports whether it accepted c for certain; when it did not (a refusal,
// or an outcome the statement cannot tell), read reads the resource's row
// (in the guard's transaction, where the guard locked it) and [Explain]
// judges. When the row changed in between (it would accept c, yet the
// guard refused), the guard is tried again, at most three times in all.
func (k *Kind) Guard(c Claim, try func() (bool, error), read func() (Row, error)) error {
	for attempt := 1; ; attempt++ {
		ok, err := try()
		if err != nil || ok {
			return err
		}
		row, err := read()
		if err != nil {
			return fmt.Errorf("%s: guard %q refused %v, and reading the high-water failed: %w", k.Pkg, c.resource, c.tok, err)
		}
		err = Explain(c, row)
		if !errors.Is(err, errMoved) {
			return err
		}
		if attempt == maxAttempts {
			return fmt.Errorf("%s: guard %q refused %v: %w", k.Pkg, c.resource, c.tok, err)
		}
	}
}

// Explain judges c against the row read after its guard:
//
//   - the row is bound to another lock: a *verifier.ForeignError;
//   - the row holds c's token, bound to its lock: nil, accepted (the
//     guard's own write, or the same token accepted in between);
//   - the row would accept c: the row changed after the guard refused, an
//     error wrapping errMoved (worth another try);
//   - else: a *verifier.StaleError.
func Explain(c Claim, row Row) error {
	tok := c.tok
	switch {
	case row.Lock != "" && row.Lock != tok.Key:
		return &verifier.ForeignError{Resource: c.resource, Token: tok, Lock: row.Lock}
	case row.Lock != "" && row.Seq == tok.Seq && row.Holder == tok.Holder:
		return nil
	case tok.Supersedes(fence.Token{Seq: row.Seq, Holder: row.Holder}):
		return errMoved
	}
	return &verifier.StaleError{Resource: c.resource, Token: tok, Highest: row.Seq, HighestHolder: row.Holder}
}

// Refused is [Explain] for a guard known to have refused c, whose write was
// rolled back: a row that would accept c, its own token included, means the
// row changed in between, an error wrapping errMoved; never nil.
func (k *Kind) Refused(c Claim, row Row) error {
	err := Explain(c, row)
	if err == nil || errors.Is(err, errMoved) {
		return fmt.Errorf("%s: guard %q refused %v: %w", k.Pkg, c.resource, c.tok, errMoved)
	}
	return err
}
