package scaffold

import (
	"context"
	"errors"
	"fmt"
)

// CommitFailed is the error of a failed commit of what (`"r"`, `2
// resources`): err, and, when ctx has ended, why it did (a lease lost
// while the transaction ran reads better than the driver's "transaction
// has already been committed or rolled back"). Both stay in the chain.
func (k *Kind) CommitFailed(ctx context.Context, what string, err error) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(err, cause) {
		return fmt.Errorf("%s: commit %s: %w (%w)", k.Pkg, what, err, cause)
	}
	return fmt.Errorf("%s: commit %s: %w", k.Pkg, what, err)
}
