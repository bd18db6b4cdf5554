package draclaims

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/multinet/multinet/internal/testing/apiservertest"
)

const gpuDriver = "gpu.example.com"

// podDevicesEnv is an API server with node's slices: multinet's driver
// publishing network devices net-b (ID b), net-a (ID a), net-c (ID c) of
// example.com/dra, ext-1 (ID x1) of example.com/ext, bad-1 (ID y) of
// example.com/other; a GPU driver publishing gpu-0 without the attributes.
type podDevicesEnv struct {
	t        *testing.T
	kc       kubernetes.Interface
	node, ns string
	pool     string
}

func newPodDevicesEnv(t *testing.T) *podDevicesEnv {
	srv := apiservertest.Shared(t)
	e := &podDevicesEnv{t: t, kc: kubernetes.NewForConfigOrDie(srv.Config()),
		node: apiservertest.Name(t, "node-pd"), ns: apiservertest.Name(t, "dra-poddevices")}
	e.pool = e.node + "/net"
	ctx := context.Background()
	if _, err := e.kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dev := func(name, rn, id string) resourceapi.Device {
		return resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			AttrResourceName: {StringValue: str(rn)}, AttrDeviceID: {StringValue: str(id)}}}
	}
	e.slice(testDriver, e.pool, dev("net-b", "example.com/dra", "b"), dev("net-a", "example.com/dra", "a"), dev("net-c", "example.com/dra", "c"),
		dev("ext-1", "example.com/ext", "x1"), dev("bad-1", "example.com/other", "y"))
	e.slice(gpuDriver, e.node+"/gpus", resourceapi.Device{Name: "gpu-0", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		"gpu.example.com/model": {StringValue: str("x")}}})
	return e
}

func (e *podDevicesEnv) slice(driver, pool string, devs ...resourceapi.Device) {
	s := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: strings.ReplaceAll(pool, "/", "-")}, Spec: resourceapi.ResourceSliceSpec{
		Driver: driver, NodeName: str(e.node), Pool: resourceapi.ResourcePool{Name: pool, ResourceSliceCount: 1}, Devices: devs}}
	if _, err := e.kc.ResourceV1().ResourceSlices().Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// claim makes ResourceClaim name allocated results (request, driver,
// pool, device) and reserved for pod.
func (e *podDevicesEnv) claim(pod *corev1.Pod, name string, results ...resourceapi.DeviceRequestAllocationResult) {
	ctx := context.Background()
	reqs := map[string]bool{}
	var spec []resourceapi.DeviceRequest
	for _, r := range results {
		if !reqs[r.Request] {
			reqs[r.Request] = true
			spec = append(spec, resourceapi.DeviceRequest{Name: r.Request, Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "c"}})
		}
	}
	cl := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: spec}}}
	cl, err := e.kc.ResourceV1().ResourceClaims(e.ns).Create(ctx, cl, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	cl.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}}
	cl.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}
	if _, err := e.kc.ResourceV1().ResourceClaims(e.ns).UpdateStatus(ctx, cl, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *podDevicesEnv) res(req, driver, pool, dev string) resourceapi.DeviceRequestAllocationResult {
	return resourceapi.DeviceRequestAllocationResult{Request: req, Driver: driver, Pool: pool, Device: dev}
}

// pod creates pod name with spec claims (pod claim → ResourceClaim name)
// and the status naming them.
func (e *podDevicesEnv) pod(name string, claims ...string) *corev1.Pod {
	ctx := context.Background()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}, Spec: corev1.PodSpec{NodeName: e.node,
		Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
	for i := 0; i < len(claims); i += 2 {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: claims[i], ResourceClaimTemplateName: str("t")})
	}
	p, err := e.kc.CoreV1().Pods(e.ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	for i := 0; i < len(claims); i += 2 {
		p.Status.ResourceClaimStatuses = append(p.Status.ResourceClaimStatuses, corev1.PodResourceClaimStatus{Name: claims[i], ResourceClaimName: str(claims[i+1])})
	}
	if p, err = e.kc.CoreV1().Pods(e.ns).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	return p
}

