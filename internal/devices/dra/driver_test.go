package dra

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/multinet/multinet/internal/devices/deviceplugin/config"
	"github.com/multinet/multinet/internal/devices/deviceplugin/pool"
	"github.com/multinet/multinet/internal/testing/apiservertest"
	"github.com/multinet/multinet/pkg/spec/devinfo"
)

func TestMain(m *testing.M) { os.Exit(apiservertest.Main(m)) }

// driverIdentity applies deploy/base/dra-driver-rbac.yaml and returns the
// config of the driver's ServiceAccount: the driver runs with exactly the
// privileges the install gives it.
func driverIdentity(t *testing.T, srv *apiservertest.Server) *rest.Config {
	t.Helper()
	return srv.ServiceAccountConfig(t, "deploy/base/dra-driver-rbac.yaml", "multinet-system", "multinet-dra-driver")
}

type running struct {
	d       *Driver
	m       *Metrics
	admin   kubernetes.Interface
	node    string
	slotDir string
	store   devinfo.Store
	cdiDir  string
	cancel  context.CancelFunc
	done    chan error
}

// startDriver runs a driver for node with a vhost-user pool of two slots, as
// the driver's ServiceAccount.
func startDriver(t *testing.T, node string) *running {
	t.Helper()
	srv := apiservertest.Shared(t)
	admin := kubernetes.NewForConfigOrDie(srv.Config())
	ctx := context.Background()
	if _, err := admin.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.CoreV1().Nodes().Delete(ctx, node, metav1.DeleteOptions{}) })
	dir := t.TempDir()
	r := &running{admin: admin, node: node, slotDir: filepath.Join(dir, "vhost"),
		store: devinfo.Store{Root: filepath.Join(dir, "devinfo")}, cdiDir: filepath.Join(dir, "cdi"), done: make(chan error, 1)}
	cfg := &config.Config{Pools: []config.Pool{{ResourceName: "example.com/vhost",
		VhostUser: &config.VhostUserSlots{Dir: r.slotDir, Slots: 2, Mode: "client", SocketName: "vhost.sock", ContainerPath: "/var/run/vhu"}}}}
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(cfg, pool.Env{}, Options{NodeName: node, Client: kubernetes.NewForConfigOrDie(driverIdentity(t, srv)),
		DevInfo: r.store, KubeletDir: filepath.Join(dir, "kubelet"), CDIDir: r.cdiDir, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	r.d, r.m = d, m
	runCtx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	go func() { r.done <- d.Run(runCtx) }()
	t.Cleanup(r.stop)
	return r
}

func (r *running) stop() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	<-r.done
}

// slices lists the node's slices of the driver.
func (r *running) slices(t *testing.T) []resourceapi.ResourceSlice {
	t.Helper()
	l, err := r.admin.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{
		FieldSelector: "spec.driver=" + DefaultDriverName + ",spec.nodeName=" + r.node})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// waitSlice waits until the node has exactly one slice of the driver and ok
// holds for it.
func (r *running) waitSlice(t *testing.T, what string, ok func(s *resourceapi.ResourceSlice) bool) *resourceapi.ResourceSlice {
	t.Helper()
	var got *resourceapi.ResourceSlice
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		select {
		case err := <-r.done:
			r.cancel = nil
			t.Fatalf("driver stopped: %v", err)
		default:
		}
		s := r.slices(t)
		if len(s) != 1 || !ok(&s[0]) {
			return false, nil
		}
		got = &s[0]
		return true, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v; slices now: %+v", what, err, r.slices(t))
	}
	return got
}

func tainted(s *resourceapi.ResourceSlice, device string) bool {
	for _, d := range s.Spec.Devices {
		if d.Name == device {
			for _, tt := range d.Taints {
				if tt.Key == UnhealthyTaintKey && tt.Effect == resourceapi.DeviceTaintEffectNoSchedule {
					return true
				}
			}
		}
	}
	return false
}

