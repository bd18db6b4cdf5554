// Package depgraph holds no code: its test (depgraph_test.go) fails when a
// multinet daemon links a package it must not, from the dependency graph
// `go list -deps` reports for each command (each daemon's dependency graph
// is kept to what it uses; docs/bench.md has the sizes). The
// shim's stricter rule stays with the shim (cmd/multinet-shim
// TestImportsStaySmall).
package depgraph
