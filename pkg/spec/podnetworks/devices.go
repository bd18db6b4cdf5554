package podnetworks

import (
	"fmt"
	"math"

	corev1 "k8s.io/api/core/v1"

	"github.com/multinet/multinet/pkg/spec/selection"
)

// Demand is what a verdict's attachments need of device-plugin resources:
// the override and the pod's networks (DefaultNetworks never have devices;
// DRA networks get theirs from resource claims, Verdict.Claims).
type Demand struct {
	// Counts[resource] is the number of attachments to NADs with that
	// resource (the same NAD selected twice counts twice).
	Counts map[string]int64
	// Order lists the resources in the order they were first selected.
	Order []string
}

// Demand counts the device resources of v's attachments that have one,
// whether or not they were planned (a missing device request is a problem
// of its own).
func (v *Verdict) Demand() Demand {
	d := Demand{Counts: map[string]int64{}}
	add := func(a *Attachment) {
		if a.Resource == "" || a.ClaimTemplate != "" {
			return
		}
		if d.Counts[a.Resource] == 0 {
			d.Order = append(d.Order, a.Resource)
		}
		d.Counts[a.Resource]++
	}
	if v.DefaultNetwork != nil {
		add(v.DefaultNetwork)
	}
	for i := range v.Attachments {
		add(&v.Attachments[i])
	}
	return d
}

// ContainerRequest is what container c asks for of resource name: the
// larger of its request and limit (extended resources need both equal; a
// limit alone implies the request), rounded up to a whole number.
func ContainerRequest(c *corev1.Container, name corev1.ResourceName) int64 {
	var v int64
	if q, ok := c.Resources.Requests[name]; ok {
		v = q.Value()
	}
	if q, ok := c.Resources.Limits[name]; ok {
		v = max(v, q.Value())
	}
	return v
}

// PodRequest is what the pod's app containers ask for of resource name
// together (init containers' devices are released before the app
// containers start), saturating at math.MaxInt64. kubelet allocates the pod
// that many devices, and multinetd gives the n-th attachment of the
// resource (Attachment.Device) the n-th.
func PodRequest(pod *corev1.Pod, name corev1.ResourceName) int64 {
	var total int64
	for i := range pod.Spec.Containers {
		total = SaturatingAdd(total, ContainerRequest(&pod.Spec.Containers[i], name))
	}
	return total
}

// SaturatingAdd adds quantities a and b (b ≥ 0), saturating at
// math.MaxInt64 instead of wrapping: absurd quantities then fail the API
// server's validation rather than turning into small or negative ones.
func SaturatingAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// DeviceProblems returns a Problem for each attachment of v (the override
// included) that needs a device beyond what pod's app containers request of
// its resource (PodRequest): kubelet allocates the pod exactly its requests,
// and multinetd gives the n-th attachment of a resource the n-th device, so
// that attachment would fail. The webhook adds the requests of the networks
// a pod selects at creation; a pod's resources cannot change afterwards.
// Likewise for a DRA attachment (ClaimTemplate) whose resource claim the
// pod lacks (Verdict.Claims). A pod with resource claims of its own
// (HasOwnClaims) may hold its devices there (Multus's DRA flow,
// docs/dra.md): its requests are not checked.
func (v *Verdict) DeviceProblems(pod *corev1.Pod) []Problem {
	have := map[string]int64{}
	var out []Problem
	claims := map[string]*corev1.PodResourceClaim{}
	for i := range pod.Spec.ResourceClaims {
		claims[pod.Spec.ResourceClaims[i].Name] = &pod.Spec.ResourceClaims[i]
	}
	own := v.HasOwnClaims(pod)
	check := func(annotation string, index int, a *Attachment) {
		if a.ClaimTemplate != "" {
			if reason := claimProblem(a, claims[a.Claim]); reason != "" {
				out = append(out, Problem{Annotation: annotation, Field: AnnotationField(annotation), Index: index,
					Err: elementError(annotation, index, a.Element, "", "", reason, "")})
			}
			return
		}
		if a.Resource == "" || own {
			return
		}
		h, ok := have[a.Resource]
		if !ok {
			h = PodRequest(pod, corev1.ResourceName(a.Resource))
			have[a.Resource] = h
		}
		if a.Device <= h {
			return
		}
		out = append(out, Problem{Annotation: annotation, Field: AnnotationField(annotation), Index: index,
			Err: elementError(annotation, index, a.Element, "", "", fmt.Sprintf("needs device %d of resource %q, but the pod's containers request %d of it (the webhook adds the requests of the networks a pod selects when it is created; a pod's resources cannot change afterwards)", a.Device, a.Resource, h), "")})
	}
	if v.DefaultNetwork != nil {
		check(selection.DefaultNetworkAnnotation, -1, v.DefaultNetwork)
	}
	for i := range v.Attachments {
		check(selection.NetworksAnnotation, i, &v.Attachments[i])
	}
	return out
}

// Claim is a pod resource claim (spec.resourceClaims[]) a DRA network needs.
type Claim struct {
	// Name is the pod's claim name, Attachment.Claim.
	Name string
	// Template is the ResourceClaimTemplate, Attachment.ClaimTemplate.
	Template string
}

// Claims lists the resource claims v's DRA attachments need (the override
// first, then the networks annotation's), in claim-name order.
func (v *Verdict) Claims() []Claim {
	var out []Claim
	add := func(a *Attachment) {
		if a.ClaimTemplate != "" {
			out = append(out, Claim{Name: a.Claim, Template: a.ClaimTemplate})
		}
	}
	if v.DefaultNetwork != nil {
		add(v.DefaultNetwork)
	}
	for i := range v.Attachments {
		add(&v.Attachments[i])
	}
	return out
}

// claimProblem says why the pod claim have cannot hold the device of DRA
// attachment a, "" when it can: it must exist and come from a's template.
func claimProblem(a *Attachment, have *corev1.PodResourceClaim) string {
	const fixed = "the webhook adds it when the pod is created; a pod's resource claims cannot change afterwards"
	switch {
	case have == nil:
		return fmt.Sprintf("needs its device from the pod's resource claim %q (ResourceClaimTemplate %q, %s), which the pod does not have (%s)",
			a.Claim, a.ClaimTemplate, AnnotationField(ResourceClaimTemplateAnnotation), fixed)
	case have.ResourceClaimTemplateName == nil || *have.ResourceClaimTemplateName != a.ClaimTemplate:
		return fmt.Sprintf("needs its device from the pod's resource claim %q made from ResourceClaimTemplate %q, but the pod's claim of that name is not made from it (the name is reserved for multinet's DRA networks; %s)",
			a.Claim, a.ClaimTemplate, fixed)
	}
	return ""
}

// HasOwnClaims reports whether pod has a resource claim
// (spec.resourceClaims) other than those of v's DRA template networks
// (Claims): a claim the pod's author wrote, which may hold the devices of
// its networks (Multus's DRA flow) or anything else (a GPU).
func (v *Verdict) HasOwnClaims(pod *corev1.Pod) bool {
	mine := map[string]bool{}
	for _, c := range v.Claims() {
		mine[c.Name] = true
	}
	for _, c := range pod.Spec.ResourceClaims {
		if !mine[c.Name] {
			return true
		}
	}
	return false
}
