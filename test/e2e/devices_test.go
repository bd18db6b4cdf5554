//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/spec/devinfo"
)

// The flow of the device plugin half on the real cluster: the webhook
// injects <resource>: N, the scheduler places the pod only where N devices
// are free, kubelet asks multinet-deviceplugin to Allocate, multinetd finds
// the devices through PodResources, hands them to the delegates (deviceID,
// CNIDeviceInfoFile) and reports device-info in network-status.

// TestDevicePluginAllocatable: both pools are registered with their full
// count (the netdev pool: every configured name in capacity, the node's
// devices allocatable); a netdev set down is reported Unhealthy on ListAndWatch within 5 s
// (netlink, not polling) and lowers the node's allocatable as soon as the
// kubelet publishes its status; setting it up restores both.
func TestDevicePluginAllocatable(t *testing.T) {
	env := devicesEnv(t)
	netdev, devs := netdevPool(t)
	vhost := env["VHOST_RESOURCE"]
	slots, err := strconv.ParseInt(env["VHOST_SLOTS"], 10, 64)
	if err != nil {
		t.Fatalf("VHOST_SLOTS: %v", err)
	}
	n := int64(len(devs))
	_, names := netdevNames(t)
	capacity := int64(len(names))
	waitAllocatable(t, netdev, n, 10*time.Second)
	waitAllocatable(t, vhost, slots, 10*time.Second)
	for res, want := range map[string]int64{netdev: capacity, vhost: slots} {
		if _, c := nodeResource(t, corev1.ResourceName(res)); c != want {
			t.Errorf("node capacity %s = %d, want %d", res, c, want)
		}
	}

	toggleHealth(t, netdev, devs[len(devs)-1], n, capacity)
}

// TestDevicePluginKubeletRestart: after a kubelet restart (which deletes
// every socket in the device-plugins directory) the same plugin process
// registers again: allocatable comes back, and health changes reach the new
// kubelet.
func TestDevicePluginKubeletRestart(t *testing.T) {
	env := devicesEnv(t)
	netdev, devs := netdevPool(t)
	vhost := env["VHOST_RESOURCE"]
	slots, _ := strconv.ParseInt(env["VHOST_SLOTS"], 10, 64)
	n := int64(len(devs))
	_, names := netdevNames(t)
	waitAllocatable(t, netdev, n, 10*time.Second)
	pluginPID := componentPID(t, "multinet-deviceplugin")
	kubeletPID := componentPID(t, "kubelet")
	sockBefore := pluginSocketID(t, netdev)

	start := time.Now()
	target.restartKubelet(t)
	if componentPID(t, "kubelet") == kubeletPID {
		t.Fatal("the kubelet's PID did not change: not restarted")
	}
	waitAllocatable(t, netdev, n, 60*time.Second)
	waitAllocatable(t, vhost, slots, 30*time.Second)
	t.Logf("kubelet restarted; both pools allocatable again %v after the restart began", time.Since(start).Round(time.Millisecond))
	if got := componentPID(t, "multinet-deviceplugin"); got != pluginPID {
		t.Errorf("multinet-deviceplugin PID %d → %d: it must re-register, not restart", pluginPID, got)
	}
	if now := pluginSocketID(t, netdev); now == "" || now == sockBefore {
		t.Errorf("the plugin's socket is the one from before the restart (the kubelet deletes it on start; the plugin must serve a new one)")
	}

	// The plugin still serves (a new socket) and its health changes reach
	// the new kubelet.
	toggleHealth(t, netdev, devs[0], n, int64(len(names)))
}

