package pool

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/multinet/multinet/internal/devices/deviceplugin/config"
	"github.com/multinet/multinet/pkg/spec/devinfo"
)

// pciFunc is what sysfs says about one PCI function.
type pciFunc struct {
	addr       string // "0000:3b:02.0"
	dir        string // <sysfs>/bus/pci/devices/<addr>
	vendor     string // "8086", lower case, no 0x
	device     string
	class      string // "020000"
	driver     string // "" when unbound
	numa       int
	physfn     string // PF address for a VF, else ""
	numVFs     int
	netdevs    []string
	rdma       string
	iommuGroup string
}

// readPCIFunc reads the function addr from <sysfs>/bus/pci/devices/<addr>.
// Missing attributes are left empty; NUMA defaults to NoNUMA.
func readPCIFunc(sysfs, addr string) pciFunc {
	dir := filepath.Join(sysfs, "bus", "pci", "devices", addr)
	f := pciFunc{
		addr:   addr,
		dir:    dir,
		vendor: config.NormalizeHexID(readAttr(dir, "vendor")),
		device: config.NormalizeHexID(readAttr(dir, "device")),
		class:  config.NormalizeHexID(readAttr(dir, "class")),
		driver: linkBase(filepath.Join(dir, "driver")),
		numa:   NoNUMA,
		physfn: linkBase(filepath.Join(dir, "physfn")),
	}
	if n, err := strconv.Atoi(readAttr(dir, "numa_node")); err == nil && n >= 0 {
		f.numa = n
	}
	if n, err := strconv.Atoi(readAttr(dir, "sriov_numvfs")); err == nil {
		f.numVFs = n
	}
	f.netdevs = dirNames(filepath.Join(dir, "net"))
	if ib := dirNames(filepath.Join(dir, "infiniband")); len(ib) > 0 {
		f.rdma = ib[0]
	}
	f.iommuGroup = linkBase(filepath.Join(dir, "iommu_group"))
	return f
}