// TestPublishSlices: the node's devices are published in a ResourceSlice of
// the driver, owned by the Node, in pool "<node>/<resourceName>", each with
// the k8s.cni.cncf.io/resourceName and deviceID attributes; device-info files
// are written as the device plugin writes them; a device that turns
// unhealthy gets the NoSchedule taint and loses it when healthy again; on
// stop the device-info files are removed.
func TestPublishSlices(t *testing.T) {
	r := startDriver(t, apiservertest.Name(t, "dra-node-a"))
	s := r.waitSlice(t, "the slice", func(s *resourceapi.ResourceSlice) bool { return len(s.Spec.Devices) == 2 })
	if s.Spec.Pool.Name != r.node+"/example.com/vhost" {
		t.Errorf("pool = %q", s.Spec.Pool.Name)
	}
	if s.Spec.NodeName == nil || *s.Spec.NodeName != r.node {
		t.Errorf("nodeName = %v", s.Spec.NodeName)
	}
	if len(s.OwnerReferences) != 1 || s.OwnerReferences[0].Kind != "Node" || s.OwnerReferences[0].Name != r.node {
		t.Errorf("ownerReferences = %+v, want the Node", s.OwnerReferences)
	}
	for i, d := range s.Spec.Devices {
		id := []string{"slot0", "slot1"}[i]
		if d.Name != id {
			t.Errorf("device %d name = %q, want %q", i, d.Name, id)
		}
		attr := func(k resourceapi.QualifiedName) string {
			if v, ok := d.Attributes[k]; ok && v.StringValue != nil {
				return *v.StringValue
			}
			return "<none>"
		}
		if got := attr(AttrResourceName); got != "example.com/vhost" {
			t.Errorf("%s %s = %q", d.Name, AttrResourceName, got)
		}
		if got := attr(AttrDeviceID); got != id {
			t.Errorf("%s %s = %q", d.Name, AttrDeviceID, got)
		}
		if got := attr(AttrKind); got != "vhostUser" {
			t.Errorf("%s %s = %q", d.Name, AttrKind, got)
		}
		if len(d.Taints) != 0 {
			t.Errorf("%s taints = %+v, want none (healthy)", d.Name, d.Taints)
		}
		if _, err := r.store.ReadDP("example.com/vhost", id); err != nil {
			t.Errorf("device-info file of %s: %v", id, err)
		}
	}

	if err := os.Remove(filepath.Join(r.slotDir, "slot0")); err != nil {
		t.Fatal(err)
	}
	r.waitSlice(t, "slot0 tainted", func(s *resourceapi.ResourceSlice) bool { return tainted(s, "slot0") && !tainted(s, "slot1") })
	report := firstReport(t, r.d)
	health := map[string]kubeletplugin.HealthStatus{}
	for _, h := range report.Devices {
		health[h.PoolName+"/"+h.DeviceName] = h.Health
	}
	if health[r.node+"/example.com/vhost/slot0"] != kubeletplugin.HealthStatusUnhealthy || health[r.node+"/example.com/vhost/slot1"] != kubeletplugin.HealthStatusHealthy {
		t.Errorf("health report = %v, want slot0 Unhealthy, slot1 Healthy", health)
	}
	if err := os.Mkdir(filepath.Join(r.slotDir, "slot0"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.waitSlice(t, "slot0 untainted", func(s *resourceapi.ResourceSlice) bool { return !tainted(s, "slot0") && len(s.Spec.Devices) == 2 })

	r.stop()
	if _, err := r.store.ReadDP("example.com/vhost", "slot0"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("device-info file after stop: %v, want it removed", err)
	}
}

func firstReport(t *testing.T, d *Driver) kubeletplugin.DeviceHealthReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ch := make(chan kubeletplugin.DeviceHealthReport, 1)
	go func() { _ = d.WatchHealthStatus(ctx, ch) }()
	select {
	case r := <-ch:
		return r
	case <-ctx.Done():
		t.Fatal("no health report")
	}
	return kubeletplugin.DeviceHealthReport{}
}

// claim is a claim of uid allocated device of r's pool and a device of
// another driver.
func claim(r *running, uid, device string) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "c-" + uid, UID: types.UID(uid)},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{
			Results: []resourceapi.DeviceRequestAllocationResult{
				{Request: "net", Driver: DefaultDriverName, Pool: r.node + "/example.com/vhost", Device: device},
				{Request: "other", Driver: "other.example.com", Pool: "p", Device: "d"},
			}}}},
	}
}

// apiClaim creates a claim in the API server allocated device of the
// node-b pool, and returns it.
func apiClaim(t *testing.T, r *running, name, device string) *resourceapi.ResourceClaim {
	t.Helper()
	ctx := context.Background()
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
			{Name: "net", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "c"}},
			{Name: "other", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "c"}}}}}}
	c, err := r.admin.ResourceV1().ResourceClaims("default").Create(ctx, c, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Status = claim(r, "x", device).Status
	if c, err = r.admin.ResourceV1().ResourceClaims("default").UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.admin.ResourceV1().ResourceClaims("default").Delete(ctx, name, metav1.DeleteOptions{}) })
	return c
}

