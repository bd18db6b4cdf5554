// Package selection parses and validates the network selection annotation
// "k8s.v1.cni.cncf.io/networks" of the NPWG multi-net spec v1.3, §4, and the
// ecosystem's "v1.multus-cni.io/default-network" override.
//
// Parse accepts both formats of §4.1 (comma-delimited, §4.1.1, with the
// widely used "namespace/name@ifname" items; and the JSON list, §4.1.2),
// validates every key of §4.1.2.1 and returns all problems at once as an
// *AnnotationError. Marshal writes the JSON list form; Parse(Marshal(x))
// returns x for every x that Parse returned.
//
// The package is pure: no I/O, no global state, no regular expressions.
package selection

import (
	"encoding/json"
)

// NetworksAnnotation is the pod annotation that selects additional networks (spec §4.1).
const NetworksAnnotation = "k8s.v1.cni.cncf.io/networks"

// DefaultNetworkAnnotation is the ecosystem's per-pod override of the cluster-wide
// default network (Multus "v1.multus-cni.io/default-network"); not part of the spec.
// Parse it with ParseDefaultNetwork.
const DefaultNetworkAnnotation = "v1.multus-cni.io/default-network"

// Element is one network selection element (spec §4.1.2.1): one attachment of
// the pod to the NetworkAttachmentDefinition Namespace/Name.
//
// The JSON keys are the spec's; Element implements json.Marshaler and
// json.Unmarshaler to keep reverse-domain keys in Extensions and to tell an
// absent key from an empty one. After Parse, Namespace is always filled in
// (defaulting to the pod's namespace, §4.1.2.1.2) and addresses are in
// canonical form (lower-case hex, colon-separated MACs and GUIDs; IPs as
// net/netip prints them; protocols lower case).
//
// For slices and maps, nil means "key absent" and non-nil empty means "key
// present with an empty value": an empty GatewayRequest still selects this
// attachment for the default route (§4.1.2.1.9), while an empty IPRequest or
// PortMappingsRequest is invalid (§4.1.2.1.3, §4.1.2.1.7).
type Element struct {
	// Name of the NetworkAttachmentDefinition (§4.1.2.1.1). Required; a DNS-1123
	// subdomain, i.e. dot-separated DNS-1123 labels (§3.3), at most 253 characters.
	Name string `json:"name"`
	// Namespace of the NetworkAttachmentDefinition (§4.1.2.1.2); DNS-1123 label,
	// at most 63 characters.
	Namespace string `json:"namespace,omitempty"`
	// IPRequest are static IPs, IPv4 or IPv6, each optionally with a "/prefix" (§4.1.2.1.3).
	// Passed as runtimeConfig "ips" (capability "ips").
	IPRequest []string `json:"ips,omitempty"`
	// MacRequest is a 6-byte unicast MAC address "aa:bb:cc:dd:ee:ff" (§4.1.2.1.4).
	// Passed as runtimeConfig "mac" (capability "mac").
	MacRequest string `json:"mac,omitempty"`
	// InterfaceRequest is the Linux interface name inside the pod (§4.1.2.1.5):
	// 1-15 bytes of printable ASCII, not "." or "..", without '/', ':', '%' or
	// white space. Used as CNI_IFNAME.
	InterfaceRequest string `json:"interface,omitempty"`
	// CNIArgs are passed to the delegate as "args":{"cni":{...}} (§4.1.2.1.6).
	// Numbers decoded by Parse are json.Number, so large integers stay exact.
	CNIArgs map[string]any `json:"cni-args,omitempty"`
	// PortMappingsRequest is passed as runtimeConfig "portMappings" (§4.1.2.1.7).
	PortMappingsRequest []PortMapping `json:"portMappings,omitempty"`
	// BandwidthRequest is passed as runtimeConfig "bandwidth" (§4.1.2.1.8).
	BandwidthRequest *Bandwidth `json:"bandwidth,omitempty"`
	// GatewayRequest: this attachment carries the pod's default route through
	// these gateway IPs, in order of preference (§4.1.2.1.9). At most one
	// element of a pod has it; non-nil and empty is allowed.
	GatewayRequest []string `json:"default-route,omitempty"`
	// InfinibandGUIDRequest is an 8-byte GUID "aa:bb:cc:dd:ee:ff:00:11" (§4.1.2.1.10).
	// Passed as runtimeConfig "infinibandGUID" (capability "infinibandGUID").
	InfinibandGUIDRequest string `json:"infiniband-guid,omitempty"`
	// IPAMClaimReference names an IPAMClaim in the pod's namespace (§4.1.2.1.11, §8);
	// a DNS-1123 subdomain (§8.3).
	IPAMClaimReference string `json:"ipam-claim-reference,omitempty"`
	// Extensions holds reverse-domain keys (containing a period), kept verbatim
	// as compact JSON (§4.1.2.1).
	Extensions map[string]json.RawMessage `json:"-"`
}

// Key returns "namespace/name", the NetworkAttachmentDefinition this element
// selects. Namespace is taken as is: call it on elements returned by Parse,
// whose Namespace is always set.
func (e Element) Key() string {
	return e.Namespace + "/" + e.Name
}

// PortMapping is one runtimeConfig "portMappings" entry (§4.1.2.1.7, CNI CONVENTIONS.md).
type PortMapping struct {
	// HostPort, 1-65535.
	HostPort int32 `json:"hostPort"`
	// ContainerPort, 1-65535.
	ContainerPort int32 `json:"containerPort"`
	// Protocol is "tcp", "udp" or "sctp" (case-insensitive on input; default tcp).
	// Parse always fills it in, lower case.
	Protocol string `json:"protocol,omitempty"`
	// HostIP optionally restricts the host side to one address (CNI
	// CONVENTIONS.md; not listed by §4.1.2.1.7 but accepted).
	HostIP string `json:"hostIP,omitempty"`
}

// Bandwidth is the runtimeConfig "bandwidth" entry (§4.1.2.1.8, CNI CONVENTIONS.md).
// Rates are in bits per second, bursts in bits. Zero means "key absent"; a
// present key must be positive, and a burst needs its rate.
type Bandwidth struct {
	IngressRate  int64 `json:"ingressRate,omitempty"`
	IngressBurst int64 `json:"ingressBurst,omitempty"`
	EgressRate   int64 `json:"egressRate,omitempty"`
	EgressBurst  int64 `json:"egressBurst,omitempty"`
}
