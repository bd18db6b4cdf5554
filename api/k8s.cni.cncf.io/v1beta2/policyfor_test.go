package v1beta2

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestParsePolicyFor(t *testing.T) {
	nn := func(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }
	for _, tc := range []struct {
		value   string
		want    []types.NamespacedName
		wantErr string
	}{
		{value: "", want: nil},
		{value: "  ", want: nil},
		{value: "macvlan1-simple", want: []types.NamespacedName{nn("tenant", "macvlan1-simple")}},
		{value: "default/macvlan1-simple", want: []types.NamespacedName{nn("default", "macvlan1-simple")}},
		{value: " default/a , b,default/a", want: []types.NamespacedName{nn("default", "a"), nn("tenant", "b")}},
		{value: "a,,b", wantErr: `entry 1 "": empty`},
		{value: "a/b/c", wantErr: `entry 0 "a/b/c": more than one "/"`},
		{value: "Default/a", wantErr: `namespace "Default"`},
		{value: "ns/A_b", wantErr: `NetworkAttachmentDefinition name "A_b"`},
		{value: "/a", wantErr: `namespace ""`},
		{value: "ns/", wantErr: `NetworkAttachmentDefinition name ""`},
	} {
		got, err := ParsePolicyFor(tc.value, "tenant")
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), PolicyForAnnotation) {
				t.Errorf("ParsePolicyFor(%q) = %v, %v; want an error naming %s and saying %q", tc.value, got, err, PolicyForAnnotation, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("ParsePolicyFor(%q) = %v, %v; want %v", tc.value, got, err, tc.want)
		}
	}
}

// FuzzParsePolicyFor: any value parses or is refused without a panic; a
// parsed value has valid, distinct names and parses again to the same
// list when written back as namespace/name entries.
func FuzzParsePolicyFor(f *testing.F) {
	for _, s := range []string{"", "a", "default/macvlan1-simple", " x/a , b,x/a", "a,,b", "a/b/c", "Ns/a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		got, err := ParsePolicyFor(value, "tenant")
		if err != nil {
			return
		}
		var entries []string
		for _, n := range got {
			if n.Namespace == "" || n.Name == "" {
				t.Fatalf("ParsePolicyFor(%q) gave an empty part: %v", value, got)
			}
			entries = append(entries, n.Namespace+"/"+n.Name)
		}
		again, err := ParsePolicyFor(strings.Join(entries, ","), "other")
		if err != nil || !slices.Equal(again, got) {
			t.Fatalf("ParsePolicyFor(%q) = %v; written back it parses to %v, %v", value, got, again, err)
		}
	})
}
