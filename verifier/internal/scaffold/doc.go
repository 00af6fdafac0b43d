// Package scaffold is what every fencelock verifier of a store shares, so
// that a backend writes only its guard and the reading of a refusal:
//
//   - the options every verifier takes ([Config], [Kind.WithHooks],
//     [Kind.WithTable], [Apply]) and the package's ErrInvalid ([Kind]);
//   - the checks of a call before any I/O (a nil or unmade verifier, a nil
//     context: [Kind.Usable]);
//   - one token check per call ([Kind.Check]): the report to the hooks,
//     panics included, and the validation of the resource and token, done
//     once; what the backend receives is a [Claim], which only Check makes,
//     so a backend cannot validate a token again, nor forget to;
//   - the explanation of a refused guard from the row read after it
//     ([Refusal]) and the retry when that row changed in between ([Guard]);
//   - the PostgreSQL guard and high-water read, one file each, shared by
//     pgverifier and sqlverifier's Postgres dialect ([PostgresGuard],
//     [PostgresHighest]).
//
// It is internal: its names may change with the verifiers that use it.
package scaffold
