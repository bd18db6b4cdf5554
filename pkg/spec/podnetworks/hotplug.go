package podnetworks

import (
	"fmt"

	"github.com/multinet/multinet/pkg/spec/selection"
)

// Diff is how a pod's network selection changed between two values of its
// k8s.v1.cni.cncf.io/networks annotation (hot-plug, docs/hotplug.md).
type Diff struct {
	// Kept[i] is the index in the old selection of the element that new
	// element i is, -1 when element i was added.
	Kept []int
	// Added are the indices in the new selection of the elements that were
	// not in the old one, in order.
	Added []int
	// Removed are the indices in the old selection of the elements that are
	// not in the new one, in order.
	Removed []int
}

// Empty reports whether nothing was added or removed.
func (d Diff) Empty() bool { return len(d.Added) == 0 && len(d.Removed) == 0 }

// DiffElements compares two network selections element by element. Two
// network selection elements are the same element when they are equal in
// every key (§4.1.2.1: the NetworkAttachmentDefinition, "interface", "ips",
// "mac", …, compared in canonical form, so that the comma form "net-a" and
// the JSON form [{"name":"net-a"}] are the same): an element whose keys
// changed is removed and added again. Equal elements are matched in order,
// each old element at most once, so that of two equal elements only the
// second is removed when one is left. Elements come from selection.Parse
// (namespace filled in, values canonical). An element that cannot be
// encoded matches nothing.
func DiffElements(old, new []selection.Element) Diff {
	d := Diff{Kept: make([]int, len(new))}
	oldKeys := make([]string, len(old))
	for i := range old {
		oldKeys[i] = elementKey(old[i])
	}
	used := make([]bool, len(old))
	for i := range new {
		d.Kept[i] = -1
		k := elementKey(new[i])
		for j := range old {
			if !used[j] && k != "" && oldKeys[j] == k {
				used[j], d.Kept[i] = true, j
				break
			}
		}
		if d.Kept[i] < 0 {
			d.Added = append(d.Added, i)
		}
	}
	for j := range old {
		if !used[j] {
			d.Removed = append(d.Removed, j)
		}
	}
	return d
}

// elementKey is the canonical JSON of e, "" when it cannot be encoded.
func elementKey(e selection.Element) string {
	b, err := e.MarshalJSON()
	if err != nil {
		return ""
	}
	return string(b)
}

// HotPlugProblems returns the problems of changing the network selection of
// a pod that exists from old (the elements of its previous annotation, or
// those its sandbox has attached) to v's (Check of the new annotation); nil
// when there are none. Hot-plug (multinetd, docs/hotplug.md) attaches the
// added elements and detaches the removed ones in the running pod, so
// besides every rule of Check it refuses (HotPlugAddProblems,
// HotPlugRemoveProblem):
//
//   - an added element whose NetworkAttachmentDefinition names a device
//     resource (resourceName): kubelet allocates a pod's devices when it is
//     admitted, from requests fixed at creation, and each of them already
//     belongs to an attachment of the pod;
//   - an added or removed element with "default-route" (§4.1.2.1.9): the
//     pod's default route belongs to its default network, which hot-plug
//     never touches.
//
// An element whose keys changed is removed and added (DiffElements). The
// webhook denies a pod UPDATE with these problems; multinetd refuses them
// too.
func (v *Verdict) HotPlugProblems(old []selection.Element) []Problem {
	d := DiffElements(old, v.Elements)
	var out []Problem
	for _, i := range d.Added {
		out = append(out, v.HotPlugAddProblems(i)...)
	}
	for _, j := range d.Removed {
		if p := HotPlugRemoveProblem(old[j]); p != nil {
			out = append(out, *p)
		}
	}
	return out
}

// HotPlugAddProblems returns why element i of v.Elements cannot be
// hot-plugged into a pod that exists (see HotPlugProblems); nil when it can.
func (v *Verdict) HotPlugAddProblems(i int) []Problem {
	const ann = selection.NetworksAnnotation
	if i < 0 || i >= len(v.Elements) {
		return nil
	}
	el := v.Elements[i]
	var out []Problem
	if i < len(v.Attachments) && v.Attachments[i].ClaimTemplate != "" {
		out = append(out, Problem{Annotation: ann, Field: AnnotationField(ann), Index: i,
			Err: elementError(ann, i, el, "", "", fmt.Sprintf("cannot be hot-plugged into a pod that exists: NetworkAttachmentDefinition %s gets its device through DRA from ResourceClaimTemplate %q, and a pod's resource claims are fixed when it is created (re-create the pod to add it)", el.Key(), v.Attachments[i].ClaimTemplate), "")})
	} else if i < len(v.Attachments) && v.Attachments[i].Resource != "" {
		out = append(out, Problem{Annotation: ann, Field: AnnotationField(ann), Index: i,
			Err: elementError(ann, i, el, "", "", fmt.Sprintf("cannot be hot-plugged into a pod that exists: NetworkAttachmentDefinition %s needs a device of resource %q, and a pod's devices are allocated from the requests it was created with (re-create the pod to add it)", el.Key(), v.Attachments[i].Resource), "")})
	}
	if el.GatewayRequest != nil {
		out = append(out, Problem{Annotation: ann, Field: AnnotationField(ann), Index: i,
			Err: elementError(ann, i, el, "default-route", "", "cannot be hot-plugged into a pod that exists: the pod's default route belongs to its default network, which hot-plug never changes (re-create the pod to route through this network)", "4.1.2.1.9")})
	}
	return out
}

// HotPlugRemoveProblem returns why element el cannot be removed from (or
// changed in) the selection of a pod that exists, nil when it can: it has
// "default-route" (see HotPlugProblems).
func HotPlugRemoveProblem(el selection.Element) *Problem {
	if el.GatewayRequest == nil {
		return nil
	}
	const ann = selection.NetworksAnnotation
	return &Problem{Annotation: ann, Field: AnnotationField(ann), Index: -1,
		Err: fmt.Errorf("the element of network %s with \"default-route\" cannot be removed from a pod that exists, nor changed: the pod's default route goes through it, and hot-plug never changes the pod's default route (re-create the pod instead) (spec §4.1.2.1.9)", el.Key())}
}
