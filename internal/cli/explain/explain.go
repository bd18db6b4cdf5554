// Package explain works out, from API objects alone, what multinetd would
// run for a pod (multi-net spec v1.3): the network selection elements (§4),
// each NetworkAttachmentDefinition and the CNI config list it resolves to
// (§3.4), the interface names (§4.1.2.1.5), the runtimeConfig and args.cni
// each delegate gets (§4.1.2.1.x, §4.1.2.1.6), the device resource of each
// network, and why an attachment would fail. It is the logic of
// "kubectl multinet explain".
//
// Its verdict is podnetworks.Check's, the one multinetd, the webhook and
// kubectl multinet lint use, so it cannot disagree with them. What lives only on the node is not visible to
// it and is said so in notes: the cluster-wide default network's config, the
// CNI config of a NetworkAttachmentDefinition without spec.config (§3.2.4),
// the devices kubelet allocates and the runtime's own runtimeConfig.
//
// The package talks to the API server only through the NADGetter it is
// given.
package explain

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/spec/netconf"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
	"github.com/multinet/multinet/pkg/spec/selection"
	"github.com/multinet/multinet/pkg/spec/status"
)

// DefaultIfName is the default network's CNI_IFNAME that container runtimes
// use and Options.DefaultIfName defaults to.
const DefaultIfName = "eth0"

// Where an attachment's CNI config comes from (Attachment.ConfigSource).
const (
	// SourceSpecConfig: the NAD's spec.config (§3.4.1 rule 1).
	SourceSpecConfig = "spec.config"
	// SourceNode: the NAD has no spec.config, so multinetd looks the config
	// up by name in the node's CNI conf dir (§3.4.1 rules 2 and 3).
	SourceNode = "node"
)

// NADGetter returns the NetworkAttachmentDefinition namespace/name. A missing
// one must give an error for which apierrors.IsNotFound is true; any other
// error (forbidden, timeout) makes Explain fail. Give every call a deadline.
type NADGetter func(ctx context.Context, namespace, name string) (*nadv1.NetworkAttachmentDefinition, error)

// Options are what multinetd is configured with and the API does not show.
type Options struct {
	// DefaultIfName is the runtime's CNI_IFNAME of the default network;
	// empty means DefaultIfName.
	DefaultIfName string
	// Isolation is multinetd's namespace isolation policy (spec §7.4); nil
	// means unknown: isolation is not checked and a note says so.
	Isolation *selection.IsolationPolicy
	// DefaultNetworks and SystemNamespaces are multinetd's (see
	// podnetworks.Policy); nil means none.
	DefaultNetworks  []selection.Element
	SystemNamespaces []string
	// UndeclaredCapabilities is multinetd's undeclaredCapabilities (see
	// podnetworks.Policy); "" means the default, "refuse".
	UndeclaredCapabilities podnetworks.UndeclaredCapabilities
	// MaxSelectionElements is multinetd's maxSelectionElements (0: the
	// default).
	MaxSelectionElements int
	// ResourceNameKeys are the NAD annotations naming a device resource, in
	// order of preference; nil means the daemon's default (the spec's key,
	// then the legacy one).
	ResourceNameKeys []string
	// Policies reads the MultiNetworkPolicies and what their rules depend
	// on; nil: the pod's network policy is not explained.
	Policies PolicySource
}