// TestPrepareUnprepare: a claim's device of this driver is prepared with a
// CDI spec carrying its slot mount (devices of other drivers are not ours);
// another claim for a device a live claim still holds, and a device the
// node does not publish, fail; once the holder is unprepared, or deleted
// from the API without an unprepare yet (the kubelet unprepares a deleted
// pod's claim late), the device can be prepared again; unprepare removes
// the spec and is idempotent.
func TestPrepareUnprepare(t *testing.T) {
	r := startDriver(t, apiservertest.Name(t, "dra-node-b"))
	r.waitSlice(t, "the slice", func(s *resourceapi.ResourceSlice) bool { return len(s.Spec.Devices) == 2 })
	ctx := context.Background()
	c1 := apiClaim(t, r, "c1", "slot1")
	res, err := r.d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{c1, claim(r, "u2", "slot1"), claim(r, "u3", "slot9")})
	if err != nil {
		t.Fatal(err)
	}
	if res[c1.UID].Err != nil {
		t.Fatalf("c1: %v", res[c1.UID].Err)
	}
	devs := res[c1.UID].Devices
	cdiName := string(c1.UID) + "-slot1"
	if len(devs) != 1 || devs[0].DeviceName != "slot1" || devs[0].PoolName != r.node+"/example.com/vhost" ||
		len(devs[0].Requests) != 1 || devs[0].Requests[0] != "net" || len(devs[0].CDIDeviceIDs) != 1 || devs[0].CDIDeviceIDs[0] != "multinet.io/net="+cdiName {
		t.Errorf("c1 devices = %+v", devs)
	}
	if res["u2"].Err == nil || !strings.Contains(res["u2"].Err.Error(), "prepared for another ResourceClaim, default/c1") {
		t.Errorf("u2 (the same device) = %v, want held by c1", res["u2"].Err)
	}
	if res["u3"].Err == nil || !strings.Contains(res["u3"].Err.Error(), "not published") {
		t.Errorf("u3 (unknown device) = %v", res["u3"].Err)
	}
	specFile := filepath.Join(r.cdiDir, DefaultDriverName+"-"+string(c1.UID)+".json")
	data, err := os.ReadFile(specFile)
	if err != nil {
		t.Fatal(err)
	}
	var spec cdispec.Spec
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	if spec.Kind != cdiKind || len(spec.Devices) != 1 || spec.Devices[0].Name != cdiName || len(spec.Devices[0].ContainerEdits.Mounts) != 1 ||
		spec.Devices[0].ContainerEdits.Mounts[0].HostPath != filepath.Join(r.slotDir, "slot1") || spec.Devices[0].ContainerEdits.Mounts[0].ContainerPath != "/var/run/vhu/slot1" {
		t.Errorf("CDI spec = %s", data)
	}

	for range 2 { // idempotent
		ures, err := r.d.UnprepareResourceClaims(ctx, []kubeletplugin.NamespacedObject{{UID: c1.UID}})
		if err != nil || ures[c1.UID] != nil {
			t.Fatalf("unprepare c1: %v %v", err, ures[c1.UID])
		}
	}
	if _, err := os.Stat(specFile); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("CDI spec after unprepare: %v", err)
	}
	res, err = r.d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{claim(r, "u2", "slot1")})
	if err != nil || res["u2"].Err != nil {
		t.Errorf("u2 after c1 was unprepared: %v %v", err, res["u2"].Err)
	}

	// A holder gone from the API without an unprepare: no conflict.
	c4 := apiClaim(t, r, "c4", "slot0")
	if res, err := r.d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{c4}); err != nil || res[c4.UID].Err != nil {
		t.Fatalf("c4: %v %v", err, res[c4.UID].Err)
	}
	if err := r.admin.ResourceV1().ResourceClaims("default").Delete(ctx, "c4", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if res, err := r.d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{claim(r, "u5", "slot0")}); err != nil || res["u5"].Err != nil {
		t.Errorf("u5 after its holder c4 was deleted: %v %v", err, res["u5"].Err)
	}
}

func TestDeviceName(t *testing.T) {
	for id, want := range map[string]string{"eth1": "eth1", "0000:3b:02.0": "0000-3b-02-0", "ENS1F0": "ens1f0", "slot3": "slot3", "eth_1": "eth-1"} {
		if got, err := DeviceName(id); err != nil || got != want {
			t.Errorf("DeviceName(%q) = %q, %v; want %q", id, got, err, want)
		}
	}
	for _, id := range []string{"", "-x", "x_", strings.Repeat("a", 64)} {
		if got, err := DeviceName(id); err == nil {
			t.Errorf("DeviceName(%q) = %q, want an error", id, got)
		}
	}
}
