package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/multinet/multinet/pkg/spec/podnetworks"
)

// MutatePods is the "NetworkResource" admission handler (spec 001, slide 5)
// for Pod CREATE; every other request is allowed unchanged.
//
// It decides the pod's network selection with podnetworks.Check (namespace
// defaulting to the pod's, or the request's when metadata.namespace is
// empty), and counts, per resource name (Options.ResourceNameAnnotations),
// the attachments to NADs with that resource: N (podnetworks.Verdict.Demand),
// less the resources the pod's own resource claims bring through DRA
// (Options.DRA, draServed; docs/decisions/dra.md). The target container (see
// Options.ContainerName/ContainerIndex) then gets "<resource>: V" in both
// requests and limits, V as Options.Existing says; requests and limits are
// always written equal, as Kubernetes requires of extended resources.
//
// Responses: allowed with a JSON patch (only the changed resources, computed
// from the raw object so that unknown fields survive); allowed unchanged
// when nothing is needed; denied (403) for every selection ValidatePods
// denies on CREATE, with the same message (a malformed annotation, a
// selection Options.Policy's isolation forbids, checked before any lookup,
// a missing NAD, a NAD with a malformed resource name or an unusable
// config, a key no plugin is capable of, …); 400 for an unreadable object;
// 503 before the NAD cache synced, and when a NAD lookup fails unless
// Options.OnLookupFailure admits (then the pod is admitted unchanged, with
// a warning).
func (w *Webhooks) MutatePods(ctx context.Context, req admission.Request) admission.Response {
	if !isPod(req) || req.Operation != admissionv1.Create {
		return admission.Allowed("not a pod CREATE")
	}
	pod, _, err := decodePods(req)
	if err != nil {
		return badRequest(err)
	}
	if !selects(pod) {
		return admission.Allowed("no network selection")
	}
	if err := w.checkSynced(); err != nil {
		return respond(err)
	}
	v, refused := w.check(ctx, pod, req)
	if refused != nil {
		return *refused
	}
	d, draServed := w.draServed(pod, v, v.Demand())
	claims, refused := w.claimsToAdd(pod, v)
	if refused != nil {
		return *refused
	}
	if len(d.Order) == 0 && len(claims) == 0 {
		if len(draServed) > 0 {
			return admission.Allowed(draServedNote(draServed))
		}
		return admission.Allowed("no selected network has a resource name")
	}
	if len(pod.Spec.Containers) == 0 {
		return admission.Allowed("pod has no containers") // the API server rejects it
	}
	target := w.targetContainer(pod)
	set := planResources(pod, target, d, w.o.Existing)
	if len(set) == 0 && len(claims) == 0 {
		return admission.Allowed(strings.TrimPrefix(draServedNote(draServed)+"; ", "; ") + "containers already request the network resources")
	}
	patched, err := patchPod(req.Object.Raw, target, set, claims)
	if err != nil {
		return badRequest(err)
	}
	resp := admission.PatchResponseFromRaw(req.Object.Raw, patched)
	if !resp.Allowed {
		return resp
	}
	resp.Result = &metav1.Status{Code: http.StatusOK}
	resp.Result.Message = describeChanges(pod.Spec.Containers[target].Name, set, claims)
	if len(draServed) > 0 {
		resp.Result.Message += "; " + draServedNote(draServed)
	}
	return resp
}

// claimsToAdd returns the resource claims of v's DRA networks
// (podnetworks.Verdict.Claims) the pod does not have yet; a pod claim of
// the same name not made from the network's ResourceClaimTemplate is
// refused (403) with podnetworks' reason.
func (w *Webhooks) claimsToAdd(pod *corev1.Pod, v *podnetworks.Verdict) ([]podnetworks.Claim, *admission.Response) {
	var out []podnetworks.Claim
	for _, c := range v.Claims() {
		have := false
		for _, pc := range pod.Spec.ResourceClaims {
			have = have || pc.Name == c.Name
		}
		if !have {
			out = append(out, c)
		}
	}
	if len(out) == len(v.Claims()) {
		return out, nil
	}
	// Some exist: they must be the networks' own.
	if err := (&podnetworks.Error{Problems: v.DeviceProblems(withClaims(pod, out))}); len(err.Problems) > 0 {
		r := admission.Denied(err.Error())
		return nil, &r
	}
	return out, nil
}

// withClaims is a copy of pod with claims added (to check the rest).
func withClaims(pod *corev1.Pod, claims []podnetworks.Claim) *corev1.Pod {
	p := pod.DeepCopy()
	for _, c := range claims {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: c.Name, ResourceClaimTemplateName: &c.Template})
	}
	return p
}

