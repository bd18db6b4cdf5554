package webhook

import (
	"context"
	"maps"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/multinet/multinet/pkg/spec/podnetworks"
	"github.com/multinet/multinet/pkg/spec/selection"
)

// resources returns the container's requests and limits of the test
// resources, as plain numbers, failing when they differ.
func resources(t *testing.T, c corev1.Container) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, rn := range []string{resA, resB} {
		req, hasReq := c.Resources.Requests[corev1.ResourceName(rn)]
		lim, hasLim := c.Resources.Limits[corev1.ResourceName(rn)]
		if hasReq != hasLim || (hasReq && req.Cmp(lim) != 0) {
			t.Errorf("container %q: %s request %v and limit %v differ", c.Name, rn, req.String(), lim.String())
		}
		if hasLim {
			out[rn] = lim.Value()
		}
	}
	return out
}

func TestMutatePods(t *testing.T) {
	type want struct {
		result string
		// containers: expected test resources per container name after the
		// patch (only checked when result is patched or allowed).
		containers map[string]map[string]int64
		msg        string // substring of the message
	}
	tests := []struct {
		name  string
		opts  Options
		reqNS string
		pod   *corev1.Pod
		want  want
	}{{
		name: "no annotation",
		pod:  pod("ns1", nil),
		want: want{result: ResultAllowed, containers: map[string]map[string]int64{"app": {}}},
	}, {
		name: "network without resource",
		pod:  pod("ns1", networks("plain")),
		want: want{result: ResultAllowed, containers: map[string]map[string]int64{"app": {}}},
	}, {
		name: "one attachment",
		pod:  pod("ns1", networks("net-a")),
		want: want{result: ResultPatched, containers: map[string]map[string]int64{"app": {resA: 1}}},
	}, {
		name: "same network twice counts twice",
		pod:  pod("ns1", networks("net-a@eth1, net-a@eth2")),
		want: want{result: ResultPatched, containers: map[string]map[string]int64{"app": {resA: 2}}},
	}, {
		name: "two networks with the same resource",
		pod:  pod("ns1", networks(`[{"name":"net-a"},{"name":"net-a2"}]`)),
		want: want{result: ResultPatched, containers: map[string]map[string]int64{"app": {resA: 2}}},
	}, {
		name: "two resources",
		pod:  pod("ns1", networks("net-a,net-b,plain,net-a2")),
		want: want{result: ResultPatched, containers: map[string]map[string]int64{"app": {resA: 2, resB: 1}}},
	}, {
		name: "legacy resourceName key",
		pod:  pod("ns1", networks("legacy")),
		want: want{result: ResultPatched, containers: map[string]map[string]int64{"app": {resB: 1}}},
	}, {
		name: "NAD in another namespace",
		pod:  pod("ns1", networks("other/net-a")),
		want: want{result: ResultPatched, containers: map[string]map[string]int64{"app": {resA: 1}}},
	}, {
		name:  "namespace from the request when the pod has none",
		reqNS: "other",
		pod:   pod("", networks("net-a")),
		want:  want{result: ResultPatched, containers: map[string]map[string]int64{"app": {resA: 1}}},
	}, {
		name:  "namespace from the request: NAD only in another namespace is missing",
		reqNS: "ns2",
		pod:   pod("", networks("net-a")),
		want:  want{result: ResultDenied, msg: `networks[0] "net-a": NetworkAttachmentDefinition ns2/net-a not found (spec §3.4.1)`},
	}, {
		name: "default-network override counts",
		pod:  pod("ns1", map[string]string{selection.DefaultNetworkAnnotation: "net-b", selection.NetworksAnnotation: "net-b"}),
		want: want{result: ResultPatched, containers: map[string]map[string]int64{"app": {resB: 2}}},
	}, {
		name: "keep: existing value large enough",
		pod:  pod("ns1", networks("net-a,net-a"), withResources("app", map[string]int64{resA: 3})),
		want: want{result: ResultAllowed, containers: map[string]map[string]int64{"app": {resA: 3}}},
	}, {
		name: "keep: existing value too small is raised",
		pod:  pod("ns1", networks("net-a,net-a"), withResources("app", map[string]int64{resA: 1})),
		want: want{result: ResultPatched, containers: map[string]map[string]int64{"app": {resA: 2}}},
	}, {
		name: "keep: another container's request counts toward the pod",
		pod: pod("ns1", networks("net-a,net-a,net-b"),
			withResources("app", nil), withResources("side", map[string]int64{resA: 1})),
		want: want{result: ResultPatched, containers: map[string]map[string]int64{"app": {resA: 1, resB: 1}, "side": {resA: 1}}},
	}, {
		name: "add: added to the existing value",
		opts: Options{Existing: AddToExisting},
		pod:  pod("ns1", networks("net-a,net-a"), withResources("app", map[string]int64{resA: 3, resB: 1})),
		want: want{result: ResultPatched, containers: map[string]map[string]int64{"app": {resA: 5, resB: 1}}},
	}, {
		name: "container by name",
		opts: Options{ContainerName: "nic"},
		pod:  pod("ns1", networks("net-a"), withResources("app", nil), withResources("nic", nil)),
		want: want{result: ResultPatched, containers: map[string]map[string]int64{"app": {}, "nic": {resA: 1}}},
	}, {
		name: "container by index",
		opts: Options{ContainerIndex: 1},
		pod:  pod("ns1", networks("net-a"), withResources("app", nil), withResources("nic", nil)),
		want: want{result: ResultPatched, containers: map[string]map[string]int64{"app": {}, "nic": {resA: 1}}},
	}, {
		name: "absent container name and index out of range fall back to the first",
		opts: Options{ContainerName: "nope", ContainerIndex: 7},
		pod:  pod("ns1", networks("net-a"), withResources("app", nil), withResources("nic", nil)),
		want: want{result: ResultPatched, containers: map[string]map[string]int64{"app": {resA: 1}, "nic": {}}},
	}, {
		name: "missing NAD",
		pod:  pod("ns1", networks("net-a,gone,other/gone2")),
		want: want{result: ResultDenied, msg: `the pod's network selection has 2 problems: metadata.annotations["k8s.v1.cni.cncf.io/networks"]: networks[1] "gone": NetworkAttachmentDefinition ns1/gone not found (spec §3.4.1); metadata.annotations["k8s.v1.cni.cncf.io/networks"]: networks[2] "gone2": NetworkAttachmentDefinition other/gone2 not found (spec §3.4.1)`},
	}, {
		name: "missing default-network NAD",
		pod:  pod("ns1", map[string]string{selection.DefaultNetworkAnnotation: "kube-system/gone"}),
		want: want{result: ResultDenied, msg: `metadata.annotations["v1.multus-cni.io/default-network"]: default-network[0] "gone": NetworkAttachmentDefinition kube-system/gone not found (spec §3.4.1)`},
	}, {
		name: "isolation: denied before the lookup, missing or not",
		opts: Options{Policy: podnetworks.Policy{Isolation: selection.IsolationPolicy{Enabled: true}}},
		pod:  pod("ns1", networks("other/net-a,other/gone")),
		want: want{result: ResultDenied, msg: `metadata.annotations["k8s.v1.cni.cncf.io/networks"]: networks[0]: network "other/net-a" is in namespace "other", which a pod in namespace "ns1" may not use`},
	}, {
		name: "malformed annotation",
		pod:  pod("ns1", networks(`[{"name":"net-a","mac":"zz"}]`)),
		want: want{result: ResultDenied, msg: `metadata.annotations["k8s.v1.cni.cncf.io/networks"]: networks[0] "net-a": field "mac"`},
	}, {
		name: "malformed resourceName on the NAD",
		pod:  pod("ns1", networks("bad-rn")),
		want: want{result: ResultDenied, msg: `metadata.annotations["k8s.v1.cni.cncf.io/networks"]: networks[0] "bad-rn": NetworkAttachmentDefinition ns1/bad-rn: metadata.annotations["k8s.v1.cni.cncf.io/resourceName"]: resourceName "no-slash"`},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newHooks(t, tt.opts)
			ns := tt.reqNS
			if ns == "" {
				ns = tt.pod.Namespace
			}
			tt.pod.Spec.InitContainers = []corev1.Container{withResources("init", nil)}
			req := podRequest(t, admissionv1.Create, ns, tt.pod, nil)
			resp := w.MutatePods(context.Background(), req)
			checkResponse(t, resp, tt.want.result, tt.want.msg)
			if tt.want.containers == nil {
				return
			}
			got := tt.pod
			if resp.Allowed && len(resp.Patches) > 0 {
				got = applyPatch(t, req, resp)
				for _, op := range resp.Patches {
					if !strings.HasPrefix(op.Path, "/spec/containers/") {
						t.Errorf("patch touches %s", op.Path)
					}
				}
			}
			if len(got.Spec.InitContainers) != 1 || len(got.Spec.InitContainers[0].Resources.Limits) != 0 {
				t.Errorf("init containers changed: %+v", got.Spec.InitContainers)
			}
			for _, c := range got.Spec.Containers {
				if g, w := resources(t, c), tt.want.containers[c.Name]; !maps.Equal(g, w) {
					t.Errorf("container %q: resources %v, want %v", c.Name, g, w)
				}
			}
		})
	}
}

