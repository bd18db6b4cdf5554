package podnetworks

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/spec/selection"
)

func parse(t *testing.T, networks string) []selection.Element {
	t.Helper()
	if networks == "" {
		return nil
	}
	els, err := selection.Parse(networks, "ns1")
	if err != nil {
		t.Fatalf("parse %q: %v", networks, err)
	}
	return els
}

// Hot-plug diffs two selections by element: both annotation
// forms give the same elements; an element whose keys changed is removed
// and added; of equal elements the first ones stay.
func TestDiffElements(t *testing.T) {
	tests := []struct {
		name, old, new string
		kept           []int
		added, removed []int
	}{
		{"same, other form", "net-a, net-b@x", `[{"name":"net-a","namespace":"ns1"},{"name":"net-b","interface":"x"}]`, []int{0, 1}, nil, nil},
		{"one added", "net-a", "net-a, net-b", []int{0, -1}, []int{1}, nil},
		{"first removed", "net-a, net-b", "net-b", []int{1}, nil, []int{0}},
		{"all removed", "net-a, net-b", "", nil, nil, []int{0, 1}},
		{"keys changed", `[{"name":"net-a","ips":["10.0.0.1/24"]}]`, `[{"name":"net-a","ips":["10.0.0.2/24"]}]`, []int{-1}, []int{0}, []int{0}},
		{"interface changed", "net-a@x", "net-a@y", []int{-1}, []int{0}, []int{0}},
		{"one of two equal removed", "net-a, net-a", "net-a", []int{0}, nil, []int{1}},
		{"reordered", "net-a, net-b", "net-b, net-a", []int{1, 0}, nil, nil},
		{"cni-args numbers", `[{"name":"net-a","cni-args":{"n":12345678901234567890}}]`, `[{"name":"net-a","cni-args":{"n":12345678901234567890}}]`, []int{0}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := DiffElements(parse(t, tt.old), parse(t, tt.new))
			if !slices.Equal(d.Kept, tt.kept) && !(len(d.Kept) == 0 && len(tt.kept) == 0) {
				t.Errorf("Kept = %v, want %v", d.Kept, tt.kept)
			}
			if !slices.Equal(d.Added, tt.added) || !slices.Equal(d.Removed, tt.removed) {
				t.Errorf("Added %v Removed %v, want %v %v", d.Added, d.Removed, tt.added, tt.removed)
			}
			if d.Empty() != (len(tt.added) == 0 && len(tt.removed) == 0) {
				t.Errorf("Empty() = %v", d.Empty())
			}
		})
	}
}

// An element as multinetd records it (canonical JSON) reads back into an
// element DiffElements finds equal to the parsed one: the record and the
// annotation compare.
func TestDiffElementsRecorded(t *testing.T) {
	els := parse(t, `[{"name":"net-a","ips":["10.0.0.1/24"],"mac":"02:00:00:00:00:01","interface":"x","cni-args":{"n":1.5,"s":"v"},"portMappings":[{"hostPort":80,"containerPort":8080}],"bandwidth":{"ingressRate":1000,"ingressBurst":10},"example.com/ext":{"k":1}}]`)
	b, err := json.Marshal(els[0])
	if err != nil {
		t.Fatal(err)
	}
	var back selection.Element
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	if d := DiffElements([]selection.Element{back}, els); !d.Empty() {
		t.Errorf("recorded element %s differs from the parsed one: %+v", b, d)
	}
}

// What cannot be hot-plugged into a pod that exists: an added
// element whose NAD names a device resource, an added, removed or changed
// element with "default-route". A device network the pod already has, and
// plain networks, can stay, come and go.
func TestHotPlugProblems(t *testing.T) {
	src := source(
		nad("ns1", "plain", plainConf, nil),
		nad("ns1", "dev", plainConf, map[string]string{nadv1.ResourceNameAnnotation: "example.com/nic"}),
	)
	tests := []struct {
		name, old, new string
		want           []string // one substring per problem
	}{
		{"plain added and removed", "plain@a", "plain@b", nil},
		{"device network kept", "dev", "dev, plain", nil},
		{"device network removed", "dev, plain", "plain", nil},
		{"device network added", "plain", "plain, dev", []string{`networks[1] "dev": cannot be hot-plugged into a pod that exists: NetworkAttachmentDefinition ns1/dev needs a device of resource "example.com/nic"`}},
		{"default-route added", "plain", `[{"name":"plain"},{"name":"plain","interface":"gw","default-route":[]}]`, []string{`networks[1] "plain": field "default-route": cannot be hot-plugged`}},
		{"default-route removed", `[{"name":"plain","default-route":[]}]`, "", []string{`ns1/plain with "default-route" cannot be removed`}},
		{"default-route element changed", `[{"name":"plain","default-route":[]}]`, `[{"name":"plain","default-route":["10.0.0.1"]}]`, []string{"cannot be hot-plugged", "cannot be removed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := Pod{Namespace: "ns1", Annotations: map[string]string{}}
			if tt.new != "" {
				pod.Annotations[selection.NetworksAnnotation] = tt.new
			}
			v, err := Check(context.Background(), pod, Options{NADs: src})
			if err != nil {
				t.Fatal(err)
			}
			got := v.HotPlugProblems(parse(t, tt.old))
			if len(got) != len(tt.want) {
				t.Fatalf("problems %v, want %d", got, len(tt.want))
			}
			for i, p := range got {
				if !strings.Contains(p.Error(), tt.want[i]) {
					t.Errorf("problem %d = %q, want it to contain %q", i, p.Error(), tt.want[i])
				}
				if !strings.HasPrefix(p.Error(), AnnotationField(selection.NetworksAnnotation)) {
					t.Errorf("problem %q does not start with the annotation's field", p.Error())
				}
			}
		})
	}
}
