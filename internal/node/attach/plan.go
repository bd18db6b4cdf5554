package attach

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	corev1 "k8s.io/api/core/v1"

	"github.com/multinet/multinet/internal/devices/draclaims"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/pkg/spec/devinfo"
	"github.com/multinet/multinet/pkg/spec/netconf"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
	"github.com/multinet/multinet/pkg/spec/selection"
)

// plan is what one ADD runs: the default network first, then the networks
// of multinetd's defaultNetworks, then one attachment per network selection
// element in annotation order.
type plan struct {
	pod *corev1.Pod // nil when the request names no pod
	// attachments[0] is the default network (spec §6.2).
	attachments []netconf.Attachment
	// resources[i] is the device resource name of attachments[i], "" if none.
	resources []string
	// claims[i] is the pod resource claim holding the DRA device of
	// attachments[i] (podnetworks.Attachment.Claim), "" when its device, if
	// any, comes from a device plugin; claimDevices[i] is that device once
	// found.
	claims       []string
	claimDevices []*draclaims.Device
	deviceIDs    []string
	// deviceInfoFiles[i] is the CNI device-info file path handed to
	// attachments[i], "" when none.
	deviceInfoFiles []string
	// gateway is the index of the attachment that carries the default route
	// (its element has "default-route", §4.1.2.1.9), 0 (the default network)
	// when no element has it.
	gateway int
	// gatewayRequested is true when an element had "default-route".
	gatewayRequested bool
	// auxiliary is the index of the auxiliary chain's attachment (the
	// last), 0 when there is none.
	auxiliary int
	// undeclared are the attachments whose keys are handed over without a
	// declaring plugin (podnetworks.Verdict.Undeclared), for the ADD's
	// Warning Events.
	undeclared []podnetworks.UndeclaredUse
	// firstElement is the index of the attachment of the pod's first
	// network selection element; elements is how many there are
	// (attachments[firstElement+i] is element i's).
	firstElement, elements int
}

// element returns the canonical JSON of the network selection element
// attachments[i] was planned for (state.Attachment.Element), nil when it is
// not one of the pod's elements. Errors: the element cannot be encoded.
func (p *plan) element(i int) ([]byte, error) {
	if i < p.firstElement || i >= p.firstElement+p.elements {
		return nil, nil
	}
	a := &p.attachments[i]
	b, err := a.Element.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("network %s: encode its network selection element: %w", a.NetworkKey, err)
	}
	return b, nil
}

// isAuxiliary reports whether attachments[i] is the auxiliary chain.
func (p *plan) isAuxiliary(i int) bool { return p.auxiliary > 0 && i == p.auxiliary }

// planError is a failure to decide the attachments: a CNI error code and the
// message the runtime and the pod's Event show.
func planError(code uint, format string, args ...any) error {
	return types.NewError(code, fmt.Sprintf(format, args...), "")
}

// planner decides the attachments of a pod sandbox: the one place the
// engine plans, for ADD, DEL without a record, the salvage of a corrupt
// record and hot-plug. The pod's network selection is decided by
// podnetworks.Check (check), the rules the admission webhook and kubectl
// multinet lint apply, which plans each element's attachment
// (netconf.PlanAttachment); the planner adds the node's part: the default
// network (spec §6) with the runtime's runtimeConfig (§7.5), devices
// (PodResources, DRA claims, device-info files) and the auxiliary chain.
// opts are the engine's.
type planner struct{ opts *Options }

// check runs podnetworks.Check on pod's selection with the engine's
// policy, NADs and CNI configs, ifName the default network's interface.
// Errors: a lookup failed (the verdict's problems are not errors).
func (pl *planner) check(ctx context.Context, pod *corev1.Pod, ifName string) (*podnetworks.Verdict, error) {
	return podnetworks.Check(ctx, podnetworks.Pod{Namespace: pod.Namespace, Annotations: pod.Annotations}, podnetworks.Options{
		Policy: pl.opts.Policy, NADs: pl.opts.NADs, Configs: pl.opts.Resolver,
		ResourceNameKeys: pl.opts.ResourceNameKeys, DefaultIfName: ifName,
	})
}