func TestMutatePodsKeepsOtherFields(t *testing.T) {
	w := newHooks(t, Options{})
	p := pod("ns1", networks("net-a"))
	p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
	req := podRequest(t, admissionv1.Create, "ns1", p, nil)
	// An unknown field and a big number must survive: the patch is computed
	// from the raw object.
	req.Object.Raw = []byte(strings.Replace(string(req.Object.Raw), `"spec":{`, `"spec":{"futureField":{"n":12345678901234567890},`, 1))
	resp := w.MutatePods(context.Background(), req)
	if Result(resp) != ResultPatched {
		t.Fatalf("result %s: %s", Result(resp), message(resp))
	}
	for _, op := range resp.Patches {
		if op.Operation == "remove" || strings.Contains(op.Path, "futureField") || strings.HasSuffix(op.Path, "/cpu") {
			t.Errorf("unexpected patch op %s %s", op.Operation, op.Path)
		}
	}
	got := applyPatch(t, req, resp)
	if q := got.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU]; q.String() != "250m" {
		t.Errorf("cpu limit %s", q.String())
	}
	if !strings.Contains(message(resp), `container "app": requests and limits example.com/net-a=1`) {
		t.Errorf("message %q", message(resp))
	}
}

func TestMutatePodsIgnoresOtherRequests(t *testing.T) {
	w := newHooks(t, Options{})
	p := pod("ns1", networks("net-a"))
	for name, edit := range map[string]func(*admissionv1.AdmissionRequest){
		"update":      func(r *admissionv1.AdmissionRequest) { r.Operation = admissionv1.Update; r.OldObject = r.Object },
		"other kind":  func(r *admissionv1.AdmissionRequest) { r.Kind.Kind = "Deployment" },
		"subresource": func(r *admissionv1.AdmissionRequest) { r.SubResource = "status" },
	} {
		r := podRequest(t, admissionv1.Create, "ns1", p, nil)
		edit(&r.AdmissionRequest)
		if resp := w.MutatePods(context.Background(), r); Result(resp) != ResultAllowed {
			t.Errorf("%s: result %s", name, Result(resp))
		}
	}
}

