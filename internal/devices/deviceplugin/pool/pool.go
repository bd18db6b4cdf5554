// Package pool discovers the devices of one device pool (one resource) and
// watches their health: host netdevs (netlink), PCI network functions (sysfs)
// and vhost-user / memif socket slots (directories). It knows nothing of gRPC;
// package deviceplugin serves a Pool over the Device Plugin API.
package pool

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/multinet/multinet/internal/devices/deviceplugin/config"
	"github.com/multinet/multinet/pkg/spec/devinfo"
)

// NoNUMA is Device.NUMANode when the device has no known NUMA affinity.
const NoNUMA = -1

// Device is one allocatable device of a pool.
type Device struct {
	// ID is the device ID advertised to kubelet (at most 63 bytes): the
	// interface name, the PCI address, or "slot<N>".
	ID string
	// Healthy is false when the device cannot be used now (link down,
	// interface gone, slot directory gone).
	Healthy bool
	// NUMANode is the NUMA node of the device, NoNUMA when unknown.
	NUMANode int
	// Parent groups devices that share hardware, e.g. the PF PCI address of
	// a VF; "" when none. GetPreferredAllocation packs allocations by Parent.
	Parent string
	// Info is the device-info map written to the device plugin device-info
	// file (device-info spec §4.1); nil writes no file.
	Info *devinfo.DeviceInfo
	// Mounts and DeviceNodes are what Allocate adds to a container that gets
	// this device.
	Mounts      []Mount
	DeviceNodes []DeviceNode
}

// Mount is a host path bind-mounted into the container.
type Mount struct {
	HostPath, ContainerPath string
	ReadOnly                bool
}

// DeviceNode is a host device node made available in the container.
type DeviceNode struct {
	HostPath, ContainerPath string
	// Permissions are cgroup permissions, a combination of "r", "w", "m".
	Permissions string
}

// Equal reports whether d and o advertise the same thing to kubelet and
// write the same device-info.
func (d Device) Equal(o Device) bool {
	return d.ID == o.ID && d.Healthy == o.Healthy && d.NUMANode == o.NUMANode && d.Parent == o.Parent &&
		slices.Equal(d.Mounts, o.Mounts) && slices.Equal(d.DeviceNodes, o.DeviceNodes) && infoEqual(d.Info, o.Info)
}

func infoEqual(a, b *devinfo.DeviceInfo) bool {
	if a == nil || b == nil {
		return a == b
	}
	ea, errA := a.Encode()
	eb, errB := b.Encode()
	return errA == nil && errB == nil && string(ea) == string(eb)
}

// Pool is the set of devices of one resource.
type Pool interface {
	// ResourceName is the extended resource name, e.g. "example.com/net-a".
	ResourceName() string
	// Devices returns the current devices sorted by ID. The caller may not
	// modify the result.
	Devices() []Device
	// Watch follows device health until ctx is done and calls changed after
	// each change of Devices (from Watch's goroutine, never concurrently).
	// It returns nil when ctx is done, or an error when it cannot watch at all.
	Watch(ctx context.Context, changed func()) error
}

// Seeder is implemented by pools whose devices can leave the host while in
// use (netdev pools: multinet-netdev moves them into pods). A server that
// restarts while such a device is away learns from its own earlier
// publication that the device was there (e.g. the DRA driver's
// ResourceSlice) and tells the pool with AssumeSeen, so that the device
// counts as in use rather than missing. AssumeSeen reports a change.
type Seeder interface {
	AssumeSeen(ids []string) bool
}

// HostPresence is implemented by pools whose devices leave the host while
// in use (netdev pools). InHost reports whether device id is in the pool's
// network namespace now: false while it is in a pod's, including the moment
// after its holder's pod was deleted and before the pod's sandbox teardown
// (the CNI DEL) brought it back.
type HostPresence interface {
	InHost(id string) bool
}

// Env is what pools need from the host besides their configuration.
type Env struct {
	// SysfsRoot is the sysfs mount point, "/sys" when empty.
	SysfsRoot string
	// NetNSPath is the network namespace netdev pools work in; the current
	// one when empty. Tests set it to a namespace they created.
	NetNSPath string
}

func (e Env) sysfs() string {
	if e.SysfsRoot == "" {
		return "/sys"
	}
	return e.SysfsRoot
}

// New builds the pool described by c (validated by package config) and
// discovers its devices.
func New(c config.Pool, env Env) (Pool, error) {
	switch {
	case c.Netdev != nil:
		return NewNetdev(c.ResourceName, *c.Netdev, env)
	case c.PCI != nil:
		return NewPCI(c.ResourceName, *c.PCI, env)
	case c.VhostUser != nil:
		return NewVhostUser(c.ResourceName, *c.VhostUser)
	case c.Memif != nil:
		return NewMemif(c.ResourceName, *c.Memif)
	}
	return nil, fmt.Errorf("pool %s: no selector", c.ResourceName)
}

func sortDevices(ds []Device) {
	slices.SortFunc(ds, func(a, b Device) int { return strings.Compare(a.ID, b.ID) })
}
