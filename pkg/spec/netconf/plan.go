package netconf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/utils"

	"github.com/multinet/multinet/pkg/spec/selection"
)

// Capability names: the runtimeConfig keys a plugin declares in its
// "capabilities" (CNI CONVENTIONS "Dynamic plugin specific fields"; device-info
// spec §4 for CNIDeviceInfoFile).
const (
	// CapIPs: []string of "ip[/prefix]" (spec §4.1.2.1.3.2).
	CapIPs = "ips"
	// CapMAC: string "aa:bb:cc:dd:ee:ff" (spec §4.1.2.1.4.2).
	CapMAC = "mac"
	// CapPortMappings: []PortMapping (spec §4.1.2.1.7.2).
	CapPortMappings = "portMappings"
	// CapBandwidth: BandwidthEntry (spec §4.1.2.1.8.2).
	CapBandwidth = "bandwidth"
	// CapInfinibandGUID: string of 8 bytes in hex, colon-separated (spec §4.1.2.1.10.2).
	CapInfinibandGUID = "infinibandGUID"
	// CapDeviceID: string, the device the device plugin allocated (e.g. a PCI address).
	CapDeviceID = "deviceID"
	// CapDeviceInfoFile: string, path of the CNI device-info file (device-info spec §4).
	CapDeviceInfoFile = "CNIDeviceInfoFile"
	// CapIPAMClaimReference: string, the IPAMClaim name in the pod's namespace
	// (spec §4.1.2.1.11, §8). multinet's convention; see docs/decisions/netconf.md.
	CapIPAMClaimReference = "ipamClaimReference"
)

// DefaultBurst is the burst in bits given to a bandwidth direction whose rate
// is set and burst is not (spec §4.1.2.1.8.2 allows a default; the reference
// bandwidth plugin requires both). It is the value kubelet used for its
// bandwidth annotations: effectively no burst limit.
const DefaultBurst = math.MaxInt32

// ErrNoCapability is wrapped when a selection element asks for a
// runtimeConfig key that no plugin of the network's config list declares
// (spec §4.1.2.1.3.2, .4.2, .7.2, .8.2, .10.2: "the entire attachment request
// must fail").
var ErrNoCapability = errors.New("no plugin of the config list declares the capability")

// ErrIfNameTaken is wrapped when an attachment's interface name is already
// used in the pod (spec §4.1.2.1.5).
var ErrIfNameTaken = errors.New("interface name already used in the pod")

// PortMapping is the CONVENTIONS form of one runtimeConfig "portMappings"
// entry: protocol lower-case, "tcp" when the element left it out.
type PortMapping struct {
	HostPort      int32  `json:"hostPort"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol"`
	HostIP        string `json:"hostIP,omitempty"`
}

// BandwidthEntry is the CONVENTIONS form of runtimeConfig "bandwidth": rates
// in bits per second, bursts in bits; zero means no limit in that direction.
type BandwidthEntry struct {
	IngressRate  int64 `json:"ingressRate,omitempty"`
	IngressBurst int64 `json:"ingressBurst,omitempty"`
	EgressRate   int64 `json:"egressRate,omitempty"`
	EgressBurst  int64 `json:"egressBurst,omitempty"`
}

// Network is one network selection element with the config list Resolve
// returned for its NetworkAttachmentDefinition.
type Network struct {
	Element  selection.Element
	ConfList *libcni.NetworkConfigList
	// HandOverUndeclared: a key whose capability no plugin of ConfList
	// declares is handed over as Multus hands it (HandOver) and listed in
	// Attachment.Undeclared, instead of failing the plan with a *KeyError
	// (the spec's rule). multinet's undeclaredCapabilities: multus
	// (docs/decisions/undeclared-capabilities.md).
	HandOverUndeclared bool
}

// PlanOptions are the pod-level inputs of Plan.
type PlanOptions struct {
	// DefaultIfName is the default network's CNI_IFNAME (the runtime's, e.g.
	// "eth0"); no other attachment may use it.
	DefaultIfName string
	// Reserved are further interface names already planned in the pod (the
	// networks of multinetd's defaultNetworks), each mapped to who uses it,
	// for errors ("network \"kube-system/sidecar\" of defaultNetworks"):
	// generated names skip them and an explicit request for one fails.
	Reserved map[string]string
}

