//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/multinet/multinet/internal/devices/dra"
	"github.com/multinet/multinet/internal/devices/draclaims"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
	"github.com/multinet/multinet/pkg/spec/status"
)

// The DRA half on the real cluster: multinet-dra-driver
// (DaemonSet multinet-dra-driver) publishes the veths mnr0, mnr1
// of hack/cluster-devices.sh as devices of multinet.io/netdev-dra; a NAD
// naming a ResourceClaimTemplate makes the webhook add the pod's claim; the
// scheduler allocates a device, the kubelet has the driver prepare it,
// multinetd finds it in the claim and hands it to multinet-netdev, and
// writes the device's status into the claim (KEP-4817).

const (
	draResource    = "multinet.io/netdev-dra"
	draDeviceClass = "multinet.io-netdev-dra"
	draDriverLabel = "multinet-dra-driver"
)

var draDevices = []string{"mnr0", "mnr1"}

// requireDRA skips nothing: the DRA driver is part of the deployed install;
// a cluster without it fails the DRA tests.
func requireDRA(t *testing.T) {
	t.Helper()
	if !testCluster.deployed {
		t.Fatal("the DRA tests need the deployed components (MULTINET_DEPLOY=manifests, the default): the DRA driver runs as DaemonSet multinet-dra-driver")
	}
	waitDRASlice(t, 90*time.Second)
}

// draSlices returns the target node's ResourceSlices of multinet's driver.
func draSlices(t *testing.T) []resourceapi.ResourceSlice {
	t.Helper()
	l, err := testCluster.kube.ResourceV1().ResourceSlices().List(testContext(t, 20*time.Second), metav1.ListOptions{
		FieldSelector: "spec.driver=" + dra.DefaultDriverName + ",spec.nodeName=" + target.Name})
	if err != nil {
		t.Fatalf("list ResourceSlices: %v", err)
	}
	return l.Items
}

