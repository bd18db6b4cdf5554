package attach

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/multinet/multinet/pkg/devinfo"
	"github.com/multinet/multinet/pkg/netconf"
	"github.com/multinet/multinet/pkg/selection"
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
	deviceIDs []string
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
}

// isAuxiliary reports whether attachments[i] is the auxiliary chain.
func (p *plan) isAuxiliary(i int) bool { return p.auxiliary > 0 && i == p.auxiliary }

// planError is a failure to decide the attachments: a CNI error code and the
// message the runtime and the pod's Event show.
func planError(code uint, format string, args ...any) error {
	return types.NewError(code, fmt.Sprintf(format, args...), "")
}

// buildPlan decides the attachments of an ADD (DESIGN.md, ADD path steps
// 3-7). withDevices looks the allocated devices up (ADD); DEL's fallback
// plan passes false. On an error after the pod was found, the partial plan
// is returned with it, so that the caller can post the Event on the pod.
func (e *Engine) buildPlan(ctx context.Context, ifName, containerID string, args podArgs, runtimeConfig map[string]any, withDevices bool) (*plan, error) {
	p := &plan{}
	if args.hasPod() && e.opts.Pods != nil {
		pod, err := e.opts.Pods.Get(ctx, args.Namespace, args.Name, args.UID)
		if err != nil {
			return nil, planError(types.ErrTryAgainLater, "pod %s/%s: %v", args.Namespace, args.Name, err)
		}
		p.pod = pod
	}

	def, err := e.defaultAttachment(ctx, p.pod, ifName, runtimeConfig)
	if err != nil {
		return p, err
	}
	p.attachments = append(p.attachments, def)

	var elements []selection.Element
	if p.pod != nil {
		if v, ok := p.pod.Annotations[selection.NetworksAnnotation]; ok {
			elements, err = selection.Parse(v, p.pod.Namespace)
			if err != nil {
				return p, planError(types.ErrInvalidNetworkConfig, "pod %s/%s: annotation %s: %v", p.pod.Namespace, p.pod.Name, selection.NetworksAnnotation, err)
			}
			if err := e.opts.Isolation.CheckAll(p.pod.Namespace, elements); err != nil {
				return p, planError(types.ErrInvalidNetworkConfig, "pod %s/%s: %v", p.pod.Namespace, p.pod.Name, err)
			}
		}
	}
	operator := e.defaultNetworksFor(p.pod)
	if len(operator) == 0 && len(elements) == 0 {
		p.resources = []string{""}
		p.deviceIDs = []string{""}
		p.deviceInfoFiles = []string{""}
		return p, e.planAuxiliary(p, ifName)
	}

	resources := []string{""}
	reserved, err := e.planDefaultNetworks(ctx, p, operator, ifName)
	if err != nil {
		return p, err
	}
	for range operator {
		resources = append(resources, "")
	}
	first := len(p.attachments) // the pod's element i is attachments[first+i]
	nets := make([]netconf.Network, 0, len(elements))
	for i, el := range elements {
		list, resource, err := e.resolveNAD(ctx, el.Namespace, el.Name)
		if err != nil {
			return p, planError(nadErrorCode(err), "network %d (%s): %v", i, el.Key(), err)
		}
		nets = append(nets, netconf.Network{Element: el, ConfList: list})
		resources = append(resources, resource)
		if el.GatewayRequest != nil {
			p.gateway, p.gatewayRequested = first+i, true
		}
	}
	if len(nets) > 0 {
		more, err := netconf.Plan(nets, netconf.PlanOptions{DefaultIfName: ifName, Reserved: reserved})
		if err != nil {
			return p, planError(types.ErrInvalidNetworkConfig, "pod %s/%s: %v", p.pod.Namespace, p.pod.Name, err)
		}
		p.attachments = append(p.attachments, more...)
	}
	p.resources = resources
	p.deviceIDs = make([]string, len(p.attachments))
	p.deviceInfoFiles = make([]string, len(p.attachments))
	if withDevices {
		if err := e.assignDevices(ctx, containerID, p); err != nil {
			return p, err
		}
	}
	return p, e.planAuxiliary(p, ifName)
}

// defaultNetworksFor returns the networks of Options.DefaultNetworks that
// pod gets: all of them, unless the ADD names no pod or the pod's namespace
// is one of Options.SystemNamespaces (Multus's systemNamespaces: the pod
// still gets its own selection).
func (e *Engine) defaultNetworksFor(pod *corev1.Pod) []selection.Element {
	if pod == nil || slices.Contains(e.opts.SystemNamespaces, pod.Namespace) {
		return nil
	}
	return e.opts.DefaultNetworks
}

