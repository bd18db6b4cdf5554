package draclaims

import (
	"fmt"

	cnitypes "github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/multinet/multinet/internal/node/state"
)

// NetworkData is the KEP-4817 networkData of the attachment on interface
// ifName whose CNI result is res: interfaceName ifName, ips the result's
// addresses on that interface (or without an interface index) in CIDR form,
// hardwareAddress the MAC of the result's interface of that name in the
// sandbox. Errors: res cannot be converted to the current CNI version.
func NetworkData(res cnitypes.Result, ifName string) (*resourceapi.NetworkDeviceData, error) {
	nd := &resourceapi.NetworkDeviceData{InterfaceName: ifName}
	if res == nil {
		return nd, nil
	}
	r, err := current.NewResultFromResult(res)
	if err != nil {
		return nil, fmt.Errorf("CNI result: %w", err)
	}
	own := -1
	for i, in := range r.Interfaces {
		if in.Name == ifName && in.Sandbox != "" {
			own = i
			nd.HardwareAddress = in.Mac
		}
	}
	for _, ip := range r.IPs {
		if ip.Interface != nil && *ip.Interface != own {
			continue
		}
		if len(nd.IPs) < resourceapi.NetworkDeviceDataMaxIPs {
			nd.IPs = append(nd.IPs, ip.Address.String())
		}
	}
	return nd, nil
}

// ToState is d as the attachment record keeps it; nil for nil.
func ToState(d *Device) *state.ClaimDevice {
	if d == nil {
		return nil
	}
	return &state.ClaimDevice{Namespace: d.Namespace, Name: d.Claim, UID: string(d.ClaimUID), Driver: d.Driver, Pool: d.Pool, Device: d.Name}
}

// FromState is the Device an attachment record names; nil for nil.
func FromState(c *state.ClaimDevice) *Device {
	if c == nil {
		return nil
	}
	return &Device{Namespace: c.Namespace, Claim: c.Name, ClaimUID: types.UID(c.UID), Driver: c.Driver, Pool: c.Pool, Name: c.Device}
}
