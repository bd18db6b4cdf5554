package draclaims

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"strings"
	"testing"

	current "github.com/containernetworking/cni/pkg/types/100"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/multinet/multinet/internal/testing/apiservertest"
	corev1client "github.com/multinet/multinet/pkg/client/clientset/kubernetes/typed/core/v1"
	resourcev1client "github.com/multinet/multinet/pkg/client/clientset/kubernetes/typed/resource/v1"
)

func TestMain(m *testing.M) { os.Exit(apiservertest.Main(m)) }

func str(s string) *string { return &s }

// fixture makes node's slice (devices eth1 of example.com/dra and eth2 of
// example.com/other), a pod and its claim allocated eth2 then eth1 and
// reserved for the pod.
func fixture(t *testing.T, kc kubernetes.Interface, node, ns string) (*corev1.Pod, *resourceapi.ResourceClaim) {
	t.Helper()
	ctx := context.Background()
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pool := node + "/example.com/dra"
	dev := func(name, rn, id string) resourceapi.Device {
		return resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			AttrResourceName: {StringValue: str(rn)}, AttrDeviceID: {StringValue: str(id)}}}
	}
	slice := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: node + "-slice"}, Spec: resourceapi.ResourceSliceSpec{
		Driver: testDriver, NodeName: str(node), Pool: resourceapi.ResourcePool{Name: pool, ResourceSliceCount: 1},
		Devices: []resourceapi.Device{dev("eth1", "example.com/dra", "eth1"), dev("eth2", "example.com/other", "eth2")}}}
	if _, err := kc.ResourceV1().ResourceSlices().Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}, Spec: corev1.PodSpec{NodeName: node,
		Containers:     []corev1.Container{{Name: "c", Image: "x"}},
		ResourceClaims: []corev1.PodResourceClaim{{Name: "multinet-net-1", ResourceClaimTemplateName: str("t")}}}}
	pod, err := kc.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p-multinet-net-1-abcde"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "net",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "c"}}}}}}
	claim, err = kc.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
		{Request: "net", Driver: testDriver, Pool: pool, Device: "eth2"},
		{Request: "net", Driver: testDriver, Pool: pool, Device: "eth1"},
	}}}
	claim.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}}
	if claim, err = kc.ResourceV1().ResourceClaims(ns).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "multinet-net-1", ResourceClaimName: str(claim.Name)}}
	if pod, err = kc.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return pod, claim
}

// TestDevice: the device of a resource is found through the pod's claim
// status, the claim's allocation and the slice's attributes, also from a
// stale copy of the pod; a resource the claim holds no device of, an
// unknown pod claim and a claim not reserved for the pod are errors.
func TestDevice(t *testing.T) {
	srv := apiservertest.Shared(t)
	kc := kubernetes.NewForConfigOrDie(srv.Config())
	node, ns := apiservertest.Name(t, "node-d"), apiservertest.Name(t, "dra-device")
	pod, claim := fixture(t, kc, node, ns)
	c := newClient(t, srv.Config(), node)
	ctx := context.Background()
	stale := pod.DeepCopy()
	stale.Status.ResourceClaimStatuses = nil
	for _, p := range []*corev1.Pod{pod, stale} {
		d, err := c.Device(ctx, p, "multinet-net-1", "example.com/dra")
		if err != nil {
			t.Fatal(err)
		}
		want := Device{Namespace: ns, Claim: claim.Name, ClaimUID: claim.UID, Driver: testDriver,
			Pool: node + "/example.com/dra", Name: "eth1", ResourceName: "example.com/dra", DeviceID: "eth1"}
		if *d != want {
			t.Errorf("device = %+v, want %+v", *d, want)
		}
	}
	if _, err := c.Device(ctx, pod, "multinet-net-1", "example.com/none"); err == nil || !strings.Contains(err.Error(), "holds no device of resource example.com/none") {
		t.Errorf("other resource: %v", err)
	}
	if _, err := c.Device(ctx, pod, "multinet-net-2", "example.com/dra"); err == nil || !strings.Contains(err.Error(), "no ResourceClaim for it") {
		t.Errorf("unknown pod claim: %v", err)
	}
	other := pod.DeepCopy()
	other.UID = "another"
	if _, err := c.Device(ctx, other, "multinet-net-1", "example.com/dra"); err == nil || !strings.Contains(err.Error(), "not reserved for pod") {
		t.Errorf("not reserved: %v", err)
	}
}