// planDefaultNetworks appends the attachments of multinetd's defaultNetworks
// (operator, from defaultNetworksFor) to p, after the default network and
// before the pod's own networks: one per NAD, in the configured order, on
// generated interfaces net1, net2, … . They are the operator's choice, not
// the pod's, so namespace isolation (§7.4) does not apply to them. A NAD
// with a device resource name is refused: the webhook injects device
// resources only for the networks a pod selects, so kubelet would have
// allocated the pod none. It returns the interface names used, for the
// pod's networks to skip (netconf.PlanOptions.Reserved).
func (e *Engine) planDefaultNetworks(ctx context.Context, p *plan, operator []selection.Element, ifName string) (map[string]string, error) {
	if len(operator) == 0 {
		return nil, nil
	}
	nets := make([]netconf.Network, 0, len(operator))
	for i, el := range operator {
		list, resource, err := e.resolveNAD(ctx, el.Namespace, el.Name)
		if err != nil {
			return nil, planError(nadErrorCode(err), "multinetd defaultNetworks[%d] (%s): %v", i, el.Key(), err)
		}
		if resource != "" {
			return nil, planError(types.ErrInvalidNetworkConfig, "multinetd defaultNetworks[%d] (%s): the NAD names device resource %q; a network of defaultNetworks cannot be a device network (devices are requested at admission for the networks a pod selects only)", i, el.Key(), resource)
		}
		nets = append(nets, netconf.Network{Element: selection.Element{Namespace: el.Namespace, Name: el.Name}, ConfList: list})
	}
	atts, err := netconf.Plan(nets, netconf.PlanOptions{DefaultIfName: ifName})
	if err != nil {
		return nil, planError(types.ErrInvalidNetworkConfig, "pod %s/%s: multinetd defaultNetworks: %v", p.pod.Namespace, p.pod.Name, err)
	}
	reserved := make(map[string]string, len(atts))
	for i := range atts {
		atts[i].Index = -1 // not an element of the pod's annotation
		reserved[atts[i].IfName] = fmt.Sprintf("network %q of multinetd's defaultNetworks", atts[i].NetworkKey)
	}
	p.attachments = append(p.attachments, atts...)
	return reserved, nil
}

// planAuxiliary appends the auxiliary chain, when there is one, as the
// plan's last attachment: on the runtime's interface ifName, in the default
// network's cniVersion, with no capability arguments. ADD chains it onto the
// default network's result (Attachment.ChainOnto); it is recorded like any
// attachment, so DEL tears it down first, but it is no network of the pod
// and has no network-status entry.
func (e *Engine) planAuxiliary(p *plan, ifName string) error {
	if e.opts.AuxiliaryChain == nil {
		return nil
	}
	list, err := e.opts.AuxiliaryChain(p.attachments[0].ConfList.CNIVersion)
	if err != nil {
		return planError(types.ErrInvalidNetworkConfig, "%v", err)
	}
	if list == nil {
		return nil
	}
	p.auxiliary = len(p.attachments)
	p.attachments = append(p.attachments, netconf.Attachment{Index: -1, NetworkKey: list.Name, NetworkName: list.Name, IfName: ifName, ConfList: list})
	p.resources = append(p.resources, "")
	p.deviceIDs = append(p.deviceIDs, "")
	p.deviceInfoFiles = append(p.deviceInfoFiles, "")
	return nil
}

// defaultAttachment plans the cluster-wide default network (spec §6): the
// configured one, or the NAD named by the pod's default-network annotation,
// which obeys the same namespace isolation (§7.4). Only it gets the
// runtime's runtimeConfig (§7.5).
func (e *Engine) defaultAttachment(ctx context.Context, pod *corev1.Pod, ifName string, runtimeConfig map[string]any) (netconf.Attachment, error) {
	if pod != nil {
		if v, ok := pod.Annotations[selection.DefaultNetworkAnnotation]; ok {
			el, err := selection.ParseDefaultNetwork(v, pod.Namespace)
			if err != nil {
				return netconf.Attachment{}, planError(types.ErrInvalidNetworkConfig, "pod %s/%s: annotation %s: %v", pod.Namespace, pod.Name, selection.DefaultNetworkAnnotation, err)
			}
			if err := e.opts.Isolation.Check(pod.Namespace, *el); err != nil {
				return netconf.Attachment{}, planError(types.ErrInvalidNetworkConfig, "pod %s/%s: default network: %v", pod.Namespace, pod.Name, err)
			}
			list, _, err := e.resolveNAD(ctx, el.Namespace, el.Name)
			if err != nil {
				return netconf.Attachment{}, planError(nadErrorCode(err), "default network %s: %v", el.Key(), err)
			}
			// Plan the element on the runtime's interface so its ips/mac/...
			// become capability args like any other attachment's.
			el.InterfaceRequest = ifName
			planned, err := netconf.Plan([]netconf.Network{{Element: *el, ConfList: list}}, netconf.PlanOptions{})
			if err != nil {
				return netconf.Attachment{}, planError(types.ErrInvalidNetworkConfig, "default network %s: %v", el.Key(), err)
			}
			a := planned[0]
			a.Index = -1
			for k, v := range netconf.DefaultCapabilityArgs(runtimeConfig, list) {
				if _, set := a.CapabilityArgs[k]; !set {
					if a.CapabilityArgs == nil {
						a.CapabilityArgs = map[string]any{}
					}
					a.CapabilityArgs[k] = v
				}
			}
			return a, nil
		}
	}
	list, name, err := e.opts.DefaultNetwork()
	if err != nil {
		return netconf.Attachment{}, planError(types.ErrTryAgainLater, "default network: %v", err)
	}
	a, err := netconf.DefaultAttachment(name, list, ifName, runtimeConfig)
	if err != nil {
		return netconf.Attachment{}, planError(types.ErrInvalidNetworkConfig, "default network %s: %v", name, err)
	}
	return a, nil
}