// Explanation is what multinetd would run for one pod. JSON: the field tags;
// lists are never null.
type Explanation struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Node is spec.nodeName, empty before the pod is scheduled.
	Node string `json:"node,omitempty"`
	// NetworksAnnotation is the k8s.v1.cni.cncf.io/networks annotation as
	// written; empty when absent.
	NetworksAnnotation string `json:"networksAnnotation,omitempty"`
	// Selection are the parsed network selection elements, namespace filled
	// in (selection.Parse); empty when the annotation is absent or invalid.
	Selection []selection.Element `json:"selection"`
	// DefaultNetwork is the pod's default-network override
	// (v1.multus-cni.io/default-network) planned like an attachment with
	// Index -1; nil when the pod has none (the cluster default is used).
	DefaultNetwork *Attachment `json:"defaultNetwork,omitempty"`
	// Attachments are the additional networks, in annotation order.
	Attachments []Attachment `json:"attachments"`
	// Errors are problems of the pod as a whole (an invalid annotation,
	// hostNetwork, interface names); each makes multinetd fail the ADD.
	Errors []string `json:"errors"`
	// Notes say what could not be checked from the API, and other facts.
	Notes []string `json:"notes"`
	// NetworkStatus is the pod's current k8s.v1.cni.cncf.io/network-status
	// (spec §5); nil when absent or invalid.
	NetworkStatus []status.NetworkStatus `json:"networkStatus,omitempty"`
	// NetworkStatusError says why the network-status annotation does not
	// decode.
	NetworkStatusError string `json:"networkStatusError,omitempty"`
	// NetworkPolicy is, per interface, the MultiNetworkPolicies that select
	// it and the effective rules; nil when not asked for (Options.Policies).
	NetworkPolicy *NetworkPolicy `json:"networkPolicy,omitempty"`
	// OK is true when nothing visible from the API would make the ADD fail:
	// Errors is empty and no attachment has an Error.
	OK bool `json:"ok"`
}

// Attachment is one planned delegate invocation, or why it would fail.
type Attachment struct {
	// Index of the element in the networks annotation; -1 for the default
	// network override.
	Index int `json:"index"`
	// Network is the NAD "namespace/name".
	Network string `json:"network"`
	// Interface is CNI_IFNAME: requested, or generated as the daemon does;
	// empty when the names cannot be decided.
	Interface string `json:"interface,omitempty"`
	// Element is the selection element as parsed.
	Element selection.Element `json:"element"`
	// NADFound is false when the NAD does not exist (or was not looked up
	// because isolation forbids it).
	NADFound bool `json:"nadFound"`
	// ResourceName is the NAD's device resource (annotation
	// k8s.v1.cni.cncf.io/resourceName); empty when none.
	ResourceName string `json:"resourceName,omitempty"`
	// ConfigSource is SourceSpecConfig or SourceNode; empty when the NAD is
	// missing.
	ConfigSource string `json:"configSource,omitempty"`
	// Config is the CNI config list multinetd runs (spec.config resolved by
	// §3.4.1/§3.4.2, args.cni merged); nil when it is not known.
	Config json.RawMessage `json:"config,omitempty"`
	// RuntimeConfig are the capability args (libcni CapabilityArgs): each key
	// goes into the runtimeConfig of the plugins that declare it. Device IDs
	// and device-info file paths are decided on the node and not included.
	RuntimeConfig map[string]any `json:"runtimeConfig,omitempty"`
	// Plugins of Config, with the runtimeConfig keys each one receives.
	Plugins []Plugin `json:"plugins,omitempty"`
	// Status is the pod's current network-status entry for this network and
	// interface; nil when there is none.
	Status *status.NetworkStatus `json:"status,omitempty"`
	// Error says why multinetd would fail this attachment; empty when it
	// would not (as far as the API shows).
	Error string `json:"error,omitempty"`
	// Notes about this attachment.
	Notes []string `json:"notes,omitempty"`
}

// Plugin is one plugin of an attachment's config list.
type Plugin struct {
	Type string `json:"type"`
	// RuntimeConfig are the capability keys this plugin declares and gets.
	RuntimeConfig []string `json:"runtimeConfig,omitempty"`
}

// explainer holds the state of one Explain call.
type explainer struct {
	ctx  context.Context
	pod  *corev1.Pod
	get  NADGetter
	opts Options
	x    *Explanation
}

// Get makes an explainer the NADs source of podnetworks.Check.
func (e *explainer) Get(ctx context.Context, namespace, name string) (*nadv1.NetworkAttachmentDefinition, error) {
	return e.get(ctx, namespace, name)
}