// TestStatus: SetReady writes the device's status.devices entry with
// networkData and Ready/NetworkReady True, SetFailed turns them False with
// the reason, Clear removes the entry (and is idempotent).
func TestStatus(t *testing.T) {
	srv := apiservertest.Shared(t)
	kc := kubernetes.NewForConfigOrDie(srv.Config())
	node := apiservertest.Name(t, "node-s")
	pod, _ := fixture(t, kc, node, apiservertest.Name(t, "dra-status"))
	c := newClient(t, srv.Config(), node)
	ctx := context.Background()
	d, err := c.Device(ctx, pod, "multinet-net-1", "example.com/dra")
	if err != nil {
		t.Fatal(err)
	}
	get := func() *resourceapi.ResourceClaim {
		cl, err := kc.ResourceV1().ResourceClaims(d.Namespace).Get(ctx, d.Claim, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	nd := &resourceapi.NetworkDeviceData{InterfaceName: "net1", IPs: []string{"10.1.2.3/24"}, HardwareAddress: "02:00:00:00:00:01"}
	if err := c.SetReady(ctx, d, nd, "attached"); err != nil {
		t.Fatal(err)
	}
	cl := get()
	if len(cl.Status.Devices) != 1 || cl.Status.Devices[0].Device != "eth1" || cl.Status.Devices[0].NetworkData == nil ||
		cl.Status.Devices[0].NetworkData.IPs[0] != "10.1.2.3/24" || cl.Status.Devices[0].NetworkData.HardwareAddress != "02:00:00:00:00:01" {
		t.Fatalf("status.devices = %+v", cl.Status.Devices)
	}
	for _, ct := range []string{ConditionReady, ConditionNetworkReady} {
		if !meta.IsStatusConditionTrue(cl.Status.Devices[0].Conditions, ct) {
			t.Errorf("%s not True: %+v", ct, cl.Status.Devices[0].Conditions)
		}
	}
	if err := c.SetFailed(ctx, d, "delegate failed: boom"); err != nil {
		t.Fatal(err)
	}
	cl = get()
	r := meta.FindStatusCondition(cl.Status.Devices[0].Conditions, ConditionReady)
	if r == nil || r.Status != metav1.ConditionFalse || r.Reason != ReasonAttachFailed || r.Message != "delegate failed: boom" || cl.Status.Devices[0].NetworkData != nil {
		t.Errorf("after SetFailed: %+v", cl.Status.Devices[0])
	}
	for range 2 {
		if err := c.Clear(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	if cl = get(); len(cl.Status.Devices) != 0 {
		t.Errorf("after Clear: %+v", cl.Status.Devices)
	}
	gone := *d
	gone.Claim = "gone"
	if err := c.Clear(ctx, &gone); err != nil {
		t.Errorf("Clear of a deleted claim: %v", err)
	}
}

// TestNetworkData: interface name, the addresses on that interface (and
// those without an interface) in CIDR form, and the sandbox interface's MAC.
func TestNetworkData(t *testing.T) {
	one, two := 1, 0
	_, a1, _ := net.ParseCIDR("10.1.2.3/24")
	a1.IP = net.ParseIP("10.1.2.3")
	_, a2, _ := net.ParseCIDR("10.9.9.9/16")
	a2.IP = net.ParseIP("10.9.9.9")
	res := &current.Result{CNIVersion: "1.0.0",
		Interfaces: []*current.Interface{{Name: "net1", Mac: "aa:bb:cc:00:00:01"}, {Name: "net1", Mac: "02:00:00:00:00:09", Sandbox: "/var/run/netns/x"}},
		IPs:        []*current.IPConfig{{Interface: &one, Address: *a1}, {Interface: &two, Address: *a2}}}
	nd, err := NetworkData(res, "net1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(nd)
	if nd.InterfaceName != "net1" || nd.HardwareAddress != "02:00:00:00:00:09" || len(nd.IPs) != 1 || nd.IPs[0] != "10.1.2.3/24" {
		t.Errorf("networkData = %s", b)
	}
}

// testDriver is multinet's driver name (dra.DefaultDriverName; internal/devices/dra
// imports this package).
const testDriver = "dra.multinet.io"

// newClient is New on the typed clients multinetd uses
// (pkg/client/clientset/kubernetes), made from cfg.
func newClient(t *testing.T, cfg *rest.Config, node string) *Client {
	t.Helper()
	pods, err := corev1client.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resource, err := resourcev1client.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return New(pods, resource, node)
}
