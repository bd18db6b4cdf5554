package deviceplugin

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/multinet/multinet/internal/devices/deviceplugin/config"
	"github.com/multinet/multinet/internal/devices/deviceplugin/internal/fakesysfs"
	"github.com/multinet/multinet/internal/devices/deviceplugin/pool"
	"github.com/multinet/multinet/pkg/spec/devinfo"
)

func vhostPool(t *testing.T, slots int) (pool.Pool, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "vhost")
	p, err := pool.NewVhostUser("example.com/vhost", config.VhostUserSlots{Dir: dir, Slots: slots, Mode: "client", SocketName: "vhost.sock", ContainerPath: "/var/run/vhu"})
	if err != nil {
		t.Fatal(err)
	}
	return p, dir
}

// k8s docs "Device plugin implementation": the plugin must serve before it
// registers; Register carries version, endpoint, resource name and options.
func TestRegistersAfterServing(t *testing.T) {
	dpDir := t.TempDir()
	k := startKubelet(t, dpDir)
	p, _ := vhostPool(t, 2)
	rp := startPlugin(t, p, dpDir, devinfo.Store{Root: t.TempDir()})

	r := k.next(t)
	if !r.serving {
		t.Fatal("Register arrived before the plugin socket was serving")
	}
	want := &pluginapi.RegisterRequest{
		Version: "v1beta1", Endpoint: "multinet-example.com_vhost.sock", ResourceName: "example.com/vhost",
		Options: &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true},
	}
	if r.req.Version != want.Version || r.req.Endpoint != want.Endpoint || r.req.ResourceName != want.ResourceName ||
		r.req.Options.GetGetPreferredAllocationAvailable() != true || r.req.Options.GetPreStartRequired() {
		t.Fatalf("RegisterRequest = %v, want %v", r.req, want)
	}
	if rp.SocketPath() != filepath.Join(dpDir, want.Endpoint) {
		t.Fatalf("SocketPath = %s", rp.SocketPath())
	}
}

func TestVhostUserPluginRPCs(t *testing.T) {
	dpDir := t.TempDir()
	k := startKubelet(t, dpDir)
	p, hostDir := vhostPool(t, 2)
	store := devinfo.Store{Root: filepath.Join(t.TempDir(), "devinfo")}
	rp := startPlugin(t, p, dpDir, store)
	k.next(t)
	c := dialPlugin(t, rp.SocketPath())
	ctx := context.Background()

	opts, err := c.GetDevicePluginOptions(ctx, &pluginapi.Empty{})
	if err != nil || !opts.GetPreferredAllocationAvailable || opts.PreStartRequired {
		t.Fatalf("GetDevicePluginOptions = %v, %v", opts, err)
	}

	// device-info spec §4.1.1: a file per device, the dp directory created.
	for _, id := range []string{"slot0", "slot1"} {
		d, err := store.ReadDP("example.com/vhost", id)
		if err != nil {
			t.Fatalf("device-info file of %s: %v", id, err)
		}
		if want := "/var/run/vhu/" + id + "/vhost.sock"; d.VhostUser.Path != want || d.VhostUser.Mode != "client" {
			t.Errorf("device-info of %s = %+v", id, d.VhostUser)
		}
	}

	recv := listAndWatch(t, c)
	first := recv()
	if got := healthOf(first); !reflect.DeepEqual(got, map[string]string{"slot0": "Healthy", "slot1": "Healthy"}) {
		t.Fatalf("initial list = %v", got)
	}
	if first["slot0"].Topology != nil {
		t.Errorf("slot0 topology = %v, want none", first["slot0"].Topology)
	}

	resp, err := c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{
		{DevicesIds: []string{"slot1"}},
		{DevicesIds: []string{"slot0", "slot1"}},
	}})
	if err != nil {
		t.Fatalf("Allocate: %v", err)
	}
	c0, c1 := resp.ContainerResponses[0], resp.ContainerResponses[1]
	if c0.Envs["MULTINET_EXAMPLE_COM_VHOST"] != "slot1" || c1.Envs["MULTINET_EXAMPLE_COM_VHOST"] != "slot0,slot1" {
		t.Errorf("envs = %v, %v", c0.Envs, c1.Envs)
	}
	if len(c0.Mounts) != 1 || c0.Mounts[0].HostPath != filepath.Join(hostDir, "slot1") || c0.Mounts[0].ContainerPath != "/var/run/vhu/slot1" || c0.Mounts[0].ReadOnly {
		t.Errorf("container 0 mounts = %v", c0.Mounts)
	}
	if len(c1.Mounts) != 2 {
		t.Errorf("container 1 mounts = %v", c1.Mounts)
	}

	for name, ids := range map[string][]string{"unknown device": {"slot7"}, "duplicate": {"slot0", "slot0"}, "empty": {}} {
		_, err := c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("Allocate(%s) = %v, want InvalidArgument", name, err)
		}
	}
	if r, err := c.PreStartContainer(ctx, &pluginapi.PreStartContainerRequest{DevicesIds: []string{"slot0"}}); err != nil || r == nil {
		t.Errorf("PreStartContainer = %v, %v", r, err)
	}

	// Health change → a new list.
	if err := os.Remove(filepath.Join(hostDir, "slot0")); err != nil {
		t.Fatal(err)
	}
	if got := healthOf(recv()); !reflect.DeepEqual(got, map[string]string{"slot0": "Unhealthy", "slot1": "Healthy"}) {
		t.Fatalf("list after removing slot0 = %v", got)
	}

	// A second stream, to see it end when the plugin stops.
	stream, err := c.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}

	// Stop: socket and device-info files removed (device-info spec §4.1.1).
	rp.stop(t)
	if _, err := stream.Recv(); err == nil {
		t.Error("ListAndWatch stream still open after the plugin stopped")
	}
	if _, err := os.Stat(rp.SocketPath()); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket still there after stop: %v", err)
	}
	for _, id := range []string{"slot0", "slot1"} {
		if _, err := store.ReadDP("example.com/vhost", id); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("device-info file of %s after stop: %v", id, err)
		}
	}
}

