package sqlverifier_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/sqlverifier"
)

func ExampleVerifier_WithTx() {
	ctx := context.Background()
	db, err := sql.Open("mysql", mysqlDSN) // e.g. "app:pw@tcp(db:3306)/app"
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE example_stock (item VARCHAR(64) PRIMARY KEY, count INT)`); err != nil {
		panic(err)
	}
	if _, err := db.ExecContext(ctx, `INSERT INTO example_stock VALUES ('widget', 10)`); err != nil {
		panic(err)
	}
	v, err := sqlverifier.New(db, sqlverifier.MySQL)
	if err != nil {
		panic(err)
	}

	// take removes n widgets with the token of a lease on "stock/widget".
	take := func(tok fence.Token, n int) error {
		return v.WithTx(ctx, "stock/widget", tok, func(tx *sql.Tx) error {
			var count int
			if err := tx.QueryRowContext(ctx, `SELECT count FROM example_stock WHERE item = 'widget'`).Scan(&count); err != nil {
				return err
			}
			if count < n {
				return fmt.Errorf("only %d left", count)
			}
			_, err := tx.ExecContext(ctx, `UPDATE example_stock SET count = ? WHERE item = 'widget'`, count-n)
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
	_ = db.QueryRowContext(ctx, `SELECT count FROM example_stock`).Scan(&count)
	fmt.Println(count, "left")
	// Output:
	// <nil>
	// <nil>
	// rejected; the highest token seen is 8
	// 5 left
}

func ExampleVerifier_Exec() {
	ctx := context.Background()
	db, err := sql.Open("pgx", pgDSN) // import _ "github.com/jackc/pgx/v5/stdlib"
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, `CREATE TABLE example_counter (id int PRIMARY KEY, n int);
		INSERT INTO example_counter VALUES (1, 0)`); err != nil {
		panic(err)
	}
	v, err := sqlverifier.New(db, sqlverifier.Postgres)
	if err != nil {
		panic(err)
	}

	bump := func(tok fence.Token) error {
		_, err := v.Exec(ctx, "counter/1", tok, `UPDATE example_counter SET n = n + 1 WHERE id = $1`, 1)
		return err
	}
	fmt.Println(bump(fence.Token{Key: "counter", Seq: 1, Holder: "a"}))
	fmt.Println(bump(fence.Token{Key: "counter", Seq: 2, Holder: "b"}))
	fmt.Println(errors.Is(bump(fence.Token{Key: "counter", Seq: 1, Holder: "a"}), verifier.ErrStale))
	var n int
	_ = db.QueryRowContext(ctx, `SELECT n FROM example_counter WHERE id = 1`).Scan(&n)
	fmt.Println("n =", n)
	// Output:
	// <nil>
	// <nil>
	// true
	// n = 2
}

func ExampleVerifier_Move() {
	ctx := context.Background()
	db, err := sql.Open("mysql", mysqlDSN)
	if err != nil {
		panic(err)
	}
	defer db.Close()
	v, err := sqlverifier.New(db, sqlverifier.MySQL)
	if err != nil {
		panic(err)
	}

	// The resource belongs to the lock of the first token it accepts.
	fmt.Println(v.Claim(ctx, "reports/daily", fence.Token{Key: "reports-v1", Seq: 40, Holder: "a"}))

	// A token of another lock is refused, whatever its Seq.
	err = v.Claim(ctx, "reports/daily", fence.Token{Key: "reports-v2", Seq: 1, Holder: "b"})
	var foreign *verifier.ForeignError
	if errors.As(err, &foreign) {
		fmt.Println("refused; bound to", foreign.Lock)
	}

	// Moving it, once reports-v1's users have stopped, is explicit.
	fmt.Println(v.Move(ctx, "reports/daily", "reports-v1", "reports-v2"))
	fmt.Println(v.Claim(ctx, "reports/daily", fence.Token{Key: "reports-v2", Seq: 1, Holder: "b"}))
	// Output:
	// <nil>
	// refused; bound to reports-v1
	// <nil>
	// <nil>
}
