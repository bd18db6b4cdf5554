package testskip

import (
	"strings"
	"testing"
)

func TestAllowedParses(t *testing.T) {
	entries := Allowed()
	if len(entries) == 0 {
		t.Fatal("allowed.txt lists no test")
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Pattern, "Test") || len(e.Reason) < 10 {
			t.Errorf("entry %+v: want a Test name and a reason", e)
		}
	}
}

func TestAllowedFor(t *testing.T) {
	for name, want := range map[string]bool{
		"TestDaemonMemoryLimitDoesNotKillDelegates":        true,
		"TestDaemonMemoryLimitDoesNotKillDelegates/cgroup": true,
		"TestDaemonMemoryLimitDoesNotKillDelegatesX":       false,
		"TestSomethingElse":                                false,
	} {
		if _, got := allowedFor(name); got != want {
			t.Errorf("allowedFor(%q) = %v, want %v", name, got, want)
		}
	}
}

// recorder stands in for a *testing.T so that a skip and a failure can be
// told apart without ending this test.
type recorder struct {
	testing.TB
	name            string
	skipped, failed string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Name() string                      { return r.name }
func (r *recorder) Skip(args ...any)                  { r.skipped = args[0].(string) }
func (r *recorder) Fatalf(format string, args ...any) { r.failed = format }

func TestSkipUnderCI(t *testing.T) {
	for _, tc := range []struct {
		ci, name   string
		wantFailed bool
	}{
		{"true", "TestNotListed", true},
		{"true", "TestDaemonMemoryLimitDoesNotKillDelegates", false},
		{"", "TestNotListed", false},
		{"false", "TestNotListed", false},
	} {
		t.Setenv(EnvCI, tc.ci)
		r := &recorder{name: tc.name}
		Skip(r, "needs %s", "x")
		if (r.failed != "") != tc.wantFailed {
			t.Errorf("CI=%q %s: failed=%q skipped=%q, want failed %v", tc.ci, tc.name, r.failed, r.skipped, tc.wantFailed)
		}
		if !tc.wantFailed && r.skipped != "needs x" {
			t.Errorf("CI=%q %s: skip reason %q", tc.ci, tc.name, r.skipped)
		}
	}
}
