package dra

import (
	"fmt"
	"github.com/multinet/multinet/internal/devices/draclaims"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/dynamic-resource-allocation/deviceattribute"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/multinet/multinet/internal/devices/deviceplugin/pool"
)

const (
	// DefaultDriverName is the DRA driver name multinet's driver uses
	// unless told otherwise.
	DefaultDriverName = "dra.multinet.io"

	// AttrResourceName and AttrDeviceID are the device attributes of the
	// convention multinetd reads (draclaims.AttrResourceName,
	// draclaims.AttrDeviceID), defined there so that multinetd does not
	// link the driver.
	AttrResourceName = draclaims.AttrResourceName
	AttrDeviceID     = draclaims.AttrDeviceID
	// AttrKind (in the driver's domain) is the pool kind: netdev, pci,
	// vhostUser or memif.
	AttrKind resourceapi.QualifiedName = "kind"

	// UnhealthyTaintKey is the key of the NoSchedule taint an unhealthy
	// device carries in the ResourceSlice, so that the scheduler allocates
	// it to no new claim (claims holding it keep it).
	UnhealthyTaintKey = "dra.multinet.io/unhealthy"

	// maxDevicesPerSlice is the API's limit for slices whose devices have
	// taints (ResourceSliceMaxDevicesWithAdvancedFeatures).
	maxDevicesPerSlice = resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures
)

// PoolName is the DRA pool name of the pool of resourceName on node:
// "<node>/<resourceName>", unique per driver across the cluster (pool names
// are DNS subdomains separated by slashes).
func PoolName(node, resourceName string) string { return node + "/" + resourceName }

// DeviceName turns a device ID into a DRA device name (a DNS label): lower
// case, every character other than [a-z0-9-] becomes '-', e.g.
// "0000:3b:02.0" → "0000-3b-02-0", "ens1f0v1" → "ens1f0v1". Errors: the
// result is not a DNS label (empty, starts or ends with '-', > 63 bytes).
func DeviceName(id string) (string, error) {
	b := []byte(strings.ToLower(id))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			b[i] = '-'
		}
	}
	n := string(b)
	if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
		return "", fmt.Errorf("device ID %q gives the DRA device name %q: %s", id, n, strings.Join(errs, "; "))
	}
	return n, nil
}

// servedPool is one pool as the driver publishes it.
type servedPool struct {
	pool  pool.Pool
	kind  string // config.Pool.Kind()
	name  string // DRA pool name
	files pool.InfoFiles

	// tainted[device name] is when the device was first seen unhealthy
	// (the taint's timeAdded, in whole seconds as the API stores it).
	tainted map[string]time.Time
}

// devices returns the DRA devices of p's current devices, by ID order, and
// the map from DRA device name to pool device. Errors: a device ID that
// gives no DNS label, or two IDs that give the same name.
func (p *servedPool) devices(now time.Time) ([]resourceapi.Device, map[string]pool.Device, error) {
	devs := p.pool.Devices()
	out := make([]resourceapi.Device, 0, len(devs))
	byName := make(map[string]pool.Device, len(devs))
	for _, d := range devs {
		name, err := DeviceName(d.ID)
		if err != nil {
			return nil, nil, fmt.Errorf("pool %s: %w", p.pool.ResourceName(), err)
		}
		if other, dup := byName[name]; dup {
			return nil, nil, fmt.Errorf("pool %s: devices %q and %q have the same DRA device name %q", p.pool.ResourceName(), other.ID, d.ID, name)
		}
		byName[name] = d
		out = append(out, p.device(name, d, now))
	}
	return out, byName, nil
}

func (p *servedPool) device(name string, d pool.Device, now time.Time) resourceapi.Device {
	rn, id, kind := p.pool.ResourceName(), d.ID, p.kind
	dev := resourceapi.Device{
		Name: name,
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			AttrResourceName: {StringValue: &rn},
			AttrDeviceID:     {StringValue: &id},
			AttrKind:         {StringValue: &kind},
		},
	}
	if d.Info != nil && d.Info.PCI != nil && d.Info.PCI.PCIAddress != "" {
		addr := d.Info.PCI.PCIAddress
		dev.Attributes[deviceattribute.StandardDeviceAttributePCIBusID] = resourceapi.DeviceAttribute{StringValue: &addr}
	}
	if d.NUMANode >= 0 {
		numa := int64(d.NUMANode)
		dev.Attributes[deviceattribute.StandardDeviceAttributeNUMANode] = resourceapi.DeviceAttribute{IntValue: &numa}
	}
	if d.Healthy {
		delete(p.tainted, name)
		return dev
	}
	since, ok := p.tainted[name]
	if !ok {
		since = now.Truncate(time.Second)
		p.tainted[name] = since
	}
	dev.Taints = []resourceapi.DeviceTaint{{
		Key: UnhealthyTaintKey, Value: "true", Effect: resourceapi.DeviceTaintEffectNoSchedule,
		TimeAdded: &metav1.Time{Time: since},
	}}
	return dev
}

// sliceDevices splits devs into slices of at most maxDevicesPerSlice devices; a
// pool without devices still gets one (empty) slice, so that it exists.
func sliceDevices(devs []resourceapi.Device) []resourceslice.Slice {
	if len(devs) == 0 {
		return []resourceslice.Slice{{}}
	}
	var out []resourceslice.Slice
	for len(devs) > 0 {
		n := min(len(devs), maxDevicesPerSlice)
		out = append(out, resourceslice.Slice{Devices: devs[:n]})
		devs = devs[n:]
	}
	return out
}