// Explain works out what multinetd would run for pod. It calls get once per
// distinct NetworkAttachmentDefinition the pod selects (none is looked up
// when isolation forbids it).
//
// Errors: only a failed NAD lookup other than NotFound, naming the pod and
// the NAD; everything that would make multinetd fail is reported in the
// Explanation instead.
func Explain(ctx context.Context, pod *corev1.Pod, get NADGetter, opts Options) (*Explanation, error) {
	if opts.DefaultIfName == "" {
		opts.DefaultIfName = DefaultIfName
	}
	e := &explainer{
		ctx: ctx, pod: pod, get: get, opts: opts,
		x: &Explanation{
			Namespace: pod.Namespace, Name: pod.Name, Node: pod.Spec.NodeName,
			NetworksAnnotation: pod.Annotations[selection.NetworksAnnotation],
			Selection:          []selection.Element{}, Attachments: []Attachment{},
			Errors: []string{}, Notes: []string{},
		},
	}
	if err := e.run(); err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	e.matchStatus()
	x := e.x
	if opts.Policies != nil {
		x.NetworkPolicy = explainPolicy(ctx, pod, opts.Policies)
	}
	x.OK = len(x.Errors) == 0
	for _, a := range x.allAttachments() {
		x.OK = x.OK && a.Error == ""
	}
	if !x.OK {
		x.Notes = append(x.Notes, "multinetd fails the pod's whole ADD at the first failing attachment and removes the ones already made (spec §7.2); the pod stays ContainerCreating with an event that says why")
	}
	return x, nil
}

// allAttachments returns pointers to the default network override (if any)
// and the additional attachments.
func (x *Explanation) allAttachments() []*Attachment {
	var out []*Attachment
	if x.DefaultNetwork != nil {
		out = append(out, x.DefaultNetwork)
	}
	for i := range x.Attachments {
		out = append(out, &x.Attachments[i])
	}
	return out
}

func (e *explainer) run() error {
	x, pod := e.x, e.pod
	e.readStatus()
	policy := podnetworks.Policy{DefaultNetworks: e.opts.DefaultNetworks, SystemNamespaces: e.opts.SystemNamespaces, UndeclaredCapabilities: e.opts.UndeclaredCapabilities,
		MaxSelectionElements: e.opts.MaxSelectionElements}
	if e.opts.Isolation == nil {
		x.Notes = append(x.Notes, "namespace isolation not checked: pass --namespace-isolation (and --global-namespaces) as multinetd is configured (spec §7.4)")
	} else {
		policy.Isolation = *e.opts.Isolation
	}
	v, err := podnetworks.Check(e.ctx, podnetworks.Pod{Namespace: pod.Namespace, Annotations: pod.Annotations, HostNetwork: pod.Spec.HostNetwork},
		podnetworks.Options{Policy: policy, NADs: e, ResourceNameKeys: e.opts.ResourceNameKeys, DefaultIfName: e.opts.DefaultIfName})
	if err != nil {
		return err
	}
	x.Selection = append(x.Selection, v.Elements...)
	if v.DefaultNetwork != nil {
		a := attachment(v.DefaultNetwork)
		a.Notes = append(a.Notes, "the default network also gets the keys of the container runtime's runtimeConfig that its plugins declare (spec §7.5); they are not visible from the API")
		x.DefaultNetwork = &a
	} else if _, ok := pod.Annotations[selection.DefaultNetworkAnnotation]; !ok {
		x.Notes = append(x.Notes, fmt.Sprintf("%s: the cluster-wide default network, from multinetd's configuration on the node (not visible from the API; spec §6)", e.opts.DefaultIfName))
	}
	for i := range v.DefaultNetworks {
		d := &v.DefaultNetworks[i]
		x.Notes = append(x.Notes, fmt.Sprintf("%s: network %s of multinetd's defaultNetworks (--default-networks), before the pod's own networks", d.IfName, d.NetworkKey))
	}
	if _, ok := pod.Annotations[selection.NetworksAnnotation]; !ok {
		x.Notes = append(x.Notes, "no "+selection.NetworksAnnotation+" annotation: only the default network is attached")
	}
	for i := range v.Attachments {
		x.Attachments = append(x.Attachments, attachment(&v.Attachments[i]))
	}
	for _, p := range append(v.Problems, v.DeviceProblems(pod)...) {
		switch a := x.attachmentOf(p); {
		case a == nil:
			x.Errors = append(x.Errors, p.Error())
		case a.Error == "":
			a.Error = p.Error()
		default:
			a.Error += "; " + p.Error()
		}
	}
	for i := range x.Attachments {
		a := &x.Attachments[i]
		if u, ok := podnetworks.UndeclaredOf(selection.NetworksAnnotation, &v.Attachments[i]); ok && a.Error == "" {
			a.Notes = append(a.Notes, u.Message())
		}
		if a.ResourceName != "" && a.Error == "" {
			a.Notes = append(a.Notes, fmt.Sprintf("deviceID: device %d of resource %s that kubelet allocates to the pod, found through PodResources on the node and passed as runtimeConfig deviceID (or top-level deviceID of the first plugin)", v.Attachments[i].Device, a.ResourceName))
		}
	}
	return nil
}

