package webhook

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	resourceinformers "k8s.io/client-go/informers/resource/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/multinet/multinet/internal/devices/draclaims"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
)

// DRAResources tells MutatePods which device resources DRA serves
// (docs/decisions/dra.md, "Which extended-resource requests the webhook
// leaves out"). Safe for concurrent use.
type DRAResources interface {
	// Published reports whether a ResourceSlice of any driver and node
	// publishes a device whose k8s.cni.cncf.io/resourceName attribute is
	// resource (the NPWG convention Multus's DRA support reads).
	Published(resource string) bool
	// Mapped reports whether a DeviceClass serves resource as an extended
	// resource (KEP-5004): its spec.extendedResourceName is resource, or
	// resource is the class's implicit name
	// "deviceclass.resource.kubernetes.io/<class>". The scheduler then
	// serves a request of resource through DRA, so it is requested as
	// before.
	Mapped(resource string) bool
}

// Index names of DRAIndex's informers.
const (
	indexNetworkResource = "networkResource"
	indexExtendedName    = "extendedResourceName"
)

// DRAIndex is a DRAResources over informers of all ResourceSlices (each
// kept as its devices' resourceName attributes only) and DeviceClasses.
type DRAIndex struct {
	slices, classes cache.SharedIndexInformer
}

// NewDRAIndex makes the informers on client (resource.k8s.io/v1: list and
// watch resourceslices and deviceclasses); Start runs them.
func NewDRAIndex(client kubernetes.Interface, resync time.Duration) (*DRAIndex, error) {
	x := &DRAIndex{
		slices: resourceinformers.NewResourceSliceInformer(client, resync, cache.Indexers{indexNetworkResource: sliceNetworkResources}),
		classes: resourceinformers.NewDeviceClassInformer(client, resync, cache.Indexers{indexExtendedName: func(obj any) ([]string, error) {
			if c, ok := obj.(*resourceapi.DeviceClass); ok && c.Spec.ExtendedResourceName != nil {
				return []string{*c.Spec.ExtendedResourceName}, nil
			}
			return nil, nil
		}}),
	}
	if err := x.slices.SetTransform(slimSlice); err != nil {
		return nil, fmt.Errorf("ResourceSlice informer: %w", err)
	}
	return x, nil
}

// Start runs the informers until ctx ends.
func (x *DRAIndex) Start(ctx context.Context) {
	go x.slices.RunWithContext(ctx)
	go x.classes.RunWithContext(ctx)
}

// HasSynced reports whether both informers hold a full list.
func (x *DRAIndex) HasSynced() bool { return x.slices.HasSynced() && x.classes.HasSynced() }

// Published implements DRAResources.
func (x *DRAIndex) Published(resource string) bool {
	objs, err := x.slices.GetIndexer().ByIndex(indexNetworkResource, resource)
	return err == nil && len(objs) > 0
}

// Mapped implements DRAResources.
func (x *DRAIndex) Mapped(resource string) bool {
	if objs, err := x.classes.GetIndexer().ByIndex(indexExtendedName, resource); err == nil && len(objs) > 0 {
		return true
	}
	class, ok := strings.CutPrefix(resource, resourceapi.ResourceDeviceClassPrefix)
	if !ok {
		return false
	}
	_, exists, err := x.classes.GetIndexer().GetByKey(class)
	return err == nil && exists
}

// sliceNetworkResources indexes a slice by its devices' resourceName
// attributes.
func sliceNetworkResources(obj any) ([]string, error) {
	s, ok := obj.(*resourceapi.ResourceSlice)
	if !ok {
		return nil, nil
	}
	seen := map[string]bool{}
	var out []string
	for _, d := range s.Spec.Devices {
		if v, ok := d.Attributes[draclaims.AttrResourceName]; ok && v.StringValue != nil && !seen[*v.StringValue] {
			seen[*v.StringValue] = true
			out = append(out, *v.StringValue)
		}
	}
	return out, nil
}

// slimSlice keeps of a ResourceSlice only what the index reads (name,
// resource version, each device's resourceName attribute): slices of large
// pools (GPUs, many attributes) would otherwise sit whole in the webhook's
// memory.
func slimSlice(obj any) (any, error) {
	s, ok := obj.(*resourceapi.ResourceSlice)
	if !ok {
		return obj, nil
	}
	out := &resourceapi.ResourceSlice{}
	out.Name, out.ResourceVersion, out.UID = s.Name, s.ResourceVersion, s.UID
	for _, d := range s.Spec.Devices {
		if v, ok := d.Attributes[draclaims.AttrResourceName]; ok {
			out.Spec.Devices = append(out.Spec.Devices, resourceapi.Device{
				Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{draclaims.AttrResourceName: v}})
		}
	}
	return out, nil
}

// draServed splits demand d: a resource the pod's own resource claims
// bring through DRA is not requested as an extended resource (no node
// advertises it: the pod would stay Pending). That is a resource some
// ResourceSlice publishes a network device of, that no DeviceClass maps
// as an extended resource, for a pod that has a resource claim besides
// the claims of v's template networks (multinetd then finds the device in
// those claims). It returns the rest of d and the resources left out.
func (w *Webhooks) draServed(pod *corev1.Pod, v *podnetworks.Verdict, d podnetworks.Demand) (podnetworks.Demand, []string) {
	if w.o.DRA == nil || !v.HasOwnClaims(pod) {
		return d, nil
	}
	rest := podnetworks.Demand{Counts: map[string]int64{}}
	var served []string
	for _, rn := range d.Order {
		if w.o.DRA.Published(rn) && !w.o.DRA.Mapped(rn) {
			served = append(served, rn)
			continue
		}
		rest.Order = append(rest.Order, rn)
		rest.Counts[rn] = d.Counts[rn]
	}
	return rest, served
}

// draServedNote says which resources were left out, e.g. "not requested,
// served through DRA by the pod's resource claims: example.com/vf".
func draServedNote(served []string) string {
	if len(served) == 0 {
		return ""
	}
	return "not requested, served through DRA by the pod's resource claims: " + strings.Join(served, ", ")
}
