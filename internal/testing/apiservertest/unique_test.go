package apiservertest

import (
	"fmt"
	"testing"
	"time"
)

// namedRun is one run of a test named name, as go test -count=N makes them:
// a distinct test value with the same name.
type namedRun struct {
	testing.TB
	name string
}

func (r *namedRun) Name() string { return r.name }

func TestName(t *testing.T) {
	// A name of its own per run: this test too may run -count=N times.
	name := fmt.Sprintf("TestRuns%d", time.Now().UnixNano())
	var got []string
	for i := range 3 {
		run := &namedRun{TB: t, name: name}
		a, b := Name(run, "ns"), Name(run, "ns")
		if a != b {
			t.Errorf("run %d: two calls gave %q and %q, want one name per run", i, a, b)
		}
		got = append(got, a)
	}
	if want := []string{"ns", "ns-r2", "ns-r3"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("three runs of one test: %v, want %v", got, want)
	}
	if other := Name(&namedRun{TB: t, name: name + "Other"}, "ns"); other != "ns" {
		t.Errorf("another test's first run: %q, want the base", other)
	}
}
