// Package draclaims is multinetd's side of Dynamic Resource Allocation: it
// finds the device a pod's resource claim holds for a network (from the
// claim's allocation and the device's attributes in its ResourceSlice,
// k8s.cni.cncf.io/resourceName and k8s.cni.cncf.io/deviceID), and writes the
// device's status back to the claim after the attachment (KEP-4817:
// status.devices[] with networkData and the Ready and NetworkReady
// conditions), clearing it on DEL. docs/dra.md, docs/decisions/dra.md.
package draclaims

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	corev1client "github.com/multinet/multinet/pkg/client/clientset/kubernetes/typed/core/v1"
	resourcev1client "github.com/multinet/multinet/pkg/client/clientset/kubernetes/typed/resource/v1"
)

// The device attributes of the NPWG convention for network devices served
// through DRA (Multus's DRA support and multinet's driver, internal/devices/dra, follow
// it): a device of any driver that carries them can back an attachment.
const (
	// AttrResourceName is the device attribute holding the resource name of
	// the device's pool (the NetworkAttachmentDefinition's resourceName).
	AttrResourceName resourceapi.QualifiedName = "k8s.cni.cncf.io/resourceName"
	// AttrDeviceID is the device attribute holding the device ID: the name
	// of the device-info file (device-info spec §4.1.1) and the CNI
	// runtimeConfig deviceID.
	AttrDeviceID resourceapi.QualifiedName = "k8s.cni.cncf.io/deviceID"
)

// Device is the device a pod's resource claim holds for one attachment.
type Device struct {
	// Namespace, Claim and ClaimUID name the ResourceClaim.
	Namespace, Claim string
	ClaimUID         types.UID
	// Driver, Pool and Name identify the allocated device
	// (status.allocation.devices.results[]).
	Driver, Pool, Name string
	// ResourceName and DeviceID are the device's attributes
	// k8s.cni.cncf.io/resourceName and k8s.cni.cncf.io/deviceID.
	ResourceName, DeviceID string
}

// String is "<driver>/<pool>/<device> of ResourceClaim <ns>/<name>".
func (d *Device) String() string {
	return fmt.Sprintf("%s/%s/%s of ResourceClaim %s/%s", d.Driver, d.Pool, d.Name, d.Namespace, d.Claim)
}

// Client reads claims and slices and writes claim status. Safe for
// concurrent use.
type Client struct {
	pods     corev1client.PodsGetter
	resource resourcev1client.ResourceV1Interface
	node     string
}

// New returns a Client for node (the slices' spec.nodeName) reading pods
// through pods and ResourceClaims and ResourceSlices through resource (the
// typed clients alone, so that multinetd links no other API group's).
func New(pods corev1client.PodsGetter, resource resourcev1client.ResourceV1Interface, node string) *Client {
	return &Client{pods: pods, resource: resource, node: node}
}

// Device finds the device pod's resource claim podClaim
// (spec.resourceClaims[].name) holds for a network of resource
// resourceName: the claim is the one the pod's status names
// (status.resourceClaimStatuses; the pod is read again when the given copy
// lacks it), it must be allocated and reserved for the pod, and one of its
// allocated devices must carry AttrResourceName = resourceName and an
// AttrDeviceID in the node's ResourceSlices. Errors say which step failed.
func (c *Client) Device(ctx context.Context, pod *corev1.Pod, podClaim, resourceName string) (*Device, error) {
	name, err := c.claimName(ctx, pod, podClaim)
	if err != nil {
		return nil, err
	}
	claim, err := c.podClaim(ctx, pod, name)
	if err != nil {
		return nil, fmt.Errorf("pod claim %s: %w", podClaim, err)
	}
	var seen []string
	for _, r := range claim.Status.Allocation.Devices.Results {
		dev, err := c.sliceDevice(ctx, r.Driver, r.Pool, r.Device)
		if err != nil {
			return nil, fmt.Errorf("pod claim %s: ResourceClaim %s/%s: %w", podClaim, pod.Namespace, name, err)
		}
		rn, id := stringAttr(dev, AttrResourceName), stringAttr(dev, AttrDeviceID)
		seen = append(seen, fmt.Sprintf("%s/%s/%s (resourceName %q)", r.Driver, r.Pool, r.Device, rn))
		if rn != resourceName {
			continue
		}
		if id == "" {
			return nil, fmt.Errorf("pod claim %s: ResourceClaim %s/%s: device %s/%s/%s has no %s attribute", podClaim, pod.Namespace, name, r.Driver, r.Pool, r.Device, AttrDeviceID)
		}
		return &Device{Namespace: claim.Namespace, Claim: claim.Name, ClaimUID: claim.UID,
			Driver: r.Driver, Pool: r.Pool, Name: r.Device, ResourceName: rn, DeviceID: id}, nil
	}
	return nil, fmt.Errorf("pod claim %s: ResourceClaim %s/%s holds no device of resource %s (allocated: %v)", podClaim, pod.Namespace, name, resourceName, seen)
}

