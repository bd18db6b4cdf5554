package draclaims

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodDevices finds the network devices the pod's own resource claims hold,
// the way Multus's DRA support does (docs/how-to-use.md of multus-cni, "Run
// pod with network annotation and Dynamic Resource Allocation driver"): for
// each resource name in want, the allocated devices whose
// AttrResourceName attribute is that name, sorted by device ID (Multus's
// order: the n-th attachment of a resource gets the n-th). It reads
//
//   - every claim of spec.resourceClaims whose name is not in skip (skip
//     holds the claims that belong to one attachment each, the webhook's
//     multinet-net-<n>): a device of another resource, without the
//     attribute (a GPU) or in none of the node's ResourceSlices is not a
//     network device of this node and is passed over;
//   - the claim the scheduler made for the pod's extended-resource requests
//     served by DRA (KEP-5004, status.extendedResourceClaimStatus): the
//     devices of each request mapped to a resource in want must carry that
//     resource name, as the mapping names it (an error otherwise).
//
// Each claim read must be allocated and reserved for the pod. A pod with
// neither kind of claim costs no API call. Errors say which claim failed.
func (c *Client) PodDevices(ctx context.Context, pod *corev1.Pod, want, skip map[string]bool) (map[string][]*Device, error) {
	out := map[string][]*Device{}
	if len(want) == 0 {
		return out, nil
	}
	slices := map[string]*resourceapi.ResourceSliceList{}
	for _, pc := range pod.Spec.ResourceClaims {
		if skip[pc.Name] {
			continue
		}
		if err := c.ownClaimDevices(ctx, pod, pc.Name, want, slices, out); err != nil {
			return nil, err
		}
	}
	if s := pod.Status.ExtendedResourceClaimStatus; s != nil {
		if err := c.extendedClaimDevices(ctx, pod, s, want, slices, out); err != nil {
			return nil, err
		}
	}
	for _, ds := range out {
		sort.SliceStable(ds, func(i, j int) bool { return ds[i].DeviceID < ds[j].DeviceID })
	}
	return out, nil
}

// ownClaimDevices adds to out the network devices of pod claim podClaim.
func (c *Client) ownClaimDevices(ctx context.Context, pod *corev1.Pod, podClaim string, want map[string]bool,
	slices map[string]*resourceapi.ResourceSliceList, out map[string][]*Device) error {
	name, err := c.claimName(ctx, pod, podClaim)
	if err != nil {
		return err
	}
	claim, err := c.podClaim(ctx, pod, name)
	if err != nil {
		return fmt.Errorf("pod claim %s: %w", podClaim, err)
	}
	for _, r := range claim.Status.Allocation.Devices.Results {
		dev, err := c.cachedSliceDevice(ctx, slices, r)
		if err != nil {
			return fmt.Errorf("pod claim %s: ResourceClaim %s/%s: %w", podClaim, claim.Namespace, claim.Name, err)
		}
		rn := ""
		if dev != nil {
			rn = stringAttr(dev, AttrResourceName)
		}
		if rn == "" || !want[rn] {
			continue // not a network device of a resource asked for (a GPU)
		}
		addDevice(out, claim, r, rn, stringAttr(dev, AttrDeviceID))
	}
	return nil
}

// extendedClaimDevices adds to out the devices of the KEP-5004 claim's
// requests mapped to a resource of want.
func (c *Client) extendedClaimDevices(ctx context.Context, pod *corev1.Pod, s *corev1.PodExtendedResourceClaimStatus, want map[string]bool,
	slices map[string]*resourceapi.ResourceSliceList, out map[string][]*Device) error {
	var mapped []corev1.ContainerExtendedResourceRequest
	for _, m := range s.RequestMappings {
		if want[m.ResourceName] {
			mapped = append(mapped, m)
		}
	}
	if len(mapped) == 0 {
		return nil
	}
	claim, err := c.podClaim(ctx, pod, s.ResourceClaimName)
	if err != nil {
		return fmt.Errorf("extended-resource claim (status.extendedResourceClaimStatus): %w", err)
	}
	for _, m := range mapped {
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Request != m.RequestName {
				continue
			}
			dev, err := c.cachedSliceDevice(ctx, slices, r)
			if err == nil && dev == nil {
				err = fmt.Errorf("device %s/%s/%s is in no ResourceSlice of node %s", r.Driver, r.Pool, r.Device, c.node)
			}
			if err != nil {
				return fmt.Errorf("extended-resource claim %s/%s, request %s (%s): %w", claim.Namespace, claim.Name, m.RequestName, m.ResourceName, err)
			}
			if rn := stringAttr(dev, AttrResourceName); rn != m.ResourceName {
				return fmt.Errorf("extended-resource claim %s/%s: device %s/%s/%s of request %s has %s %q, but the request serves extended resource %s",
					claim.Namespace, claim.Name, r.Driver, r.Pool, r.Device, m.RequestName, AttrResourceName, rn, m.ResourceName)
			}
			addDevice(out, claim, r, m.ResourceName, stringAttr(dev, AttrDeviceID))
		}
	}
	return nil
}

// addDevice appends allocation result r of claim to out[rn], once.
func addDevice(out map[string][]*Device, claim *resourceapi.ResourceClaim, r resourceapi.DeviceRequestAllocationResult, rn, id string) {
	for _, d := range out[rn] {
		if d.ClaimUID == claim.UID && d.Driver == r.Driver && d.Pool == r.Pool && d.Name == r.Device {
			return
		}
	}
	out[rn] = append(out[rn], &Device{Namespace: claim.Namespace, Claim: claim.Name, ClaimUID: claim.UID,
		Driver: r.Driver, Pool: r.Pool, Name: r.Device, ResourceName: rn, DeviceID: id})
}

// podClaim reads ResourceClaim name of the pod's namespace and checks that
// it is allocated and reserved for the pod.
func (c *Client) podClaim(ctx context.Context, pod *corev1.Pod, name string) (*resourceapi.ResourceClaim, error) {
	claim, err := c.resource.ResourceClaims(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("ResourceClaim %s/%s: %w", pod.Namespace, name, err)
	}
	if claim.Status.Allocation == nil {
		return nil, fmt.Errorf("ResourceClaim %s/%s is not allocated", pod.Namespace, name)
	}
	for _, r := range claim.Status.ReservedFor {
		if r.UID == pod.UID {
			return claim, nil
		}
	}
	return nil, fmt.Errorf("ResourceClaim %s/%s is not reserved for pod %s/%s", pod.Namespace, name, pod.Namespace, pod.Name)
}

// cachedSliceDevice is device r in the node's ResourceSlices of r's driver
// (the pool's newest generation), listed once per driver into slices; nil
// when no slice has it.
func (c *Client) cachedSliceDevice(ctx context.Context, slices map[string]*resourceapi.ResourceSliceList, r resourceapi.DeviceRequestAllocationResult) (*resourceapi.Device, error) {
	l, ok := slices[r.Driver]
	if !ok {
		var err error
		if l, err = c.listSlices(ctx, r.Driver); err != nil {
			return nil, err
		}
		slices[r.Driver] = l
	}
	return findDevice(l, r.Pool, r.Device), nil
}
