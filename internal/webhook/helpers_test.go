package webhook

import (
	"encoding/json"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	nadlisters "github.com/multinet/multinet/pkg/client/listers/k8s.cni.cncf.io/v1"
)

const (
	resA = "example.com/net-a"
	resB = "example.com/net-b"
)

// capableConfig declares every capability a selection element can ask for.
const capableConfig = `{"cniVersion":"1.0.0","type":"bridge","capabilities":{"ips":true,"mac":true,"portMappings":true,"bandwidth":true,"infinibandGUID":true}}`

// nad returns a NAD ns/name with a bridge spec.config that declares every
// capability and, when rn is not empty, the resourceName annotation.
func nad(ns, name, rn string) *nadv1.NetworkAttachmentDefinition {
	n := &nadv1.NetworkAttachmentDefinition{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: capableConfig},
	}
	if rn != "" {
		n.Annotations = map[string]string{nadv1.ResourceNameAnnotation: rn}
	}
	return n
}

// lister returns an informer-style lister holding nads.
func lister(t testing.TB, nads ...*nadv1.NetworkAttachmentDefinition) nadlisters.NetworkAttachmentDefinitionLister {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, n := range nads {
		if err := idx.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	return nadlisters.NewNetworkAttachmentDefinitionLister(idx)
}

// standardNADs: ns1/net-a (resA), ns1/net-a2 (resA), ns1/net-b (resB),
// ns1/plain (no resource), other/net-a (resA), ns1/legacy (resB under the
// legacy key), ns1/bad-rn (malformed resource name), default/shared (no
// resource), all declaring every capability; ns1/nocap (no resource) whose
// plugin declares none.
func standardNADs() []*nadv1.NetworkAttachmentDefinition {
	legacy := nad("ns1", "legacy", "")
	legacy.Annotations = map[string]string{nadv1.LegacyResourceNameAnnotation: resB}
	nocap := nad("ns1", "nocap", "")
	nocap.Spec.Config = `{"cniVersion":"1.0.0","type":"bridge"}`
	return []*nadv1.NetworkAttachmentDefinition{
		nad("ns1", "net-a", resA), nad("ns1", "net-a2", resA), nad("ns1", "net-b", resB),
		nad("ns1", "plain", ""), nad("other", "net-a", resA), legacy,
		nad("ns1", "bad-rn", "no-slash"), nad("default", "shared", ""), nocap,
	}
}

func newHooks(t testing.TB, o Options) *Webhooks {
	t.Helper()
	if o.NADs == nil {
		o.NADs = lister(t, standardNADs()...)
	}
	w, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// pod returns a pod in ns with annotations and one container "app" (plus
// any extra containers).
func pod(ns string, annotations map[string]string, containers ...corev1.Container) *corev1.Pod {
	if len(containers) == 0 {
		containers = []corev1.Container{{Name: "app", Image: "busybox"}}
	}
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", Annotations: annotations},
		Spec:       corev1.PodSpec{Containers: containers},
	}
}

func networks(v string) map[string]string { return map[string]string{nadv1.NetworksAnnotation: v} }

// withResources returns a container name with requests and limits of each
// resource set to its value.
func withResources(name string, res map[string]int64) corev1.Container {
	c := corev1.Container{Name: name, Image: "busybox"}
	if len(res) > 0 {
		c.Resources.Requests = corev1.ResourceList{}
		c.Resources.Limits = corev1.ResourceList{}
		for k, v := range res {
			c.Resources.Requests[corev1.ResourceName(k)] = *resource.NewQuantity(v, resource.DecimalSI)
			c.Resources.Limits[corev1.ResourceName(k)] = *resource.NewQuantity(v, resource.DecimalSI)
		}
	}
	return c
}

func raw(t testing.TB, obj any) runtime.RawExtension {
	t.Helper()
	if obj == nil {
		return runtime.RawExtension{}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return runtime.RawExtension{Raw: b}
}

// podRequest returns an admission request for pod (and old on UPDATE) in
// request namespace ns.
func podRequest(t testing.TB, op admissionv1.Operation, ns string, p, old *corev1.Pod) admission.Request {
	t.Helper()
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       "uid-1",
		Kind:      metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource:  metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Namespace: ns,
		Operation: op,
		Object:    raw(t, p),
	}}
	if old != nil {
		req.OldObject = raw(t, old)
	}
	return req
}

func nadRequest(t testing.TB, op admissionv1.Operation, n, old *nadv1.NetworkAttachmentDefinition) admission.Request {
	t.Helper()
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       "uid-2",
		Kind:      metav1.GroupVersionKind{Group: nadv1.GroupName, Version: nadv1.Version, Kind: nadv1.NetworkAttachmentDefinitionKind},
		Resource:  metav1.GroupVersionResource{Group: nadv1.GroupName, Version: nadv1.Version, Resource: nadv1.NetworkAttachmentDefinitionResource},
		Namespace: n.Namespace,
		Name:      n.Name,
		Operation: op,
		Object:    raw(t, n),
	}}
	if old != nil {
		req.OldObject = raw(t, old)
	}
	return req
}

// applyPatch applies the response's JSON patch to the request's object and
// decodes the result.
func applyPatch(t testing.TB, req admission.Request, resp admission.Response) *corev1.Pod {
	t.Helper()
	ops, err := json.Marshal(resp.Patches)
	if err != nil {
		t.Fatal(err)
	}
	p, err := jsonpatch.DecodePatch(ops)
	if err != nil {
		t.Fatalf("decoding patch %s: %v", ops, err)
	}
	out, err := p.Apply(req.Object.Raw)
	if err != nil {
		t.Fatalf("applying patch %s: %v", ops, err)
	}
	var pod corev1.Pod
	if err := json.Unmarshal(out, &pod); err != nil {
		t.Fatalf("patched pod does not decode: %v", err)
	}
	return &pod
}

func message(resp admission.Response) string {
	if resp.Result == nil {
		return ""
	}
	return resp.Result.Message
}

// checkResponse fails t unless resp has result and its message contains
// every msg.
func checkResponse(t *testing.T, resp admission.Response, result string, msgs ...string) {
	t.Helper()
	if got := Result(resp); got != result {
		t.Fatalf("result %s (%s), want %s", got, message(resp), result)
	}
	for _, m := range msgs {
		if !strings.Contains(message(resp), m) {
			t.Errorf("message %q does not contain %q", message(resp), m)
		}
	}
}