// Attachment is one planned delegate invocation: the network attachment
// identified by (container ID, NetworkName, IfName) (spec §4.2.1).
type Attachment struct {
	// Index is the position of the element in the selection annotation.
	Index int
	// NetworkKey is the NetworkAttachmentDefinition "namespace/name".
	NetworkKey string
	// NetworkName is the CNI network name (ConfList.Name).
	NetworkName string
	// IfName is CNI_IFNAME: the element's "interface" or a generated "netN".
	IfName string
	// ConfList is the config list to run, with the element's cni-args merged
	// into every plugin's args.cni. Read-only.
	ConfList *libcni.NetworkConfigList
	// CapabilityArgs go to libcni.RuntimeConf.CapabilityArgs; libcni puts
	// each key into the "runtimeConfig" of the plugins that declare it. Nil
	// when there are none.
	CapabilityArgs map[string]any
	// Element is the network selection element this attachment comes from.
	Element selection.Element
	// Undeclared are the element's keys whose capability no plugin
	// declares, handed over as Multus hands them
	// (Network.HandOverUndeclared); nil otherwise.
	Undeclared []UndeclaredKey
	// CNIArgs are the CNI_ARGS pairs of the handed-over keys (MAC=, IP=),
	// added to the runtime's for every plugin of the list; nil when none.
	CNIArgs [][2]string
}

// RuntimeConf returns the libcni invocation arguments of this attachment.
// args are the CNI_ARGS pairs (e.g. K8S_POD_NAMESPACE); the attachment's
// own CNIArgs follow them.
func (a *Attachment) RuntimeConf(containerID, netns string, args [][2]string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID:    containerID,
		NetNS:          netns,
		IfName:         a.IfName,
		Args:           slices.Concat(args, a.CNIArgs),
		CapabilityArgs: a.CapabilityArgs,
	}
}

// Declares reports whether some plugin of the attachment's list declares
// capability c.
func (a *Attachment) Declares(c string) bool { return Declares(a.ConfList, c) }

// SetDeviceID hands the delegates the device the device plugin allocated to
// this attachment. Plugins declaring the "deviceID" capability get it in
// runtimeConfig (CONVENTIONS); when none does, the first plugin's config gets
// a top-level "deviceID" (the field SR-IOV style plugins read), replacing any
// value there. An empty id is an error.
func (a *Attachment) SetDeviceID(id string) error {
	if id == "" {
		return fmt.Errorf("network %q: empty deviceID", a.NetworkKey)
	}
	if a.Declares(CapDeviceID) {
		a.setCapabilityArg(CapDeviceID, id)
		return nil
	}
	list, err := setPluginField(a.ConfList, 0, "deviceID", id)
	if err != nil {
		return fmt.Errorf("network %q: inject deviceID: %w", a.NetworkKey, err)
	}
	a.ConfList = list
	return nil
}

// SetDeviceInfoFile hands the path of the attachment's CNI device-info file
// to the plugins declaring "CNIDeviceInfoFile" (device-info spec §4). It
// reports whether any plugin declares it; when none does the path is not
// passed (and the caller need not write the file).
func (a *Attachment) SetDeviceInfoFile(path string) bool {
	if !a.Declares(CapDeviceInfoFile) {
		return false
	}
	a.setCapabilityArg(CapDeviceInfoFile, path)
	return true
}

func (a *Attachment) setCapabilityArg(k string, v any) {
	// Copy on write: the map may be shared with a copy of the Attachment.
	m := make(map[string]any, len(a.CapabilityArgs)+1)
	for ck, cv := range a.CapabilityArgs {
		m[ck] = cv
	}
	m[k] = v
	a.CapabilityArgs = m
}

// Declares reports whether some plugin of list declares capability c true.
func Declares(list *libcni.NetworkConfigList, c string) bool {
	if list == nil {
		return false
	}
	for _, p := range list.Plugins {
		if p.Network.Capabilities[c] {
			return true
		}
	}
	return false
}

