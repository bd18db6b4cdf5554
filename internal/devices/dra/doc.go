// Package dra serves multinet's device pools (package
// deviceplugin/pool: host netdevs, PCI functions, vhost-user and memif
// socket slots) through Dynamic Resource Allocation (resource.k8s.io/v1)
// instead of the Device Plugin API: a kubelet plugin (the helper of
// k8s.io/dynamic-resource-allocation/kubeletplugin) that publishes the
// node's devices in ResourceSlices, prepares and unprepares the
// ResourceClaims allocated to them, reports their health to the kubelet and
// keeps the slices in line with it.
//
// Every device carries the attributes AttrResourceName
// ("k8s.cni.cncf.io/resourceName", the pool's resource name) and
// AttrDeviceID ("k8s.cni.cncf.io/deviceID", the ID the device plugin would
// advertise: interface name, PCI address, slot<N>), so that multinetd (and
// other NPWG implementations following that convention) find the
// device-info file of an allocated device as for a device plugin's. See
// docs/dra.md and docs/decisions/dra.md.
package dra
