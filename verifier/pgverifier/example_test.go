package pgverifier_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/pgverifier"
)

func ExampleVerifier_WithTx() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn) // or a *pgxpool.Pool
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `CREATE TABLE example_stock (item text PRIMARY KEY, count int);
		INSERT INTO example_stock VALUES ('widget', 10)`)
	if err != nil {
		panic(err)
	}
	v, err := pgverifier.New(conn)
	if err != nil {
		panic(err)
	}

	// take removes n widgets with the token of a lease on "stock/widget".
	take := func(tok fence.Token, n int) error {
		return v.WithTx(ctx, "stock/widget", tok, func(tx pgx.Tx) error {
			var count int
			if err := tx.QueryRow(ctx, `SELECT count FROM example_stock WHERE item = 'widget'`).Scan(&count); err != nil {
				return err
			}
			if count < n {
				return fmt.Errorf("only %d left", count)
			}
			_, err := tx.Exec(ctx, `UPDATE example_stock SET count = $1 WHERE item = 'widget'`, count-n)
			return err
		})
	}
	fmt.Println(take(fence.Token{Key: "stock/widget", Seq: 7, Holder: "worker-a"}, 3))
	fmt.Println(take(fence.Token{Key: "stock/widget", Seq: 8, Holder: "worker-b"}, 2))

	// worker-a paused past its lease and comes back with token 7.
	err = take(fence.Token{Key: "stock/widget", Seq: 7, Holder: "worker-a"}, 3)
	var stale *verifier.StaleError
	if errors.As(err, &stale) {
		fmt.Println("rejected; the highest token seen is", stale.Highest)
	}
	var count int
	_ = conn.QueryRow(ctx, `SELECT count FROM example_stock`).Scan(&count)
	fmt.Println(count, "left")
	// Output:
	// <nil>
	// <nil>
	// rejected; the highest token seen is 8
	// 5 left
}

func ExampleVerifier_Exec() {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `CREATE TABLE example_counters (name text PRIMARY KEY, n int);
		INSERT INTO example_counters VALUES ('hits', 0)`)
	if err != nil {
		panic(err)
	}
	v, err := pgverifier.New(conn)
	if err != nil {
		panic(err)
	}
	incr := `UPDATE example_counters SET n = n + 1 WHERE name = $1`
	for _, seq := range []uint64{1, 2, 1, 3} {
		tok := fence.Token{Key: "counters/hits", Seq: seq, Holder: "h"}
		_, err := v.Exec(ctx, "counters/hits", tok, incr, "hits")
		fmt.Printf("token %d: stale=%v\n", seq, errors.Is(err, verifier.ErrStale))
	}
	var n int
	_ = conn.QueryRow(ctx, `SELECT n FROM example_counters`).Scan(&n)
	fmt.Println("hits:", n)
	// Output:
	// token 1: stale=false
	// token 2: stale=false
	// token 1: stale=true
	// token 3: stale=false
	// hits: 3
}
