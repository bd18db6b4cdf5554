package dra

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/multinet/multinet/internal/devices/deviceplugin/pool"
	"github.com/multinet/multinet/internal/testing/apiservertest"
)

// newTestNS is a network namespace removed when the test ends.
func newTestNS(t *testing.T) ns.NetNS {
	t.Helper()
	n, err := testutils.NewNS()
	if err != nil {
		t.Fatalf("cannot create a network namespace (run the tests as root): %v", err)
	}
	t.Cleanup(func() { _ = n.Close(); _ = testutils.UnmountNS(n) })
	return n
}

// moveLink moves link name from namespace from to namespace to.
func moveLink(t *testing.T, name string, from, to ns.NetNS) {
	t.Helper()
	if err := from.Do(func(ns.NetNS) error {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return err
		}
		return netlink.LinkSetNsFd(l, int(to.Fd()))
	}); err != nil {
		t.Fatalf("move %s: %v", name, err)
	}
}

// setUp sets the named links up, in the current network namespace.
func setUp(names ...string) error {
	for _, n := range names {
		l, err := netlink.LinkByName(n)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(l); err != nil {
			return err
		}
	}
	return nil
}

// TestPrepareWaitsForTheDeviceToComeBack: a netdev freed by a deleted
// claim while it is still in its old pod's network namespace (the
// scheduler gave it away before the old pod's CNI DEL ran) is not prepared
// for the next claim: the prepare fails, naming the old claim, until the
// device is back in the host, then succeeds. Before, the prepare succeeded
// at once and the new pod's first CNI ADD failed ("Link not found").
func TestPrepareWaitsForTheDeviceToComeBack(t *testing.T) {
	host, podNS := newTestNS(t), newTestNS(t)
	if err := host.Do(func(ns.NetNS) error {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "dev0"}, PeerName: "dev0p"}); err != nil {
			return err
		}
		return setUp("dev0", "dev0p")
	}); err != nil {
		t.Fatalf("veth: %v", err)
	}
	srv := apiservertest.Shared(t)
	admin := kubernetes.NewForConfigOrDie(srv.Config())
	ctx := context.Background()
	node := apiservertest.Name(t, "dra-node-return")
	if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}) })
	const rn = "example.com/net"
	r := runNetdevDriver(t, srv, node, rn, host.Path(), "dev0")
	d := r.d
	s := r.waitSlice(t, "the slice", func(s *resourceapi.ResourceSlice) bool { return len(s.Spec.Devices) == 1 && !tainted(s, "dev0") })
	poolName := s.Spec.Pool.Name

	allocated := func(c *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
		c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
			{Request: "net", Driver: DefaultDriverName, Pool: poolName, Device: "dev0"}}}}
		return c
	}
	old, err := admin.ResourceV1().ResourceClaims("default").Create(ctx, &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: apiservertest.Name(t, "old-holder")},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
			{Name: "net", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "c"}}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if old, err = admin.ResourceV1().ResourceClaims("default").UpdateStatus(ctx, allocated(old), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	prepare := func(c *resourceapi.ResourceClaim) error {
		res, err := d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{c})
		if err != nil {
			return err
		}
		return res[c.UID].Err
	}
	if err := prepare(old); err != nil {
		t.Fatalf("the first holder: %v", err)
	}

	// The old pod has the device; its claim is deleted before its DEL runs.
	moveLink(t, "dev0", host, podNS)
	hp := d.byDRA[poolName].pool.(pool.HostPresence)
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return !hp.InHost("dev0"), nil
	}); err != nil {
		t.Fatal("the pool still sees dev0 in the host after it moved")
	}
	if err := admin.ResourceV1().ResourceClaims("default").Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	next := allocated(&resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "next", UID: types.UID("next-" + node)}})
	err = prepare(next)
	if err == nil || !strings.Contains(err.Error(), "not back in the host yet") || !strings.Contains(err.Error(), old.Name) {
		t.Fatalf("prepare while dev0 is in the old pod: %v, want refused naming %s", err, old.Name)
	}

	// The old pod's DEL brings it back (up, as multinet-netdev leaves it):
	// the next claim gets it.
	moveLink(t, "dev0", podNS, host)
	if err := host.Do(func(ns.NetNS) error { return setUp("dev0") }); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return prepare(next) == nil, nil
	}); err != nil {
		t.Fatalf("prepare once dev0 is back: %v", prepare(next))
	}
}