// TestDeviceNetdevPod: a pod selecting a netdev-pool network twice gets
// limits 2 from the webhook; two host netdevs are moved into it under the
// requested names with the IPs host-local gave; network-status lists them
// with the devices' MACs; deleting the pod returns both to the host under
// their names, up, and frees their addresses.
func TestDeviceNetdevPod(t *testing.T) {
	netdev, devs := netdevPool(t)
	requireNetdevs(t, devs, 2)
	waitAllocatable(t, netdev, int64(len(devs)), 10*time.Second)
	before := map[string]*hostLink{}
	for _, d := range devs {
		if before[d] = hostLinkState(t, d); before[d] == nil || !before[d].Up {
			t.Fatalf("pool device %s is not in the host or not up: %+v", d, before[d])
		}
	}
	ns := newNamespace(t)
	nd := netdevNet(t, ns, "nd", netdev)

	p := podSpec(ns, "netdev", "nd@data0,nd@data1")
	waitInjected(t, p, netdev, 2)
	got := runPod(t, p)
	req, lim := containerResources(got, netdev)
	if req.Value() != 2 || lim.Value() != 2 {
		t.Errorf("container resources %s: requests %s limits %s, want 2 and 2", netdev, req.String(), lim.String())
	}
	list := checkStatusMatchesPod(t, got, []string{"eth0", "data0", "data1"})

	ids := strings.Split(podEnv(t, ns, "netdev", envVarOf(netdev)), ",")
	if len(ids) != 2 || ids[0] == ids[1] || !slices.Contains(devs, ids[0]) || !slices.Contains(devs, ids[1]) {
		t.Fatalf("%s in the container = %v, want two distinct devices of %v", envVarOf(netdev), ids, devs)
	}
	for _, id := range ids {
		if l := hostLinkState(t, id); l != nil {
			t.Errorf("allocated device %s is still in the host", id)
		}
	}
	// multinetd gave each attachment one allocated device (PodResources),
	// and that device is the interface in the pod: same MAC.
	recs := podRecords(t, ns, "netdev")
	if len(recs) != 1 {
		t.Fatalf("records of the pod: %v, want one", recs)
	}
	byIf := map[string]string{}
	for _, a := range readRecord(t, recs[0]).Attachments {
		byIf[a.IfName] = a.DeviceID
	}
	seen := map[string]bool{}
	addrs := nd.allocations(t)
	for _, s := range list[1:] {
		if s.Name != ns+"/nd" {
			t.Errorf("%s: network-status name %q, want %s/nd", s.Interface, s.Name, ns)
		}
		id := byIf[s.Interface]
		if !slices.Contains(ids, id) || seen[id] {
			t.Errorf("%s: device %q, want one of %v not given to another attachment", s.Interface, id, ids)
			continue
		}
		seen[id] = true
		if s.Mac != before[id].MAC {
			t.Errorf("%s: MAC %s, but device %s has %s: not the allocated device", s.Interface, s.Mac, id, before[id].MAC)
		}
		if len(s.IPs) != 1 || addrs[s.IPs[0]] == "" {
			t.Errorf("%s: IPs %v, host-local holds %v", s.Interface, s.IPs, addrs)
		}
		if len(s.DeviceInfo) != 0 {
			t.Errorf("%s: device-info %s for a virtual netdev (no PCI function behind it: no file)", s.Interface, s.DeviceInfo)
		}
	}
	if len(addrs) != 2 {
		t.Errorf("host-local holds %v, want two addresses", addrs)
	}

	deletePod(t, ns, "netdev")
	for _, id := range ids {
		var l *hostLink
		err := wait.PollUntilContextTimeout(testContext(t, 20*time.Second), 200*time.Millisecond, 15*time.Second, true, func(context.Context) (bool, error) {
			l = hostLinkState(t, id)
			return l != nil, nil
		})
		if err != nil {
			t.Errorf("device %s is not back in the host after the pod's DEL", id)
			continue
		}
		if l.MAC != before[id].MAC || !l.Up {
			t.Errorf("device %s back in the host as %+v, want MAC %s and up", id, l, before[id].MAC)
		}
	}
	if a := nd.allocations(t); len(a) != 0 {
		t.Errorf("host-local still holds %v", a)
	}
	waitAllocatable(t, netdev, int64(len(devs)), 10*time.Second)
	assertNoRecords(t, ns)
}

// TestDeviceVhostUserDeviceInfo: an attachment of a vhost-user-backed
// network reports in network-status the device-info the device plugin wrote
// for the allocated slot (type, version, mode, path); the slot is mounted in
// the container; the CNI device-info file exists while the pod runs and is
// gone after DEL. The same when the NAD's plugin does not declare the
// CNIDeviceInfoFile capability, as SR-IOV-style NADs usually do not
// (device-info spec §4.2: the copy is due for every resourceName NAD; the
// capability only decides whether the plugin gets the path).
func TestDeviceVhostUserDeviceInfo(t *testing.T) {
	for name, caps := range map[string]map[string]bool{
		"CNIDeviceInfoFile":    {"deviceID": true, "CNIDeviceInfoFile": true},
		"no CNIDeviceInfoFile": {"deviceID": true},
	} {
		t.Run(name, func(t *testing.T) { testVhostUserDeviceInfo(t, caps) })
	}
}

