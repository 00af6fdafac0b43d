package scaffold_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/sentinel"
	"github.com/fencelock/fencelock/observe"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/internal/scaffold"
)

var errInvalid = sentinel.New("test: invalid argument", verifier.ErrInvalid)

var kind = &scaffold.Kind{Pkg: "test", ErrInvalid: errInvalid}

func tok(seq uint64, holder string) fence.Token {
	return fence.Token{Key: "k", Seq: seq, Holder: "00000000-0000-4000-8000-00000000000" + holder}
}

// claim makes a Claim the only way there is: through Check.
func claim(t *testing.T, tk fence.Token) scaffold.Claim {
	t.Helper()
	b := kind.Base("test", scaffold.Config{})
	var got scaffold.Claim
	require.NoError(t, kind.Check(t.Context(), &b, "r", tk, func(c scaffold.Claim) error { got = c; return nil }))
	return got
}

func TestCheckUsableValidatesAndReportsOnce(t *testing.T) {
	var verdicts []observe.Verdict
	h := &observe.Hooks{Verified: func(_ context.Context, e observe.Verified) {
		assert.Equal(t, "test", e.Verifier)
		verdicts = append(verdicts, e.Verdict)
	}}
	c := scaffold.Config{}
	require.ErrorIs(t, scaffold.Apply(kind, &c, []func(*scaffold.Config) error{kind.WithHooks(nil)}), errInvalid)
	require.ErrorIs(t, scaffold.Apply(kind, &c, []func(*scaffold.Config) error{nil}), errInvalid)
	require.NoError(t, scaffold.Apply(kind, &c, []func(*scaffold.Config) error{kind.WithHooks(h)}))
	b := kind.Base("test", c)
	ctx := t.Context()
	calls := 0
	fn := func(scaffold.Claim) error { calls++; return nil }

	var zero scaffold.Base
	for _, err := range []error{
		kind.Check(ctx, nil, "r", tok(1, "1"), fn),
		kind.Check(ctx, &zero, "r", tok(1, "1"), fn),
		kind.Check(nil, &b, "r", tok(1, "1"), fn), //nolint:staticcheck // a nil context is what is tested
	} {
		require.ErrorIs(t, err, errInvalid)
		require.ErrorIs(t, err, verifier.ErrInvalid)
	}
	assert.Empty(t, verdicts, "an unusable verifier reports nothing")

	require.ErrorIs(t, kind.Check(ctx, &b, "", tok(1, "1"), fn), verifier.ErrInvalidResource)
	require.ErrorIs(t, kind.Check(ctx, &b, "r", fence.Token{Key: "k"}, fn), fence.ErrMalformed)
	assert.Zero(t, calls, "fn does not run on invalid input")
	require.NoError(t, kind.Check(ctx, &b, "r", tok(1, "1"), fn))
	assert.Equal(t, 1, calls)
	assert.PanicsWithValue(t, "boom", func() {
		_ = kind.Check(ctx, &b, "r", tok(1, "1"), func(scaffold.Claim) error { panic("boom") })
	})
	assert.Equal(t, []observe.Verdict{observe.Error, observe.Error, observe.Accepted, observe.Error}, verdicts)
}

func TestExplain(t *testing.T) {
	c := claim(t, tok(5, "1"))
	var fe *verifier.ForeignError
	require.ErrorAs(t, scaffold.Explain(c, scaffold.Row{Seq: 1, Holder: "x", Lock: "other"}), &fe)
	assert.Equal(t, "other", fe.Lock)
	assert.NoError(t, scaffold.Explain(c, scaffold.Row{Seq: 5, Holder: tok(5, "1").Holder, Lock: "k"}), "the row holds the token")
	var se *verifier.StaleError
	require.ErrorAs(t, scaffold.Explain(c, scaffold.Row{Seq: 7, Holder: "x", Lock: "k"}), &se)
	assert.Equal(t, uint64(7), se.Highest)
	require.ErrorAs(t, scaffold.Explain(c, scaffold.Row{Seq: 5, Holder: "x", Lock: "k"}), &se)
	assert.True(t, se.Conflict())
	assert.Error(t, scaffold.Explain(c, scaffold.Row{Seq: 3, Lock: "k"}), "a row that would accept: moved")
	assert.Error(t, kind.Refused(c, scaffold.Row{Seq: 5, Holder: tok(5, "1").Holder, Lock: "k"}), "a refused guard is never accepted")
}

func TestGuardRetriesWhenTheRowMoved(t *testing.T) {
	c := claim(t, tok(5, "1"))
	tries := 0
	refuse := func() (bool, error) { tries++; return false, nil }
	moved := func() (scaffold.Row, error) { return scaffold.Row{Seq: 1, Lock: "k"}, nil }
	err := kind.Guard(c, refuse, moved)
	require.Error(t, err)
	assert.NotErrorIs(t, err, verifier.ErrStale)
	assert.Equal(t, 3, tries)

	tries = 0
	acceptSecond := func() (bool, error) { tries++; return tries == 2, nil }
	require.NoError(t, kind.Guard(c, acceptSecond, moved))
	assert.Equal(t, 2, tries)

	boom := errors.New("boom")
	require.ErrorIs(t, kind.Guard(c, refuse, func() (scaffold.Row, error) { return scaffold.Row{}, boom }), boom)
	require.ErrorIs(t, kind.Guard(c, func() (bool, error) { return false, boom }, moved), boom)
}