// ifNamesBeside names the interfaces of elements added to rec's sandbox
// (hot-plug): the requested one, or the first netN that no attachment of
// the sandbox has and no added element requests (netconf.IfNames); errs[i]
// is element i's naming problem.
func (pl *planner) ifNamesBeside(rec *state.Record, elems []selection.Element, defIfName string) (names []string, errs []error) {
	taken := map[string]string{}
	for _, a := range rec.Attachments {
		if !a.Default && !a.Auxiliary {
			taken[a.IfName] = fmt.Sprintf("network %q of the pod", a.Network)
		}
	}
	return netconf.IfNames(elems, netconf.PlanOptions{DefaultIfName: defIfName, Reserved: taken})
}

// plan decides the attachments of an ADD (pod, selection, NADs, CNI
// configs, devices; docs/multinetd.md "What it does on ADD"): the pod's network selection is decided by podnetworks.Check, the
// rules the admission webhook and kubectl multinet lint apply, against the
// NADs of Options.NADs and the node's CNI configs (Options.Resolver), with
// the runtime's ifName as the default network's interface; devices and the
// default network's config are the node's. withDevices looks the allocated
// devices up (ADD); DEL's fallback plan passes false. On an error after
// the pod was found, the partial plan is returned with it, so that the
// caller can post the Event on the pod.
func (pl *planner) plan(ctx context.Context, ifName, containerID string, args podArgs, runtimeConfig map[string]any, withDevices bool) (*plan, error) {
	p := &plan{}
	if args.HasPod() && pl.opts.Pods != nil {
		pod, err := pl.opts.Pods.Get(ctx, args.Namespace, args.Name, args.UID)
		if err != nil {
			return nil, planError(types.ErrTryAgainLater, "pod %s/%s: %v", args.Namespace, args.Name, err)
		}
		p.pod = pod
	}

	v := &podnetworks.Verdict{}
	if p.pod != nil {
		var err error
		v, err = pl.check(ctx, p.pod, ifName)
		if err != nil {
			return p, planError(types.ErrTryAgainLater, "pod %s/%s: %v", p.pod.Namespace, p.pod.Name, err)
		}
		if err := v.Err(); err != nil {
			return p, planError(types.ErrInvalidNetworkConfig, "%v", err)
		}
		p.undeclared = v.Undeclared()
	}

	def, err := pl.defaultAttachment(v.DefaultNetwork, ifName, runtimeConfig)
	if err != nil {
		return p, err
	}
	p.attachments = append(p.attachments, def)
	p.resources = []string{""}
	p.claims = []string{""}
	if v.DefaultNetwork != nil && v.DefaultNetwork.Claim != "" {
		p.resources[0], p.claims[0] = v.DefaultNetwork.Resource, v.DefaultNetwork.Claim
	}
	for _, a := range v.DefaultNetworks {
		p.attachments = append(p.attachments, a.Attachment)
		p.resources = append(p.resources, "")
		p.claims = append(p.claims, "")
	}
	first := len(p.attachments) // the pod's element i is attachments[first+i]
	p.firstElement, p.elements = first, len(v.Attachments)
	for i, a := range v.Attachments {
		p.attachments = append(p.attachments, a.Attachment)
		p.resources = append(p.resources, a.Resource)
		p.claims = append(p.claims, a.Claim)
		if a.Element.GatewayRequest != nil {
			p.gateway, p.gatewayRequested = first+i, true
		}
	}
	p.deviceIDs = make([]string, len(p.attachments))
	p.deviceInfoFiles = make([]string, len(p.attachments))
	p.claimDevices = make([]*draclaims.Device, len(p.attachments))
	if withDevices {
		if err := pl.assignDevices(ctx, containerID, p); err != nil {
			return p, err
		}
	}
	return p, pl.planAuxiliary(p, ifName)
}

