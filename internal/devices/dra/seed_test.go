package dra

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/testutils"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/multinet/multinet/internal/devices/deviceplugin/config"
	"github.com/multinet/multinet/internal/devices/deviceplugin/pool"
	"github.com/multinet/multinet/internal/testing/apiservertest"
	"github.com/multinet/multinet/pkg/spec/devinfo"
)

// TestSeedFromSlices: a driver starting while its named netdevs are out of
// the host keeps one its predecessor published untainted healthy (it is in
// a pod) and taints one the predecessor published tainted.
func TestSeedFromSlices(t *testing.T) {
	n, err := testutils.NewNS()
	if err != nil {
		t.Fatalf("cannot create a network namespace (run the tests as root): %v", err)
	}
	t.Cleanup(func() { _ = n.Close(); _ = testutils.UnmountNS(n) })
	srv := apiservertest.Shared(t)
	admin := kubernetes.NewForConfigOrDie(srv.Config())
	ctx := context.Background()
	node := apiservertest.Name(t, "dra-node-seed")
	if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}) })
	// The predecessor's slice: inpod0 healthy, lost0 tainted.
	str := func(s string) *string { return &s }
	rn := "example.com/net"
	dev := func(name string, tainted bool) resourceapi.Device {
		d := resourceapi.Device{Name: name, Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			AttrResourceName: {StringValue: str(rn)}, AttrDeviceID: {StringValue: str(name)}}}
		if tainted {
			d.Taints = []resourceapi.DeviceTaint{{Key: UnhealthyTaintKey, Value: "true", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
		}
		return d
	}
	old := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "old-" + node}, Spec: resourceapi.ResourceSliceSpec{
		Driver: DefaultDriverName, NodeName: str(node), Pool: resourceapi.ResourcePool{Name: PoolName(node, rn), ResourceSliceCount: 1},
		Devices: []resourceapi.Device{dev("inpod0", false), dev("lost0", true)}}}
	if _, err := admin.ResourceV1().ResourceSlices().Create(ctx, old, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	r := runNetdevDriver(t, srv, node, rn, n.Path(), "inpod0", "lost0")
	deadline := time.Now().Add(60 * time.Second)
	for {
		var s []resourceapi.ResourceSlice
		for _, x := range r.slices(t) {
			if x.Name != old.Name {
				s = append(s, x)
			}
		}
		if len(s) == 1 && len(s[0].Spec.Devices) == 2 && !tainted(&s[0], "inpod0") && tainted(&s[0], "lost0") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("want inpod0 untainted and lost0 tainted; slices: %+v", r.slices(t))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runNetdevDriver runs a driver for node (created by the caller) with one
// netdev pool of resource rn naming names in the network namespace at
// netnsPath, as the driver's ServiceAccount, until the test ends.
func runNetdevDriver(t *testing.T, srv *apiservertest.Server, node, rn, netnsPath string, names ...string) *running {
	t.Helper()
	dir := t.TempDir()
	cfg := &config.Config{Pools: []config.Pool{{ResourceName: rn, Netdev: &config.NetdevSelector{Names: names}}}}
	d, err := New(cfg, pool.Env{NetNSPath: netnsPath}, Options{NodeName: node, Client: kubernetes.NewForConfigOrDie(driverIdentity(t, srv)),
		DevInfo: devinfo.Store{Root: filepath.Join(dir, "devinfo")}, KubeletDir: filepath.Join(dir, "kubelet"), CDIDir: filepath.Join(dir, "cdi")})
	if err != nil {
		t.Fatal(err)
	}
	r := &running{d: d, admin: kubernetes.NewForConfigOrDie(srv.Config()), node: node, done: make(chan error, 1)}
	runCtx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- d.Run(runCtx) }()
	t.Cleanup(r.stop)
	return r
}