// Plan turns a pod's selected networks, in annotation order, into the
// attachments to run, in the same order: the interface names of IfNames,
// then PlanAttachment for each network. It fails at the first problem; the
// error names the network and the element index. Callers that want every
// problem of a pod at once call IfNames and PlanAttachment themselves (as
// pkg/spec/podnetworks does).
func Plan(nets []Network, opts PlanOptions) ([]Attachment, error) {
	elems := make([]selection.Element, len(nets))
	for i := range nets {
		elems[i] = nets[i].Element
	}
	ifNames, errs := IfNames(elems, opts)
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("network %q (selection element %d): %w", networkKey(&nets[i].Element), i, err)
		}
	}
	out := make([]Attachment, len(nets))
	for i := range nets {
		a, err := PlanAttachment(nets[i], ifNames[i])
		if err != nil {
			return nil, fmt.Errorf("network %q (selection element %d, interface %q): %w", networkKey(&nets[i].Element), i, ifNames[i], err)
		}
		a.Index = i
		out[i] = a
	}
	return out, nil
}

// IfNameError is an element's "interface" that the pod cannot have (spec
// §4.1.2.1.5): not a name libcni accepts, or already used in the pod.
type IfNameError struct {
	// IfName is the requested name.
	IfName string
	// Owner says who already uses it ("the default network", a network of
	// PlanOptions.Reserved, another element); empty when the name itself is
	// invalid.
	Owner string
	// Reason says why an invalid name is invalid; empty when it is taken.
	Reason string
}

// Error implements error, e.g. `interface "eth0" is used by the default network`.
func (e *IfNameError) Error() string {
	if e.Owner != "" {
		return fmt.Sprintf("interface %q is used by %s", e.IfName, e.Owner)
	}
	return fmt.Sprintf("interface %q: %s", e.IfName, e.Reason)
}

// Unwrap returns ErrIfNameTaken for a taken name.
func (e *IfNameError) Unwrap() error {
	if e.Owner != "" {
		return ErrIfNameTaken
	}
	return nil
}

// IfNames decides CNI_IFNAME for each element (spec §4.1.2.1.5): its
// "interface", or else the first free "net1", "net2", … that no element
// requests, opts does not reserve and no earlier element got. names has one
// entry per element, the requested name even when it is refused; errs[i] is
// an *IfNameError when element i's requested name is invalid or taken (by
// opts.DefaultIfName, opts.Reserved or an earlier element), nil otherwise.
func IfNames(elems []selection.Element, opts PlanOptions) (names []string, errs []error) {
	taken := make(map[string]string, len(elems)+len(opts.Reserved)+1) // ifname → owner, for errors
	if opts.DefaultIfName != "" {
		taken[opts.DefaultIfName] = "the default network"
	}
	for name, owner := range opts.Reserved {
		taken[name] = owner
	}
	names = make([]string, len(elems))
	errs = make([]error, len(elems))
	for i := range elems {
		e := &elems[i]
		if e.InterfaceRequest == "" {
			continue
		}
		names[i] = e.InterfaceRequest
		if err := utils.ValidateInterfaceName(e.InterfaceRequest); err != nil {
			errs[i] = &IfNameError{IfName: e.InterfaceRequest, Reason: err.Msg}
			continue
		}
		if owner, ok := taken[e.InterfaceRequest]; ok {
			errs[i] = &IfNameError{IfName: e.InterfaceRequest, Owner: owner}
			continue
		}
		taken[e.InterfaceRequest] = fmt.Sprintf("network %q (selection element %d)", networkKey(e), i)
	}
	next := 1
	for i := range elems {
		if names[i] != "" {
			continue
		}
		for {
			name := "net" + strconv.Itoa(next)
			next++
			if _, ok := taken[name]; !ok {
				names[i] = name
				taken[name] = "generated"
				break
			}
		}
	}
	return names, errs
}

func networkKey(e *selection.Element) string {
	if e.Namespace == "" {
		return e.Name
	}
	return e.Namespace + "/" + e.Name
}

// KeyError is a network selection element key that the network's config
// list cannot honour: a runtimeConfig key no plugin declares (wrapping
// ErrNoCapability), or cni-args that cannot be merged into the plugins'
// args.
type KeyError struct {
	// Key is the selection element key ("ips", "mac", "portMappings",
	// "bandwidth", "infiniband-guid", "cni-args").
	Key string
	// Section is the spec section of the rule, e.g. "4.1.2.1.4.2".
	Section string
	// Reason says what is wrong, phrased to follow the key.
	Reason string
	// Err is ErrNoCapability or the merge failure.
	Err error
}

