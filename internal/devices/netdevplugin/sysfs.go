package netdevplugin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/multinet/multinet/pkg/spec/devinfo"
)

// pciOf returns the "pci" device-info map of the host interface name when sysfs
// shows it is a PCI function (<sysfs>/class/net/<name>/device links to a
// directory named by a BDF address), else nil. It must run while the interface
// is in the host network namespace: sysfs shows only that namespace's
// interfaces. pf-pci-address comes from the function's physfn link (an SR-IOV
// VF), rdma-device from its infiniband directory. This is the map
// multinet-deviceplugin writes for PCI-backed netdevs.
func pciOf(sysfs, name string) *devinfo.PCI {
	dev := filepath.Join(sysfs, "class", "net", name, "device")
	addr := linkTarget(dev)
	if !devinfo.IsPCIAddress(addr) {
		return nil
	}
	pci := &devinfo.PCI{PCIAddress: addr}
	if pf := linkTarget(filepath.Join(dev, "physfn")); devinfo.IsPCIAddress(pf) {
		pci.PFPCIAddress = pf
	}
	if ib, err := os.ReadDir(filepath.Join(dev, "infiniband")); err == nil && len(ib) > 0 {
		pci.RDMADevice = ib[0].Name()
	}
	return pci
}

// linkTarget is the base name of the symlink p's target, or "".
func linkTarget(p string) string {
	t, err := os.Readlink(p)
	if err != nil {
		return ""
	}
	return filepath.Base(t)
}

// writeDeviceInfo writes a "pci" device-info map to path when path does not
// exist yet (device-info spec §4.2.2: the NPWG implementation may already have
// copied the device plugin's file there, and then it is left alone). It
// reports whether it wrote the file. The directory is created when missing.
func writeDeviceInfo(path string, pci *devinfo.PCI) (bool, error) {
	if path == "" || pci == nil {
		return false, nil
	}
	if _, err := os.Lstat(path); err == nil {
		return false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("device-info file %s: %w", path, err)
	}
	d := &devinfo.DeviceInfo{Type: devinfo.TypePCI, Version: devinfo.SpecVersion, PCI: pci}
	if err := devinfo.WriteFile(path, d); err != nil {
		return false, fmt.Errorf("device-info file %s: %w", path, err)
	}
	return true, nil
}
