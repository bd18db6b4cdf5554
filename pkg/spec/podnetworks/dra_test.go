package podnetworks

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
)

func draNAD(name, template string) *nadv1.NetworkAttachmentDefinition {
	return nad("ns1", name, plainConf, map[string]string{nadv1.ResourceNameAnnotation: "example.com/dra", ResourceClaimTemplateAnnotation: template})
}

// TestDRANetworks: a NAD naming a ResourceClaimTemplate makes a DRA
// attachment: numbered claims multinet-net-1, -2 in selection order, no
// extended-resource demand, device ordinals only for device-plugin networks.
func TestDRANetworks(t *testing.T) {
	s := source(draNAD("a", "tmpl-a"), draNAD("b", "tmpl-b"),
		nad("ns1", "dp", plainConf, map[string]string{nadv1.ResourceNameAnnotation: "example.com/dp"}))
	v := check(t, networks("a,dp,b,a"), s, Options{})
	if p := problems(v); len(p) > 0 {
		t.Fatalf("problems: %v", p)
	}
	want := []struct{ template, claim string }{{"tmpl-a", "multinet-net-1"}, {"", ""}, {"tmpl-b", "multinet-net-2"}, {"tmpl-a", "multinet-net-3"}}
	for i, w := range want {
		a := v.Attachments[i]
		if a.ClaimTemplate != w.template || a.Claim != w.claim {
			t.Errorf("attachment %d: template %q claim %q, want %q %q", i, a.ClaimTemplate, a.Claim, w.template, w.claim)
		}
	}
	if v.Attachments[0].Device != 0 || v.Attachments[1].Device != 1 {
		t.Errorf("device ordinals = %d, %d; want 0 (DRA), 1", v.Attachments[0].Device, v.Attachments[1].Device)
	}
	d := v.Demand()
	if len(d.Order) != 1 || d.Order[0] != "example.com/dp" {
		t.Errorf("demand = %+v, want only the device-plugin resource", d)
	}
	claims := v.Claims()
	if len(claims) != 3 || claims[1] != (Claim{Name: "multinet-net-2", Template: "tmpl-b"}) {
		t.Errorf("claims = %+v", claims)
	}
}

// TestDRAClaimProblems: a DRA attachment whose pod claim is missing or made
// from another template is a problem naming the claim; the right claim is none.
func TestDRAClaimProblems(t *testing.T) {
	v := check(t, networks("a"), source(draNAD("a", "tmpl-a")), Options{})
	pod := &corev1.Pod{}
	if p := v.DeviceProblems(pod); len(p) != 1 || !strings.Contains(p[0].Error(), `resource claim "multinet-net-1"`) || !strings.Contains(p[0].Error(), "does not have") {
		t.Errorf("no claim: %v", p)
	}
	other := "tmpl-x"
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "multinet-net-1", ResourceClaimTemplateName: &other}}
	if p := v.DeviceProblems(pod); len(p) != 1 || !strings.Contains(p[0].Error(), "not made from it") {
		t.Errorf("other template: %v", p)
	}
	right := "tmpl-a"
	pod.Spec.ResourceClaims[0].ResourceClaimTemplateName = &right
	if p := v.DeviceProblems(pod); len(p) != 0 {
		t.Errorf("right claim: %v", p)
	}
}

// TestDRANADRules: the template annotation must be a name and come with a
// resource name; CheckNAD and Check agree.
func TestDRANADRules(t *testing.T) {
	for name, n := range map[string]*nadv1.NetworkAttachmentDefinition{
		"no resourceName": nad("ns1", "a", plainConf, map[string]string{ResourceClaimTemplateAnnotation: "tmpl"}),
		"bad name":        draNAD("a", "Not_A_Name"),
	} {
		f := CheckNAD(n, nil)
		if len(f.Errors) != 1 || f.Errors[0].Field != AnnotationField(ResourceClaimTemplateAnnotation) {
			t.Errorf("%s: CheckNAD errors = %v", name, f.Errors)
		}
		v := check(t, networks("a"), source(n), Options{})
		if p := problems(v); len(p) != 1 || !strings.Contains(p[0], ResourceClaimTemplateAnnotation) {
			t.Errorf("%s: Check problems = %v", name, p)
		}
	}
}

// TestDRAHotPlug: a DRA network cannot be hot-plugged (claims are fixed at
// creation).
func TestDRAHotPlug(t *testing.T) {
	v := check(t, networks("a"), source(draNAD("a", "tmpl-a")), Options{})
	p := v.HotPlugProblems(nil)
	if len(p) != 1 || !strings.Contains(p[0].Error(), "through DRA") {
		t.Errorf("hot-plug problems = %v", p)
	}
}

// TestDRAOwnClaimsRequests: a pod with a resource claim of its own is not
// told to request the devices of its resourceName networks (its claims may
// hold them: Multus's DRA flow); a pod whose only claim is a template
// network's is.
func TestDRAOwnClaimsRequests(t *testing.T) {
	v := check(t, networks("a,b"), source(draNAD("a", "tmpl-a"), nad("ns1", "b", plainConf, map[string]string{nadv1.ResourceNameAnnotation: "example.com/b"})), Options{})
	tmpl := "tmpl-a"
	pod := &corev1.Pod{Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "multinet-net-1", ResourceClaimTemplateName: &tmpl}}}}
	if v.HasOwnClaims(pod) {
		t.Error("the template network's claim counted as the pod's own")
	}
	if p := v.DeviceProblems(pod); len(p) != 1 || !strings.Contains(p[0].Error(), `needs device 1 of resource "example.com/b"`) {
		t.Errorf("without own claims: %v", p)
	}
	vf := "vf"
	pod.Spec.ResourceClaims = append(pod.Spec.ResourceClaims, corev1.PodResourceClaim{Name: "vf", ResourceClaimTemplateName: &vf})
	if !v.HasOwnClaims(pod) {
		t.Error("claim vf not counted as the pod's own")
	}
	if p := v.DeviceProblems(pod); len(p) != 0 {
		t.Errorf("with its own claim: %v", p)
	}
}
