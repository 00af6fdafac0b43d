package migrations_test

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/migrations"
)

// Call Apply at start-up, from every process: the first applies what is
// missing, in one transaction, and the others find nothing to do.
func ExampleApply() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn) // or a *pgxpool.Pool, or a pgx.Tx
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)

	ran, err := migrations.Apply(ctx, conn)
	if err != nil {
		panic(err)
	}
	for _, m := range ran {
		fmt.Println("applied", m.Version, m.Name)
	}

	ran, err = migrations.Apply(ctx, conn)
	if err != nil {
		panic(err)
	}
	fmt.Println("second Apply applied", len(ran))
	// Output:
	// applied 1 000001_fence_tokens.up.sql
	// applied 2 000002_fence_lock_binding.up.sql
	// second Apply applied 0
}