func ids(ds []*Device) string {
	var s []string
	for _, d := range ds {
		s = append(s, d.Claim+":"+d.Name+"="+d.DeviceID)
	}
	return strings.Join(s, ",")
}

// TestPodDevices: the devices of the pod's own claims (Multus's DRA flow)
// are found by their resourceName attribute, sorted by device ID across
// claims; the GPU claim's device and a device of a resource not asked for
// are passed over; the claims in skip (the webhook's multinet-net-<n>) are
// not read; the KEP-5004 claim gives the devices of the requests mapped to
// a wanted resource. A pod without claims costs no API call.
func TestPodDevices(t *testing.T) {
	e := newPodDevicesEnv(t)
	c := newClient(t, apiservertest.Shared(t).Config(), e.node)
	ctx := context.Background()
	p := e.pod("p", "net", "p-net", "gpu", "p-gpu", "multinet-net-1", "p-mn1")
	e.claim(p, "p-net", e.res("vf", testDriver, e.pool, "net-c"), e.res("vf", testDriver, e.pool, "net-b"), e.res("vf", testDriver, e.pool, "bad-1"))
	e.claim(p, "p-gpu", e.res("gpu", gpuDriver, e.node+"/gpus", "gpu-0"))
	e.claim(p, "p-mn1", e.res("net", testDriver, e.pool, "net-a"))
	e.claim(p, "p-ext", e.res("container-0-request-0", testDriver, e.pool, "ext-1"), e.res("container-0-request-1", gpuDriver, e.node+"/gpus", "gpu-0"))
	p.Status.ExtendedResourceClaimStatus = &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "p-ext", RequestMappings: []corev1.ContainerExtendedResourceRequest{
		{ContainerName: "c", ResourceName: "example.com/ext", RequestName: "container-0-request-0"},
		{ContainerName: "c", ResourceName: "example.com/gpu", RequestName: "container-0-request-1"}}}

	got, err := c.PodDevices(ctx, p, map[string]bool{"example.com/dra": true, "example.com/ext": true}, map[string]bool{"multinet-net-1": true})
	if err != nil {
		t.Fatal(err)
	}
	if s := ids(got["example.com/dra"]); s != "p-net:net-b=b,p-net:net-c=c" {
		t.Errorf("example.com/dra devices = %s", s)
	}
	if s := ids(got["example.com/ext"]); s != "p-ext:ext-1=x1" {
		t.Errorf("example.com/ext devices (KEP-5004 claim) = %s", s)
	}
	if len(got) != 2 {
		t.Errorf("resources = %v, want only the two asked for", got)
	}
	// Without skip, the attachment-bound claim's device counts too, first by ID.
	got, err = c.PodDevices(ctx, p, map[string]bool{"example.com/dra": true}, nil)
	if err != nil || ids(got["example.com/dra"]) != "p-mn1:net-a=a,p-net:net-b=b,p-net:net-c=c" {
		t.Errorf("without skip: %s, %v", ids(got["example.com/dra"]), err)
	}
	// A mapped request whose device carries another resource name is an error.
	_, err = c.PodDevices(ctx, p, map[string]bool{"example.com/gpu": true}, nil)
	if err == nil || !strings.Contains(err.Error(), `has k8s.cni.cncf.io/resourceName "", but the request serves extended resource example.com/gpu`) {
		t.Errorf("mapped GPU request: %v", err)
	}
	// A claim not reserved for the pod is an error.
	other := p.DeepCopy()
	other.UID = "another"
	if _, err := c.PodDevices(ctx, other, map[string]bool{"example.com/dra": true}, nil); err == nil || !strings.Contains(err.Error(), "not reserved for pod") {
		t.Errorf("not reserved: %v", err)
	}
	// No claims: no API call (the client has none to make it with).
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "bare"}}
	if got, err := New(nil, nil, e.node).PodDevices(ctx, bare, map[string]bool{"example.com/dra": true}, nil); err != nil || len(got) != 0 {
		t.Errorf("pod without claims: %v, %v", got, err)
	}
}