// Error implements error, e.g. `selection element key "mac" needs
// runtimeConfig "mac", but no plugin of CNI config "plain" declares
// "capabilities": {"mac": true} (spec §4.1.2.1.4.2)`.
func (e *KeyError) Error() string {
	return fmt.Sprintf("selection element key %q %s (spec §%s)", e.Key, e.Reason, e.Section)
}

func (e *KeyError) Unwrap() error { return e.Err }

// capabilityRequest is one element key that becomes a runtimeConfig key.
type capabilityRequest struct {
	elementKey string // the selection annotation key
	capability string
	section    string
	value      any
}

// capabilityRequests returns the runtimeConfig keys element e asks for, in
// CONVENTIONS form, in the order of spec §4.1.2.1.
func capabilityRequests(e *selection.Element) []capabilityRequest {
	var r []capabilityRequest
	if len(e.IPRequest) > 0 {
		r = append(r, capabilityRequest{"ips", CapIPs, "4.1.2.1.3.2", slices.Clone(e.IPRequest)})
	}
	if e.MacRequest != "" {
		r = append(r, capabilityRequest{"mac", CapMAC, "4.1.2.1.4.2", e.MacRequest})
	}
	if len(e.PortMappingsRequest) > 0 {
		r = append(r, capabilityRequest{"portMappings", CapPortMappings, "4.1.2.1.7.2", portMappings(e.PortMappingsRequest)})
	}
	if e.BandwidthRequest != nil {
		r = append(r, capabilityRequest{"bandwidth", CapBandwidth, "4.1.2.1.8.2", bandwidth(e.BandwidthRequest)})
	}
	if e.InfinibandGUIDRequest != "" {
		r = append(r, capabilityRequest{"infiniband-guid", CapInfinibandGUID, "4.1.2.1.10.2", e.InfinibandGUIDRequest})
	}
	return r
}

// UndeclaredKey is a network selection element key whose runtimeConfig
// capability no plugin of the network's config list declares.
type UndeclaredKey struct {
	// Key is the selection element key ("ips", "mac", "portMappings",
	// "bandwidth", "infiniband-guid").
	Key string
	// Capability is the runtimeConfig key it needs ("ips", "mac", …).
	Capability string
	// Section is the spec section that requires the capability, e.g.
	// "4.1.2.1.4.2".
	Section string
	// CNIArg is the CNI_ARGS key Multus also hands the value in ("MAC",
	// "IP"); "" for keys that only go to runtimeConfig.
	CNIArg string
}

// HandedOver says how the key reaches the plugins under
// Network.HandOverUndeclared, e.g. `CNI_ARGS MAC= and runtimeConfig "mac"`.
func (u UndeclaredKey) HandedOver() string {
	if u.CNIArg == "" {
		return fmt.Sprintf("runtimeConfig %q only, which libcni gives to no plugin", u.Capability)
	}
	return fmt.Sprintf("CNI_ARGS %s= and runtimeConfig %q", u.CNIArg, u.Capability)
}

// UndeclaredKeys returns the keys of element e that list cannot honour
// because no plugin declares their capability (spec §4.1.2.1.x.2), in the
// order of §4.1.2.1; nil when there are none or list is nil.
func UndeclaredKeys(e *selection.Element, list *libcni.NetworkConfigList) []UndeclaredKey {
	if list == nil {
		return nil
	}
	var out []UndeclaredKey
	for _, q := range capabilityRequests(e) {
		if !Declares(list, q.capability) {
			out = append(out, undeclared(q))
		}
	}
	return out
}

// undeclared describes request q as an UndeclaredKey.
func undeclared(q capabilityRequest) UndeclaredKey {
	u := UndeclaredKey{Key: q.elementKey, Capability: q.capability, Section: q.section}
	switch q.capability {
	case CapMAC:
		u.CNIArg = "MAC"
	case CapIPs:
		u.CNIArg = "IP"
	}
	return u
}

