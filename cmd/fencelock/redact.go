//go:build unix

package main

import (
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// Secrets in URLs: every URL fencelock prints (in an error, mostly) goes
// through redactURL, and every error that may quote one (go-redis's, pgx's,
// the MySQL driver's parse errors) through redactErr, so that no password
// reaches a terminal, a log or a cron mail.

// mask replaces a secret in what fencelock prints.
const mask = "xxxxx"

// secretSpan is where a secret sits in a URL: raw[start:end].
type secretSpan struct{ start, end int }

// secretSpans finds the secrets of raw without parsing it (a URL that
// url.Parse refuses, for a bad escape say, has them too): the password of
// its user info (a user info without ':' is a user name, as in
// url.URL.Redacted), and the value of each query parameter whose name says
// it holds one (password, sentinel_password, sslpassword, token, ...). The
// user info runs to the last '@' before the query, or, with none there, to
// the last '@' at all (a '?' in a password, unescaped, starts no query): a
// password with an unescaped '/', '@' or '?' is masked whole, and so is
// more of a URL with an '@' only in its query.
func secretSpans(raw string) []secretSpan {
	var spans []secretSpan
	start := 0
	if i := strings.Index(raw, "://"); i >= 0 {
		start = i + len("://")
	}
	query := indexFrom(raw, start, '?')
	at := strings.LastIndexByte(raw[start:query], '@')
	if at < 0 {
		at = strings.LastIndexByte(raw[start:], '@')
	}
	if at >= 0 {
		at += start
		if colon := strings.IndexByte(raw[start:at], ':'); colon >= 0 {
			spans = append(spans, secretSpan{start + colon + 1, at})
		}
		query = indexFrom(raw, at, '?')
	}
	for i := query; i < len(raw); {
		end := strings.IndexAny(raw[i+1:], "&;")
		if end < 0 {
			end = len(raw)
		} else {
			end += i + 1
		}
		param := raw[i+1 : end]
		if name, _, ok := strings.Cut(param, "="); ok && secretParam(name) {
			spans = append(spans, secretSpan{i + 1 + len(name) + 1, end})
		}
		i = end
	}
	return spans
}

// indexFrom is the index of the first c in s from i on, or len(s).
func indexFrom(s string, i int, c byte) int {
	if j := strings.IndexByte(s[i:], c); j >= 0 {
		return i + j
	}
	return len(s)
}

// secretParam reports whether a query parameter's name says its value is
// a secret.
func secretParam(name string) bool {
	name = strings.ToLower(name)
	for _, s := range []string{"pass", "pwd", "secret", "token", "auth", "credential"} {
		if strings.Contains(name, s) {
			return true
		}
	}
	return false
}

// redactURL returns raw with its secrets masked (see secretSpans): the
// form of a URL that fencelock prints.
func redactURL(raw string) string {
	var b strings.Builder
	last := 0
	for _, s := range secretSpans(raw) {
		b.WriteString(raw[last:s.start])
		if s.end > s.start {
			b.WriteString(mask)
		}
		last = s.end
	}
	b.WriteString(raw[last:])
	return b.String()
}

// redactErr returns err with each of urls, and each secret in them, masked
// in its message: as written, percent-decoded, escaped as %q escapes, its
// pieces between URL delimiters, and any quoted piece of one (a parser
// quotes the bad escape it refused); errors.Is and errors.As still see err.
func redactErr(err error, urls ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	for _, u := range urls {
		msg = strings.ReplaceAll(msg, u, redactURL(u))
		for _, s := range secretSpans(u) {
			secret := u[s.start:s.end]
			forms := []string{secret}
			if d, err := url.PathUnescape(secret); err == nil {
				forms = append(forms, d)
			}
			if d, err := url.QueryUnescape(secret); err == nil {
				forms = append(forms, d)
			}
			// The pieces a parser may quote when it cuts the URL at a
			// character in the secret ("invalid port \":pw\"").
			for _, f := range strings.FieldsFunc(secret, func(r rune) bool { return strings.ContainsRune("?#/@:&;=%", r) }) {
				if len(f) >= minPiece {
					forms = append(forms, f)
				}
			}
			for _, f := range forms {
				if f == "" {
					continue
				}
				q := strings.Trim(strconv.Quote(f), `"`)
				msg = strings.ReplaceAll(strings.ReplaceAll(msg, f, mask), q, mask)
				msg = quoted.ReplaceAllStringFunc(msg, func(m string) string {
					if len(m) > len(`""`)+1 && strings.Contains(f, m[1:len(m)-1]) {
						return `"` + mask + `"`
					}
					return m
				})
			}
		}
	}
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

// minPiece is the shortest piece of a secret, cut at a URL delimiter, that
// redactErr masks on its own.
const minPiece = 3

// quoted matches a quoted piece of an error message.
var quoted = regexp.MustCompile(`"[^"]*"`)

// redactedError is an error whose message had secrets masked.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
