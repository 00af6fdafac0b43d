package migrations_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/fencelock/fencelock/internal/testenv"
)

// dsn is a throwaway PostgreSQL that TestMain starts for the examples, which
// need a database that no migration has touched (so not DATABASE_URL).
// Tests start their own.
var dsn string

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pg, err := testenv.StartPostgres(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "migrations tests:", err)
		return 1
	}
	defer pg.Close()
	dsn = pg.DSN()
	return m.Run()
}
