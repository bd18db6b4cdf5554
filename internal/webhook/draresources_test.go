package webhook

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/multinet/multinet/internal/devices/draclaims"
	"github.com/multinet/multinet/internal/testing/apiservertest"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
)

func TestMain(m *testing.M) { os.Exit(apiservertest.Main(m)) }

// draIndexEnv: on the real API server, a ResourceSlice publishing network
// devices of example.com/vf and example.com/mapped (and a GPU without the
// attribute), a DeviceClass mapping example.com/mapped as its extended
// resource (KEP-5004), and a DRAIndex over them, synced.
type draIndexEnv struct {
	kc    kubernetes.Interface
	x     *DRAIndex
	slice string
	class string
}

func newDRAIndexEnv(t *testing.T) *draIndexEnv {
	kc := kubernetes.NewForConfigOrDie(apiservertest.Shared(t).Config())
	base := strings.ToLower(t.Name())
	e := &draIndexEnv{kc: kc, slice: apiservertest.Name(t, base+"-slice"), class: apiservertest.Name(t, base+"-mapped")}
	ctx := context.Background()
	attr := func(rn string) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
		return map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{draclaims.AttrResourceName: {StringValue: &rn}}
	}
	node := e.slice + "-node"
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: e.slice}, Spec: resourceapi.ResourceSliceSpec{
		Driver: "dra.multinet.io", NodeName: &node, Pool: resourceapi.ResourcePool{Name: node, ResourceSliceCount: 1},
		Devices: []resourceapi.Device{{Name: "vf0", Attributes: attr("example.com/vf")}, {Name: "m0", Attributes: attr("example.com/mapped")},
			{Name: "own0", Attributes: attr("example.com/" + e.slice)}, {Name: "gpu0"}}}}
	if _, err := kc.ResourceV1().ResourceSlices().Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ext := "example.com/mapped"
	c := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: e.class}, Spec: resourceapi.DeviceClassSpec{ExtendedResourceName: &ext}}
	if _, err := kc.ResourceV1().DeviceClasses().Create(ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	x, err := NewDRAIndex(kc, 0)
	if err != nil {
		t.Fatal(err)
	}
	ictx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel)
	x.Start(ictx)
	waitFor(t, "the DRA informers to sync", x.HasSynced)
	e.x = x
	return e
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestDRAIndex: a resource is published when a slice's device carries it
// as its resourceName attribute, mapped when a DeviceClass names it as its
// extendedResourceName or it is a class's implicit name; a deleted slice
// no longer publishes.
func TestDRAIndex(t *testing.T) {
	e := newDRAIndexEnv(t)
	for rn, want := range map[string][2]bool{
		"example.com/vf": {true, false}, "example.com/mapped": {true, true}, resA: {false, false},
		resourceapi.ResourceDeviceClassPrefix + e.class: {false, true}, resourceapi.ResourceDeviceClassPrefix + "no-such-class": {false, false},
	} {
		if got := [2]bool{e.x.Published(rn), e.x.Mapped(rn)}; got != want {
			t.Errorf("%s: published, mapped = %v, want %v", rn, got, want)
		}
	}
	own := "example.com/" + e.slice
	if !e.x.Published(own) {
		t.Fatalf("%s not published", own)
	}
	if err := e.kc.ResourceV1().ResourceSlices().Delete(context.Background(), e.slice, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deleted slice to stop publishing "+own, func() bool { return !e.x.Published(own) })
}

// TestMutatePodsDRAServed: the webhook requests no extended resource that
// the pod's own resource claims bring through DRA (Multus's DRA flow: a
// slice publishes it, no DeviceClass maps it, the pod has a claim of its
// own); every other case is requested as before: no claim of the pod's own
// (only a template network's), a resource no slice publishes (a device
// plugin's, next to a GPU claim), a resource a DeviceClass maps (KEP-5004:
// the scheduler serves the request through DRA).
func TestMutatePodsDRAServed(t *testing.T) {
	e := newDRAIndexEnv(t)
	nads := append(standardNADs(), nad("ns1", "vf-net", "example.com/vf"), nad("ns1", "mapped-net", "example.com/mapped"))
	tmpl := nad("ns1", "dra-a", "example.com/dra")
	tmpl.Annotations[podnetworks.ResourceClaimTemplateAnnotation] = "tmpl-a"
	w := newHooks(t, Options{NADs: lister(t, append(nads, tmpl)...), DRA: e.x})
	withClaims := func(p *corev1.Pod, claims ...string) *corev1.Pod {
		for _, c := range claims {
			t := "tmpl-" + c
			if c == "multinet-net-1" {
				t = "tmpl-a"
			}
			p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: c, ResourceClaimTemplateName: &t})
		}
		return p
	}
	for _, tc := range []struct {
		name     string
		pod      *corev1.Pod
		want     map[string]int64 // the target container's limits of these resources (0: absent)
		note     bool             // the response says what was left out
		patched  bool
		claimsTo int // spec.resourceClaims after the patch
	}{
		{"own claim: the DRA resource left out", withClaims(pod("ns1", networks("vf-net,vf-net,net-a")), "vf"),
			map[string]int64{"example.com/vf": 0, resA: 1}, true, true, 1},
		{"own claim, DRA resource only: unchanged", withClaims(pod("ns1", networks("vf-net")), "vf", "gpu"),
			map[string]int64{"example.com/vf": 0}, true, false, 2},
		{"no claim of its own", pod("ns1", networks("vf-net")), map[string]int64{"example.com/vf": 1}, false, true, 0},
		{"only a template network's claim (added)", pod("ns1", networks("dra-a,vf-net")),
			map[string]int64{"example.com/vf": 1, "example.com/dra": 0}, false, true, 1},
		{"a GPU claim and a device-plugin resource", withClaims(pod("ns1", networks("net-a")), "gpu"), map[string]int64{resA: 1}, false, true, 1},
		{"a mapped resource (KEP-5004)", withClaims(pod("ns1", networks("mapped-net")), "vf"), map[string]int64{"example.com/mapped": 1}, false, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := podRequest(t, admissionv1.Create, "ns1", tc.pod, nil)
			resp := w.MutatePods(context.Background(), req)
			if !resp.Allowed || (Result(resp) == ResultPatched) != tc.patched {
				t.Fatalf("result %s (want patched %v): %s", Result(resp), tc.patched, message(resp))
			}
			if got := strings.Contains(message(resp), "served through DRA by the pod's resource claims: example.com/vf"); got != tc.note {
				t.Errorf("message %q: note %v, want %v", message(resp), got, tc.note)
			}
			got := tc.pod
			if tc.patched {
				got = applyPatch(t, req, resp)
			}
			for rn, n := range tc.want {
				q, ok := got.Spec.Containers[0].Resources.Limits[corev1.ResourceName(rn)]
				if (n == 0 && ok) || (n > 0 && q.Value() != n) {
					t.Errorf("limit %s = %v (set %v), want %d", rn, q.String(), ok, n)
				}
			}
			if len(got.Spec.ResourceClaims) != tc.claimsTo {
				t.Errorf("resourceClaims = %+v, want %d", got.Spec.ResourceClaims, tc.claimsTo)
			}
		})
	}
}
