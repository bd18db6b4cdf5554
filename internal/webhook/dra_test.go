package webhook

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/multinet/multinet/pkg/spec/podnetworks"
)

// draHooks: standardNADs plus ns1/dra-a (resource example.com/dra, template
// tmpl-a) and ns1/dra-b (template tmpl-b).
func draHooks(t *testing.T) *Webhooks {
	nads := standardNADs()
	for name, tmpl := range map[string]string{"dra-a": "tmpl-a", "dra-b": "tmpl-b"} {
		n := nad("ns1", name, "example.com/dra")
		n.Annotations[podnetworks.ResourceClaimTemplateAnnotation] = tmpl
		nads = append(nads, n)
	}
	return newHooks(t, Options{NADs: lister(t, nads...)})
}

// TestMutatePodsDRA: a pod selecting DRA networks gets one resource claim
// per DRA attachment, made from the NAD's ResourceClaimTemplate and
// referenced by the target container, next to the device-plugin requests;
// no extended-resource request for the DRA resource.
func TestMutatePodsDRA(t *testing.T) {
	w := draHooks(t)
	req := podRequest(t, admissionv1.Create, "ns1", pod("ns1", networks("dra-a,net-a,dra-b")), nil)
	resp := w.MutatePods(context.Background(), req)
	if Result(resp) != ResultPatched {
		t.Fatalf("result %s: %s", Result(resp), message(resp))
	}
	got := applyPatch(t, req, resp)
	want := map[string]string{"multinet-net-1": "tmpl-a", "multinet-net-2": "tmpl-b"}
	if len(got.Spec.ResourceClaims) != 2 {
		t.Fatalf("resourceClaims = %+v", got.Spec.ResourceClaims)
	}
	for _, c := range got.Spec.ResourceClaims {
		if c.ResourceClaimTemplateName == nil || *c.ResourceClaimTemplateName != want[c.Name] {
			t.Errorf("claim %s from %v, want %s", c.Name, c.ResourceClaimTemplateName, want[c.Name])
		}
	}
	cc := got.Spec.Containers[0].Resources.Claims
	if len(cc) != 2 || cc[0].Name != "multinet-net-1" || cc[1].Name != "multinet-net-2" {
		t.Errorf("container claims = %+v", cc)
	}
	if _, ok := got.Spec.Containers[0].Resources.Limits["example.com/dra"]; ok {
		t.Error("the DRA resource was requested as an extended resource")
	}
	if q := got.Spec.Containers[0].Resources.Limits[resA]; q.Value() != 1 {
		t.Errorf("%s limit = %v, want 1", resA, q.String())
	}
	if !strings.Contains(message(resp), "resource claims multinet-net-1 (ResourceClaimTemplate tmpl-a)") {
		t.Errorf("message %q", message(resp))
	}
	// The patched pod passes validation's device checks.
	v, refused := w.check(context.Background(), got, req)
	if refused != nil {
		t.Fatal(message(*refused))
	}
	if p := v.DeviceProblems(got); len(p) > 0 {
		t.Errorf("patched pod: %v", p)
	}
}

// TestMutatePodsDRAClaimClash: a pod claim named like a network's claim but
// from another template is denied with the reason; the same claim from the
// right template is kept (no patch).
func TestMutatePodsDRAClaimClash(t *testing.T) {
	w := draHooks(t)
	p := pod("ns1", networks("dra-a"))
	other := "tmpl-x"
	p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "multinet-net-1", ResourceClaimTemplateName: &other}}
	resp := w.MutatePods(context.Background(), podRequest(t, admissionv1.Create, "ns1", p, nil))
	if Result(resp) != ResultDenied || !strings.Contains(message(resp), `resource claim "multinet-net-1" made from ResourceClaimTemplate "tmpl-a"`) {
		t.Errorf("clash: %s %s", Result(resp), message(resp))
	}
	right := "tmpl-a"
	p.Spec.ResourceClaims[0].ResourceClaimTemplateName = &right
	resp = w.MutatePods(context.Background(), podRequest(t, admissionv1.Create, "ns1", p, nil))
	if Result(resp) != ResultAllowed {
		t.Errorf("own claim present: %s %s", Result(resp), message(resp))
	}
}

// TestValidateNADDRA: the webhook denies a NAD naming a template without a
// resource name (podnetworks.CheckNAD).
func TestValidateNADDRA(t *testing.T) {
	w := draHooks(t)
	n := nad("ns1", "x", "")
	n.Annotations = map[string]string{podnetworks.ResourceClaimTemplateAnnotation: "tmpl"}
	resp := w.ValidateNADs(context.Background(), nadRequest(t, admissionv1.Create, n, nil))
	if resp.Allowed || !strings.Contains(message(resp), "names no resource") {
		t.Errorf("got %v %s", resp.Allowed, message(resp))
	}
}