// handOver hands request q, which no plugin declares, over as Multus does
// (pkg/multus DelegateAdd, v4.3.0): "mac" as CNI_ARGS MAC=<mac>, "ips" as
// CNI_ARGS IP=<ip[/prefix]>,… (read by tuning, static IPAM, macvlan, …;
// IgnoreUnknown=1 is always set), and every key in CapabilityArgs too, which
// libcni gives only to plugins declaring it, so to none here.
func (a *Attachment) handOver(q capabilityRequest) {
	u := undeclared(q)
	a.Undeclared = append(a.Undeclared, u)
	a.CapabilityArgs[q.capability] = q.value
	switch u.CNIArg {
	case "MAC":
		a.CNIArgs = append(a.CNIArgs, [2]string{u.CNIArg, q.value.(string)})
	case "IP":
		a.CNIArgs = append(a.CNIArgs, [2]string{u.CNIArg, strings.Join(q.value.([]string), ",")})
	}
}

// PlanAttachment plans one network's attachment on CNI_IFNAME ifName:
//
//   - CapabilityArgs hold the element's ips, mac, portMappings, bandwidth and
//     infiniband-guid in CONVENTIONS form; each must be declared by some
//     plugin of the list, or PlanAttachment fails with a *KeyError wrapping
//     ErrNoCapability (spec §4.1.2.1.x.2), unless n.HandOverUndeclared: then
//     the key is handed over as Multus hands it and listed in Undeclared.
//     ipam-claim-reference is passed to plugins declaring it, never failing;
//   - the element's cni-args are merged over each plugin's args.cni, the
//     element winning (§4.1.2.1.6.2); a plugin whose args or args.cni is not
//     a JSON object fails with a *KeyError for "cni-args".
//
// Nothing of the runtime's own runtimeConfig reaches the attachment (§7.5;
// see DefaultAttachment). Index is left 0. A nil ConfList is an error.
func PlanAttachment(n Network, ifName string) (Attachment, error) {
	e := &n.Element
	if n.ConfList == nil {
		return Attachment{}, errors.New("no CNI config list")
	}
	a := Attachment{
		NetworkKey:  networkKey(e),
		NetworkName: n.ConfList.Name,
		IfName:      ifName,
		ConfList:    n.ConfList,
		Element:     *e,
	}

	r := capabilityRequests(e)
	if len(r) > 0 || e.IPAMClaimReference != "" {
		a.CapabilityArgs = make(map[string]any, len(r)+1)
	}
	for _, q := range r {
		switch {
		case Declares(n.ConfList, q.capability):
			a.CapabilityArgs[q.capability] = q.value
		case n.HandOverUndeclared:
			a.handOver(q)
		default:
			return Attachment{}, &KeyError{Key: q.elementKey, Section: q.section, Err: ErrNoCapability,
				Reason: fmt.Sprintf("needs runtimeConfig %q, but no plugin of CNI config %q declares \"capabilities\": {%q: true}", q.capability, n.ConfList.Name, q.capability)}
		}
	}
	if e.IPAMClaimReference != "" && Declares(n.ConfList, CapIPAMClaimReference) {
		a.CapabilityArgs[CapIPAMClaimReference] = e.IPAMClaimReference
	}
	if len(a.CapabilityArgs) == 0 {
		a.CapabilityArgs = nil
	}

	if len(e.CNIArgs) > 0 {
		list, err := injectCNIArgs(n.ConfList, e.CNIArgs)
		if err != nil {
			return Attachment{}, &KeyError{Key: "cni-args", Section: "4.1.2.1.6.2", Err: err,
				Reason: "cannot be merged into " + err.Error()}
		}
		a.ConfList = list
	}
	return a, nil
}

func portMappings(in []selection.PortMapping) []PortMapping {
	out := make([]PortMapping, len(in))
	for i, p := range in {
		proto := strings.ToLower(p.Protocol)
		if proto == "" {
			proto = "tcp"
		}
		out[i] = PortMapping{HostPort: p.HostPort, ContainerPort: p.ContainerPort, Protocol: proto, HostIP: p.HostIP}
	}
	return out
}

func bandwidth(b *selection.Bandwidth) BandwidthEntry {
	out := BandwidthEntry{IngressRate: b.IngressRate, IngressBurst: b.IngressBurst, EgressRate: b.EgressRate, EgressBurst: b.EgressBurst}
	if out.IngressRate > 0 && out.IngressBurst == 0 {
		out.IngressBurst = DefaultBurst
	}
	if out.EgressRate > 0 && out.EgressBurst == 0 {
		out.EgressBurst = DefaultBurst
	}
	return out
}