// claimName is the ResourceClaim of the pod's claim podClaim.
func (c *Client) claimName(ctx context.Context, pod *corev1.Pod, podClaim string) (string, error) {
	find := func(p *corev1.Pod) (string, bool) {
		for _, s := range p.Status.ResourceClaimStatuses {
			if s.Name == podClaim && s.ResourceClaimName != nil {
				return *s.ResourceClaimName, true
			}
		}
		for _, s := range p.Spec.ResourceClaims {
			if s.Name == podClaim && s.ResourceClaimName != nil {
				return *s.ResourceClaimName, true
			}
		}
		return "", false
	}
	if n, ok := find(pod); ok {
		return n, nil
	}
	fresh, err := c.pods.Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("pod claim %s: read pod: %w", podClaim, err)
	}
	if n, ok := find(fresh); ok {
		return n, nil
	}
	return "", fmt.Errorf("pod claim %s: the pod has no ResourceClaim for it (status.resourceClaimStatuses)", podClaim)
}

// sliceDevice finds device pool/name of driver in the node's ResourceSlices
// (the pool's newest generation).
func (c *Client) sliceDevice(ctx context.Context, driver, pool, name string) (*resourceapi.Device, error) {
	l, err := c.listSlices(ctx, driver)
	if err != nil {
		return nil, err
	}
	found := findDevice(l, pool, name)
	if found == nil {
		return nil, fmt.Errorf("device %s/%s/%s is in no ResourceSlice of node %s", driver, pool, name, c.node)
	}
	return found, nil
}

// listSlices lists the node's ResourceSlices of driver.
func (c *Client) listSlices(ctx context.Context, driver string) (*resourceapi.ResourceSliceList, error) {
	l, err := c.resource.ResourceSlices().List(ctx, metav1.ListOptions{
		FieldSelector: resourceapi.ResourceSliceSelectorDriver + "=" + driver + "," + resourceapi.ResourceSliceSelectorNodeName + "=" + c.node})
	if err != nil {
		return nil, fmt.Errorf("ResourceSlices of driver %s on node %s: %w", driver, c.node, err)
	}
	return l, nil
}

// findDevice is device pool/name in l, from the pool's newest generation;
// nil when no slice has it.
func findDevice(l *resourceapi.ResourceSliceList, pool, name string) *resourceapi.Device {
	var found *resourceapi.Device
	var gen int64 = -1
	for i := range l.Items {
		s := &l.Items[i]
		if s.Spec.Pool.Name != pool || s.Spec.Pool.Generation < gen {
			continue
		}
		for j := range s.Spec.Devices {
			if s.Spec.Devices[j].Name == name {
				found, gen = &s.Spec.Devices[j], s.Spec.Pool.Generation
			}
		}
	}
	return found
}

func stringAttr(d *resourceapi.Device, k resourceapi.QualifiedName) string {
	if v, ok := d.Attributes[k]; ok && v.StringValue != nil {
		return *v.StringValue
	}
	return ""
}

// ErrNoClaim: the claim is gone (Clear has nothing to do).
var ErrNoClaim = errors.New("ResourceClaim gone")
