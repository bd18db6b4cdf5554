// Package explain works out, from API objects alone, what multinetd would
// run for a pod (multi-net spec v1.3): the network selection elements (§4),
// each NetworkAttachmentDefinition and the CNI config list it resolves to
// (§3.4), the interface names (§4.1.2.1.5), the runtimeConfig and args.cni
// each delegate gets (§4.1.2.1.x, §4.1.2.1.6), the device resource of each
// network, and why an attachment would fail. It is the logic of
// "kubectl multinet explain".
//
// It uses the same code as the daemon (pkg/selection, pkg/netconf), so its
// verdicts are the daemon's. What lives only on the node is not visible to
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
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/containernetworking/cni/libcni"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/netconf"
	"github.com/multinet/multinet/pkg/selection"
	"github.com/multinet/multinet/pkg/status"
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
	// ResourceNameKeys are the NAD annotations naming a device resource, in
	// order of preference; nil means the daemon's default (the spec's key,
	// then the legacy one).
	ResourceNameKeys []string
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

// standInConfig stands for a CNI config the CLI cannot see (a NAD without
// spec.config, or a missing NAD): one plugin declaring every capability a
// selection element can ask for, so that planning checks only what does not
// depend on the config.
const standInConfig = `{"cniVersion":"1.0.0","type":"multinet-explain-stand-in","capabilities":` +
	`{"ips":true,"mac":true,"portMappings":true,"bandwidth":true,"infinibandGUID":true,"ipamClaimReference":true}}`