// injectCNIArgs returns a copy of list whose every plugin has cniArgs merged
// over its own "args": {"cni": {...}}, cniArgs winning key by key; other keys
// of "args" are kept (spec §4.1.2.1.6.2).
func injectCNIArgs(list *libcni.NetworkConfigList, cniArgs map[string]any) (*libcni.NetworkConfigList, error) {
	whole, err := json.Marshal(cniArgs)
	if err != nil {
		return nil, fmt.Errorf("cni-args: %w", err)
	}
	var over map[string]json.RawMessage // per key, only when some plugin has args
	plugins := make([]*libcni.PluginConfig, len(list.Plugins))
	for i, p := range list.Plugins {
		var probe struct {
			Args json.RawMessage `json:"args"`
		}
		if err := json.Unmarshal(p.Bytes, &probe); err != nil {
			return nil, fmt.Errorf("CNI config %q plugins[%d]: %w", list.Name, i, err)
		}
		if len(probe.Args) == 0 {
			// Common case: no "args" key (the probe matches keys
			// case-insensitively, so none in any case): append one.
			if b, ok := appendMember(p.Bytes, `"args":{"cni":`, whole, `}`); ok {
				plugins[i] = withBytes(p, b)
				continue
			}
		}
		if over == nil {
			over = make(map[string]json.RawMessage, len(cniArgs))
			for k, v := range cniArgs {
				if over[k], err = json.Marshal(v); err != nil {
					return nil, fmt.Errorf("cni-args[%q]: %w", k, err)
				}
			}
		}
		b, err := mergeCNIArgs(p.Bytes, over)
		if err != nil {
			return nil, fmt.Errorf("CNI config %q plugins[%d].%w", list.Name, i, err)
		}
		plugins[i] = withBytes(p, b)
	}
	return rebuildList(list, plugins, false)
}

// mergeCNIArgs sets each key of over in conf's args.cni (errors start with
// the field name, "args" or "args.cni").
func mergeCNIArgs(confBytes []byte, over map[string]json.RawMessage) ([]byte, error) {
	var conf map[string]json.RawMessage
	if err := json.Unmarshal(confBytes, &conf); err != nil {
		return nil, err
	}
	args, err := rawObject(conf["args"])
	if err != nil {
		return nil, fmt.Errorf("args: %w", err)
	}
	cni, err := rawObject(args["cni"])
	if err != nil {
		return nil, fmt.Errorf("args.cni: %w", err)
	}
	for k, v := range over {
		cni[k] = v
	}
	if args["cni"], err = json.Marshal(cni); err != nil {
		return nil, err
	}
	if conf["args"], err = json.Marshal(args); err != nil {
		return nil, err
	}
	return json.Marshal(conf)
}

// appendMember returns a copy of the JSON object obj with the member
// prefix+value+suffix added before its closing brace; ok is false when obj
// does not look like an object. obj must lack that member.
func appendMember(obj []byte, prefix string, value []byte, suffix string) (out []byte, ok bool) {
	body := bytes.TrimRight(obj, " \t\r\n")
	if lead := bytes.TrimLeft(body, " \t\r\n"); len(lead) < 2 || lead[0] != '{' || body[len(body)-1] != '}' {
		return nil, false
	}
	body = body[:len(body)-1]
	out = make([]byte, 0, len(body)+len(prefix)+len(value)+len(suffix)+2)
	out = append(out, body...)
	if t := bytes.TrimRight(body, " \t\r\n"); t[len(t)-1] != '{' {
		out = append(out, ',')
	}
	out = append(out, prefix...)
	out = append(out, value...)
	out = append(out, suffix...)
	return append(out, '}'), true
}

// setPluginField returns a copy of list whose plugin i has top-level key k set to v.
func setPluginField(list *libcni.NetworkConfigList, i int, k string, v any) (*libcni.NetworkConfigList, error) {
	if i >= len(list.Plugins) {
		return nil, fmt.Errorf("no plugin %d", i)
	}
	var conf map[string]json.RawMessage
	if err := json.Unmarshal(list.Plugins[i].Bytes, &conf); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	conf[k] = raw
	b, err := json.Marshal(conf)
	if err != nil {
		return nil, err
	}
	plugins := slices.Clone(list.Plugins)
	plugins[i] = withBytes(list.Plugins[i], b)
	return rebuildList(list, plugins, false)
}