func testVhostUserDeviceInfo(t *testing.T, caps map[string]bool) {
	env := devicesEnv(t)
	vhost := env["VHOST_RESOURCE"]
	if free := freeDevices(t, vhost); free < 1 {
		t.Fatalf("no free %s on the node (%d)", vhost, free)
	}
	ns := newNamespace(t)
	vh := vhostNetCaps(t, ns, "vh", vhost, caps)
	p := podSpec(ns, "vhost", "vh")
	waitInjected(t, p, vhost, 1)
	got := runPod(t, p)

	slot := podEnv(t, ns, "vhost", envVarOf(vhost))
	if !strings.HasPrefix(slot, "slot") || strings.Contains(slot, ",") {
		t.Fatalf("%s in the container = %q, want one slot", envVarOf(vhost), slot)
	}
	dpPath, err := devinfo.Store{Root: env["DEVINFO_ROOT"]}.DPPath(vhost, slot)
	if err != nil {
		t.Fatal(err)
	}
	dpFile, err := os.ReadFile(target.path(dpPath))
	if err != nil {
		t.Fatalf("device plugin's device-info file: %v", err)
	}
	st := attachmentStatus(t, got, "net1")
	if !jsonEqual(t, st.DeviceInfo, dpFile) {
		t.Errorf("network-status device-info\n %s\nwant the device plugin's file %s\n %s", st.DeviceInfo, dpPath, dpFile)
	}
	info, err := devinfo.Decode(st.DeviceInfo)
	if err != nil {
		t.Fatalf("network-status device-info: %v", err)
	}
	wantPath := filepath.Join(env["VHOST_CONTAINER_PATH"], slot, "vhost.sock")
	if info.Type != devinfo.TypeVhostUser || info.Version != devinfo.SpecVersion || info.VhostUser == nil ||
		info.VhostUser.Mode != "client" || info.VhostUser.Path != wantPath {
		t.Errorf("device-info %s: want type vhost-user, version %s, mode client, path %s", st.DeviceInfo, devinfo.SpecVersion, wantPath)
	}
	if out, err := kubectl(testContext(t, 30*time.Second), "-n", ns, "exec", "vhost", "--", "test", "-d", filepath.Dir(wantPath)); err != nil {
		t.Errorf("slot directory %s is not mounted in the container: %v %s", filepath.Dir(wantPath), err, out)
	}

	recs := podRecords(t, ns, "vhost")
	if len(recs) != 1 {
		t.Fatalf("records of the pod: %v, want one", recs)
	}
	var cniFile string
	for _, a := range readRecord(t, recs[0]).Attachments {
		if a.IfName == "net1" {
			cniFile = a.DeviceInfoFile
			if a.DeviceID != slot {
				t.Errorf("attachment net1 got device %q, the container %q", a.DeviceID, slot)
			}
		}
	}
	if cniFile == "" {
		t.Fatal("multinetd recorded no CNI device-info file for net1")
	}
	if b, err := os.ReadFile(target.path(cniFile)); err != nil || !jsonEqual(t, b, dpFile) {
		t.Errorf("CNI device-info file %s: %v %s, want the device plugin's content", cniFile, err, b)
	}

	deletePod(t, ns, "vhost")
	if _, err := os.Stat(target.path(cniFile)); !os.IsNotExist(err) {
		t.Errorf("CNI device-info file %s after DEL: %v, want it gone", cniFile, err)
	}
	if _, err := os.Stat(target.path(dpPath)); err != nil {
		t.Errorf("the device plugin's file %s must stay: %v", dpPath, err)
	}
	assertReleased(t, vh)
	assertNoRecords(t, ns)
}

// jsonEqual compares two JSON documents by value.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Errorf("%s: %v", a, err)
		return false
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Errorf("%s: %v", b, err)
		return false
	}
	return reflect.DeepEqual(x, y)
}

