package pgverifier_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/pgverifier"
	"github.com/fencelock/fencelock/verifier/verifiertest"
)

// nilCtx is a nil context, which every method must refuse rather than panic
// on.
var nilCtx context.Context

// noIO is a DB that fails the test on any use: the checks for invalid
// input come before any I/O.
type noIO struct{ t *testing.T }

func (d noIO) QueryRow(context.Context, string, ...any) pgx.Row {
	d.t.Error("QueryRow called")
	return errRow{errors.New("no I/O")}
}

func (d noIO) Begin(context.Context) (pgx.Tx, error) {
	d.t.Error("Begin called")
	return nil, errors.New("no I/O")
}

func TestErrInvalid(t *testing.T) {
	assert.ErrorIs(t, pgverifier.ErrInvalid, verifier.ErrInvalid)
	assert.NotEqual(t, verifier.ErrInvalid, pgverifier.ErrInvalid, "a sentinel of its own")
	assert.NotErrorIs(t, verifier.ErrInvalid, pgverifier.ErrInvalid)
	assert.NotErrorIs(t, pgverifier.ErrInvalid, verifier.ErrStale)
}

func TestNewNil(t *testing.T) {
	var nilConn *pgx.Conn
	var nilTx pgx.Tx
	for name, db := range map[string]pgverifier.DB{
		"nil DB":                nil,
		"typed nil *pgx.Conn":   nilConn,
		"nil pgx.Tx":            nilTx,
		"typed nil custom pool": (*connPool)(nil),
	} {
		v, err := pgverifier.New(db)
		assert.ErrorIs(t, err, pgverifier.ErrInvalid, name)
		assert.ErrorIs(t, err, verifier.ErrInvalid, name)
		assert.Nil(t, v, name)
	}

	db := noIO{t}
	for name, opts := range map[string][]pgverifier.Option{
		"nil option":              {nil},
		"nil option after ok":     {pgverifier.WithTable("t"), nil},
		"WithTable()":             {pgverifier.WithTable()},
		"WithTable with 3 parts":  {pgverifier.WithTable("a", "b", "c")},
		"WithTable empty part":    {pgverifier.WithTable("")},
		"WithTable with NUL byte": {pgverifier.WithTable("a\x00b")},
	} {
		v, err := pgverifier.New(db, opts...)
		assert.ErrorIs(t, err, pgverifier.ErrInvalid, name)
		assert.Nil(t, v, name)
	}
	v, err := pgverifier.New(db, pgverifier.WithTable("app", "fence"))
	require.NoError(t, err)
	assert.Equal(t, `"app"."fence"`, v.Table())
}

// TestMethodsNil calls every method with a nil receiver, a zero Verifier,
// a nil context and nil arguments: each returns ErrInvalid, before any I/O.
func TestMethodsNil(t *testing.T) {
	ctx := t.Context()
	tok := verifiertest.Tok(1, "a")
	fn := func(pgx.Tx) error { t.Error("fn called"); return nil }
	calls := func(v *pgverifier.Verifier, ctx context.Context) map[string]error {
		_, _, highestErr := v.Highest(ctx, "r")
		_, execErr := v.Exec(ctx, "r", tok, "SELECT 1")
		return map[string]error{
			"Claim":   v.Claim(ctx, "r", tok),
			"Guard":   v.Guard(ctx, noIO{t}, "r", tok),
			"Highest": highestErr,
			"WithTx":  v.WithTx(ctx, "r", tok, fn),
			"Exec":    execErr,
		}
	}

	var nilV *pgverifier.Verifier
	for name, err := range calls(nilV, ctx) {
		assert.ErrorIs(t, err, pgverifier.ErrInvalid, "%s on a nil *Verifier", name)
	}
	assert.Empty(t, nilV.Table())
	for name, err := range calls(&pgverifier.Verifier{}, ctx) {
		assert.ErrorIs(t, err, pgverifier.ErrInvalid, "%s on a zero Verifier", name)
	}

	v, err := pgverifier.New(noIO{t})
	require.NoError(t, err)
	for name, err := range calls(v, nilCtx) {
		assert.ErrorIs(t, err, pgverifier.ErrInvalid, "%s with a nil context", name)
	}

	var nilConn *pgx.Conn
	var nilTx pgx.Tx
	for name, q := range map[string]pgverifier.Querier{
		"nil Querier":         nil,
		"typed nil *pgx.Conn": nilConn,
		"nil pgx.Tx":          nilTx,
	} {
		assert.ErrorIs(t, v.Guard(ctx, q, "r", tok), pgverifier.ErrInvalid, name)
	}
	assert.ErrorIs(t, v.WithTx(ctx, "r", tok, nil), pgverifier.ErrInvalid, "WithTx with a nil fn")
}

// TestWithTxNilFnClaimsNothing checks, on a real database, that WithTx with
// a nil function neither begins a transaction nor raises the high-water.
func TestWithTxNilFnClaimsNothing(t *testing.T) {
	ctx := t.Context()
	v, err := pgverifier.New(connect(t, dsn))
	require.NoError(t, err)
	res := verifiertest.Resource(t, "r")
	require.ErrorIs(t, v.WithTx(ctx, res, verifiertest.Tok(5, "a"), nil), pgverifier.ErrInvalid)
	seq, _, err := v.Highest(ctx, res)
	require.NoError(t, err)
	assert.Zero(t, seq)
}
