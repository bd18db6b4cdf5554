package netdevplugin

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"

	"github.com/multinet/multinet/internal/testing/cnitest"
	"github.com/multinet/multinet/pkg/spec/devinfo"
)

func TestMain(m *testing.M) { os.Exit(cnitest.Main(m)) }

// env is one test's world: a "host" network namespace the plugin runs in (so
// nothing touches the machine's own), a pod namespace, a host device and a
// host-local data directory.
type env struct {
	t        *testing.T
	host     ns.NetNS
	pod      ns.NetNS
	hostH    *netlink.Handle
	podH     *netlink.Handle
	dev      string // host device name
	ipamDir  string
	cniPath  string
	p        *Plugin
	contID   string
	infoFile string // runtimeConfig CNIDeviceInfoFile, "" for none
}

func newEnv(t *testing.T) *env {
	t.Helper()
	cnitest.RequireRoot(t)
	e := &env{t: t, host: cnitest.NewNS(t), pod: cnitest.NewNS(t), ipamDir: t.TempDir(),
		cniPath: cnitest.BinDir(t), p: &Plugin{}, contID: "ctr-" + cnitest.UniqueName("")}
	e.hostH, e.podH = cnitest.Handle(t, e.host), cnitest.Handle(t, e.pod)
	e.dev = cnitest.UniqueName("mnd")
	cnitest.Dummy(t, e.host, e.dev, true)
	if err := e.hostH.LinkSetAlias(e.hostLink(e.dev), "uplink: keep me"); err != nil {
		t.Fatal(err)
	}
	return e
}

const hostLocal = `{"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": "10.123.0.0/24"}]], "routes": [{"dst": "10.124.0.0/16"}]}`

// conf is a network configuration with runtimeConfig deviceID = e.dev and
// host-local IPAM (ipam "" for none).
func (e *env) conf(version, ipam string) []byte {
	c := map[string]any{
		"cniVersion": version, "name": "data", "type": "multinet-netdev",
		"capabilities":  map[string]bool{"deviceID": true, "CNIDeviceInfoFile": true},
		"runtimeConfig": map[string]string{"deviceID": e.dev},
	}
	if e.infoFile != "" {
		c["runtimeConfig"].(map[string]string)["CNIDeviceInfoFile"] = e.infoFile
	}
	if ipam != "" {
		c["ipam"] = json.RawMessage(ipam)
	}
	b, err := json.Marshal(c)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

func (e *env) hostLocal() string {
	b, _ := json.Marshal(e.ipamDir)
	return strings.Replace(hostLocal, "%q", string(b), 1)
}

func (e *env) args(ifname string, conf []byte) *skel.CmdArgs {
	return &skel.CmdArgs{ContainerID: e.contID, Netns: e.pod.Path(), IfName: ifname,
		Args: "IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web", Path: e.cniPath, StdinData: conf}
}

// inHost runs f with the calling thread in the test's host namespace, as the
// plugin binary runs in the real host's.
func (e *env) inHost(f func() error) error {
	return e.host.Do(func(ns.NetNS) error { return f() })
}

func (e *env) add(args *skel.CmdArgs) (*current.Result, error) {
	var res *current.Result
	err := e.inHost(func() (err error) {
		res, err = e.p.Add(context.Background(), args)
		return err
	})
	return res, err
}

func (e *env) del(args *skel.CmdArgs) error {
	return e.inHost(func() error { return e.p.Del(context.Background(), args) })
}

func (e *env) check(args *skel.CmdArgs) error {
	return e.inHost(func() error { return e.p.Check(context.Background(), args) })
}

func (e *env) hostLink(name string) netlink.Link {
	e.t.Helper()
	return mustLink(e.t, e.hostH, name, "host")
}
func (e *env) podLink(name string) netlink.Link {
	e.t.Helper()
	return mustLink(e.t, e.podH, name, "pod")
}

func mustLink(t *testing.T, h *netlink.Handle, name, where string) netlink.Link {
	t.Helper()
	l, err := h.LinkByName(name)
	if err != nil {
		t.Fatalf("%s link %s: %v", where, name, err)
	}
	return l
}

func absent(t *testing.T, h *netlink.Handle, name, where string) {
	t.Helper()
	if _, err := h.LinkByName(name); !isNotFound(err) {
		t.Fatalf("%s: link %s should not exist (err %v)", where, name, err)
	}
}

// assertHome checks the device is back in the host as it was before ADD.
func (e *env) assertHome(up bool) {
	e.t.Helper()
	l := e.hostLink(e.dev)
	if got := l.Attrs().Alias; got != "uplink: keep me" {
		e.t.Errorf("host alias = %q, want the original", got)
	}
	if got := l.Attrs().Flags&net.FlagUp != 0; got != up {
		e.t.Errorf("host up = %v, want %v", got, up)
	}
}

// reservations lists host-local's reserved addresses.
func (e *env) reservations() []string {
	e.t.Helper()
	var ips []string
	entries, _ := os.ReadDir(filepath.Join(e.ipamDir, "data"))
	for _, en := range entries {
		if net.ParseIP(en.Name()) != nil {
			ips = append(ips, en.Name())
		}
	}
	return ips
}

func hasAddress(t *testing.T, h *netlink.Handle, l netlink.Link, cidr string) bool {
	t.Helper()
	addrs, err := h.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if a.IPNet.String() == cidr {
			return true
		}
	}
	return false
}