// explainer holds the state of one Explain call.
type explainer struct {
	ctx  context.Context
	pod  *corev1.Pod
	get  NADGetter
	opts Options
	x    *Explanation
	// nads caches the lookups by "namespace/name"; nil value: not found.
	nads map[string]*nadv1.NetworkAttachmentDefinition
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
	if opts.ResourceNameKeys == nil {
		opts.ResourceNameKeys = []string{nadv1.ResourceNameAnnotation, nadv1.LegacyResourceNameAnnotation}
	}
	e := &explainer{
		ctx: ctx, pod: pod, get: get, opts: opts,
		x: &Explanation{
			Namespace: pod.Namespace, Name: pod.Name, Node: pod.Spec.NodeName,
			NetworksAnnotation: pod.Annotations[selection.NetworksAnnotation],
			Selection:          []selection.Element{}, Attachments: []Attachment{},
			Errors: []string{}, Notes: []string{},
		},
		nads: map[string]*nadv1.NetworkAttachmentDefinition{},
	}
	if err := e.run(); err != nil {
		return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	e.matchStatus()
	x := e.x
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
	if pod.Spec.HostNetwork {
		x.Errors = append(x.Errors, "spec.hostNetwork is true: the pod uses the node's network namespace, so no CNI plugin runs for it and its network selection is never honoured")
		return nil
	}
	if e.opts.Isolation == nil {
		x.Notes = append(x.Notes, "namespace isolation not checked: pass --namespace-isolation (and --global-namespaces) as multinetd is configured (spec §7.4)")
	}
	if err := e.defaultNetwork(); err != nil {
		return err
	}
	v, ok := pod.Annotations[selection.NetworksAnnotation]
	if !ok {
		x.Notes = append(x.Notes, "no "+selection.NetworksAnnotation+" annotation: only the default network is attached")
		return nil
	}
	elems, err := selection.Parse(v, pod.Namespace)
	if err != nil {
		for _, msg := range problems(err) {
			x.Errors = append(x.Errors, "annotation "+selection.NetworksAnnotation+": "+msg)
		}
		return nil
	}
	x.Selection = append(x.Selection, elems...)
	lists := make([]*libcni.NetworkConfigList, len(elems))
	for i, el := range elems {
		a := Attachment{Index: i, Network: el.Key(), Element: el}
		var err error
		if lists[i], err = e.resolve(&a); err != nil {
			return err
		}
		x.Attachments = append(x.Attachments, a)
	}
	e.name()
	for i := range x.Attachments {
		e.plan(&x.Attachments[i], lists[i])
	}
	e.checkDevices()
	return nil
}

// problems splits a selection error into its problems.
func problems(err error) []string {
	var ae *selection.AnnotationError
	if !errors.As(err, &ae) {
		return []string{err.Error()}
	}
	out := make([]string, len(ae.Problems))
	for i, p := range ae.Problems {
		out[i] = p.Error()
	}
	return out
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

// defaultNetwork plans the pod's default-network override as the daemon
// does: on the runtime's interface, isolation applying (§7.4).
func (e *explainer) defaultNetwork() error {
	x, pod := e.x, e.pod
	v, ok := pod.Annotations[selection.DefaultNetworkAnnotation]
	if !ok {
		x.Notes = append(x.Notes, fmt.Sprintf("%s: the cluster-wide default network, from multinetd's configuration on the node (not visible from the API; spec §6)", e.opts.DefaultIfName))
		return nil
	}
	el, err := selection.ParseDefaultNetwork(v, pod.Namespace)
	if err != nil {
		for _, msg := range problems(err) {
			x.Errors = append(x.Errors, "annotation "+selection.DefaultNetworkAnnotation+": "+msg)
		}
		return nil
	}
	el.InterfaceRequest = e.opts.DefaultIfName
	a := Attachment{Index: -1, Network: el.Key(), Interface: e.opts.DefaultIfName, Element: *el}
	list, err := e.resolve(&a)
	if err != nil {
		return err
	}
	e.plan(&a, list)
	a.Notes = append(a.Notes, "the default network also gets the keys of the container runtime's runtimeConfig that its plugins declare (spec §7.5); they are not visible from the API")
	x.DefaultNetwork = &a
	return nil
}

// resolve checks isolation, looks the NAD up and resolves its config list.
// It returns the list to plan with: the real one, a stand-in when the
// config is on the node, or nil when the attachment fails.
func (e *explainer) resolve(a *Attachment) (*libcni.NetworkConfigList, error) {
	el := a.Element
	if e.opts.Isolation != nil {
		if err := e.opts.Isolation.Check(e.pod.Namespace, el); err != nil {
			a.Error = err.Error()
			return nil, nil
		}
	}
	nad, err := e.nad(el.Namespace, el.Name)
	if err != nil {
		return nil, err
	}
	if nad == nil {
		a.Error = fmt.Sprintf("NetworkAttachmentDefinition %s not found: multinetd fails the attachment (spec §3.4.1)", a.Network)
		return nil, nil
	}
	a.NADFound = true
	for _, k := range e.opts.ResourceNameKeys {
		if v := nad.Annotations[k]; v != "" {
			a.ResourceName = v
			break
		}
	}
	if strings.TrimSpace(nad.Spec.Config) == "" {
		a.ConfigSource = SourceNode
		a.Notes = append(a.Notes, fmt.Sprintf("NetworkAttachmentDefinition %s has no spec.config: multinetd uses the CNI config named %q in the node's CNI conf dir (spec §3.4.1), which the CLI cannot see; it fails the attachment when there is none, or when no plugin declares a capability runtimeConfig needs", a.Network, el.Name))
		return netconf.Resolve(el.Namespace, el.Name, standInConfig, nil)
	}
	a.ConfigSource = SourceSpecConfig
	list, err := netconf.Resolve(el.Namespace, el.Name, nad.Spec.Config, nil)
	if err != nil {
		a.Error = err.Error()
		return nil, nil
	}
	return list, nil
}

// nad returns the NAD namespace/name, nil when it does not exist.
func (e *explainer) nad(namespace, name string) (*nadv1.NetworkAttachmentDefinition, error) {
	key := namespace + "/" + name
	if nad, ok := e.nads[key]; ok {
		return nad, nil
	}
	nad, err := e.get(e.ctx, namespace, name)
	switch {
	case apierrors.IsNotFound(err):
		nad = nil
	case err != nil:
		return nil, fmt.Errorf("NetworkAttachmentDefinition %s: %w", key, err)
	}
	e.nads[key] = nad
	return nad, nil
}

// name decides the interface names as the daemon does (spec §4.1.2.1.5),
// with a stand-in config for networks whose config is not known, so that
// every attachment shows its name even when another one would fail.
func (e *explainer) name() {
	x := e.x
	standIn, err := netconf.Resolve(e.pod.Namespace, "stand-in", standInConfig, nil)
	if err != nil { // a constant config: cannot happen
		x.Errors = append(x.Errors, "internal: stand-in config: "+err.Error())
		return
	}
	nets := make([]netconf.Network, len(x.Attachments))
	for i, a := range x.Attachments {
		nets[i] = netconf.Network{Element: a.Element, ConfList: standIn}
	}
	named, err := netconf.Plan(nets, netconf.PlanOptions{DefaultIfName: e.opts.DefaultIfName})
	if err != nil {
		x.Errors = append(x.Errors, "annotation "+selection.NetworksAnnotation+": "+err.Error())
		if named, err = netconf.Plan(nets, netconf.PlanOptions{}); err != nil {
			return
		}
	}
	for i := range named {
		x.Attachments[i].Interface = named[i].IfName
	}
}

// plan plans one attachment alone, on the interface name it gets among all
// of them, and fills in its config, runtimeConfig and plugins.
func (e *explainer) plan(a *Attachment, list *libcni.NetworkConfigList) {
	if list == nil || a.Interface == "" {
		return
	}
	el := a.Element
	el.InterfaceRequest = a.Interface
	planned, err := netconf.Plan([]netconf.Network{{Element: el, ConfList: list}}, netconf.PlanOptions{})
	if err != nil {
		// Plan wraps the reason in "network ... (selection element 0, ...)";
		// the attachment already says which network it is.
		if inner := errors.Unwrap(err); inner != nil {
			err = inner
		}
		a.Error = err.Error()
		return
	}
	p := planned[0]
	a.RuntimeConfig = p.CapabilityArgs
	if a.ConfigSource != SourceSpecConfig {
		return
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
}

// checkDevices checks that the pod requests a device of each NAD resource
// for every attachment that needs one: multinetd gives the Nth attachment of
// a resource the Nth device kubelet allocated to the pod, and fails the
// attachment when there is none.
func (e *explainer) checkDevices() {
	used := map[string]int64{}
	for i := range e.x.Attachments {
		a := &e.x.Attachments[i]
		r := a.ResourceName
		if r == "" || a.Error != "" {
			continue
		}
		used[r]++
		have := requested(e.pod, corev1.ResourceName(r))
		if used[r] > have {
			a.Error = fmt.Sprintf("needs device %d of resource %s but the pod's containers request %d (the admission webhook adds the requests of the pod's networks; was the pod admitted without it?)", used[r], r, have)
			continue
		}
		a.Notes = append(a.Notes, fmt.Sprintf("deviceID: device %d of resource %s that kubelet allocates to the pod, found through PodResources on the node and passed as runtimeConfig deviceID (or top-level deviceID of the first plugin)", used[r], r))
	}
}

// requested returns how many units of resource the pod's containers request
// (limits, or requests where no limit is set; extended resources have both
// equal).
func requested(pod *corev1.Pod, name corev1.ResourceName) int64 {
	var n int64
	for _, c := range pod.Spec.Containers {
		q, ok := c.Resources.Limits[name]
		if !ok {
			q, ok = c.Resources.Requests[name]
		}
		if ok {
			n += q.Value()
		}
	}
	return n
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
