package verifier

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/isnil"
)

// HighestHeader is the response header in which the middleware of
// [NewMiddleware] reports the highest Seq a resource has accepted, on a 409
// Conflict.
const HighestHeader = "Fence-Highest"

// MiddlewareOption configures [NewMiddleware]. An option checks its own
// argument; NewMiddleware returns the first option's error (wrapping
// [ErrInvalid]).
type MiddlewareOption func(*middlewareConfig) error

type middlewareConfig struct {
	resource func(*http.Request) (string, error)
	log      *slog.Logger
}

// WithResource sets how the middleware names the resource a request writes
// to. An error from fn answers 400 Bad Request with the error's text. The
// default is the request's URL path (r.URL.Path), so "/kv/a" and "/kv/b"
// are fenced separately. A nil fn is invalid.
func WithResource(fn func(*http.Request) (string, error)) MiddlewareOption {
	return func(c *middlewareConfig) error {
		if fn == nil {
			return fmt.Errorf("%w: WithResource: nil function", ErrInvalid)
		}
		c.resource = fn
		return nil
	}
}

// WithLogger sets where the middleware logs failures that are not the
// client's fault (the storage behind the verifier is unreachable, say); the
// client only sees 503 Service Unavailable. The default is slog.Default()
// at the time of the failure. A nil l is invalid.
func WithLogger(l *slog.Logger) MiddlewareOption {
	return func(c *middlewareConfig) error {
		if l == nil {
			return fmt.Errorf("%w: WithLogger: nil *slog.Logger", ErrInvalid)
		}
		c.log = l
		return nil
	}
}

// NewMiddleware returns a middleware that fences an HTTP handler that
// writes to a resource. For each request it reads the token from the
// fence.Header request header, claims it with v for the request's resource,
// and then runs next with the token in the request's context
// (fence.FromContext). Requests for the same resource run one at a time from
// the claim to the end of next, so within this process no older token can
// pass the claim while a newer one is writing.
//
// NewMiddleware checks, before anything runs, that v is neither nil nor a
// typed nil (a nil *Memory, say) and that no option is nil or was given a
// bad value; otherwise it returns an error wrapping [ErrInvalid].
//
// The handler is not called, and the answer is:
//
//   - 428 Precondition Required when the header is missing;
//   - 400 Bad Request when the token is malformed (or sent twice, in two
//     fields or comma-joined in one) or the
//     resource name is invalid;
//   - 409 Conflict when the token is stale, with the highest accepted Seq in
//     the HighestHeader response header and in the JSON body, or when it
//     belongs to another lock than the resource's (a *ForeignError: the
//     body has "foreign": true and the resource's "lock", and no
//     HighestHeader, since Seqs of different locks do not compare);
//   - 503 Service Unavailable when v fails or the request ends while
//     waiting for another write to the same resource;
//   - 500 Internal Server Error, with nothing claimed, when the middleware
//     was applied to a nil handler.
//
// Every error body is a JSON object {"error": "..."}; a 409 adds
// "resource" and "token", and "highest_seq" and "conflict" or "foreign" and
// "lock".
//
// The claim stands even if next then fails: the resource has seen the
// token, and older ones stay rejected. A client that got an error retries
// with the same token (accepted again) or a newer one.
//
// When several processes write the same storage, a per-process order is not
// enough: let the handler fence its own write as well, with the token from
// the context and a storage-side verifier (pgverifier's WithTx, for one).
func NewMiddleware(v Verifier, opts ...MiddlewareOption) (func(http.Handler) http.Handler, error) {
	if isnil.Nil(v) {
		return nil, fmt.Errorf("%w: NewMiddleware: nil Verifier", ErrInvalid)
	}
	cfg := middlewareConfig{resource: func(r *http.Request) (string, error) { return r.URL.Path, nil }}
	for i, o := range opts {
		if o == nil {
			return nil, fmt.Errorf("%w: NewMiddleware: option %d is nil", ErrInvalid, i)
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	locks := new(keyLock)
	return func(next http.Handler) http.Handler {
		if isnil.Nil(next) {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				logger(cfg.log).ErrorContext(r.Context(), "verifier: middleware applied to a nil handler", "method", r.Method, "path", r.URL.Path)
				writeError(w, http.StatusInternalServerError, errorBody{Error: "verifier: no handler"})
			})
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tok, ok, err := fence.FromHeader(r.Header)
			if err != nil {
				writeError(w, http.StatusBadRequest, errorBody{Error: err.Error()})
				return
			}
			if !ok {
				writeError(w, http.StatusPreconditionRequired, errorBody{Error: "verifier: missing " + fence.Header + " header"})
				return
			}
			resource, err := cfg.resource(r)
			if err == nil {
				err = ValidateClaim(resource, tok)
			}
			if err != nil {
				writeError(w, http.StatusBadRequest, errorBody{Error: err.Error()})
				return
			}
			ctx := r.Context()
			unlock, err := locks.lock(ctx, resource)
			if err != nil {
				writeError(w, http.StatusServiceUnavailable, errorBody{Error: "verifier: " + err.Error()})
				return
			}
			defer unlock()
			if err := v.Claim(ctx, resource, tok); err != nil {
				claimFailed(w, r, cfg.log, err)
				return
			}
			next.ServeHTTP(w, r.WithContext(fence.NewContext(ctx, tok)))
		})
	}, nil
}

func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.Default()
	}
	return l
}

type errorBody struct {
	Error      string `json:"error"`
	Resource   string `json:"resource,omitempty"`
	Token      string `json:"token,omitempty"`
	HighestSeq uint64 `json:"highest_seq,omitempty"`
	Conflict   bool   `json:"conflict,omitempty"`
	Foreign    bool   `json:"foreign,omitempty"`
	Lock       string `json:"lock,omitempty"`
}

func claimFailed(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	var stale *StaleError
	var foreign *ForeignError
	switch {
	case errors.As(err, &foreign):
		writeError(w, http.StatusConflict, errorBody{
			Error: foreign.Error(), Resource: foreign.Resource, Token: foreign.Token.String(),
			Foreign: true, Lock: foreign.Lock,
		})
	case errors.As(err, &stale):
		w.Header().Set(HighestHeader, strconv.FormatUint(stale.Highest, 10))
		writeError(w, http.StatusConflict, errorBody{
			Error: stale.Error(), Resource: stale.Resource, Token: stale.Token.String(),
			HighestSeq: stale.Highest, Conflict: stale.Conflict(),
		})
	case errors.Is(err, fence.ErrMalformed), errors.Is(err, ErrInvalidResource):
		writeError(w, http.StatusBadRequest, errorBody{Error: err.Error()})
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		writeError(w, http.StatusServiceUnavailable, errorBody{Error: "verifier: " + err.Error()})
	default:
		logger(log).ErrorContext(r.Context(), "verifier: claim failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusServiceUnavailable, errorBody{Error: "verifier: cannot check the token now"})
	}
}

func writeError(w http.ResponseWriter, code int, body errorBody) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}
