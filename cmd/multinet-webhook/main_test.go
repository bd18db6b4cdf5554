package main

import (
	"slices"
	"testing"
)

func TestSplitList(t *testing.T) {
	if got := splitList(" a, ,b,,c "); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("splitList: %q", got)
	}
	if got := splitList(""); got != nil {
		t.Errorf("splitList(\"\"): %q", got)
	}
	if got := appendUnique([]string{"kube-system"}, "kube-system"); len(got) != 1 {
		t.Errorf("appendUnique duplicated: %q", got)
	}
	if got := appendUnique([]string{"kube-system"}, "mn"); !slices.Equal(got, []string{"kube-system", "mn"}) {
		t.Errorf("appendUnique: %q", got)
	}
}
