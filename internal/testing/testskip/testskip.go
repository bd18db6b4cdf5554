// Package testskip is the one way a multinet test skips. A skip that nobody
// reads is a pass that proved nothing, so under CI=true (the CI run and
// `make test`) a skip fails the test unless the test is on the short list of
// host-dependent tests in allowed.txt, which `make skips` prints with their
// reasons and `make test` prints before it starts.
//
// Tests never call t.Skip directly; hack/verify.sh refuses a *_test.go file
// that does (benchmarks excepted: they are not part of a verdict).
package testskip

import (
	_ "embed"
	"fmt"
	"os"
	"strings"
	"testing"
)

// EnvCI is the variable that, set to "true", turns an unlisted skip into a
// failure. CI systems set it; .ci/run and the Makefile's test targets do.
const EnvCI = "CI"

//go:embed allowed.txt
var allowedText string

// Entry is one line of allowed.txt: a test name (or a name prefix ending in
// "*") and why its host may lack what it needs.
type Entry struct {
	Pattern string
	Reason  string
}

// Allowed parses allowed.txt. Lines are "<pattern> <reason>"; blank lines and
// lines starting with "#" are ignored. It panics on a line without a reason,
// since the file is embedded and a malformed one is a build defect
// (TestAllowedParses keeps it well formed).
func Allowed() []Entry {
	var out []Entry
	for i, line := range strings.Split(allowedText, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		pattern, reason, ok := strings.Cut(line, " ")
		if !ok || strings.TrimSpace(reason) == "" {
			panic(fmt.Sprintf("testskip: allowed.txt line %d has no reason: %q", i+1, line))
		}
		out = append(out, Entry{Pattern: pattern, Reason: strings.TrimSpace(reason)})
	}
	return out
}

// allowedFor returns the entry that lists the test name (the top-level name
// of a subtest: "TestA/sub" is listed by "TestA").
func allowedFor(name string) (Entry, bool) {
	top, _, _ := strings.Cut(name, "/")
	for _, e := range Allowed() {
		if p, prefix := strings.CutSuffix(e.Pattern, "*"); prefix && strings.HasPrefix(top, p) || e.Pattern == top {
			return e, true
		}
	}
	return Entry{}, false
}

// strict reports whether unlisted skips fail (CI=true).
func strict() bool { return os.Getenv(EnvCI) == "true" }

// Skip skips the test with the reason, formatted as by fmt.Sprintf. Under
// CI=true a test that allowed.txt does not list fails instead, with the
// reason and the file to edit.
func Skip(tb testing.TB, format string, args ...any) {
	tb.Helper()
	reason := fmt.Sprintf(format, args...)
	if strict() {
		if _, ok := allowedFor(tb.Name()); !ok {
			tb.Fatalf("skipped under %s=true, and %s is not on the list of host-dependent tests (internal/testing/testskip/allowed.txt): %s",
				EnvCI, tb.Name(), reason)
		}
	}
	tb.Skip(reason)
}
