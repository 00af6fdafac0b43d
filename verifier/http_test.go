package verifier_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/verifier"
	"github.com/fencelock/fencelock/verifier/verifiertest"
)

// fencedServer serves handler behind NewMiddleware(v, opts...) and counts
// the calls that reached the handler.
func fencedServer(t *testing.T, v verifier.Verifier, handler http.HandlerFunc, opts ...verifier.MiddlewareOption) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	calls := new(atomic.Int64)
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		handler(w, r)
	})
	fenced, err := verifier.NewMiddleware(v, opts...)
	require.NoError(t, err)
	srv := httptest.NewServer(fenced(inner))
	t.Cleanup(srv.Close)
	return srv, calls
}

type reply struct {
	code    int
	highest string
	body    map[string]any
}

func put(t *testing.T, url string, headers ...string) reply {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, url, strings.NewReader("v"))
	require.NoError(t, err)
	for _, h := range headers {
		req.Header.Add(fence.Header, h)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	r := reply{code: resp.StatusCode, highest: resp.Header.Get(verifier.HighestHeader)}
	if resp.Header.Get("Content-Type") == "application/json" {
		require.NoError(t, json.Unmarshal(raw, &r.body), "body %s", raw)
	}
	return r
}

func ok(w http.ResponseWriter, r *http.Request) {
	tok, _ := fence.FromContext(r.Context())
	io.WriteString(w, "stored with "+tok.String())
}

func TestMiddleware(t *testing.T) {
	m := verifier.NewMemory()
	srv, calls := fencedServer(t, m, ok)
	tok := func(seq uint64, holder string) string { return verifiertest.Tok(seq, holder).String() }
	require.NoError(t, m.Claim(t.Context(), "/kv/x", verifiertest.Tok(5, "a")))

	t.Run("accepted", func(t *testing.T) {
		before := calls.Load()
		r := put(t, srv.URL+"/kv/x", tok(6, "b"))
		assert.Equal(t, http.StatusOK, r.code)
		assert.Equal(t, before+1, calls.Load(), "the handler ran")
		seq, holder := m.Highest("/kv/x")
		assert.Equal(t, uint64(6), seq)
		assert.Equal(t, "b", holder)

		r = put(t, srv.URL+"/kv/x", tok(6, "b"))
		assert.Equal(t, http.StatusOK, r.code, "the same token again")
	})
	for name, c := range map[string]struct {
		header []string
		code   int
		msg    string
	}{
		"stale":          {[]string{tok(4, "a")}, http.StatusConflict, "stale token"},
		"conflict":       {[]string{tok(6, "c")}, http.StatusConflict, "conflicting token"},
		"missing":        {nil, http.StatusPreconditionRequired, "missing Fence-Token"},
		"malformed":      {[]string{"7:b"}, http.StatusBadRequest, "malformed token"},
		"leading zero":   {[]string{"07:b:verifiertest"}, http.StatusBadRequest, "leading zero"},
		"overflow":       {[]string{"18446744073709551616:b:k"}, http.StatusBadRequest, "exceeds"},
		"sent twice":     {[]string{tok(7, "b"), tok(8, "b")}, http.StatusBadRequest, "2 Fence-Token headers"},
		"comma-joined":   {[]string{tok(7, "b") + "," + tok(8, "b")}, http.StatusBadRequest, "2 comma-separated values"},
		"comma, spaced":  {[]string{tok(7, "b") + ", " + tok(8, "b")}, http.StatusBadRequest, "2 comma-separated values"},
		"foreign lock":   {[]string{verifiertest.TokOf("other", 9, "b").String()}, http.StatusConflict, "bound to lock"},
		"quote injected": {[]string{`7:b'--:k`}, http.StatusBadRequest, "holder"},
		"NUL in key":     {[]string{"7:b:verifiertest%00"}, http.StatusBadRequest, "NUL byte at byte 12"},
		"key not UTF-8":  {[]string{"7:b:verifiertest%FF"}, http.StatusBadRequest, "invalid UTF-8 at byte 12"},
	} {
		t.Run(name, func(t *testing.T) {
			before := calls.Load()
			r := put(t, srv.URL+"/kv/x", c.header...)
			assert.Equal(t, c.code, r.code)
			assert.Contains(t, r.body["error"], c.msg)
			assert.Equal(t, before, calls.Load(), "the handler did not run")
			seq, holder := m.Highest("/kv/x")
			assert.Equal(t, uint64(6), seq, "high-water unchanged")
			assert.Equal(t, "b", holder)
			if name == "foreign lock" {
				assert.Empty(t, r.highest, "no high-water of another lock's counter")
				assert.Equal(t, verifiertest.Lock, r.body["lock"])
				assert.Equal(t, true, r.body["foreign"])
				assert.Equal(t, c.header[0], r.body["token"])
			} else if c.code == http.StatusConflict {
				assert.Equal(t, "6", r.highest, verifier.HighestHeader)
				assert.Equal(t, float64(6), r.body["highest_seq"])
				assert.Equal(t, "/kv/x", r.body["resource"])
				assert.Equal(t, c.header[0], r.body["token"])
				assert.Equal(t, name == "conflict", r.body["conflict"] == true)
			}
		})
	}
	t.Run("resources are separate", func(t *testing.T) {
		assert.Equal(t, http.StatusOK, put(t, srv.URL+"/kv/y", tok(1, "a")).code)
	})
}