func TestPCIPluginTopologyAndPreferredAllocation(t *testing.T) {
	sysfs := t.TempDir()
	if err := fakesysfs.TwoNUMA(sysfs); err != nil {
		t.Fatal(err)
	}
	p, err := pool.NewPCI("example.com/vf", config.PCISelector{Devices: []string{"1889"}}, pool.Env{SysfsRoot: sysfs})
	if err != nil {
		t.Fatal(err)
	}
	dpDir := t.TempDir()
	k := startKubelet(t, dpDir)
	store := devinfo.Store{Root: t.TempDir()}
	rp := startPlugin(t, p, dpDir, store)
	k.next(t)
	c := dialPlugin(t, rp.SocketPath())

	list := listAndWatch(t, c)()
	for id, numa := range map[string]int64{"0000:3b:02.0": 0, "0000:3b:02.1": 0, "0000:af:02.0": 1, "0000:af:02.1": 1} {
		d := list[id]
		if d == nil || d.Health != pluginapi.Healthy || len(d.Topology.GetNodes()) != 1 || d.Topology.Nodes[0].ID != numa {
			t.Errorf("%s = %v, want healthy on NUMA %d", id, d, numa)
		}
	}
	// device-info spec §3.1.3 / §4.1: one pci file per VF.
	d, err := store.ReadDP("example.com/vf", "0000:af:02.1")
	if err != nil || d.PCI.PCIAddress != "0000:af:02.1" || d.PCI.PFPCIAddress != "0000:af:00.0" {
		t.Fatalf("device-info of af:02.1 = %+v, %v", d, err)
	}

	all := []string{"0000:af:02.1", "0000:3b:02.0", "0000:af:02.0", "0000:3b:02.1"}
	tests := []struct {
		name      string
		available []string
		must      []string
		size      int32
		want      []string
	}{
		{"two fit on either node: lowest node", all, nil, 2, []string{"0000:3b:02.0", "0000:3b:02.1"}},
		{"only node 1 can hold two", []string{"0000:3b:02.0", "0000:af:02.0", "0000:af:02.1"}, nil, 2, []string{"0000:af:02.0", "0000:af:02.1"}},
		{"must-include pulls to its node", all, []string{"0000:af:02.1"}, 2, []string{"0000:af:02.1", "0000:af:02.0"}},
		{"spill over to the other node", all, nil, 3, []string{"0000:3b:02.0", "0000:3b:02.1", "0000:af:02.0"}},
		{"must-include only", all, []string{"0000:3b:02.1"}, 1, []string{"0000:3b:02.1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := c.GetPreferredAllocation(context.Background(), &pluginapi.PreferredAllocationRequest{
				ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{{AvailableDeviceIDs: tc.available, MustIncludeDeviceIDs: tc.must, AllocationSize: tc.size}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.ContainerResponses[0].DeviceIDs; !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("preferred = %v, want %v", got, tc.want)
			}
		})
	}

	// A vfio-pci VF brings its VFIO device nodes.
	resp, err := c.Allocate(context.Background(), &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: []string{"0000:3b:02.1", "0000:3b:02.0"}}}})
	if err != nil {
		t.Fatal(err)
	}
	cr := resp.ContainerResponses[0]
	if cr.Envs["MULTINET_EXAMPLE_COM_VF"] != "0000:3b:02.1,0000:3b:02.0" || len(cr.Devices) != 2 || cr.Devices[1].HostPath != "/dev/vfio/42" || cr.Devices[1].Permissions != "rw" {
		t.Fatalf("Allocate = %v", cr)
	}
}