// resolveNAD returns the config list of NAD namespace/name (spec §3.4.1) and
// its device resource name ("" when none). A lookup failure other than
// NotFound (Options.NADs) is a lookupError: see nadErrorCode.
func (e *Engine) resolveNAD(ctx context.Context, namespace, name string) (*libcniList, string, error) {
	if e.opts.NADs == nil {
		return nil, "", fmt.Errorf("NetworkAttachmentDefinition %s/%s: no NAD source configured", namespace, name)
	}
	nad, err := e.opts.NADs.Get(ctx, namespace, name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "", fmt.Errorf("NetworkAttachmentDefinition %s/%s not found", namespace, name)
		}
		return nil, "", lookupError{err}
	}
	list, err := e.opts.Resolver.Resolve(namespace, name, nad.Spec.Config)
	if err != nil {
		return nil, "", err
	}
	resource := ""
	for _, k := range e.opts.ResourceNameKeys {
		if v := nad.Annotations[k]; v != "" {
			resource = v
			break
		}
	}
	return list, resource, nil
}

// lookupError is a NAD lookup that failed for a reason a retry may cure:
// the informer's cache not synced in time, the API server failing. Its
// message names the NAD (nadlookup.Lookup).
type lookupError struct{ err error }

func (e lookupError) Error() string { return e.err.Error() }
func (e lookupError) Unwrap() error { return e.err }

// nadErrorCode is the CNI error code of a resolveNAD failure: 11 (try again
// later) for a lookupError, 7 (invalid network config) for a NAD that does
// not exist or has an unusable config.
func nadErrorCode(err error) uint {
	var le lookupError
	if errors.As(err, &le) {
		return types.ErrTryAgainLater
	}
	return types.ErrInvalidNetworkConfig
}

// assignDevices gives the i-th attachment of each resource the i-th device
// kubelet allocated to the pod for it (PodResources), as runtimeConfig
// deviceID, and prepares the CNI device-info file (device-info spec §4.2).
func (e *Engine) assignDevices(ctx context.Context, containerID string, p *plan) error {
	need := false
	for _, r := range p.resources {
		need = need || r != ""
	}
	if !need {
		return e.prepareDeviceInfoFiles(containerID, p)
	}
	if e.opts.Devices == nil {
		return planError(types.ErrInvalidNetworkConfig, "pod %s/%s selects device networks but multinetd has no PodResources client", p.pod.Namespace, p.pod.Name)
	}
	devices, err := e.podDevices(ctx, p.pod.Namespace, p.pod.Name)
	if err != nil {
		return planError(types.ErrTryAgainLater, "pod %s/%s: allocated devices (PodResources): %v", p.pod.Namespace, p.pod.Name, err)
	}
	used := map[string]int{}
	for i, r := range p.resources {
		if r == "" {
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
	return e.prepareDeviceInfoFiles(containerID, p)
}

// podDevices asks PodResources for the pod's devices, retrying for up to
// DeviceWait while kubelet has not reported the pod yet.
func (e *Engine) podDevices(ctx context.Context, namespace, name string) (map[string][]string, error) {
	ctx, cancel := context.WithTimeout(ctx, e.opts.DeviceWait)
	defer cancel()
	for {
		devices, err := e.opts.Devices.DeviceIDs(ctx, namespace, name)
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
func (e *Engine) prepareDeviceInfoFiles(containerID string, p *plan) error {
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
			path, err = e.opts.DevInfo.CopyToCNI(p.resources[i], p.deviceIDs[i], unique)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return planError(types.ErrInvalidNetworkConfig, "network %s: device-info of %s device %s: %v", a.NetworkKey, p.resources[i], p.deviceIDs[i], err)
			}
		}
		if !declares {
			p.deviceInfoFiles[i] = path
			continue
		}
		if path == "" {
			if path, err = e.opts.DevInfo.CNIPath(unique); err != nil {
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