func TestMutatePodsNotSynced(t *testing.T) {
	w := newHooks(t, Options{Synced: func() bool { return false }})
	resp := w.MutatePods(context.Background(), podRequest(t, admissionv1.Create, "ns1", pod("ns1", networks("net-a")), nil))
	if resp.Allowed || resp.Result.Code != http.StatusServiceUnavailable {
		t.Fatalf("got allowed=%v %+v, want 503", resp.Allowed, resp.Result)
	}
	// Pods without a selection do not wait for the cache.
	resp = w.MutatePods(context.Background(), podRequest(t, admissionv1.Create, "ns1", pod("ns1", nil), nil))
	if !resp.Allowed {
		t.Fatalf("pod without selection: %+v", resp.Result)
	}
}

func TestMutatePodsBadObject(t *testing.T) {
	w := newHooks(t, Options{})
	r := podRequest(t, admissionv1.Create, "ns1", nil, nil)
	if resp := w.MutatePods(context.Background(), r); resp.Allowed || resp.Result.Code != http.StatusBadRequest {
		t.Errorf("empty object: %+v", resp.Result)
	}
	r.Object.Raw = []byte(`{"spec":{"containers":"no"}}`)
	if resp := w.MutatePods(context.Background(), r); resp.Allowed || resp.Result.Code != http.StatusBadRequest {
		t.Errorf("bad object: %+v", resp.Result)
	}
}

func TestNewOptions(t *testing.T) {
	l := lister(t)
	for _, o := range []Options{
		{},
		{NADs: l, Existing: "replace"},
		{NADs: l, ContainerIndex: -1},
		{NADs: l, ResourceNameAnnotations: []string{" "}},
	} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v): no error", o)
		}
	}
}
