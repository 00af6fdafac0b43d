package verifier

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/fencelock/fencelock/fence"
)

// HighestHeader is the response header in which [Middleware] reports the
// highest Seq a resource has accepted, on a 409 Conflict.
const HighestHeader = "Fence-Highest"

// MiddlewareOption configures [Middleware].
type MiddlewareOption func(*middlewareConfig)

type middlewareConfig struct {
	resource func(*http.Request) (string, error)
	log      *slog.Logger
}

// WithResource sets how the middleware names the resource a request writes
// to. An error from fn answers 400 Bad Request with the error's text. The
// default is the request's URL path (r.URL.Path), so "/kv/a" and "/kv/b"
// are fenced separately.
func WithResource(fn func(*http.Request) (string, error)) MiddlewareOption {
	return func(c *middlewareConfig) { c.resource = fn }
}

// WithLogger sets where the middleware logs verifier failures that are not
// the client's fault (the storage behind the verifier is unreachable, say);
// the client only sees 503 Service Unavailable. The default is
// slog.Default().
func WithLogger(l *slog.Logger) MiddlewareOption {
	return func(c *middlewareConfig) { c.log = l }
}

// Middleware fences an HTTP handler that writes to a resource. For each
// request it reads the token from the fence.Header request header, claims it
// with v for the request's resource, and then runs next with the token in
// the request's context (fence.FromContext). Requests for the same resource
// run one at a time from the claim to the end of next, so within this
// process no older token can pass the claim while a newer one is writing.
//
// The handler is not called, and the answer is:
//
//   - 428 Precondition Required when the header is missing;
//   - 400 Bad Request when the token is malformed (or sent twice) or the
//     resource name is invalid;
//   - 409 Conflict when the token is stale, with the highest accepted Seq in
//     the HighestHeader response header and in the JSON body;
//   - 503 Service Unavailable when v fails or the request ends while
//     waiting for another write to the same resource.
//
// Every error body is a JSON object {"error": "..."}; a 409 adds
// "resource", "token", "highest_seq" and "conflict".
//
// The claim stands even if next then fails: the resource has seen the
// token, and older ones stay rejected. A client that got an error retries
// with the same token (accepted again) or a newer one.
//
// When several processes write the same storage, a per-process order is not
// enough: let the handler fence its own write as well, with the token from
// the context and a storage-side verifier (pgverifier's WithTx, for one).
func Middleware(v Verifier, opts ...MiddlewareOption) func(http.Handler) http.Handler {
	cfg := middlewareConfig{resource: func(r *http.Request) (string, error) { return r.URL.Path, nil }}
	for _, o := range opts {
		o(&cfg)
	}
	locks := new(keyLock)
	return func(next http.Handler) http.Handler {
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
	}
}

type errorBody struct {
	Error      string `json:"error"`
	Resource   string `json:"resource,omitempty"`
	Token      string `json:"token,omitempty"`
	HighestSeq uint64 `json:"highest_seq,omitempty"`
	Conflict   bool   `json:"conflict,omitempty"`
}

func claimFailed(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	var stale *StaleError
	switch {
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
		if log == nil {
			log = slog.Default()
		}
		log.ErrorContext(r.Context(), "verifier: claim failed", "method", r.Method, "path", r.URL.Path, "err", err)
		writeError(w, http.StatusServiceUnavailable, errorBody{Error: "verifier: cannot check the token now"})
	}
}

func writeError(w http.ResponseWriter, code int, body errorBody) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}