func TestAddCheckDel(t *testing.T) {
	e := newEnv(t)
	mac := e.hostLink(e.dev).Attrs().HardwareAddr.String()
	args := e.args("net1", e.conf("1.1.0", e.hostLocal()))

	res, err := e.add(args)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Interfaces) != 1 || res.Interfaces[0].Name != "net1" || res.Interfaces[0].Mac != mac ||
		res.Interfaces[0].Sandbox != e.pod.Path() || res.Interfaces[0].Mtu == 0 {
		t.Fatalf("interfaces = %v", res.Interfaces)
	}
	if len(res.IPs) != 1 || res.IPs[0].Address.String() != "10.123.0.2/24" || *res.IPs[0].Interface != 0 {
		t.Fatalf("ips = %v", res.IPs)
	}
	if len(res.Routes) != 1 || res.Routes[0].Dst.String() != "10.124.0.0/16" {
		t.Fatalf("routes = %v", res.Routes)
	}
	absent(t, e.hostH, e.dev, "host after ADD")
	pl := e.podLink("net1")
	if want := AliasPrefix + e.dev + ":up:uplink: keep me"; pl.Attrs().Alias != want {
		t.Errorf("pod alias = %q, want %q", pl.Attrs().Alias, want)
	}
	if pl.Attrs().Flags&net.FlagUp == 0 || !hasAddress(t, e.podH, pl, "10.123.0.2/24") {
		t.Errorf("net1 in the pod: up=%v, addresses lack 10.123.0.2/24", pl.Attrs().Flags&net.FlagUp != 0)
	}
	if got := e.reservations(); len(got) != 1 {
		t.Fatalf("host-local reservations = %v, want one", got)
	}

	// CHECK with the result as prevResult.
	checkArgs := e.args("net1", withPrevResult(t, e.conf("1.1.0", e.hostLocal()), res))
	if err := e.check(checkArgs); err != nil {
		t.Fatalf("CHECK: %v", err)
	}

	// DEL twice.
	for i := range 2 {
		if err := e.del(args); err != nil {
			t.Fatalf("DEL %d: %v", i, err)
		}
		absent(t, e.podH, "net1", "pod after DEL")
		e.assertHome(true)
		if got := e.reservations(); len(got) != 0 {
			t.Fatalf("DEL %d: host-local reservations = %v, want none", i, got)
		}
	}

	// CHECK after DEL: the device is missing.
	if err := e.check(checkArgs); err == nil || !strings.Contains(err.Error(), "net1") {
		t.Fatalf("CHECK after DEL: %v, want an error naming net1", err)
	}
}

func withPrevResult(t *testing.T, conf []byte, res *current.Result) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(conf, &m); err != nil {
		t.Fatal(err)
	}
	prev, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	m["prevResult"] = json.RawMessage(prev)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCheckDetects(t *testing.T) {
	e := newEnv(t)
	conf := e.conf("1.0.0", e.hostLocal())
	res, err := e.add(e.args("net1", conf))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.del(e.args("net1", conf)) })
	checkArgs := e.args("net1", withPrevResult(t, conf, res))
	if err := e.check(checkArgs); err != nil {
		t.Fatalf("CHECK: %v", err)
	}

	// No prevResult.
	if err := e.check(e.args("net1", conf)); err == nil || !strings.Contains(err.Error(), "prevResult") {
		t.Fatalf("CHECK without prevResult: %v", err)
	}
	// Address gone.
	pl := e.podLink("net1")
	a, _ := netlink.ParseAddr("10.123.0.2/24")
	if err := e.podH.AddrDel(pl, a); err != nil {
		t.Fatal(err)
	}
	if err := e.check(checkArgs); err == nil || !strings.Contains(err.Error(), "10.123.0.2/24") {
		t.Fatalf("CHECK with the address gone: %v", err)
	}
	// Device down.
	if err := e.podH.AddrAdd(pl, a); err != nil {
		t.Fatal(err)
	}
	if err := e.podH.LinkSetDown(pl); err != nil {
		t.Fatal(err)
	}
	if err := e.check(checkArgs); err == nil || !strings.Contains(err.Error(), "down") {
		t.Fatalf("CHECK with the device down: %v", err)
	}
	// Device missing.
	if err := e.podH.LinkDel(pl); err != nil {
		t.Fatal(err)
	}
	if err := e.check(checkArgs); err == nil || !strings.Contains(err.Error(), "net1") {
		t.Fatalf("CHECK with the device missing: %v", err)
	}
}

