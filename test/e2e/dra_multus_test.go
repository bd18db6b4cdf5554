//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/multinet/multinet/internal/devices/dra"
	"github.com/multinet/multinet/internal/testing/testskip"
)

// Multus's DRA flow on multinet. Multus's how-to
// (multus-cni docs/how-to-use.md, "Run pod with network annotation and
// Dynamic Resource Allocation driver") adapted to multinet's driver: a
// DeviceClass selecting the driver, a ResourceClaimTemplate, a NAD carrying
// only k8s.v1.cni.cncf.io/resourceName, and a pod that declares its own
// claim. And KEP-5004: a DeviceClass serving the NAD's resource as an
// extended resource, the webhook's request served through DRA.

// multusDRANet creates, in ns, the how-to's objects adapted: DeviceClass
// (cluster-wide, deleted at the end; Multus's selector: the driver only),
// ResourceClaimTemplate "netdev-template" of one device of it, and NAD
// "netdev-net" for multinet-netdev with the resourceName annotation only.
func multusDRANet(t *testing.T, ns string) *testNet {
	t.Helper()
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "-netdev"}, Spec: resourceapi.DeviceClassSpec{
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "` + dra.DefaultDriverName + `"`}}}}}
	createDeviceClass(t, class)
	claimTemplate(t, ns, "netdev-template", class.Name, 1)
	n := nextSubnet()
	tn := &testNet{Namespace: ns, Name: "netdev-net", Subnet: fmt.Sprintf("10.212.%d.0/24", n),
		DataDir: filepath.Join(testCluster.mustEnv(t, "CNI_IPAM_DIR"), "e2e", ns+"-netdev-net")}
	createNAD(t, ns, tn.Name, map[string]any{
		"cniVersion": "1.0.0", "name": tn.Name, "type": "multinet-netdev",
		"ipam": map[string]any{"type": "host-local", "dataDir": tn.DataDir, "ranges": [][]map[string]string{{{"subnet": tn.Subnet}}}},
	}, map[string]string{resourceNameAnnotation: draResource})
	t.Cleanup(func() { _ = os.RemoveAll(target.path(tn.DataDir)) })
	return tn
}

// createDeviceClass creates class and deletes it when the test ends.
func createDeviceClass(t *testing.T, class *resourceapi.DeviceClass) {
	t.Helper()
	if _, err := testCluster.kube.ResourceV1().DeviceClasses().Create(testContext(t, 30*time.Second), class, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create DeviceClass %s: %v", class.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := testCluster.kube.ResourceV1().DeviceClasses().Delete(ctx, class.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete DeviceClass %s: %v", class.Name, err)
		}
	})
}

// claimTemplate creates ResourceClaimTemplate name in ns: one request "dev"
// of count devices of class.
func claimTemplate(t *testing.T, ns, name, class string, count int64) {
	t.Helper()
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "dev", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}}}}}}}
	if _, err := testCluster.kube.ResourceV1().ResourceClaimTemplates(ns).Create(testContext(t, 30*time.Second), tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ResourceClaimTemplate %s/%s: %v", ns, name, err)
	}
}

// withOwnClaims gives pod p claim name → template for each pair, each
// referenced by its container, as the how-to's pod does.
func withOwnClaims(p *corev1.Pod, pairs ...string) *corev1.Pod {
	for i := 0; i+1 < len(pairs); i += 2 {
		name, tmpl := pairs[i], pairs[i+1]
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, corev1.PodResourceClaim{Name: name, ResourceClaimTemplateName: &tmpl})
		p.Spec.Containers[0].Resources.Claims = append(p.Spec.Containers[0].Resources.Claims, corev1.ResourceClaim{Name: name})
	}
	return p
}

// ownClaim returns the ResourceClaim of the pod's claim podClaim.
func ownClaim(t *testing.T, p *corev1.Pod, podClaim string) *resourceapi.ResourceClaim {
	t.Helper()
	for _, s := range p.Status.ResourceClaimStatuses {
		if s.Name == podClaim && s.ResourceClaimName != nil {
			c, err := testCluster.kube.ResourceV1().ResourceClaims(p.Namespace).Get(testContext(t, 20*time.Second), *s.ResourceClaimName, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("claim %s of pod %s/%s: %v", podClaim, p.Namespace, p.Name, err)
			}
			return c
		}
	}
	t.Fatalf("pod %s/%s has no ResourceClaim for %s: %+v", p.Namespace, p.Name, podClaim, p.Status.ResourceClaimStatuses)
	return nil
}

// claimDevices returns the devices of multinet's driver the claim holds.
func claimDevices(c *resourceapi.ResourceClaim) []string {
	var out []string
	if c.Status.Allocation != nil {
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Driver == dra.DefaultDriverName {
				out = append(out, r.Device)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestDRAMultusHowTo: Multus's how-to pod, adapted to multinet's driver,
// runs at its first attach: the webhook adds no extended-resource request
// and no claim of its own; multinetd finds the device in the pod's claim by
// its resourceName attribute and hands it to multinet-netdev (the device
// moves into the pod; network-status has its MAC; the record its device
// ID), the claim's status gets networkData and Ready (KEP-4817), cleared on
// deletion; the device comes back and nothing is left.
func TestDRAMultusHowTo(t *testing.T) {
	requireDRA(t)
	macs := draMACs(t)
	ns := newNamespace(t)
	tn := multusDRANet(t, ns)
	got := runPod(t, withOwnClaims(podSpec(ns, "sriov-pod", "netdev-net"), "netdev", "netdev-template"))
	if _, lim := containerResources(got, draResource); !lim.IsZero() {
		t.Errorf("the webhook requested %s=%s: no node advertises it, DRA serves it through the pod's claim", draResource, lim.String())
	}
	if len(got.Spec.ResourceClaims) != 1 {
		t.Errorf("pod resourceClaims = %+v, want only its own", got.Spec.ResourceClaims)
	}
	claim := ownClaim(t, got, "netdev")
	devs := claimDevices(claim)
	if len(devs) != 1 {
		t.Fatalf("claim %s holds %v, want one device", claim.Name, devs)
	}
	checkClaimAttachment(t, got, claim, devs[0], "net1", macs)
	deletePod(t, ns, got.Name)
	waitClaimCleared(t, claim)
	waitDevicesHome(t, macs)
	assertReleased(t, tn)
	assertNoRecords(t, ns)
}

// TestDRAMultusTwoDevices: two attachments of the resource take the two
// devices of the pod's claim, in device-ID order (net1 mnr0, net2 mnr1).
func TestDRAMultusTwoDevices(t *testing.T) { draMultusTwoDevices(t, false) }

// TestDRAMultusTwoDevicesAndGPU: as TestDRAMultusTwoDevices, with a second
// claim of the pod, a GPU of another driver (a test driver run here, its
// device without the network attributes), which is allocated and prepared
// and left alone: no status is written to it. The test driver registers
// with the kubelet of the node this process runs on, so it runs on node 1
// only (internal/testing/testskip/allowed.txt).
func TestDRAMultusTwoDevicesAndGPU(t *testing.T) { draMultusTwoDevices(t, true) }

func draMultusTwoDevices(t *testing.T, withGPU bool) {
	requireDRA(t)
	var gpuClass string
	if withGPU {
		gpuClass = startGPUDriver(t)
	}
	macs := draMACs(t)
	ns := newNamespace(t)
	tn := multusDRANet(t, ns)
	claimTemplate(t, ns, "two-netdevs", ns+"-netdev", 2)
	claims := []string{"nets", "two-netdevs"}
	if withGPU {
		claimTemplate(t, ns, "gpu", gpuClass, 1)
		claims = append([]string{"gpu", "gpu"}, claims...)
	}
	got := runPod(t, withOwnClaims(podSpec(ns, "two", "netdev-net,netdev-net"), claims...))
	claim := ownClaim(t, got, "nets")
	if devs := claimDevices(claim); !slices.Equal(devs, draDevices) {
		t.Fatalf("claim holds %v, want %v", devs, draDevices)
	}
	checkClaimAttachment(t, got, claim, "mnr0", "net1", macs)
	checkClaimAttachment(t, got, claim, "mnr1", "net2", macs)
	if withGPU {
		gpu := ownClaim(t, got, "gpu")
		if gpu.Status.Allocation == nil || len(gpu.Status.Allocation.Devices.Results) != 1 || gpu.Status.Allocation.Devices.Results[0].Driver != gpuDriverName {
			t.Errorf("GPU claim allocation = %+v", gpu.Status.Allocation)
		}
		if len(gpu.Status.Devices) != 0 {
			t.Errorf("GPU claim got a device status: %+v", gpu.Status.Devices)
		}
	}
	deletePod(t, ns, got.Name)
	waitDevicesHome(t, macs)
	assertReleased(t, tn)
	assertNoRecords(t, ns)
}

// TestDRAExtendedResource (KEP-5004): with a DeviceClass serving
// multinet.io/netdev-dra as its extendedResourceName, a pod without claims
// selecting the resourceName-only NAD gets the webhook's request (the
// mapping serves it), the scheduler makes the pod's extended-resource claim
// (pod.status.extendedResourceClaimStatus), and multinetd finds the device
// there: moved into the pod, KEP-4817 status in that claim.
func TestDRAExtendedResource(t *testing.T) {
	requireDRA(t)
	macs := draMACs(t)
	ns := newNamespace(t)
	tn := multusDRANet(t, ns)
	ext := draResource
	createDeviceClass(t, &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "-ext"}, Spec: resourceapi.DeviceClassSpec{
		ExtendedResourceName: &ext,
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "` + dra.DefaultDriverName +
			`" && device.attributes["k8s.cni.cncf.io"].resourceName == "` + draResource + `"`}}}}})
	got := runPod(t, podSpec(ns, "ext", "netdev-net"))
	if _, lim := containerResources(got, draResource); lim.Value() != 1 {
		t.Errorf("limit %s = %s, want the webhook's 1 (a DeviceClass maps it)", draResource, lim.String())
	}
	s := got.Status.ExtendedResourceClaimStatus
	if s == nil || len(s.RequestMappings) != 1 || s.RequestMappings[0].ResourceName != draResource {
		t.Fatalf("pod status.extendedResourceClaimStatus = %+v", s)
	}
	claim, err := testCluster.kube.ResourceV1().ResourceClaims(ns).Get(testContext(t, 20*time.Second), s.ResourceClaimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	devs := claimDevices(claim)
	if len(devs) != 1 {
		t.Fatalf("extended-resource claim holds %v, want one device", devs)
	}
	checkClaimAttachment(t, got, claim, devs[0], "net1", macs)
	deletePod(t, ns, got.Name)
	waitDevicesHome(t, macs)
	assertReleased(t, tn)
	assertNoRecords(t, ns)
}

