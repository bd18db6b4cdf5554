// Package fakesysfs builds a small sysfs tree of PCI functions and netdevs
// in a directory, laid out like the kernel's (bus/pci/devices/<addr> links to
// devices/pci0000:00/<addr>; class/net/<name> links into the device's net/
// directory), for tests of PCI discovery.
package fakesysfs

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
)

// Func is one PCI function.
type Func struct {
	Addr           string // "0000:3b:00.0"
	Vendor, Device string // "8086", "154c"
	Class          string // "0x020000"; defaults to that
	Driver         string // "" for unbound
	NUMA           int    // written to numa_node
	PF             string // physfn address of a VF
	NetDevs        []string
	RDMA           string // infiniband/<RDMA>
	IOMMUGroup     string
	SwitchID       string // phys_switch_id of the netdevs (switchdev PFs)
}

// Representor is a switchdev representor netdev (class/net only).
type Representor struct {
	Name, SwitchID, PortName string
}

// Build writes funcs and reps under root. VFs get physfn links and their PFs
// virtfn<N> links (in the order the VFs are listed) and sriov_numvfs.
func Build(root string, funcs []Func, reps []Representor) error {
	t := tree{
		devRoot:  filepath.Join(root, "devices", "pci0000:00"),
		busDir:   filepath.Join(root, "bus", "pci", "devices"),
		classNet: filepath.Join(root, "class", "net"),
		vfCount:  map[string]int{},
	}
	for _, d := range []string{t.devRoot, t.busDir, t.classNet} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for _, f := range funcs {
		if err := t.addFunc(f); err != nil {
			return err
		}
	}
	for pf, n := range t.vfCount {
		if err := os.WriteFile(filepath.Join(t.devRoot, pf, "sriov_numvfs"), []byte(strconv.Itoa(n)+"\n"), 0o644); err != nil {
			return err
		}
	}
	for _, r := range reps {
		if err := addRepresentor(root, t.classNet, r); err != nil {
			return err
		}
	}
	return nil
}

// tree is the fake sysfs being built: its PCI device, bus and class/net
// dirs, and the VFs counted per PF so far.
type tree struct {
	devRoot, busDir, classNet string
	vfCount                   map[string]int
}

// addFunc adds PCI function f: its attribute files, its bus, driver, IOMMU
// group and PF links, its netdevs and RDMA device.
func (t *tree) addFunc(f Func) error {
	dir := filepath.Join(t.devRoot, f.Addr)
	class := f.Class
	if class == "" {
		class = "0x020000"
	}
	if err := writeFiles(dir, map[string]string{
		"vendor": "0x" + f.Vendor, "device": "0x" + f.Device, "class": class,
		"numa_node": strconv.Itoa(f.NUMA),
	}); err != nil {
		return err
	}
	links := map[string]string{filepath.Join(t.busDir, f.Addr): "../../../devices/pci0000:00/" + f.Addr}
	if f.Driver != "" {
		links[filepath.Join(dir, "driver")] = "../../../bus/pci/drivers/" + f.Driver
	}
	if f.IOMMUGroup != "" {
		links[filepath.Join(dir, "iommu_group")] = "../../../kernel/iommu_groups/" + f.IOMMUGroup
	}
	if f.PF != "" {
		links[filepath.Join(dir, "physfn")] = "../" + f.PF
		n := t.vfCount[f.PF]
		t.vfCount[f.PF] = n + 1
		links[filepath.Join(t.devRoot, f.PF, fmt.Sprintf("virtfn%d", n))] = "../" + f.Addr
	}
	for _, nd := range f.NetDevs {
		ndDir := filepath.Join(dir, "net", nd)
		files := map[string]string{}
		if f.SwitchID != "" {
			files["phys_switch_id"] = f.SwitchID
		}
		if err := writeFiles(ndDir, files); err != nil {
			return err
		}
		links[filepath.Join(ndDir, "device")] = "../../../" + f.Addr
		links[filepath.Join(t.classNet, nd)] = "../../devices/pci0000:00/" + f.Addr + "/net/" + nd
	}
	if f.RDMA != "" {
		if err := os.MkdirAll(filepath.Join(dir, "infiniband", f.RDMA), 0o755); err != nil {
			return err
		}
	}
	return symlinks(links)
}