func TestAddIPAMFailureReturnsDevice(t *testing.T) {
	e := newEnv(t)
	bad := `{"type": "static", "addresses": [{"address": "not-an-address"}]}`
	args := e.args("net1", e.conf("1.1.0", bad))
	if _, err := e.add(args); err == nil || !strings.Contains(err.Error(), "static") {
		t.Fatalf("ADD with failing IPAM: %v, want an error naming the IPAM plugin", err)
	}
	absent(t, e.podH, "net1", "pod after failed ADD")
	e.assertHome(true)
	if err := e.del(args); err != nil {
		t.Fatalf("DEL after failed ADD: %v", err)
	}
	e.assertHome(true)
}

func TestAddFailureAfterIPAMReleasesAddress(t *testing.T) {
	e := newEnv(t)
	// A device-info file whose directory cannot be created: the last step of
	// ADD fails after host-local assigned an address.
	blocker := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e.infoFile = filepath.Join(blocker, "cni", "x.json")
	e.p.SysfsRoot = fakePCISysfs(t, e.dev)
	if _, err := e.add(e.args("net1", e.conf("1.1.0", e.hostLocal()))); err == nil || !strings.Contains(err.Error(), "device-info") {
		t.Fatalf("ADD: %v, want a device-info error", err)
	}
	absent(t, e.podH, "net1", "pod after failed ADD")
	e.assertHome(true)
	if got := e.reservations(); len(got) != 0 {
		t.Fatalf("host-local reservations after failed ADD = %v, want none", got)
	}
}

func TestAddMissingDevice(t *testing.T) {
	e := newEnv(t)
	e.dev = "mnd-missing0"
	e.p.DeviceWait = 300 * time.Millisecond
	if _, err := e.add(e.args("net1", e.conf("1.1.0", e.hostLocal()))); err == nil || !strings.Contains(err.Error(), "mnd-missing0") ||
		!strings.Contains(err.Error(), "waited 300ms") {
		t.Fatalf("ADD: %v, want an error naming the device and the wait", err)
	}
	if got := e.reservations(); len(got) != 0 {
		t.Fatalf("IPAM ran: %v", got)
	}
}

// TestAddWaitsForTheDeviceToComeBack: the device is still in the pod
// namespace of its previous holder when ADD starts (the kubelet or the
// scheduler gave it to the next pod before the old pod's DEL ran); it comes
// back 500 ms later, and ADD takes it instead of failing with "Link not
// found" (a failed first sandbox, retried by the kubelet).
func TestAddWaitsForTheDeviceToComeBack(t *testing.T) {
	e := newEnv(t)
	old := cnitest.NewNS(t)
	if err := e.hostH.LinkSetNsFd(e.hostLink(e.dev), int(old.Fd())); err != nil {
		t.Fatal(err)
	}
	oldH := cnitest.Handle(t, old)
	back := make(chan error, 1)
	go func() {
		time.Sleep(500 * time.Millisecond) // the old pod's DEL, running late
		l, err := oldH.LinkByName(e.dev)
		if err == nil {
			err = oldH.LinkSetNsFd(l, int(e.host.Fd()))
		}
		back <- err
	}()
	args := e.args("net1", e.conf("1.1.0", e.hostLocal()))
	if _, err := e.add(args); err != nil {
		t.Fatalf("ADD while the device comes back: %v", err)
	}
	if err := <-back; err != nil {
		t.Fatalf("moving the device back: %v", err)
	}
	e.podLink("net1")
	if err := e.del(args); err != nil {
		t.Fatalf("DEL: %v", err)
	}
}

func TestAddNoDevice(t *testing.T) {
	e := newEnv(t)
	e.dev = ""
	if _, err := e.add(e.args("net1", e.conf("1.1.0", ""))); err == nil || !strings.Contains(err.Error(), "deviceID") {
		t.Fatalf("ADD: %v, want an error about deviceID", err)
	}
}

