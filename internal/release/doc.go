// Package release holds no code, only the test that proves the nested
// modules (extra/fenceotel, bench) can be published: it serves the core and
// fenceotel from a file module proxy, as a tagged release would be served,
// and builds a consumer that imports fenceotel alone. docs/RELEASING.md has
// the release steps and the version scheme this test checks.
package release