// waitDRASlice waits until the node's slice lists both DRA netdevs, with
// their resourceName and deviceID attributes, untainted; it returns the slice.
func waitDRASlice(t *testing.T, within time.Duration) *resourceapi.ResourceSlice {
	t.Helper()
	var got *resourceapi.ResourceSlice
	err := wait.PollUntilContextTimeout(testContext(t, within+10*time.Second), 500*time.Millisecond, within, true, func(context.Context) (bool, error) {
		for _, s := range draSlices(t) {
			var ids []string
			for _, d := range s.Spec.Devices {
				rn, id := d.Attributes[dra.AttrResourceName], d.Attributes[dra.AttrDeviceID]
				if rn.StringValue != nil && *rn.StringValue == draResource && id.StringValue != nil && len(d.Taints) == 0 {
					ids = append(ids, *id.StringValue)
				}
			}
			slices.Sort(ids)
			if slices.Equal(ids, draDevices) {
				got = s.DeepCopy()
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no ResourceSlice of %s on the node lists %v as %s within %v: %+v", dra.DefaultDriverName, draDevices, draResource, within, draSlices(t))
	}
	return got
}

// draNet creates, in ns, ResourceClaimTemplate "dra-netdev" (one device of
// the DRA DeviceClass) and NAD name for multinet-netdev naming it, with
// host-local IPAM on a fresh subnet; exhausted gives host-local a range of
// one address that another container already holds, so that every ADD of
// the network fails in the delegate (after multinet-netdev moved the
// device) while its DEL succeeds.
func draNet(t *testing.T, ns, name string, exhausted bool) *testNet {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dra-netdev"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "net", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: draDeviceClass}}}}}}}
	if _, err := testCluster.kube.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create ResourceClaimTemplate: %v", err)
	}
	n := nextSubnet()
	tn := &testNet{Namespace: ns, Name: name, Subnet: fmt.Sprintf("10.212.%d.0/24", n),
		DataDir: filepath.Join(testCluster.mustEnv(t, "CNI_IPAM_DIR"), "e2e", ns+"-"+name)}
	rng := map[string]string{"subnet": tn.Subnet}
	if exhausted {
		only := fmt.Sprintf("10.212.%d.10", n)
		rng["rangeStart"], rng["rangeEnd"] = only, only
		dir := target.path(filepath.Join(tn.DataDir, name))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, only), []byte("e2e-other-container\r\nnet1"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	createNAD(t, ns, name, map[string]any{
		"cniVersion": "1.1.0", "name": name, "type": "multinet-netdev",
		"capabilities": map[string]bool{"deviceID": true, "CNIDeviceInfoFile": true},
		"ipam": map[string]any{"type": "host-local", "dataDir": tn.DataDir,
			"ranges": [][]map[string]string{{rng}}},
	}, map[string]string{resourceNameAnnotation: draResource, podnetworks.ResourceClaimTemplateAnnotation: "dra-netdev"})
	t.Cleanup(func() { _ = os.RemoveAll(target.path(tn.DataDir)) })
	return tn
}

// podClaim returns the ResourceClaim of the pod's claim multinet-net-<n>.
func podClaim(t *testing.T, p *corev1.Pod, n int) *resourceapi.ResourceClaim {
	t.Helper()
	name := fmt.Sprintf("%s%d", podnetworks.ClaimNamePrefix, n)
	ctx := testContext(t, 30*time.Second)
	var claim *resourceapi.ResourceClaim
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		cur, err := testCluster.kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, s := range cur.Status.ResourceClaimStatuses {
			if s.Name == name && s.ResourceClaimName != nil {
				claim, err = testCluster.kube.ResourceV1().ResourceClaims(p.Namespace).Get(ctx, *s.ResourceClaimName, metav1.GetOptions{})
				return err == nil, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s: no ResourceClaim for %s: %v", p.Namespace, p.Name, name, err)
	}
	return claim
}

// allocatedDevice returns the device ID (= DRA device name here) of the
// claim's allocation.
func allocatedDevice(t *testing.T, c *resourceapi.ResourceClaim) string {
	t.Helper()
	if c.Status.Allocation == nil || len(c.Status.Allocation.Devices.Results) != 1 {
		t.Fatalf("claim %s/%s allocation = %+v, want one device", c.Namespace, c.Name, c.Status.Allocation)
	}
	r := c.Status.Allocation.Devices.Results[0]
	if r.Driver != dra.DefaultDriverName || !slices.Contains(draDevices, r.Device) {
		t.Fatalf("claim %s/%s allocated %s/%s/%s, want one of %v of %s", c.Namespace, c.Name, r.Driver, r.Pool, r.Device, draDevices, dra.DefaultDriverName)
	}
	return r.Device
}

// waitClaimCondition waits until the claim's status.devices entry of device
// has condition Ready with status st; it returns the entry.
func waitClaimCondition(t *testing.T, ns, name, device string, st metav1.ConditionStatus) resourceapi.AllocatedDeviceStatus {
	t.Helper()
	var got resourceapi.AllocatedDeviceStatus
	var last *resourceapi.ResourceClaim
	err := wait.PollUntilContextTimeout(testContext(t, 70*time.Second), 250*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		c, err := testCluster.kube.ResourceV1().ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = c
		for _, d := range c.Status.Devices {
			if d.Device == device {
				if r := meta.FindStatusCondition(d.Conditions, draclaims.ConditionReady); r != nil && r.Status == st {
					got = d
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("claim %s/%s: no Ready=%s for device %s: %v; status: %+v", ns, name, st, device, err, last.Status.Devices)
	}
	return got
}

// checkDRAAttachment checks the pod's attachment ifName of a DRA network:
// the claim's device was moved into the pod (its host MAC is the
// interface's in network-status), multinetd's record holds its deviceID
// and claim, and the claim's status carries networkData and Ready and
// NetworkReady True. It returns the device.
func checkDRAAttachment(t *testing.T, p *corev1.Pod, claimN int, ifName string, macs map[string]string) string {
	t.Helper()
	claim := podClaim(t, p, claimN)
	dev := allocatedDevice(t, claim)
	checkClaimAttachment(t, p, claim, dev, ifName, macs)
	return dev
}

// checkClaimAttachment checks the pod's attachment ifName of device dev of
// claim as checkDRAAttachment does: the device is in the pod (MAC in
// network-status), the record holds its ID and claim, the claim's status
// networkData and Ready/NetworkReady True.
func checkClaimAttachment(t *testing.T, p *corev1.Pod, claim *resourceapi.ResourceClaim, dev, ifName string, macs map[string]string) {
	t.Helper()
	if hostLinkState(t, dev) != nil {
		t.Errorf("allocated device %s is still in the host", dev)
	}
	s := attachmentStatus(t, p, ifName)
	if s.Mac != macs[dev] {
		t.Errorf("%s: MAC %s, but the claim's device %s has %s", ifName, s.Mac, dev, macs[dev])
	}
	recs := podRecords(t, p.Namespace, p.Name)
	if len(recs) != 1 {
		t.Fatalf("records of the pod: %v", recs)
	}
	found := false
	for _, a := range readRecord(t, recs[0]).Attachments {
		if a.IfName == ifName {
			found = true
			if a.DeviceID != dev || a.Claim == nil || a.Claim.Name != claim.Name || a.Claim.Device != dev {
				t.Errorf("record of %s: deviceID %q claim %+v, want %s of %s", ifName, a.DeviceID, a.Claim, dev, claim.Name)
			}
		}
	}
	if !found {
		t.Errorf("no record of %s", ifName)
	}
	st := waitClaimCondition(t, claim.Namespace, claim.Name, dev, metav1.ConditionTrue)
	if !meta.IsStatusConditionTrue(st.Conditions, draclaims.ConditionNetworkReady) {
		t.Errorf("NetworkReady not True: %+v", st.Conditions)
	}
	nd := st.NetworkData
	if nd == nil || nd.InterfaceName != ifName || nd.HardwareAddress != s.Mac || len(nd.IPs) != 1 || len(s.IPs) != 1 || !strings.HasPrefix(nd.IPs[0], s.IPs[0]+"/") {
		t.Errorf("networkData = %+v, want interface %s, MAC %s, ips %v in CIDR form", nd, ifName, s.Mac, s.IPs)
	}
}

func draMACs(t *testing.T) map[string]string {
	t.Helper()
	macs := map[string]string{}
	for _, d := range draDevices {
		l := hostLinkState(t, d)
		if l == nil || !l.Up {
			t.Fatalf("DRA device %s is not in the host, up: %+v", d, l)
		}
		macs[d] = l.MAC
	}
	return macs
}

// waitDevicesHome waits until every DRA device is back in the host with its MAC.
func waitDevicesHome(t *testing.T, macs map[string]string) {
	t.Helper()
	for _, d := range draDevices {
		var l *hostLink
		err := wait.PollUntilContextTimeout(testContext(t, 40*time.Second), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			l = hostLinkState(t, d)
			return l != nil, nil
		})
		if err != nil || l.MAC != macs[d] {
			t.Errorf("device %s not back in the host with MAC %s: %+v", d, macs[d], l)
		}
	}
}

// TestDRANetdevPod: the webhook adds the pod's claim
// from the NAD's template, no extended resource; the device is allocated,
// moved into the pod by multinet-netdev, network-status carries it as a
// device-plugin device's (MAC of the device; no device-info file for a
// virtual netdev, as with the device plugin), the claim's status shows
// networkData and Ready=True; on deletion multinetd clears the status
// before the claim goes, the device returns and nothing is left.
func TestDRANetdevPod(t *testing.T) {
	requireDRA(t)
	macs := draMACs(t)
	ns := newNamespace(t)
	dn := draNet(t, ns, "dn", false)
	got := runPod(t, podSpec(ns, "dra", "dn@data0"))
	if len(got.Spec.ResourceClaims) != 1 || got.Spec.ResourceClaims[0].Name != "multinet-net-1" ||
		got.Spec.ResourceClaims[0].ResourceClaimTemplateName == nil || *got.Spec.ResourceClaims[0].ResourceClaimTemplateName != "dra-netdev" {
		t.Errorf("pod resourceClaims = %+v, want multinet-net-1 from dra-netdev", got.Spec.ResourceClaims)
	}
	if _, lim := containerResources(got, draResource); !lim.IsZero() {
		t.Errorf("the DRA resource %s was requested as an extended resource", draResource)
	}
	checkStatusMatchesPod(t, got, []string{"eth0", "data0"})
	dev := checkDRAAttachment(t, got, 1, "data0", macs)
	if di := attachmentStatus(t, got, "data0").DeviceInfo; len(di) != 0 {
		t.Errorf("device-info %s for a virtual netdev (the driver writes none, as the device plugin)", di)
	}

	// Watch the claim through the deletion: its device status is removed
	// (DEL) while the claim still exists.
	claim := podClaim(t, got, 1)
	ctx := testContext(t, 120*time.Second)
	w, err := testCluster.kube.ResourceV1().ResourceClaims(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + claim.Name, ResourceVersion: claim.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	deletePod(t, ns, "dra")
	cleared, deleted := false, false
	timeout := time.After(90 * time.Second)
	for !deleted {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("claim watch ended")
			}
			c, _ := ev.Object.(*resourceapi.ResourceClaim)
			switch {
			case ev.Type == watch.Deleted:
				deleted = true
			case c != nil && ev.Type == watch.Modified && len(c.Status.Devices) == 0:
				cleared = true
			}
		case <-timeout:
			t.Fatalf("claim %s/%s not deleted 90 s after its pod", ns, claim.Name)
		}
	}
	if !cleared {
		t.Errorf("claim %s/%s was deleted with the status of device %s still in it: DEL did not clear it", ns, claim.Name, dev)
	}
	waitDevicesHome(t, macs)
	assertReleased(t, dn)
	assertNoRecords(t, ns)
}

// TestDRAPendingUntilFree: with both DRA devices
// held, a third pod stays Pending (FailedScheduling: no device to allocate);
// deleting a holder frees its device, and the waiting pod runs with it.
func TestDRAPendingUntilFree(t *testing.T) {
	requireDRA(t)
	macs := draMACs(t)
	ns := newNamespace(t)
	dn := draNet(t, ns, "dn", false)
	h1 := runPod(t, podSpec(ns, "h1", "dn"))
	runPod(t, podSpec(ns, "h2", "dn"))
	freed := allocatedDevice(t, podClaim(t, h1, 1))

	if _, err := createPod(t, podSpec(ns, "waiter", "dn")); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	msg := waitEvent(t, ns, "waiter", "FailedScheduling")
	t.Logf("event: %s", msg)
	w, err := testCluster.kube.CoreV1().Pods(ns).Get(testContext(t, 20*time.Second), "waiter", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w.Status.Phase != corev1.PodPending || w.Spec.NodeName != "" {
		t.Fatalf("pod waiter: phase %s node %q, want Pending and unscheduled", w.Status.Phase, w.Spec.NodeName)
	}

	deletePod(t, ns, "h1")
	w = waitRunning(t, ns, "waiter", 180*time.Second)
	if got := checkDRAAttachment(t, w, 1, "net1", macs); got != freed {
		t.Errorf("waiter got device %s, want %s freed by h1", got, freed)
	}
	deletePod(t, ns, "waiter")
	deletePod(t, ns, "h2")
	waitDevicesHome(t, macs)
	assertReleased(t, dn)
	assertNoRecords(t, ns)
}

// TestDRADelegateFailure: the delegate of a DRA
// attachment fails (multinet-netdev moved the device, then its IPAM has no
// address left): the pod does not start (fail closed), the claim says
// Ready=False with the reason, the device is back in the host, and
// deleting the pod leaves nothing (the other container's address stays).
func TestDRADelegateFailure(t *testing.T) {
	requireDRA(t)
	macs := draMACs(t)
	ns := newNamespace(t)
	bad := draNet(t, ns, "bad", true)
	if _, err := createPod(t, podSpec(ns, "p", "bad")); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	t.Logf("event: %s", waitEvent(t, ns, "p", "NetworkAttachFailed", ns+"/bad"))
	p, err := testCluster.kube.CoreV1().Pods(ns).Get(testContext(t, 20*time.Second), "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim := podClaim(t, p, 1)
	dev := allocatedDevice(t, claim)
	st := waitClaimCondition(t, ns, claim.Name, dev, metav1.ConditionFalse)
	r := meta.FindStatusCondition(st.Conditions, draclaims.ConditionReady)
	if r.Reason != draclaims.ReasonAttachFailed || !strings.Contains(r.Message, ns+"/bad") {
		t.Errorf("Ready condition = %+v, want reason %s naming network %s/bad", r, draclaims.ReasonAttachFailed, ns)
	}
	t.Logf("Ready=False: %s", r.Message)
	if st.NetworkData != nil {
		t.Errorf("networkData %+v on a failed attachment", st.NetworkData)
	}
	if p, err = testCluster.kube.CoreV1().Pods(ns).Get(testContext(t, 20*time.Second), "p", metav1.GetOptions{}); err != nil || p.Status.Phase == corev1.PodRunning {
		t.Fatalf("pod runs without its device's attachment (phase %s, %v)", p.Status.Phase, err)
	}
	waitDevicesHome(t, macs)
	deletePod(t, ns, "p")
	assertNoRecords(t, ns)
	if a := bad.allocations(t); len(a) != 1 {
		t.Errorf("host-local holds %v, want only the other container's address", a)
	}
}

// TestDRAWithDevicePlugin: one pod with a
// device-plugin netdev network and a DRA netdev network: the webhook adds
// the extended resource for one and the claim for the other; both devices
// are moved into the pod; both paths report as usual.
func TestDRAWithDevicePlugin(t *testing.T) {
	requireDRA(t)
	macs := draMACs(t)
	netdev, devs := netdevPool(t)
	waitAllocatable(t, netdev, int64(len(devs)), 30*time.Second)
	ns := newNamespace(t)
	nd := netdevNet(t, ns, "nd", netdev)
	dn := draNet(t, ns, "dn", false)
	got := runPod(t, podSpec(ns, "both", "nd@dp0,dn@dra0"))
	if _, lim := containerResources(got, netdev); lim.Value() != 1 {
		t.Errorf("%s limit = %s, want 1", netdev, lim.String())
	}
	checkStatusMatchesPod(t, got, []string{"eth0", "dp0", "dra0"})
	checkDRAAttachment(t, got, 1, "dra0", macs)
	dpID := ""
	for _, a := range readRecord(t, podRecords(t, ns, "both")[0]).Attachments {
		if a.IfName == "dp0" {
			dpID = a.DeviceID
			if a.Claim != nil {
				t.Errorf("dp0 recorded with a claim %+v", a.Claim)
			}
		}
	}
	if !slices.Contains(devs, dpID) || hostLinkState(t, dpID) != nil {
		t.Errorf("dp0 device %q: want one of %v, moved into the pod", dpID, devs)
	}
	deletePod(t, ns, "both")
	waitDevicesHome(t, macs)
	assertReleased(t, nd, dn)
	assertNoRecords(t, ns)
	waitAllocatable(t, netdev, int64(len(devs)), 30*time.Second)
}

// TestDRARestarts: the driver restarted publishes
// its slice again, the running pod's device (out of the host) still healthy
// (the new process reads its predecessor's slice); a slice deleted under
// the driver comes back; after a kubelet restart the driver is registered
// again; a pod running through all of it is unaffected, and a new pod still
// gets a device.
func TestDRARestarts(t *testing.T) {
	requireDRA(t)
	macs := draMACs(t)
	ns := newNamespace(t)
	draNet(t, ns, "dn", false)
	before := runPod(t, podSpec(ns, "running", "dn"))
	dev := checkDRAAttachment(t, before, 1, "net1", macs)

	// The driver: delete its pod and the slice; the new pod republishes.
	old := runningPod(t, draDriverLabel)
	ctx := testContext(t, 30*time.Second)
	if err := testCluster.kube.CoreV1().Pods(systemNamespace).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(testContext(t, 100*time.Second), 500*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := targetPods(ctx, systemNamespace, "app.kubernetes.io/name="+draDriverLabel)
		if err != nil {
			return false, nil
		}
		for i := range l.Items {
			p := &l.Items[i]
			if p.UID != old.UID && p.DeletionTimestamp == nil && podReady(p) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no new %s pod ready: %v", draDriverLabel, err)
	}
	// The new process read its predecessor's slice: dev, out of the host
	// (in the pod), was published healthy, so it stays healthy, untainted.
	waitDRASlice(t, 120*time.Second)
	// A slice deleted under the running driver is published again.
	for _, s := range draSlices(t) {
		if err := testCluster.kube.ResourceV1().ResourceSlices().Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	waitDRASlice(t, 120*time.Second)

	// The kubelet.
	kubeletPID := componentPID(t, "kubelet")
	target.restartKubelet(t)
	if componentPID(t, "kubelet") == kubeletPID {
		t.Fatal("the kubelet's PID did not change: not restarted")
	}
	waitDRASlice(t, 120*time.Second)

	now, err := testCluster.kube.CoreV1().Pods(ns).Get(testContext(t, 20*time.Second), "running", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if now.Status.Phase != corev1.PodRunning || now.Annotations[status.Annotation] != before.Annotations[status.Annotation] {
		t.Errorf("running pod after the restarts: phase %s, network-status %s (was %s)", now.Status.Phase, now.Annotations[status.Annotation], before.Annotations[status.Annotation])
	}
	for _, cs := range now.Status.ContainerStatuses {
		if cs.RestartCount != 0 {
			t.Errorf("container %s restarted %d times", cs.Name, cs.RestartCount)
		}
	}
	after := runPod(t, podSpec(ns, "after", "dn"))
	if got := checkDRAAttachment(t, after, 1, "net1", macs); got == dev {
		t.Errorf("new pod got %s, the running pod's device", got)
	}
	deletePod(t, ns, "after")
	deletePod(t, ns, "running")
	waitDevicesHome(t, macs)
	assertNoRecords(t, ns)
	waitDRASlice(t, 60*time.Second) // both back in the host: healthy, untainted
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// TestDRAHealth: a DRA netdev set down is tainted NoSchedule in the slice
// (netlink, then the ResourceSlice controller) and a pod needing a device
// gets the other one; set up, the taint goes.
func TestDRAHealth(t *testing.T) {
	requireDRA(t)
	macs := draMACs(t)
	down := draDevices[1]
	setLink(t, down, "down")
	t.Cleanup(func() { setLink(t, down, "up") })
	waitTaint(t, down, true)
	ns := newNamespace(t)
	draNet(t, ns, "dn", false)
	p := runPod(t, podSpec(ns, "p", "dn"))
	if got := checkDRAAttachment(t, p, 1, "net1", macs); got == down {
		t.Errorf("the pod got %s, which is tainted unhealthy", down)
	}
	setLink(t, down, "up")
	waitTaint(t, down, false)
	deletePod(t, ns, "p")
	waitDevicesHome(t, macs)
	assertNoRecords(t, ns)
}

// waitTaint waits until device's unhealthy taint in the node's slice is
// present (want) or absent.
func waitTaint(t *testing.T, device string, want bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(testContext(t, 70*time.Second), 250*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		for _, s := range draSlices(t) {
			for _, d := range s.Spec.Devices {
				if d.Name != device {
					continue
				}
				has := false
				for _, tt := range d.Taints {
					has = has || (tt.Key == dra.UnhealthyTaintKey && tt.Effect == resourceapi.DeviceTaintEffectNoSchedule)
				}
				return has == want, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("device %s: unhealthy taint present=%v not reached: %v; slices: %+v", device, want, err, draSlices(t))
	}
}