// waitClaimCleared waits until the claim has no device status or is gone
// (multinetd clears it on DEL).
func waitClaimCleared(t *testing.T, c *resourceapi.ResourceClaim) {
	t.Helper()
	err := wait.PollUntilContextTimeout(testContext(t, 70*time.Second), 250*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		cur, err := testCluster.kube.ResourceV1().ResourceClaims(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err) || (err == nil && len(cur.Status.Devices) == 0), nil
	})
	if err != nil {
		t.Errorf("claim %s/%s: device status not cleared after its pod was deleted: %v", c.Namespace, c.Name, err)
	}
}

// gpuDriverName is the test's stand-in for a GPU driver.
const gpuDriverName = "gpu.e2e.multinet.io"

// gpuDriver is a kubelet plugin publishing one device "gpu0" on the target
// node, with an attribute of its own and none of the network convention,
// and preparing claims of it with nothing to inject.
type gpuDriver struct{}

func (gpuDriver) PrepareResourceClaims(_ context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	out := map[types.UID]kubeletplugin.PrepareResult{}
	for _, c := range claims {
		var devs []kubeletplugin.Device
		if c.Status.Allocation != nil {
			for _, r := range c.Status.Allocation.Devices.Results {
				if r.Driver == gpuDriverName {
					devs = append(devs, kubeletplugin.Device{Requests: []string{r.Request}, PoolName: r.Pool, DeviceName: r.Device})
				}
			}
		}
		out[c.UID] = kubeletplugin.PrepareResult{Devices: devs}
	}
	return out, nil
}