func TestAddNameTakenInPod(t *testing.T) {
	e := newEnv(t)
	cnitest.Dummy(t, e.pod, "net1", false)
	if _, err := e.add(e.args("net1", e.conf("1.1.0", e.hostLocal()))); err == nil || !strings.Contains(err.Error(), "already there") {
		t.Fatalf("ADD: %v, want a name conflict", err)
	}
	e.assertHome(true)
	if got := e.reservations(); len(got) != 0 {
		t.Fatalf("IPAM ran: %v", got)
	}
	if e.podLink("net1").Attrs().Alias != "" {
		t.Fatal("the pod's own net1 was touched")
	}
}

func TestDownDeviceStaysDown(t *testing.T) {
	e := newEnv(t)
	if err := e.hostH.LinkSetDown(e.hostLink(e.dev)); err != nil {
		t.Fatal(err)
	}
	args := e.args("eth1", e.conf("0.4.0", ""))
	res, err := e.add(args)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.IPs) != 0 || e.podLink("eth1").Attrs().Flags&net.FlagUp == 0 {
		t.Fatalf("without IPAM: ips %v; the device must be up in the pod", res.IPs)
	}
	if err := e.del(args); err != nil {
		t.Fatal(err)
	}
	e.assertHome(false)
}

func TestStaticDeviceIDAndPCIAddress(t *testing.T) {
	e := newEnv(t)
	// Top-level deviceID, given as the PCI address of the device.
	e.p.SysfsRoot = fakePCISysfs(t, e.dev)
	conf := []byte(`{"cniVersion": "0.3.1", "name": "data", "type": "multinet-netdev", "deviceID": "0000:3b:02.1"}`)
	args := e.args("net2", conf)
	res, err := e.add(args)
	if err != nil {
		t.Fatal(err)
	}
	if res.Interfaces[0].PciID != "0000:3b:02.1" {
		t.Errorf("pciID = %q", res.Interfaces[0].PciID)
	}
	e.podLink("net2")
	if err := e.del(args); err != nil {
		t.Fatal(err)
	}
	e.assertHome(true)
}

// TestDelAfterNetnsDestroyed simulates a physical device the kernel returned
// to the host, under its pod name and with our alias, when the pod's
// namespace was destroyed (dummy links are destroyed instead, so the test
// moves it by hand).
func TestDelAfterNetnsDestroyed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		netns    func(e *env) string
		static   bool // device known only by its in-pod name (PCI-address deviceID)
		returnAs string
	}{
		{name: "netns path gone", netns: func(e *env) string { return e.pod.Path() }, returnAs: "net1"},
		{name: "empty netns", netns: func(*env) string { return "" }, returnAs: "dev7"},
		{name: "pci by ifname", netns: func(*env) string { return "" }, returnAs: "net1", static: true},
		{name: "pci by sysfs", netns: func(*env) string { return "" }, returnAs: "dev9", static: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			conf := e.conf("1.1.0", e.hostLocal())
			if tc.static {
				e.p.SysfsRoot = fakePCISysfs(t, e.dev)
				conf = []byte(strings.Replace(string(conf), `"deviceID":"`+e.dev+`"`, `"deviceID":"0000:3b:02.1"`, 1))
			}
			args := e.args("net1", conf)
			if _, err := e.add(args); err != nil {
				t.Fatal(err)
			}
			// The kernel's part: the device lands in the host, down, under
			// the name it had in the pod (or devN on a clash); alias kept.
			pl := e.podLink("net1")
			if err := e.podH.LinkSetDown(pl); err != nil {
				t.Fatal(err)
			}
			if err := e.podH.LinkSetName(pl, tc.returnAs); err != nil {
				t.Fatal(err)
			}
			if err := e.podH.LinkSetNsFd(e.podLink(tc.returnAs), int(e.host.Fd())); err != nil {
				t.Fatal(err)
			}
			if tc.static { // sysfs shows the function's interface under its new name
				vfNet := filepath.Join(e.p.SysfsRoot, "devices", "pci0000:3a", "0000:3a:00.0", "0000:3b:02.1", "net")
				if err := os.Rename(filepath.Join(vfNet, e.dev), filepath.Join(vfNet, tc.returnAs)); err != nil {
					t.Fatal(err)
				}
			}
			// The pod's namespace goes away: its path is what DEL sees.
			_ = e.pod.Close()
			if err := testutils.UnmountNS(e.pod); err != nil {
				t.Fatal(err)
			}
			args.Netns = tc.netns(e)
			if err := e.del(args); err != nil {
				t.Fatalf("DEL: %v", err)
			}
			e.assertHome(true)
			if got := e.reservations(); len(got) != 0 {
				t.Fatalf("host-local reservations = %v, want none", got)
			}
		})
	}
}