// withBytes is p with new Bytes that differ from p's only in keys that
// types.PluginConf does not decode (args, deviceID) or that nothing reads
// from Network (prevResult), so Network is reused
// (shallow-copied).
func withBytes(p *libcni.PluginConfig, b []byte) *libcni.PluginConfig {
	nw := *p.Network
	return &libcni.PluginConfig{Network: &nw, Bytes: b}
}

// rawObject decodes a JSON object; a missing value or null gives an empty map.
func rawObject(raw json.RawMessage) (map[string]json.RawMessage, error) {
	m := map[string]json.RawMessage{}
	if len(raw) == 0 || string(raw) == "null" {
		return m, nil
	}
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, fmt.Errorf("not a JSON object: %s", truncate(raw))
	}
	return m, nil
}

// rebuildList returns a copy of list with plugins as its plugins and Bytes
// re-encoded from the list's fields to inline them (and
// "loadOnlyInlinedPlugins": true when inlineAll), so that list.Bytes alone
// reproduces the list for libcni. Top-level keys libcni does not read are
// dropped; "cniVersions" is replaced by the cniVersion libcni chose from it.
func rebuildList(list *libcni.NetworkConfigList, plugins []*libcni.PluginConfig, inlineAll bool) (*libcni.NetworkConfigList, error) {
	nl := *list
	nl.Plugins = plugins
	nl.LoadOnlyInlinedPlugins = nl.LoadOnlyInlinedPlugins || inlineAll
	n := 128
	for _, p := range plugins {
		n += len(p.Bytes) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, `{"cniVersion":`...)
	b = append(b, mustMarshal(nl.CNIVersion)...)
	b = append(b, `,"name":`...)
	b = append(b, mustMarshal(nl.Name)...)
	if nl.DisableCheck {
		b = append(b, `,"disableCheck":true`...)
	}
	if nl.DisableGC {
		b = append(b, `,"disableGC":true`...)
	}
	if nl.LoadOnlyInlinedPlugins {
		b = append(b, `,"loadOnlyInlinedPlugins":true`...)
	}
	b = append(b, `,"plugins":[`...)
	for i, p := range plugins {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, p.Bytes...)
	}
	nl.Bytes = append(b, "]}"...)
	return &nl, nil
}

// DefaultAttachment plans the cluster-wide default network's attachment (spec
// §6): on the runtime's ifName, with the runtimeConfig the runtime gave
// multinet (cnirequest.Request.RuntimeConfig) restricted to keys some plugin of
// list declares. Only this attachment ever gets the runtime's runtimeConfig
// (§7.5). network names it in errors and records (a NAD key or a file name).
func DefaultAttachment(network string, list *libcni.NetworkConfigList, ifName string, runtimeConfig map[string]any) (Attachment, error) {
	if list == nil {
		return Attachment{}, fmt.Errorf("default network %q: no CNI config list", network)
	}
	if err := utils.ValidateInterfaceName(ifName); err != nil {
		return Attachment{}, fmt.Errorf("default network %q: interface %q: %s", network, ifName, err.Msg)
	}
	return Attachment{
		Index:          -1,
		NetworkKey:     network,
		NetworkName:    list.Name,
		IfName:         ifName,
		ConfList:       list,
		CapabilityArgs: DefaultCapabilityArgs(runtimeConfig, list),
	}, nil
}

// DefaultCapabilityArgs returns the keys of the runtime's runtimeConfig that
// some plugin of the default network's list declares (nil when none), for
// libcni.RuntimeConf.CapabilityArgs (spec §7.5).
func DefaultCapabilityArgs(runtimeConfig map[string]any, list *libcni.NetworkConfigList) map[string]any {
	var out map[string]any
	for k, v := range runtimeConfig {
		if !Declares(list, k) {
			continue
		}
		if out == nil {
			out = make(map[string]any, len(runtimeConfig))
		}
		out[k] = v
	}
	return out
}