// describeChanges says what the patch does, e.g. `container "app":
// requests and limits example.com/a=2; resource claims multinet-net-1
// (ResourceClaimTemplate t)`.
func describeChanges(container string, set []resourceSetting, claims []podnetworks.Claim) string {
	var parts []string
	if len(set) > 0 {
		parts = append(parts, describe(set))
	}
	if len(claims) > 0 {
		cs := make([]string, len(claims))
		for i, c := range claims {
			cs[i] = fmt.Sprintf("%s (ResourceClaimTemplate %s)", c.Name, c.Template)
		}
		parts = append(parts, "resource claims "+strings.Join(cs, ", "))
	}
	return fmt.Sprintf("container %q: %s", container, strings.Join(parts, "; "))
}

// targetContainer is the index in spec.containers that gets the resources.
func (w *Webhooks) targetContainer(pod *corev1.Pod) int {
	if w.o.ContainerName != "" {
		for i, c := range pod.Spec.Containers {
			if c.Name == w.o.ContainerName {
				return i
			}
		}
	}
	if w.o.ContainerIndex < len(pod.Spec.Containers) {
		return w.o.ContainerIndex
	}
	return 0
}

// resourceSetting is one resource value to write into the target container.
type resourceSetting struct {
	name  string
	value int64
}

// planResources returns the resources whose value in container target must
// change, in the order of d, with their new values (see ExistingPolicy).
// Init containers neither count nor change.
func planResources(pod *corev1.Pod, target int, d podnetworks.Demand, policy ExistingPolicy) []resourceSetting {
	var out []resourceSetting
	tc := &pod.Spec.Containers[target]
	for _, rn := range d.Order {
		n := d.Counts[rn]
		name := corev1.ResourceName(rn)
		cur := podnetworks.ContainerRequest(tc, name)
		var want int64
		switch policy {
		case AddToExisting:
			want = podnetworks.SaturatingAdd(cur, n)
		default: // KeepExisting
			total := podnetworks.PodRequest(pod, name)
			if total >= n {
				want = cur
			} else {
				want = podnetworks.SaturatingAdd(cur, n-total)
			}
		}
		if want == cur {
			// Nothing to add; a limit without a request is fine (the API
			// server defaults the request to it).
			continue
		}
		out = append(out, resourceSetting{name: rn, value: want})
	}
	return out
}

// describe says what was set, e.g. `requests and limits example.com/a=2, example.com/b=1`.
func describe(set []resourceSetting) string {
	parts := make([]string, len(set))
	for i, s := range set {
		parts[i] = fmt.Sprintf("%s=%d", s.name, s.value)
	}
	return "requests and limits " + strings.Join(parts, ", ")
}

// patchPod returns raw (a pod as JSON) with
// spec.containers[target].resources.requests and .limits of each setting
// set to its value, and each claim appended to spec.resourceClaims (made
// from its ResourceClaimTemplate) and to the target container's
// resources.claims (so that it gets the claim's CDI devices: mounts of
// socket slots, vfio nodes). raw is edited as a generic JSON tree with
// numbers kept verbatim, so that a patch computed from raw to the result
// holds only these changes.
func patchPod(raw []byte, target int, set []resourceSetting, claims []podnetworks.Claim) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var tree map[string]any
	if err := dec.Decode(&tree); err != nil {
		return nil, fmt.Errorf("decoding pod: %w", err)
	}
	spec, ok := tree["spec"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("pod has no spec object")
	}
	containers, ok := spec["containers"].([]any)
	if !ok || target >= len(containers) {
		return nil, fmt.Errorf("pod has no spec.containers[%d]", target)
	}
	c, ok := containers[target].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("spec.containers[%d] is not an object", target)
	}
	res := childObject(c, "resources")
	if len(set) > 0 {
		requests := childObject(res, "requests")
		limits := childObject(res, "limits")
		for _, s := range set {
			q := resource.NewQuantity(s.value, resource.DecimalSI).String()
			requests[s.name] = q
			limits[s.name] = q
		}
	}
	if len(claims) > 0 {
		podClaims, _ := spec["resourceClaims"].([]any)
		cClaims, _ := res["claims"].([]any)
		for _, cl := range claims {
			podClaims = append(podClaims, map[string]any{"name": cl.Name, "resourceClaimTemplateName": cl.Template})
			cClaims = append(cClaims, map[string]any{"name": cl.Name})
		}
		spec["resourceClaims"] = podClaims
		res["claims"] = cClaims
	}
	out, err := json.Marshal(tree)
	if err != nil {
		return nil, fmt.Errorf("encoding pod: %w", err)
	}
	return out, nil
}

// childObject returns m[key] as an object, replacing a missing or null value
// (or one of another type) with a new empty object.
func childObject(m map[string]any, key string) map[string]any {
	if o, ok := m[key].(map[string]any); ok {
		return o
	}
	o := map[string]any{}
	m[key] = o
	return o
}
