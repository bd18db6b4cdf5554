package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
	"github.com/multinet/multinet/pkg/spec/selection"
)

// FuzzAdmissionReview posts arbitrary bodies to the three handlers as the
// API server would (HTTP, AdmissionReview JSON), with panics not recovered.
// Every answer must be a decodable AdmissionReview with a response; a
// patch must apply to the request's object and give a pod whose patched
// resources have equal requests and limits.
func FuzzAdmissionReview(f *testing.F) {
	f.Add([]byte(``))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":null}`))
	f.Add(reviewBody(f, podRequest(f, admissionv1.Create, "ns1", pod("ns1", networks("net-a,net-a,net-b")), nil)))
	f.Add(reviewBody(f, podRequest(f, admissionv1.Create, "ns1", pod("", networks(`[{"name":"net-a","namespace":"other"}]`)), nil)))
	f.Add(reviewBody(f, podRequest(f, admissionv1.Update, "ns1", pod("ns1", networks("net-a,x")), pod("ns1", networks("net-a")))))
	f.Add(reviewBody(f, nadRequest(f, admissionv1.Create, nad("ns1", "n", "example.com/x"), nil)))

	w := newHooks(f, Options{})
	handlers := w.Handlers()
	for _, h := range handlers {
		h.(*admission.Webhook).WithRecoverPanic(false)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var in admissionv1.AdmissionReview
		inErr := json.Unmarshal(body, &in)
		for path, h := range handlers {
			rec := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			h.ServeHTTP(rec, r)
			var out admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
				t.Fatalf("%s: answer %q is not an AdmissionReview with a response: %v", path, rec.Body.Bytes(), err)
			}
			if len(out.Response.Patch) == 0 {
				continue
			}
			if !out.Response.Allowed || path != MutatePodsPath || inErr != nil || in.Request == nil {
				t.Fatalf("%s: unexpected patch %s", path, out.Response.Patch)
			}
			req := admission.Request{AdmissionRequest: *in.Request}
			resp := admission.Response{Patches: nil}
			if err := json.Unmarshal(out.Response.Patch, &resp.Patches); err != nil {
				t.Fatalf("patch %s: %v", out.Response.Patch, err)
			}
			p := applyPatch(t, req, resp)
			for _, c := range p.Spec.Containers {
				for name, lim := range c.Resources.Limits {
					if req, ok := c.Resources.Requests[name]; ok && req.Cmp(lim) != 0 && isTestResource(name) {
						t.Fatalf("container %q: %s request %s != limit %s", c.Name, name, req.String(), lim.String())
					}
				}
			}
		}
	})
}

func isTestResource(n corev1.ResourceName) bool { return n == resA || n == resB }

