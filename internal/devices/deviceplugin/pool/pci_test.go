package pool

import (
	"reflect"
	"testing"

	"github.com/multinet/multinet/internal/devices/deviceplugin/config"
	"github.com/multinet/multinet/internal/devices/deviceplugin/internal/fakesysfs"
	"github.com/multinet/multinet/pkg/spec/devinfo"
)

func ids(ds []Device) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

func byID(t *testing.T, ds []Device, id string) Device {
	t.Helper()
	for _, d := range ds {
		if d.ID == id {
			return d
		}
	}
	t.Fatalf("device %s not in %v", id, ids(ds))
	return Device{}
}

func TestPCISelection(t *testing.T) {
	root := t.TempDir()
	if err := fakesysfs.TwoNUMA(root); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		sel  config.PCISelector
		want []string
	}{
		// PFs with VFs enabled are never advertised; the ISA bridge (class 06) never.
		{"vendor", config.PCISelector{Vendors: []string{"0x8086"}}, []string{"0000:3b:02.0", "0000:3b:02.1", "0000:5e:00.0", "0000:af:02.0", "0000:af:02.1"}},
		{"device", config.PCISelector{Devices: []string{"1889"}}, []string{"0000:3b:02.0", "0000:3b:02.1", "0000:af:02.0", "0000:af:02.1"}},
		{"driver", config.PCISelector{Drivers: []string{"vfio-pci"}}, []string{"0000:3b:02.1"}},
		{"pfName of VFs", config.PCISelector{PFNames: []string{"ens2f0"}}, []string{"0000:af:02.0", "0000:af:02.1"}},
		{"pfName of PF without VFs", config.PCISelector{PFNames: []string{"eno1"}}, []string{"0000:5e:00.0"}},
		{"pfName and driver", config.PCISelector{PFNames: []string{"ens1f0"}, Drivers: []string{"iavf"}}, []string{"0000:3b:02.0"}},
		{"address", config.PCISelector{Addresses: []string{"0000:AF:02.1", "0000:3b:00.0"}}, []string{"0000:af:02.1"}},
		{"no match", config.PCISelector{Vendors: []string{"15b3"}}, []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := NewPCI("example.com/vf", tc.sel, Env{SysfsRoot: root})
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(p.Devices()); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("devices = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPCIDeviceFacts(t *testing.T) {
	root := t.TempDir()
	if err := fakesysfs.TwoNUMA(root); err != nil {
		t.Fatal(err)
	}
	p, err := NewPCI("example.com/vf", config.PCISelector{Vendors: []string{"8086"}}, Env{SysfsRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	ds := p.Devices()

	vf := byID(t, ds, "0000:3b:02.0")
	if !vf.Healthy || vf.NUMANode != 0 || vf.Parent != "0000:3b:00.0" || len(vf.DeviceNodes) != 0 {
		t.Errorf("3b:02.0 = %+v", vf)
	}
	// device-info spec §3.1.3: pci-address, pf-pci-address, representor (switchdev).
	want := &devinfo.DeviceInfo{Type: "pci", Version: "1.1.0", PCI: &devinfo.PCI{PCIAddress: "0000:3b:02.0", PFPCIAddress: "0000:3b:00.0", RepresentorDevice: "ens1f0_0"}}
	if !reflect.DeepEqual(vf.Info, want) {
		t.Errorf("3b:02.0 info = %+v, want %+v", vf.Info.PCI, want.PCI)
	}

	vfio := byID(t, ds, "0000:3b:02.1")
	if vfio.Info.PCI.RDMADevice != "mlx5_3" || vfio.Info.PCI.RepresentorDevice != "ens1f0_1" {
		t.Errorf("3b:02.1 info = %+v", vfio.Info.PCI)
	}
	wantNodes := []DeviceNode{
		{HostPath: "/dev/vfio/vfio", ContainerPath: "/dev/vfio/vfio", Permissions: "rw"},
		{HostPath: "/dev/vfio/42", ContainerPath: "/dev/vfio/42", Permissions: "rw"},
	}
	if !reflect.DeepEqual(vfio.DeviceNodes, wantNodes) {
		t.Errorf("3b:02.1 device nodes = %+v", vfio.DeviceNodes)
	}

	// A VF whose numa_node is -1 inherits its PF's node; no switchdev → no representor.
	af := byID(t, ds, "0000:af:02.1")
	if af.NUMANode != 1 || af.Parent != "0000:af:00.0" || af.Info.PCI.RepresentorDevice != "" {
		t.Errorf("af:02.1 = %+v info %+v", af, af.Info.PCI)
	}
	pf := byID(t, ds, "0000:5e:00.0")
	if pf.Parent != "" || pf.Info.PCI.PFPCIAddress != "" || pf.NUMANode != 0 {
		t.Errorf("5e:00.0 = %+v", pf)
	}
	for _, d := range ds {
		if err := d.Info.Validate(); err != nil {
			t.Errorf("%s: invalid device-info: %v", d.ID, err)
		}
	}
}

func TestPCIMissingSysfs(t *testing.T) {
	if _, err := NewPCI("example.com/vf", config.PCISelector{Vendors: []string{"8086"}}, Env{SysfsRoot: t.TempDir()}); err == nil {
		t.Fatal("NewPCI without bus/pci/devices succeeded")
	}
}