func TestMiddlewareBadResource(t *testing.T) {
	m := verifier.NewMemory()
	long := strings.Repeat("r", 10<<10)
	srv, calls := fencedServer(t, m, ok, verifier.WithResource(func(r *http.Request) (string, error) {
		switch r.URL.Path {
		case "/long":
			return long, nil
		case "/nul":
			return "a\x00b", nil
		case "/utf8":
			return "a\xffb", nil
		case "/err":
			return "", errors.New("no such bucket")
		}
		return r.URL.Path, nil
	}))
	for path, msg := range map[string]string{"/long": "10240 bytes", "/nul": "NUL", "/utf8": "UTF-8", "/err": "no such bucket"} {
		r := put(t, srv.URL+path, verifiertest.Tok(1, "a").String())
		assert.Equal(t, http.StatusBadRequest, r.code, path)
		assert.Contains(t, r.body["error"], msg, path)
	}
	assert.Zero(t, calls.Load())
	seq, _ := m.Highest(long[:verifier.MaxResourceLen])
	assert.Zero(t, seq)
}

// brokenVerifier fails every claim, like a verifier whose database is down.
type brokenVerifier struct{}

func (brokenVerifier) Claim(context.Context, string, fence.Token) error {
	return errors.New("dial tcp 127.0.0.1:5432: connection refused")
}

func TestMiddlewareVerifierDown(t *testing.T) {
	var logged bytes.Buffer
	srv, calls := fencedServer(t, brokenVerifier{}, ok,
		verifier.WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
	r := put(t, srv.URL+"/kv/x", verifiertest.Tok(1, "a").String())
	assert.Equal(t, http.StatusServiceUnavailable, r.code)
	assert.NotContains(t, r.body["error"], "5432", "internal details stay in the log")
	assert.Contains(t, logged.String(), "connection refused")
	assert.Zero(t, calls.Load())
}

// TestMiddlewareSerializesPerResource shows why the middleware holds a
// per-resource order: an old request that passed its check must finish its
// write before a newer request is checked, and a request with an older token
// that arrives meanwhile is rejected afterwards.
func TestMiddlewareSerializesPerResource(t *testing.T) {
	m := verifier.NewMemory()
	inA, releaseA := make(chan struct{}), make(chan struct{})
	var order []string
	srv, _ := fencedServer(t, m, func(w http.ResponseWriter, r *http.Request) {
		tok, _ := fence.FromContext(r.Context())
		if tok.Holder == "a" {
			close(inA)
			<-releaseA
		}
		order = append(order, tok.Holder) // safe: writes to one resource run one at a time
	})
	codes := make(chan int, 2)
	go func() { codes <- put(t, srv.URL+"/kv/x", verifiertest.Tok(1, "a").String()).code }()
	<-inA
	go func() { codes <- put(t, srv.URL+"/kv/x", verifiertest.Tok(2, "b").String()).code }()
	time.Sleep(50 * time.Millisecond)
	assert.Empty(t, order, "B waits while A writes")
	close(releaseA)
	assert.Equal(t, http.StatusOK, <-codes)
	assert.Equal(t, http.StatusOK, <-codes)
	assert.Equal(t, []string{"a", "b"}, order)
	assert.Equal(t, http.StatusConflict, put(t, srv.URL+"/kv/x", verifiertest.Tok(1, "a").String()).code)
}