func reviewBody(t testing.TB, req admission.Request) []byte {
	t.Helper()
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request:  &req.AdmissionRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzMutatePod builds pods from fuzzed selection annotations and existing
// requests and checks MutatePods against a model: under KeepExisting the
// pod's app containers request at least N of each resource afterwards
// (a selection the model knows to be invalid, for a missing NAD, a
// malformed resource name, the default network's interface or a key the
// NAD ns1/nocap cannot honour, must be denied),
// where N counts the selected NADs carrying it, and no container but the
// target changes; under AddToExisting the target gains exactly N.
func FuzzMutatePod(f *testing.F) {
	f.Add("net-a,net-a2,net-b", "", int64(0), int64(0), uint8(1), false)
	f.Add(`[{"name":"net-a","interface":"x1"},{"name":"net-a","namespace":"other"}]`, "net-b", int64(1), int64(5), uint8(2), false)
	f.Add("net-a@e1,net-a@e2,plain", "", int64(3), int64(0), uint8(3), true)
	f.Add("legacy, net-b ,gone", "", int64(0), int64(1), uint8(1), false)
	f.Add("", `{"name":"net-a"}`, int64(-1), int64(1<<40), uint8(0), true)

	nads := standardNADs()
	resOf := map[string]string{}
	for _, n := range nads {
		for _, k := range DefaultResourceNameAnnotations {
			if v, ok := n.Annotations[k]; ok {
				resOf[n.Namespace+"/"+n.Name] = v
				break
			}
		}
	}
	keep := newHooks(f, Options{})
	add := newHooks(f, Options{Existing: AddToExisting})
	f.Fuzz(func(t *testing.T, nets, defNet string, targetA, otherA int64, ncont uint8, addMode bool) {
		annots := map[string]string{}
		if nets != "" {
			annots[nadv1.NetworksAnnotation] = nets
		}
		if defNet != "" {
			annots[selection.DefaultNetworkAnnotation] = defNet
		}
		var cs []corev1.Container
		for i := range int(ncont%4) + 1 {
			v := otherA
			if i == 0 {
				v = targetA
			}
			c := corev1.Container{Name: "c" + string(rune('0'+i))}
			if v > 0 && v < 1<<50 {
				c = withResources(c.Name, map[string]int64{resA: v})
			}
			cs = append(cs, c)
		}
		p := pod("ns1", annots, cs...)
		w := keep
		if addMode {
			w = add
		}
		req := podRequest(t, admissionv1.Create, "ns1", p, nil)
		resp := w.MutatePods(context.Background(), req)

		// The model.
		var elems []selection.Element
		parseOK := true
		if defNet != "" {
			e, err := selection.ParseDefaultNetwork(defNet, "ns1")
			parseOK = err == nil
			if e != nil {
				elems = append(elems, *e)
			}
		}
		more, err := selection.Parse(nets, "ns1")
		parseOK = parseOK && err == nil
		elems = append(elems, more...)
		counts := map[string]int64{}
		bad := !parseOK
		for _, e := range elems {
			rn, known := resOf[e.Key()]
			asks := e.IPRequest != nil || e.MacRequest != "" || e.PortMappingsRequest != nil || e.BandwidthRequest != nil || e.InfinibandGUIDRequest != ""
			switch {
			case e.InterfaceRequest == podnetworks.DefaultIfName: // the default network's
				bad = true
			case e.Key() == "ns1/nocap" && asks: // its plugin declares no capability
				bad = true
			case !known && !nadExists(nads, e.Key()):
				bad = true
			case rn == "no-slash":
				bad = true
			case known:
				counts[rn]++
			}
		}
		if bad {
			if resp.Allowed && (nets != "" || defNet != "") {
				t.Fatalf("allowed a pod the model denies: %s", message(resp))
			}
			return
		}
		if !resp.Allowed {
			t.Fatalf("denied a pod the model allows: %s", message(resp))
		}
		got := p
		if len(resp.Patches) > 0 {
			got = applyPatch(t, req, resp)
		}
		for i := 1; i < len(got.Spec.Containers); i++ {
			if !equalResources(got.Spec.Containers[i], p.Spec.Containers[i]) {
				t.Fatalf("container %d changed", i)
			}
		}
		for rn, n := range counts {
			before, after := value(p.Spec.Containers[0], rn), value(got.Spec.Containers[0], rn)
			if addMode {
				if after != before+n {
					t.Fatalf("add: %s %d → %d, want +%d", rn, before, after, n)
				}
				continue
			}
			var total int64
			for _, c := range got.Spec.Containers {
				total += value(c, rn)
			}
			if total < n || (after != before && total != n) {
				t.Fatalf("keep: %s target %d → %d, pod total %d, want ≥ %d (exactly when raised)", rn, before, after, total, n)
			}
		}
	})
}

func nadExists(nads []*nadv1.NetworkAttachmentDefinition, key string) bool {
	for _, n := range nads {
		if n.Namespace+"/"+n.Name == key {
			return true
		}
	}
	return false
}

func value(c corev1.Container, rn string) int64 {
	q, ok := c.Resources.Limits[corev1.ResourceName(rn)]
	if !ok {
		return 0
	}
	return q.Value()
}

func equalResources(a, b corev1.Container) bool {
	eq := func(x, y corev1.ResourceList) bool {
		if len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || v.Cmp(w) != 0 {
				return false
			}
		}
		return true
	}
	return eq(a.Resources.Requests, b.Resources.Requests) && eq(a.Resources.Limits, b.Resources.Limits)
}
