// Package docfacts holds no code: its tests check that the README, docs/,
// bench/README.md and the package docs state the facts that the code
// defines once (the lock's Redis keys, metric and attribute names and their
// values, verifier names, option defaults), and that every public
// package's doc opens with a code block.
package docfacts