// planAuxiliary appends the auxiliary chain, when there is one, as the
// plan's last attachment: on the runtime's interface ifName, in the default
// network's cniVersion, with no capability arguments. ADD chains it onto the
// default network's result (Attachment.ChainOnto); it is recorded like any
// attachment, so DEL tears it down first, but it is no network of the pod
// and has no network-status entry.
func (pl *planner) planAuxiliary(p *plan, ifName string) error {
	if pl.opts.AuxiliaryChain == nil {
		return nil
	}
	list, err := pl.opts.AuxiliaryChain(p.attachments[0].ConfList.CNIVersion)
	if err != nil {
		return planError(types.ErrInvalidNetworkConfig, "%v", err)
	}
	if list == nil {
		return nil
	}
	p.auxiliary = len(p.attachments)
	p.attachments = append(p.attachments, netconf.Attachment{Index: -1, NetworkKey: list.Name, NetworkName: list.Name, IfName: ifName, ConfList: list})
	p.resources = append(p.resources, "")
	p.claims = append(p.claims, "")
	p.claimDevices = append(p.claimDevices, nil)
	p.deviceIDs = append(p.deviceIDs, "")
	p.deviceInfoFiles = append(p.deviceInfoFiles, "")
	return nil
}

// defaultAttachment plans the cluster-wide default network (spec §6): the
// configured one, or override, the pod's default-network annotation as
// podnetworks.Check planned it (isolation, §7.4, applied). Only it gets the
// keys of the runtime's runtimeConfig its plugins declare (§7.5).
func (pl *planner) defaultAttachment(override *podnetworks.Attachment, ifName string, runtimeConfig map[string]any) (netconf.Attachment, error) {
	if override != nil {
		a := override.Attachment
		for k, v := range netconf.DefaultCapabilityArgs(runtimeConfig, a.ConfList) {
			if _, set := a.CapabilityArgs[k]; !set {
				if a.CapabilityArgs == nil {
					a.CapabilityArgs = map[string]any{}
				}
				a.CapabilityArgs[k] = v
			}
		}
		return a, nil
	}
	list, name, err := pl.opts.DefaultNetwork()
	if err != nil {
		return netconf.Attachment{}, planError(types.ErrTryAgainLater, "default network: %v", err)
	}
	a, err := netconf.DefaultAttachment(name, list, ifName, runtimeConfig)
	if err != nil {
		return netconf.Attachment{}, planError(types.ErrInvalidNetworkConfig, "default network %s: %v", name, err)
	}
	return a, nil
}

// assignDevices gives each DRA attachment the device of its pod claim
// (assignClaimDevices), the attachments of a resource the pod's own claims
// hold devices of those devices (assignPodClaimDevices), and the i-th
// remaining attachment of each resource the i-th device kubelet allocated
// to the pod for it (PodResources), as
// runtimeConfig deviceID, and prepares the CNI device-info file
// (device-info spec §4.2).
func (pl *planner) assignDevices(ctx context.Context, containerID string, p *plan) error {
	if err := pl.assignClaimDevices(ctx, p); err != nil {
		return err
	}
	if err := pl.assignPodClaimDevices(ctx, p); err != nil {
		return err
	}
	need := false
	for i, r := range p.resources {
		need = need || (r != "" && p.deviceIDs[i] == "")
	}
	if !need {
		return pl.prepareDeviceInfoFiles(containerID, p)
	}
	if pl.opts.Devices == nil {
		return planError(types.ErrInvalidNetworkConfig, "pod %s/%s selects device networks but multinetd has no PodResources client", p.pod.Namespace, p.pod.Name)
	}
	devices, err := pl.podDevices(ctx, p.pod.Namespace, p.pod.Name)
	if err != nil {
		return planError(types.ErrTryAgainLater, "pod %s/%s: allocated devices (PodResources): %v", p.pod.Namespace, p.pod.Name, err)
	}
	used := map[string]int{}
	for i, r := range p.resources {
		if r == "" || p.deviceIDs[i] != "" {
			continue
		}
		ids := devices[r]
		n := used[r]
		if n >= len(ids) {
			return planError(types.ErrInvalidNetworkConfig, "network %s needs device %d of resource %s but kubelet allocated %d to pod %s/%s (is the resource in the pod's requests? the admission webhook adds it)",
				p.attachments[i].NetworkKey, n+1, r, len(ids), p.pod.Namespace, p.pod.Name)
		}
		used[r] = n + 1
		p.deviceIDs[i] = ids[n]
		if err := p.attachments[i].SetDeviceID(ids[n]); err != nil {
			return planError(types.ErrInvalidNetworkConfig, "%v", err)
		}
	}
	return pl.prepareDeviceInfoFiles(containerID, p)
}