// k8s docs "Handling kubelet restarts": a new kubelet deletes the sockets
// in the directory; the plugin serves again and re-registers. Re-creating
// kubelet.sock alone also makes it re-register.
func TestKubeletRestart(t *testing.T) {
	dpDir := t.TempDir()
	p, _ := vhostPool(t, 1)
	// The plugin starts before kubelet: it registers once kubelet.sock appears.
	rp := startPlugin(t, p, dpDir, devinfo.Store{Root: t.TempDir()})
	waitSocket(t, rp.SocketPath())
	k1 := startKubelet(t, dpDir)
	if r := k1.next(t); !r.serving {
		t.Fatal("first Register before serving")
	}

	// Restart: kubelet goes away, its successor wipes the directory.
	k1.stop()
	if err := os.Remove(rp.SocketPath()); err != nil {
		t.Fatal(err)
	}
	k2 := startKubelet(t, dpDir)
	r := k2.next(t)
	if !r.serving || r.req.ResourceName != "example.com/vhost" {
		t.Fatalf("Register after restart = %v serving=%v", r.req, r.serving)
	}
	// The socket is back and serves (inode numbers are reused, so no inode check).
	c := dialPlugin(t, rp.SocketPath())
	if got := healthOf(listAndWatch(t, c)()); got["slot0"] != pluginapi.Healthy {
		t.Fatalf("ListAndWatch on the new socket = %v", got)
	}

	// Only kubelet.sock is re-created: register again, same socket.
	k2.stop()
	k3 := startKubelet(t, dpDir)
	if r := k3.next(t); !r.serving {
		t.Fatal("Register after kubelet.sock re-creation arrived before serving")
	}
	select {
	case r := <-k3.regs:
		t.Fatalf("unexpected second Register %v", r.req)
	case <-time.After(300 * time.Millisecond):
	}
}

func waitSocket(t *testing.T, path string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for identity(path) == (fileID{}) {
		if time.Now().After(deadline) {
			t.Fatalf("socket %s never appeared", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestPluginsFromConfig(t *testing.T) {
	base := t.TempDir()
	cfg, err := config.Parse([]byte(`
pools:
- resourceName: example.com/vhost
  vhostUser: {dir: ` + base + `/vhost, slots: 2, mode: server, containerPath: /run/vhu}
- resourceName: example.com/memif
  memif: {dir: ` + base + `/memif, slots: 1, role: master, mode: ip, containerPath: /run/memif}
`))
	if err != nil {
		t.Fatal(err)
	}
	dpDir := t.TempDir()
	k := startKubelet(t, dpDir)
	plugins, err := Plugins(cfg, pool.Env{}, Options{DevicePluginsDir: dpDir, DevInfo: devinfo.Store{Root: t.TempDir()}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- RunAll(ctx, plugins) }()
	got := map[string]bool{}
	for range 2 {
		r := k.next(t)
		got[r.req.ResourceName] = r.serving
	}
	if !reflect.DeepEqual(got, map[string]bool{"example.com/vhost": true, "example.com/memif": true}) {
		t.Fatalf("registrations = %v", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("RunAll = %v", err)
	}
}

func TestPluginsRejectOverlap(t *testing.T) {
	sysfs := t.TempDir()
	if err := fakesysfs.TwoNUMA(sysfs); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(`
pools:
- resourceName: example.com/a
  pci: {pfNames: [ens1f0]}
- resourceName: example.com/b
  pci: {drivers: [vfio-pci]}
`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Plugins(cfg, pool.Env{SysfsRoot: sysfs}, Options{DevicePluginsDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "0000:3b:02.1 is also selected by example.com/a") {
		t.Fatalf("Plugins = %v, want overlap error", err)
	}
}
