package sqlverifier_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/sqlverifier"
	"github.com/fencelock/fencelock/verifier/verifiertest"
)

// nilCtx is a nil context, which every method must refuse rather than panic
// on.
var nilCtx context.Context

// noIODriver fails the test on any connection: the checks for invalid input
// come before any I/O.
type noIODriver struct{ t *testing.T }

func (d noIODriver) Open(string) (driver.Conn, error) {
	d.t.Error("connection opened")
	return nil, errors.New("no I/O")
}

func (d noIODriver) Connect(context.Context) (driver.Conn, error) { return d.Open("") }
func (d noIODriver) Driver() driver.Driver                        { return d }

// noIO is a *sql.DB that fails the test if it is ever used.
func noIO(t *testing.T) *sql.DB {
	db := sql.OpenDB(noIODriver{t})
	t.Cleanup(func() { db.Close() })
	return db
}

func TestErrInvalid(t *testing.T) {
	assert.ErrorIs(t, sqlverifier.ErrInvalid, verifier.ErrInvalid)
	assert.NotEqual(t, verifier.ErrInvalid, sqlverifier.ErrInvalid, "a sentinel of its own")
	assert.NotErrorIs(t, verifier.ErrInvalid, sqlverifier.ErrInvalid)
	assert.NotErrorIs(t, sqlverifier.ErrInvalid, verifier.ErrStale)
}

func TestNewNil(t *testing.T) {
	var nilDB *sql.DB
	var nilConn *sql.Conn
	for name, db := range map[string]sqlverifier.DB{
		"nil DB":            nil,
		"typed nil *sql.DB": nilDB,
		"typed nil Conn":    nilConn,
	} {
		v, err := sqlverifier.New(db, sqlverifier.MySQL)
		assert.ErrorIs(t, err, sqlverifier.ErrInvalid, name)
		assert.ErrorIs(t, err, verifier.ErrInvalid, name)
		assert.Nil(t, v, name)
	}

	db := noIO(t)
	for _, d := range []sqlverifier.Dialect{0, 3, -1} {
		v, err := sqlverifier.New(db, d)
		assert.ErrorIs(t, err, sqlverifier.ErrInvalid, "dialect %v", d)
		assert.Nil(t, v)
	}
	for name, opts := range map[string][]sqlverifier.Option{
		"nil option":              {nil},
		"nil option after ok":     {sqlverifier.WithTable("t"), nil},
		"WithTable()":             {sqlverifier.WithTable()},
		"WithTable with 3 parts":  {sqlverifier.WithTable("a", "b", "c")},
		"WithTable empty part":    {sqlverifier.WithTable("")},
		"WithTable with NUL byte": {sqlverifier.WithTable("a\x00b")},
		"WithHooks(nil)":          {sqlverifier.WithHooks(nil)},
	} {
		for _, d := range []sqlverifier.Dialect{sqlverifier.MySQL, sqlverifier.Postgres} {
			v, err := sqlverifier.New(db, d, opts...)
			assert.ErrorIs(t, err, sqlverifier.ErrInvalid, "%s (%v)", name, d)
			assert.Nil(t, v, name)
		}
	}
	v, err := sqlverifier.New(db, sqlverifier.MySQL, sqlverifier.WithTable("app", "fe`nce"))
	require.NoError(t, err)
	assert.Equal(t, "`app`.`fe``nce`", v.Table())
	assert.Equal(t, sqlverifier.MySQL, v.Dialect())
	v, err = sqlverifier.New(db, sqlverifier.Postgres, sqlverifier.WithTable("app", `fe"nce`))
	require.NoError(t, err)
	assert.Equal(t, `"app"."fe""nce"`, v.Table())
	assert.Equal(t, "postgres", v.Dialect().String())
}

// TestMethodsNil calls every method with a nil receiver, a zero Verifier,
// a nil context and nil arguments: each returns ErrInvalid, before any I/O.
func TestMethodsNil(t *testing.T) {
	ctx := t.Context()
	tok := verifiertest.Tok(1, "a")
	fn := func(*sql.Tx) error { t.Error("fn called"); return nil }
	calls := func(v *sqlverifier.Verifier, ctx context.Context) map[string]error {
		_, _, highestErr := v.Highest(ctx, "r")
		_, execErr := v.Exec(ctx, "r", tok, "SELECT 1")
		return map[string]error{
			"Claim":   v.Claim(ctx, "r", tok),
			"Guard":   v.Guard(ctx, noIO(t), "r", tok),
			"Highest": highestErr,
			"WithTx":  v.WithTx(ctx, "r", tok, fn),
			"Exec":    execErr,
			"Move":    v.Move(ctx, "r", "a", "b"),
		}
	}

	var nilV *sqlverifier.Verifier
	for name, err := range calls(nilV, ctx) {
		assert.ErrorIs(t, err, sqlverifier.ErrInvalid, "%s on a nil *Verifier", name)
	}
	assert.Empty(t, nilV.Table())
	assert.Zero(t, nilV.Dialect())
	for name, err := range calls(&sqlverifier.Verifier{}, ctx) {
		assert.ErrorIs(t, err, sqlverifier.ErrInvalid, "%s on a zero Verifier", name)
	}

	for _, d := range []sqlverifier.Dialect{sqlverifier.MySQL, sqlverifier.Postgres} {
		v, err := sqlverifier.New(noIO(t), d)
		require.NoError(t, err)
		for name, err := range calls(v, nilCtx) {
			assert.ErrorIs(t, err, sqlverifier.ErrInvalid, "%s with a nil context", name)
		}
		var nilDB *sql.DB
		var nilTx *sql.Tx
		for name, q := range map[string]sqlverifier.Querier{
			"nil Querier":       nil,
			"typed nil *sql.DB": nilDB,
			"typed nil *sql.Tx": nilTx,
		} {
			assert.ErrorIs(t, v.Guard(ctx, q, "r", tok), sqlverifier.ErrInvalid, name)
		}
		assert.ErrorIs(t, v.WithTx(ctx, "r", tok, nil), sqlverifier.ErrInvalid, "WithTx with a nil fn")
		assert.ErrorIs(t, v.Move(ctx, "r", "a", "a"), sqlverifier.ErrInvalid)
		assert.ErrorIs(t, v.Claim(ctx, "r", verifiertest.Tok(0, "a")), fence.ErrMalformed)
		assert.ErrorIs(t, v.Claim(ctx, "", tok), verifier.ErrInvalidResource)
	}
}

// TestWithTxNilFnClaimsNothing checks, on real databases, that WithTx with
// a nil function neither begins a transaction nor raises the high-water.
func TestWithTxNilFnClaimsNothing(t *testing.T) {
	each(t, func(t *testing.T, tg target) {
		ctx := t.Context()
		v := tg.verifier(t, tg.open(t))
		res := verifiertest.Resource(t, "r")
		require.ErrorIs(t, v.WithTx(ctx, res, verifiertest.Tok(5, "a"), nil), sqlverifier.ErrInvalid)
		requireHighest(t, v, res, 0, "")
	})
}