// addRepresentor adds the virtual netdev of representor r and its
// class/net link.
func addRepresentor(root, classNet string, r Representor) error {
	dir := filepath.Join(root, "devices", "virtual", "net", r.Name)
	if err := writeFiles(dir, map[string]string{"phys_switch_id": r.SwitchID, "phys_port_name": r.PortName}); err != nil {
		return err
	}
	return os.Symlink("../../devices/virtual/net/"+r.Name, filepath.Join(classNet, r.Name))
}

// writeFiles makes dir and writes each file of files (name: value) in it,
// the value followed by a newline, as sysfs shows attributes.
func writeFiles(dir string, files map[string]string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, v := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(v+"\n"), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// symlinks makes each link (path: target) and its parent dirs.
func symlinks(links map[string]string) error {
	for link, target := range links {
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(target, link); err != nil {
			return err
		}
	}
	return nil
}

// TwoNUMA is a host with two SR-IOV PFs, one per NUMA node, each with two
// VFs; on node 0 one VF is bound to vfio-pci, one has an RDMA device, and
// the PF is in switchdev mode with representors. There is also a PF without
// VFs (eno1, NUMA 0) and a non-network function.
//
//	NUMA 0: PF 0000:3b:00.0 ens1f0 (VFs 0000:3b:02.0 iavf, 0000:3b:02.1 vfio-pci group 42, rdma mlx5_3)
//	NUMA 1: PF 0000:af:00.0 ens2f0 (VFs 0000:af:02.0, 0000:af:02.1 iavf; numa_node -1 on the VFs)
//	NUMA 0: 0000:5e:00.0 eno1 (ice, no VFs); 0000:00:1f.0 ISA bridge
func TwoNUMA(root string) error {
	return Build(root, []Func{
		{Addr: "0000:3b:00.0", Vendor: "8086", Device: "1593", Driver: "ice", NUMA: 0, NetDevs: []string{"ens1f0"}, SwitchID: "aabbcc"},
		{Addr: "0000:3b:02.0", Vendor: "8086", Device: "1889", Driver: "iavf", NUMA: 0, PF: "0000:3b:00.0", NetDevs: []string{"ens1f0v0"}},
		{Addr: "0000:3b:02.1", Vendor: "8086", Device: "1889", Driver: "vfio-pci", NUMA: 0, PF: "0000:3b:00.0", IOMMUGroup: "42", RDMA: "mlx5_3"},
		{Addr: "0000:af:00.0", Vendor: "8086", Device: "1593", Driver: "ice", NUMA: 1, NetDevs: []string{"ens2f0"}},
		{Addr: "0000:af:02.0", Vendor: "8086", Device: "1889", Driver: "iavf", NUMA: -1, PF: "0000:af:00.0"},
		{Addr: "0000:af:02.1", Vendor: "8086", Device: "1889", Driver: "iavf", NUMA: -1, PF: "0000:af:00.0"},
		{Addr: "0000:5e:00.0", Vendor: "8086", Device: "1592", Driver: "ice", NUMA: 0, NetDevs: []string{"eno1"}},
		{Addr: "0000:00:1f.0", Vendor: "8086", Device: "a1c1", Class: "0x060100", NUMA: 0},
	}, []Representor{
		{Name: "ens1f0_0", SwitchID: "aabbcc", PortName: "pf0vf0"},
		{Name: "ens1f0_1", SwitchID: "aabbcc", PortName: "pf0vf1"},
		{Name: "other_0", SwitchID: "ddeeff", PortName: "pf0vf0"},
	})
}