func readAttr(dir, name string) string {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func linkBase(p string) string {
	target, err := os.Readlink(p)
	if err != nil {
		return ""
	}
	return filepath.Base(target)
}

func dirNames(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

// pciPool is a static pool of PCI network functions.
type pciPool struct {
	resourceName string
	devices      []Device
}

// NewPCI discovers the PCI network functions (class 0x02) under
// <sysfs>/bus/pci/devices that sel selects. A PF with VFs enabled
// (sriov_numvfs > 0) is never selected: its VFs are. The device ID is the PCI
// address, Parent the PF address (physfn), NUMANode from numa_node (a VF
// without one inherits its PF's). Each device gets a "pci" device-info map
// (device-info spec §3.1.3) with pci-address, pf-pci-address, rdma-device and
// representor-device when sysfs knows them; a vfio-pci function gets
// /dev/vfio/vfio and /dev/vfio/<iommu group>. Finding no device is not an
// error (the pool advertises zero devices).
func NewPCI(resourceName string, sel config.PCISelector, env Env) (Pool, error) {
	sysfs := env.sysfs()
	root := filepath.Join(sysfs, "bus", "pci", "devices")
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("pool %s: list PCI devices: %w", resourceName, err)
	}
	funcs := map[string]pciFunc{}
	for _, e := range entries {
		if devinfo.IsPCIAddress(e.Name()) {
			funcs[e.Name()] = readPCIFunc(sysfs, e.Name())
		}
	}
	p := &pciPool{resourceName: resourceName}
	for _, f := range funcs {
		if !strings.HasPrefix(f.class, "02") || f.numVFs > 0 {
			continue
		}
		pf, hasPF := funcs[f.physfn]
		if f.physfn != "" && !hasPF {
			pf = readPCIFunc(sysfs, f.physfn)
		}
		if !selectPCI(sel, f, pf) {
			continue
		}
		if f.numa == NoNUMA && f.physfn != "" {
			f.numa = pf.numa
		}
		info := &devinfo.PCI{PCIAddress: f.addr, RDMADevice: f.rdma}
		if f.physfn != "" && devinfo.IsPCIAddress(f.physfn) {
			info.PFPCIAddress = f.physfn
			info.RepresentorDevice = representor(sysfs, f, pf)
		}
		d := Device{
			ID: f.addr, Healthy: true, NUMANode: f.numa, Parent: f.physfn,
			Info: &devinfo.DeviceInfo{Type: devinfo.TypePCI, Version: devinfo.SpecVersion, PCI: info},
		}
		if f.driver == "vfio-pci" && f.iommuGroup != "" {
			d.DeviceNodes = []DeviceNode{
				{HostPath: "/dev/vfio/vfio", ContainerPath: "/dev/vfio/vfio", Permissions: "rw"},
				{HostPath: "/dev/vfio/" + f.iommuGroup, ContainerPath: "/dev/vfio/" + f.iommuGroup, Permissions: "rw"},
			}
		}
		p.devices = append(p.devices, d)
	}
	sortDevices(p.devices)
	return p, nil
}

func selectPCI(sel config.PCISelector, f, pf pciFunc) bool {
	if len(sel.Vendors) > 0 && !slices.ContainsFunc(sel.Vendors, func(v string) bool { return config.NormalizeHexID(v) == f.vendor }) {
		return false
	}
	if len(sel.Devices) > 0 && !slices.ContainsFunc(sel.Devices, func(v string) bool { return config.NormalizeHexID(v) == f.device }) {
		return false
	}
	if len(sel.Drivers) > 0 && !slices.Contains(sel.Drivers, f.driver) {
		return false
	}
	if len(sel.Addresses) > 0 && !slices.ContainsFunc(sel.Addresses, func(a string) bool { return strings.EqualFold(a, f.addr) }) {
		return false
	}
	if len(sel.PFNames) > 0 {
		names := f.netdevs // a PF without VFs is selected by its own name
		if f.physfn != "" {
			names = pf.netdevs
		}
		if !slices.ContainsFunc(names, func(n string) bool { return slices.Contains(sel.PFNames, n) }) {
			return false
		}
	}
	return true
}

var portNameRE = regexp.MustCompile(`^(?:c\d+)?pf(\d+)vf(\d+)$`)

// representor finds the switchdev representor netdev of VF vf of PF pf: the
// netdev under <sysfs>/class/net with the PF's phys_switch_id whose
// phys_port_name is "pf<P>vf<N>" for the VF's index N. "" when there is none
// (legacy SR-IOV mode, no netdev on the PF).
func representor(sysfs string, vf, pf pciFunc) string {
	index := -1
	for _, name := range dirNames(pf.dir) {
		if strings.HasPrefix(name, "virtfn") && linkBase(filepath.Join(pf.dir, name)) == vf.addr {
			if n, err := strconv.Atoi(strings.TrimPrefix(name, "virtfn")); err == nil {
				index = n
			}
		}
	}
	if index < 0 || len(pf.netdevs) == 0 {
		return ""
	}
	switchID := readAttr(filepath.Join(pf.dir, "net", pf.netdevs[0]), "phys_switch_id")
	if switchID == "" {
		return ""
	}
	classNet := filepath.Join(sysfs, "class", "net")
	var found []string
	for _, name := range dirNames(classNet) {
		dir := filepath.Join(classNet, name)
		if readAttr(dir, "phys_switch_id") != switchID {
			continue
		}
		m := portNameRE.FindStringSubmatch(readAttr(dir, "phys_port_name"))
		if m == nil || m[2] != strconv.Itoa(index) {
			continue
		}
		found = append(found, name)
	}
	if len(found) == 1 {
		return found[0]
	}
	// Several PFs share the switch: pick the one whose pf number is the PF's
	// PCI function number.
	for _, name := range found {
		m := portNameRE.FindStringSubmatch(readAttr(filepath.Join(classNet, name), "phys_port_name"))
		if m[1] == pf.addr[len(pf.addr)-1:] {
			return name
		}
	}
	return ""
}

func (p *pciPool) ResourceName() string { return p.resourceName }
func (p *pciPool) Devices() []Device    { return p.devices }

// Watch blocks until ctx is done: PCI functions are discovered once and
// stay healthy (see docs/decisions/deviceplugin.md).
func (p *pciPool) Watch(ctx context.Context, _ func()) error {
	<-ctx.Done()
	return nil
}
