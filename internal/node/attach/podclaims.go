package attach

import (
	"context"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/multinet/multinet/internal/devices/draclaims"
)

// claimReadTimeout bounds the reads of a pod's claims and the node's
// slices for one ADD.
const claimReadTimeout = 10 * time.Second

// assignPodClaimDevices gives the attachments whose NAD names a resource but
// no ResourceClaimTemplate the devices of that resource the pod's own
// resource claims hold (Multus's DRA flow) or its extended-resource claim
// (KEP-5004), found by Options.Claims.PodDevices: in plan order, the n-th
// attachment of a resource gets the n-th device by device ID
// (docs/decisions/dra.md). A resource none of these claims holds a device
// of is left to PodResources; one they hold fewer devices of than it has
// attachments fails the ADD. A pod without such claims reads nothing.
func (pl *planner) assignPodClaimDevices(ctx context.Context, p *plan) error {
	want, skip := map[string]bool{}, map[string]bool{}
	for i, r := range p.resources {
		if r != "" && p.claims[i] == "" {
			want[r] = true
		}
		skip[p.claims[i]] = p.claims[i] != ""
	}
	if len(want) == 0 || pl.opts.Claims == nil || !hasOwnClaims(p.pod, skip) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, claimReadTimeout)
	defer cancel()
	devs, err := pl.opts.Claims.PodDevices(ctx, p.pod, want, skip)
	if err != nil {
		return planError(types.ErrTryAgainLater, "pod %s/%s: the devices of its resource claims: %v", p.pod.Namespace, p.pod.Name, err)
	}
	used := map[string]int{}
	for i, r := range p.resources {
		if r == "" || p.claims[i] != "" || len(devs[r]) == 0 {
			continue
		}
		a, n := &p.attachments[i], used[r]
		if n >= len(devs[r]) {
			return planError(types.ErrInvalidNetworkConfig, "network %s needs device %d of resource %s, but the pod's resource claims hold %d of it",
				a.NetworkKey, n+1, r, len(devs[r]))
		}
		used[r] = n + 1
		dev := devs[r][n]
		if dev.DeviceID == "" {
			return planError(types.ErrInvalidNetworkConfig, "network %s: device %s has no %s attribute", a.NetworkKey, dev, draclaims.AttrDeviceID)
		}
		p.claimDevices[i], p.deviceIDs[i] = dev, dev.DeviceID
		if err := a.SetDeviceID(dev.DeviceID); err != nil {
			return planError(types.ErrInvalidNetworkConfig, "%v", err)
		}
	}
	return nil
}

// hasOwnClaims reports whether pod has a resource claim not in skip or an
// extended-resource claim (status.extendedResourceClaimStatus).
func hasOwnClaims(pod *corev1.Pod, skip map[string]bool) bool {
	if pod == nil {
		return false
	}
	for _, c := range pod.Spec.ResourceClaims {
		if !skip[c.Name] {
			return true
		}
	}
	return pod.Status.ExtendedResourceClaimStatus != nil
}
