package netdevplugin

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/utils"

	"github.com/multinet/multinet/pkg/spec/devinfo"
)

// NetConf is the network configuration of multinet-netdev:
//
//	{"cniVersion": "1.1.0", "name": "data", "type": "multinet-netdev",
//	 "capabilities": {"deviceID": true, "CNIDeviceInfoFile": true},
//	 "deviceID": "eth3",
//	 "ipam": {"type": "host-local", ...}}
//
// The device is runtimeConfig "deviceID" (set by the runtime for the deviceID
// capability, e.g. a device-plugin device ID) or else the static top-level
// "deviceID". Either is a host interface name, or a PCI address in BDF form
// whose function has exactly one network interface. "ipam" is optional: without
// it the device is moved and brought up with no addresses.
type NetConf struct {
	types.PluginConf
	// DeviceID is the device when runtimeConfig has none.
	DeviceID string `json:"deviceID,omitempty"`
	// RuntimeConfig holds what the runtime fills in for our capabilities.
	RuntimeConfig RuntimeConfig `json:"runtimeConfig,omitempty"`
}

// RuntimeConfig is the "runtimeConfig" the runtime passes (CNI conventions;
// device-info spec §5).
type RuntimeConfig struct {
	// DeviceID is the allocated device (capability "deviceID").
	DeviceID string `json:"deviceID,omitempty"`
	// CNIDeviceInfoFile is the CNI device-info file of this attachment
	// (capability "CNIDeviceInfoFile", device-info spec §4.2, §5).
	CNIDeviceInfoFile string `json:"CNIDeviceInfoFile,omitempty"`
}

// ParseConf decodes a network configuration (stdin of a CNI command).
func ParseConf(data []byte) (*NetConf, error) {
	var c NetConf
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "multinet-netdev: parse network configuration", err.Error())
	}
	if f := c.RuntimeConfig.CNIDeviceInfoFile; f != "" && !filepath.IsAbs(f) {
		return nil, types.NewError(types.ErrInvalidNetworkConfig,
			fmt.Sprintf("multinet-netdev: runtimeConfig.CNIDeviceInfoFile %q is not an absolute path", f), "")
	}
	return &c, nil
}

// deviceID is the configured device: runtimeConfig first, then top level.
func (c *NetConf) deviceID() string {
	if c.RuntimeConfig.DeviceID != "" {
		return c.RuntimeConfig.DeviceID
	}
	return c.DeviceID
}

// resolveDevice returns the host interface name of the configured device.
// A PCI address is looked up in <sysfs>/bus/pci/devices/<addr>/net, which
// lists the interfaces of the function in the host network namespace.
func (c *NetConf) resolveDevice(sysfs string) (string, error) {
	id := c.deviceID()
	if id == "" {
		return "", types.NewError(types.ErrInvalidNetworkConfig,
			`multinet-netdev: no device: set runtimeConfig "deviceID" (capability "deviceID") or "deviceID"`, "")
	}
	if !devinfo.IsPCIAddress(id) {
		if err := utils.ValidateInterfaceName(id); err != nil {
			return "", types.NewError(types.ErrInvalidNetworkConfig,
				fmt.Sprintf("multinet-netdev: deviceID %q is neither an interface name nor a PCI address: %s", id, err.Msg), "")
		}
		return id, nil
	}
	dir := filepath.Join(sysfs, "bus", "pci", "devices", id, "net")
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		n := len(entries)
		return "", fmt.Errorf("multinet-netdev: PCI device %s has %d network interfaces in the host network namespace (%s), want 1: "+
			"is it bound to a userspace driver, or already in a pod?", id, n, dir)
	}
	return entries[0].Name(), nil
}

// hostName is the original host name of the device when the configuration
// names it directly, or "" (PCI address, or no device configured). DEL uses it
// to recognise the device without sysfs, which no longer shows a device that is
// in a pod.
func (c *NetConf) hostName() string {
	id := c.deviceID()
	if id == "" || devinfo.IsPCIAddress(id) || utils.ValidateInterfaceName(id) != nil {
		return ""
	}
	return id
}