// TestDevicePendingUntilFree: with every vhost-user slot taken, a pod that
// needs one stays Pending with FailedScheduling (the real scheduler counts
// the webhook's requests against the node's allocatable), and runs once the
// holder is deleted.
func TestDevicePendingUntilFree(t *testing.T) {
	env := devicesEnv(t)
	vhost := env["VHOST_RESOURCE"]
	ns := newNamespace(t)
	vh := vhostNet(t, ns, "vh", vhost)
	free := freeDevices(t, vhost)
	if free < 1 {
		t.Fatalf("no free %s on the node (%d)", vhost, free)
	}
	sel := strings.TrimSuffix(strings.Repeat("vh,", int(free)), ",")
	holder := podSpec(ns, "holder", sel)
	waitInjected(t, holder, vhost, free)
	runPod(t, holder)

	waiter := podSpec(ns, "waiter", "vh")
	if _, err := createPod(t, waiter); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	msg := waitEvent(t, ns, "waiter", "FailedScheduling", "Insufficient "+vhost)
	t.Logf("event: %s", msg)
	w, err := testCluster.kube.CoreV1().Pods(ns).Get(testContext(t, 20*time.Second), "waiter", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w.Status.Phase != corev1.PodPending || w.Spec.NodeName != "" {
		t.Fatalf("pod waiter: phase %s node %q, want Pending and unscheduled", w.Status.Phase, w.Spec.NodeName)
	}
	if _, lim := containerResources(w, vhost); lim.Value() != 1 {
		t.Errorf("pod waiter: limit %s = %s, want 1", vhost, lim.String())
	}

	deletePod(t, ns, "holder")
	w = waitRunning(t, ns, "waiter", 90*time.Second)
	if di := attachmentStatus(t, w, "net1").DeviceInfo; len(di) == 0 {
		t.Errorf("pod waiter: no device-info on net1")
	}
	deletePod(t, ns, "waiter")
	assertReleased(t, vh)
	assertNoRecords(t, ns)
}

// TestWebhookRejects: the admission webhook denies a malformed selection
// with a message naming the field, a selection of a NAD that does not exist
// naming it, and a NAD whose config is no usable CNI config naming the
// field; nothing is created.
func TestWebhookRejects(t *testing.T) {
	ns := newNamespace(t)
	bridgeNet(t, ns, "net-a", "1.0.0", nil)
	for _, c := range []struct {
		name, sel string
		want      []string
	}{
		{"bad-mac", `[{"name":"net-a","mac":"zz"}]`, []string{`metadata.annotations["k8s.v1.cni.cncf.io/networks"]`, `"mac"`}},
		{"bad-interface", `[{"name":"net-a","interface":"way-too-long-interface-name"}]`, []string{`metadata.annotations["k8s.v1.cni.cncf.io/networks"]`, `"interface"`}},
		{"missing-nad", "net-a,gone", []string{"not found", ns + "/gone"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := createPod(t, podSpec(ns, c.name, c.sel))
			assertDenied(t, err, c.want...)
			if _, err := testCluster.kube.CoreV1().Pods(ns).Get(testContext(t, 20*time.Second), c.name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("pod %s exists after the rejection: %v", c.name, err)
			}
		})
	}
	t.Run("bad-nad-config", func(t *testing.T) {
		_, err := testCluster.multi.K8sCniCncfIoV1().NetworkAttachmentDefinitions(ns).Create(testContext(t, 20*time.Second), &nadv1.NetworkAttachmentDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: ns},
			Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: `{"cniVersion":"1.0.0","name":"bad","plugins":[{"type":"bridge"},{"ipam":{}}]}`},
		}, metav1.CreateOptions{})
		assertDenied(t, err, "spec.config", "plugins[1].type")
	})
}

// assertDenied fails unless err is an admission webhook's denial whose
// message contains every part.
func assertDenied(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("admitted, want denied with %q", parts)
	}
	msg := err.Error()
	if !strings.Contains(msg, "admission webhook") || !strings.Contains(msg, "denied the request") {
		t.Fatalf("error %q is not an admission webhook's denial", msg)
	}
	for _, p := range parts {
		if !strings.Contains(msg, p) {
			t.Errorf("denial %q does not contain %q", msg, p)
		}
	}
	t.Logf("denied: %s", msg)
}