// assignClaimDevices finds the device of each DRA attachment in its pod
// claim (Options.Claims): the allocated device whose
// k8s.cni.cncf.io/resourceName is the NAD's resource, handed to the
// delegate by its k8s.cni.cncf.io/deviceID exactly as a device plugin's.
// Fail closed: no device, no ADD (the runtime retries; the pod does not
// start without it).
func (pl *planner) assignClaimDevices(ctx context.Context, p *plan) error {
	for i, c := range p.claims {
		if c == "" {
			continue
		}
		a := &p.attachments[i]
		if pl.opts.Claims == nil {
			return planError(types.ErrInvalidNetworkConfig, "network %s gets its device through DRA (pod claim %s), but multinetd reads no ResourceClaims (no API client)", a.NetworkKey, c)
		}
		dev, err := pl.opts.Claims.Device(ctx, p.pod, c, p.resources[i])
		if err != nil {
			return planError(types.ErrTryAgainLater, "network %s: its DRA device: %v", a.NetworkKey, err)
		}
		p.claimDevices[i] = dev
		p.deviceIDs[i] = dev.DeviceID
		if err := a.SetDeviceID(dev.DeviceID); err != nil {
			return planError(types.ErrInvalidNetworkConfig, "%v", err)
		}
	}
	return nil
}

// podDevices asks PodResources for the pod's devices, retrying for up to
// DeviceWait while kubelet has not reported the pod yet.
func (pl *planner) podDevices(ctx context.Context, namespace, name string) (map[string][]string, error) {
	ctx, cancel := context.WithTimeout(ctx, pl.opts.DeviceWait)
	defer cancel()
	for {
		devices, err := pl.opts.Devices.DeviceIDs(ctx, namespace, name)
		if err == nil {
			return devices, nil
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// prepareDeviceInfoFiles makes the CNI device-info file of every attachment
// with a device (its NAD has a resourceName and kubelet allocated one):
// the device plugin's file for that device is copied there whether or not
// the plugins declare CNIDeviceInfoFile (device-info spec §4.2, "If the
// Network Attachment Definition contains a resourceName key, the NPWG
// Implementation must query Kubelet to find the DeviceID of the allocated
// resource and copy the content of the corresponding Device Plugin Device
// Information File into the generated CNI Plugin Device Information File."),
// so that network-status carries it (§6). The capability decides only
// whether the path is handed to the plugins (runtimeConfig
// CNIDeviceInfoFile); a plugin declaring it gets a path even without a
// device, to write its own. p.deviceInfoFiles[i] is the file, "" when
// there is none.
func (pl *planner) prepareDeviceInfoFiles(containerID string, p *plan) error {
	for i := range p.attachments {
		a := &p.attachments[i]
		declares := a.Declares(netconf.CapDeviceInfoFile)
		if !declares && p.deviceIDs[i] == "" {
			continue
		}
		unique, err := devinfo.UniqueName(containerID, a.NetworkKey, a.IfName)
		if err != nil {
			return planError(types.ErrInvalidNetworkConfig, "network %s: device-info file name: %v", a.NetworkKey, err)
		}
		var path string
		if p.deviceIDs[i] != "" {
			path, err = pl.opts.DevInfo.CopyToCNI(p.resources[i], p.deviceIDs[i], unique)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return planError(types.ErrInvalidNetworkConfig, "network %s: device-info of %s device %s: %v", a.NetworkKey, p.resources[i], p.deviceIDs[i], err)
			}
		}
		if !declares {
			p.deviceInfoFiles[i] = path
			continue
		}
		if path == "" {
			if path, err = pl.opts.DevInfo.CNIPath(unique); err != nil {
				return planError(types.ErrInvalidNetworkConfig, "network %s: %v", a.NetworkKey, err)
			}
			// The plugin writes the file itself: its directory must exist.
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				return planError(types.ErrInternal, "network %s: device-info directory: %v", a.NetworkKey, err)
			}
		}
		a.SetDeviceInfoFile(path)
		p.deviceInfoFiles[i] = path
	}
	return nil
}