// attachmentOf returns the attachment problem p is about, nil when it is
// about the pod as a whole.
func (x *Explanation) attachmentOf(p podnetworks.Problem) *Attachment {
	switch {
	case p.Annotation == selection.NetworksAnnotation && p.Index >= 0 && p.Index < len(x.Attachments):
		return &x.Attachments[p.Index]
	case p.Annotation == selection.DefaultNetworkAnnotation && x.DefaultNetwork != nil:
		return x.DefaultNetwork
	}
	return nil
}

// attachment is the explanation of a planned attachment: its config, the
// runtimeConfig each plugin gets, and what the CLI cannot see.
func attachment(p *podnetworks.Attachment) Attachment {
	a := Attachment{Index: p.Index, Network: p.NetworkKey, Interface: p.IfName, Element: p.Element,
		NADFound: p.NAD != nil, ResourceName: p.Resource}
	if p.Note != "" {
		a.Notes = append(a.Notes, p.Note)
	}
	switch p.Config {
	case podnetworks.ConfigSpec:
		a.ConfigSource = SourceSpecConfig
	case podnetworks.ConfigNode, podnetworks.ConfigUnknown:
		if p.NAD != nil {
			a.ConfigSource = SourceNode
		}
	}
	if !p.Planned {
		return a
	}
	a.RuntimeConfig = p.CapabilityArgs
	if a.ConfigSource != SourceSpecConfig {
		return a
	}
	a.Config = json.RawMessage(p.ConfList.Bytes)
	for _, pl := range p.ConfList.Plugins {
		plugin := Plugin{Type: pl.Network.Type}
		for k := range p.CapabilityArgs {
			if pl.Network.Capabilities[k] {
				plugin.RuntimeConfig = append(plugin.RuntimeConfig, k)
			}
		}
		slices.Sort(plugin.RuntimeConfig)
		a.Plugins = append(a.Plugins, plugin)
	}
	if netconf.Declares(p.ConfList, netconf.CapDeviceInfoFile) {
		a.Notes = append(a.Notes, "a plugin declares "+netconf.CapDeviceInfoFile+": multinetd passes it the path of the attachment's CNI device-info file on the node")
	}
	return a
}

func (e *explainer) readStatus() {
	v, ok := e.pod.Annotations[status.Annotation]
	if !ok {
		return
	}
	list, err := status.Decode(v)
	if err != nil {
		e.x.NetworkStatusError = err.Error()
		return
	}
	e.x.NetworkStatus = list
}

// matchStatus attaches each network-status entry to the attachment of the
// same network and interface.
func (e *explainer) matchStatus() {
	x := e.x
	for _, a := range x.allAttachments() {
		for i := range x.NetworkStatus {
			s := &x.NetworkStatus[i]
			if s.Name == a.Network && s.Interface == a.Interface && a.Interface != "" {
				a.Status = s
				break
			}
		}
	}
}
