package sqlverifier

import (
	"encoding/hex"
	"strconv"
	"strings"
)

// inline is a MySQL statement whose ? placeholders are filled in by the
// verifier itself, as literals, so that it goes out as one text statement:
// one round trip. With go-sql-driver/mysql's default DSN (no
// interpolateParams), a statement with arguments is prepared, run and
// closed instead: two round trips. Only the guard's fast path, which runs
// at every fenced write, is sent this way.
//
// The literals cannot be read as SQL: a string is a hex literal (X'6162'),
// whatever the connection's character set and sql_mode
// (NO_BACKSLASH_ESCAPES), and compares byte for byte with the table's
// VARBINARY columns, by primary key; an integer is its decimal digits.
type inline struct {
	parts []string // the statement, split at its placeholders
}

// newInline splits query at its ? placeholders after dropping its comment
// lines ("--" first on the line, as in the embedded files; the statements
// have no ? inside a string).
func newInline(query string) inline {
	var b strings.Builder
	for line := range strings.Lines(query) {
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		b.WriteString(line)
	}
	return inline{parts: strings.Split(strings.TrimSpace(b.String()), "?")}
}

// with returns the statement with args (string or int64, one per
// placeholder) in place of the placeholders.
func (s inline) with(args ...any) string {
	if len(args) != len(s.parts)-1 {
		panic("sqlverifier: inline statement given " + strconv.Itoa(len(args)) + " arguments for " + strconv.Itoa(len(s.parts)-1)) // a bug here
	}
	n := 0
	for _, p := range s.parts {
		n += len(p)
	}
	for _, a := range args {
		if s, ok := a.(string); ok {
			n += 3 + 2*len(s)
		} else {
			n += 20
		}
	}
	b := make([]byte, 0, n)
	for i, p := range s.parts {
		b = append(b, p...)
		if i == len(args) {
			break
		}
		switch a := args[i].(type) {
		case string:
			b = append(b, "X'"...)
			b = hex.AppendEncode(b, []byte(a))
			b = append(b, '\'')
		case int64:
			b = strconv.AppendInt(b, a, 10)
		default:
			panic("sqlverifier: inline argument of an unexpected type") // a bug here
		}
	}
	return string(b)
}
