package verifier_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/verifiertest"
)

// nilCtx is a nil context, which every method must refuse rather than panic
// on.
var nilCtx context.Context

func TestErrInvalidIsItsOwnSentinel(t *testing.T) {
	for _, other := range []error{verifier.ErrStale, verifier.ErrInvalidResource, fence.ErrMalformed} {
		assert.False(t, errors.Is(verifier.ErrInvalid, other), "%v", other)
		assert.False(t, errors.Is(other, verifier.ErrInvalid), "%v", other)
	}
}

func TestNewMiddlewareNil(t *testing.T) {
	var nilMemory *verifier.Memory
	for name, v := range map[string]verifier.Verifier{
		"nil Verifier":                nil,
		"typed nil *Memory":           nilMemory,
		"typed nil *countingVerifier": (*countingVerifier)(nil),
	} {
		mw, err := verifier.NewMiddleware(v)
		assert.ErrorIs(t, err, verifier.ErrInvalid, name)
		assert.Nil(t, mw, name)
	}

	m := verifier.NewMemory()
	for name, opts := range map[string][]verifier.MiddlewareOption{
		"nil option":          {nil},
		"nil option after ok": {verifier.WithLogger(slog.Default()), nil},
		"WithResource(nil)":   {verifier.WithResource(nil)},
		"WithLogger(nil)":     {verifier.WithLogger(nil)},
	} {
		mw, err := verifier.NewMiddleware(m, opts...)
		assert.ErrorIs(t, err, verifier.ErrInvalid, name)
		assert.Nil(t, mw, name)
	}
}

// TestMiddlewareNilHandler checks that a middleware applied to a nil
// handler answers 500 and claims nothing, instead of panicking.
func TestMiddlewareNilHandler(t *testing.T) {
	m := verifier.NewMemory()
	var logged bytes.Buffer
	mw, err := verifier.NewMiddleware(m, verifier.WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
	require.NoError(t, err)
	var nilFunc http.HandlerFunc
	for name, next := range map[string]http.Handler{"nil Handler": nil, "typed nil HandlerFunc": nilFunc} {
		srv := httptest.NewServer(mw(next))
		r := put(t, srv.URL+"/doc", verifiertest.Tok(3, "a").String())
		srv.Close()
		assert.Equal(t, http.StatusInternalServerError, r.code, name)
	}
	seq, _ := m.Highest("/doc")
	assert.Zero(t, seq, "nothing was claimed")
	assert.Contains(t, logged.String(), "nil handler")
}

func TestMemoryNil(t *testing.T) {
	ctx := t.Context()
	tok := verifiertest.Tok(1, "a")
	write := func() error { return nil }

	m := verifier.NewMemory()
	assert.ErrorIs(t, m.Do(ctx, "r", tok, nil), verifier.ErrInvalid, "nil write")
	seq, _ := m.Highest("r")
	assert.Zero(t, seq, "a refused Do claims nothing")
	assert.ErrorIs(t, m.Claim(nilCtx, "r", tok), verifier.ErrInvalid, "Claim with a nil ctx")
	assert.ErrorIs(t, m.Do(nilCtx, "r", tok, write), verifier.ErrInvalid, "Do with a nil ctx")

	var nm *verifier.Memory
	assert.ErrorIs(t, nm.Claim(ctx, "r", tok), verifier.ErrInvalid, "Claim on a nil *Memory")
	assert.ErrorIs(t, nm.Do(ctx, "r", tok, write), verifier.ErrInvalid, "Do on a nil *Memory")
	assert.ErrorIs(t, nm.Do(ctx, "r", tok, nil), verifier.ErrInvalid, "Do on a nil *Memory, nil write")
	seq, holder := nm.Highest("r")
	assert.Zero(t, seq)
	assert.Empty(t, holder)

	var zero verifier.Memory
	require.NoError(t, zero.Claim(ctx, "r", tok), "the zero Memory is ready to use")
}

func TestStaleErrorNil(t *testing.T) {
	var e *verifier.StaleError
	assert.NotPanics(t, func() { _ = e.Error() })
	assert.False(t, e.Conflict())
	assert.True(t, errors.Is(e, verifier.ErrStale))
}

// countingVerifier is a Verifier with a pointer receiver, to be passed as a
// typed nil.
type countingVerifier struct{ n int }

func (c *countingVerifier) Claim(context.Context, string, fence.Token) error { c.n++; return nil }
