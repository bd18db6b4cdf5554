package main

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// stream is govulncheck JSON: GO-1 reached in example.com/m and in the
// standard library, GO-2 only imported.
const stream = `{"config":{"protocol_version":"v1.0.0","scanner_name":"govulncheck"}}
{"osv":{"id":"GO-1","summary":"bad parse"}}
{"osv":{"id":"GO-2","summary":"bad other"}}
{"finding":{"osv":"GO-2","fixed_version":"v1.2.0","trace":[{"module":"example.com/m","version":"v1.0.0","package":"example.com/m/p"}]}}
{"finding":{"osv":"GO-1","fixed_version":"v1.1.0","trace":[{"module":"example.com/m","version":"v1.0.0","package":"example.com/m/p","function":"Parse"},{"module":"example.com/app","package":"example.com/app","function":"main"}]}}
{"finding":{"osv":"GO-1","fixed_version":"v1.1.0","trace":[{"module":"example.com/m","version":"v1.0.0","package":"example.com/m/p","function":"Parse"},{"module":"example.com/app","package":"example.com/app","function":"other"}]}}
{"finding":{"osv":"GO-1","fixed_version":"v1.26.9","trace":[{"module":"stdlib","version":"v1.26.8","package":"net/http","receiver":"*Server","function":"Serve"},{"module":"example.com/app","package":"example.com/app","function":"main"}]}}
`

func TestCheck(t *testing.T) {
	acc, err := parseAccepted(strings.NewReader("# comment\nGO-1 stdlib fixed in a newer Go\nGO-9 example.com/x gone since\n"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := check(strings.NewReader(stream), acc)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Failed) != 1 || r.Failed[0].ID != "GO-1" || r.Failed[0].Module != "example.com/m" || r.Failed[0].Summary != "bad parse" ||
		r.Failed[0].Example != "example.com/app.main -> example.com/m/p.Parse" {
		t.Errorf("failed %+v, want GO-1 in example.com/m only (the stdlib one is accepted)", r.Failed)
	}
	if len(r.Accepted) != 1 || r.Accepted[0].Module != "stdlib" || r.Accepted[0].Reason != "fixed in a newer Go" ||
		r.Accepted[0].Example != "example.com/app.main -> net/http.Server.Serve" {
		t.Errorf("accepted %+v", r.Accepted)
	}
	if r.Unreached != 1 {
		t.Errorf("unreached %d, want 1 (GO-2 only imported)", r.Unreached)
	}
	if len(r.Stale) != 1 || r.Stale[0].ID != "GO-9" {
		t.Errorf("stale %+v, want GO-9", r.Stale)
	}
	if _, err := parseAccepted(strings.NewReader("GO-1 stdlib\n")); err == nil {
		t.Error("an entry without a reason was accepted")
	}
}

// TestReportsReachableVulnerability runs hack/govulncheck.sh, as make verify
// does (govulncheck and the database from the Go module proxy, nothing from
// vuln.go.dev), on hack/testdata/vulnmod, which calls
// golang.org/x/text/language.Parse of v0.3.5 (GO-2021-0113): it must name
// that vulnerability with its call path and exit 1.
func TestReportsReachableVulnerability(t *testing.T) {
	cmd := exec.Command(filepath.Join("..", "..", "govulncheck.sh"), filepath.Join("..", "..", "testdata", "vulnmod"))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("hack/govulncheck.sh on a module calling a vulnerable symbol: %v, want exit 1\n%s", err, out)
	}
	for _, want := range []string{"REACHABLE GO-2021-0113 in golang.org/x/text@v0.3.5 (fixed in v0.3.7)", "example.com/vulnmod.main -> golang.org/x/text/language.Parse"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
