package podnetworks

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// Error's message is the single problem, or a count and the first 20
// problems, the rest counted (selection.ListProblems, as an annotation's
// own problems are listed).
func TestErrorMessage(t *testing.T) {
	problem := func(i int) Problem {
		return Problem{Field: "f", Index: i, Err: errors.New(fmt.Sprint("p", i))}
	}
	if got := (&Error{Problems: []Problem{problem(0)}}).Error(); got != "f: p0" {
		t.Errorf("one problem: %q, want %q", got, "f: p0")
	}
	var ps []Problem
	var listed []string
	for i := range 23 {
		ps = append(ps, problem(i))
		if i < 20 {
			listed = append(listed, fmt.Sprint("f: p", i))
		}
	}
	want := "the pod's network selection has 23 problems: " + strings.Join(listed, "; ") + "; and 3 more"
	if got := (&Error{Problems: ps}).Error(); got != want {
		t.Errorf("23 problems:\n got %q\nwant %q", got, want)
	}
	if got, want := (&Error{Problems: ps[:2]}).Error(), "the pod's network selection has 2 problems: f: p0; f: p1"; got != want {
		t.Errorf("2 problems: %q, want %q", got, want)
	}
}