func (gpuDriver) UnprepareResourceClaims(_ context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	out := map[types.UID]error{}
	for _, c := range claims {
		out[c.UID] = nil
	}
	return out, nil
}

func (gpuDriver) HandleError(context.Context, error, string) {}

func (gpuDriver) WatchHealthStatus(ctx context.Context, _ chan<- kubeletplugin.DeviceHealthReport) error {
	<-ctx.Done()
	return nil
}

// startGPUDriver runs gpuDriver on the target node for the test (it
// registers with the kubelet through the node's plugins_registry, so the
// node must be the host) and creates its DeviceClass; it returns the
// class's name. At the end the driver stops and its slices go.
func startGPUDriver(t *testing.T) string {
	t.Helper()
	if !target.isHost() {
		testskip.Skip(t, "the test GPU driver registers with the kubelet at a path of this host: run on node 1 (E2E_NODE unset)")
	}
	root := testCluster.mustEnv(t, "KUBELET_ROOT_DIR")
	registry, data := filepath.Join(root, "plugins_registry"), filepath.Join(root, "plugins", gpuDriverName)
	for _, d := range []string{registry, data} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	helper, err := kubeletplugin.Start(ctx, gpuDriver{}, kubeletplugin.KubeClient(testCluster.kube), kubeletplugin.NodeName(target.Name),
		kubeletplugin.DriverName(gpuDriverName), kubeletplugin.RegistrarDirectoryPath(registry), kubeletplugin.PluginDataDirectoryPath(data))
	if err != nil {
		cancel()
		t.Fatalf("start the test GPU driver: %v", err)
	}
	t.Cleanup(func() {
		helper.Stop()
		cancel()
		dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer dcancel()
		_ = testCluster.kube.ResourceV1().ResourceSlices().DeleteCollection(dctx, metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: "spec.driver=" + gpuDriverName})
	})
	model := "e2e"
	res := resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{target.Name + "-gpus": {Slices: []resourceslice.Slice{{Devices: []resourceapi.Device{
		{Name: "gpu0", Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{gpuDriverName + "/model": {StringValue: &model}}}}}}}}}
	if err := helper.PublishResources(ctx, res); err != nil {
		t.Fatalf("publish the test GPU's slice: %v", err)
	}
	class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "e2e-gpu-" + randHex(4)}, Spec: resourceapi.DeviceClassSpec{
		Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "` + gpuDriverName + `"`}}}}}
	createDeviceClass(t, class)
	err = wait.PollUntilContextTimeout(testContext(t, 40*time.Second), 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := testCluster.kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=" + gpuDriverName})
		return err == nil && len(l.Items) > 0, nil
	})
	if err != nil {
		t.Fatalf("the test GPU driver's slice was not published: %v", err)
	}
	return class.Name
}