func TestDelNothingToDo(t *testing.T) {
	e := newEnv(t)
	// Never added, and a pod link of the same name that is not ours.
	cnitest.Dummy(t, e.pod, "net1", true)
	if err := e.del(e.args("net1", e.conf("1.1.0", e.hostLocal()))); err != nil {
		t.Fatal(err)
	}
	e.podLink("net1")
	e.assertHome(true)
}

func TestDeviceInfoFile(t *testing.T) {
	t.Run("pci, file missing", func(t *testing.T) {
		e := newEnv(t)
		e.p.SysfsRoot = fakePCISysfs(t, e.dev)
		e.infoFile = filepath.Join(t.TempDir(), "devinfo", "cni", "att.json")
		args := e.args("net1", e.conf("1.1.0", ""))
		if _, err := e.add(args); err != nil {
			t.Fatal(err)
		}
		d, err := devinfo.ReadFile(e.infoFile)
		if err != nil {
			t.Fatal(err)
		}
		want := devinfo.PCI{PCIAddress: "0000:3b:02.1", PFPCIAddress: "0000:3b:00.0", RDMADevice: "mlx5_3"}
		if d.Type != devinfo.TypePCI || d.Version != devinfo.SpecVersion || d.PCI == nil || *d.PCI != want {
			t.Fatalf("device-info = %+v %+v", d, d.PCI)
		}
		if err := e.del(args); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("file exists", func(t *testing.T) {
		e := newEnv(t)
		e.p.SysfsRoot = fakePCISysfs(t, e.dev)
		content := []byte(`{"type":"vhost-user","version":"1.1.0","vhost-user":{"mode":"client","path":"/x"}}`)
		e.infoFile = filepath.Join(t.TempDir(), "att.json")
		if err := os.WriteFile(e.infoFile, content, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := e.add(e.args("net1", e.conf("1.1.0", ""))); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(e.infoFile); string(got) != string(content) {
			t.Fatalf("existing file changed: %s", got)
		}
		_ = e.del(e.args("net1", e.conf("1.1.0", "")))
	})
	t.Run("not pci", func(t *testing.T) {
		e := newEnv(t)
		e.p.SysfsRoot = t.TempDir()
		e.infoFile = filepath.Join(t.TempDir(), "att.json")
		res, err := e.add(e.args("net1", e.conf("1.1.0", "")))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(e.infoFile); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("device-info written for a non-PCI device: %v", err)
		}
		if res.Interfaces[0].PciID != "" {
			t.Fatalf("pciID = %q", res.Interfaces[0].PciID)
		}
		_ = e.del(e.args("net1", e.conf("1.1.0", "")))
	})
}

// fakePCISysfs builds a sysfs tree in which interface name is VF 0000:3b:02.1
// of PF 0000:3b:00.0 with RDMA device mlx5_3, and returns its root.
func fakePCISysfs(t *testing.T, name string) string {
	t.Helper()
	root := t.TempDir()
	vf := filepath.Join(root, "devices", "pci0000:3a", "0000:3a:00.0", "0000:3b:02.1")
	pf := filepath.Join(root, "devices", "pci0000:3a", "0000:3a:00.0", "0000:3b:00.0")
	for _, d := range []string{filepath.Join(vf, "net", name), filepath.Join(vf, "infiniband", "mlx5_3"), pf,
		filepath.Join(root, "class", "net", name), filepath.Join(root, "bus", "pci", "devices")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		filepath.Join(vf, "physfn"):                                  "../0000:3b:00.0",
		filepath.Join(root, "class", "net", name, "device"):          "../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:02.1",
		filepath.Join(root, "bus", "pci", "devices", "0000:3b:02.1"): "../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:02.1",
	} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestGCAndStatusDelegate(t *testing.T) {
	e := newEnv(t)
	conf := e.conf("1.1.0", e.hostLocal())
	if err := e.inHost(func() error { return e.p.GC(context.Background(), e.args("", conf)) }); err != nil {
		t.Fatalf("GC: %v", err)
	}
	if err := e.inHost(func() error { return e.p.Status(context.Background(), e.args("", conf)) }); err != nil {
		t.Fatalf("STATUS: %v", err)
	}
	noIPAM := e.conf("1.1.0", `{"type": "missing-ipam"}`)
	if err := e.inHost(func() error { return e.p.Status(context.Background(), e.args("", noIPAM)) }); err == nil ||
		!strings.Contains(err.Error(), "missing-ipam") {
		t.Fatalf("STATUS with a missing IPAM plugin: %v", err)
	}
}
