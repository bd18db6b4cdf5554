// Package selection parses and validates the network selection annotation
// "k8s.v1.cni.cncf.io/networks" of the NPWG multi-net spec v1.3, §4.
package selection

import "encoding/json"

// NetworksAnnotation is the pod annotation that selects additional networks (spec §4.1).
const NetworksAnnotation = "k8s.v1.cni.cncf.io/networks"

// DefaultNetworkAnnotation is the ecosystem's per-pod override of the cluster-wide
// default network (Multus "v1.multus-cni.io/default-network"); not part of the spec.
const DefaultNetworkAnnotation = "v1.multus-cni.io/default-network"

// Element is one network selection element (spec §4.1.2.1): one attachment of
// the pod to the NetworkAttachmentDefinition Namespace/Name.
//
// The JSON keys are the spec's. After Parse, Namespace is always filled in
// (defaulting to the pod's namespace, §4.1.2.1.2).
type Element struct {
	// Name of the NetworkAttachmentDefinition (§4.1.2.1.1). Required; DNS-1123 label.
	Name string `json:"name"`
	// Namespace of the NetworkAttachmentDefinition (§4.1.2.1.2); DNS-1123 label.
	Namespace string `json:"namespace,omitempty"`
	// IPRequest are static IPs, IPv4 or IPv6, each optionally with a "/prefix" (§4.1.2.1.3).
	// Passed as runtimeConfig "ips" (capability "ips").
	IPRequest []string `json:"ips,omitempty"`
	// MacRequest is a 6-byte MAC address "aa:bb:cc:dd:ee:ff" (§4.1.2.1.4).
	// Passed as runtimeConfig "mac" (capability "mac").
	MacRequest string `json:"mac,omitempty"`
	// InterfaceRequest is the Linux interface name inside the pod (§4.1.2.1.5).
	InterfaceRequest string `json:"interface,omitempty"`
	// CNIArgs are passed to the delegate as "args":{"cni":{...}} (§4.1.2.1.6).
	CNIArgs map[string]any `json:"cni-args,omitempty"`
	// PortMappingsRequest is passed as runtimeConfig "portMappings" (§4.1.2.1.7).
	PortMappingsRequest []PortMapping `json:"portMappings,omitempty"`
	// BandwidthRequest is passed as runtimeConfig "bandwidth" (§4.1.2.1.8).
	BandwidthRequest *Bandwidth `json:"bandwidth,omitempty"`
	// GatewayRequest: this attachment carries the pod's default route through
	// these gateway IPs (§4.1.2.1.9). At most one element of a pod has it.
	GatewayRequest []string `json:"default-route,omitempty"`
	// InfinibandGUIDRequest is an 8-byte GUID "aa:bb:cc:dd:ee:ff:00:11" (§4.1.2.1.10).
	// Passed as runtimeConfig "infinibandGUID" (capability "infinibandGUID").
	InfinibandGUIDRequest string `json:"infiniband-guid,omitempty"`
	// IPAMClaimReference names an IPAMClaim in the pod's namespace (§4.1.2.1.11, §8).
	IPAMClaimReference string `json:"ipam-claim-reference,omitempty"`
	// Extensions holds reverse-domain keys (containing a period), kept verbatim (§4.1.2.1).
	Extensions map[string]json.RawMessage `json:"-"`
}

// PortMapping is one runtimeConfig "portMappings" entry (§4.1.2.1.7, CNI CONVENTIONS.md).
type PortMapping struct {
	// HostPort, 1-65535.
	HostPort int32 `json:"hostPort"`
	// ContainerPort, 1-65535.
	ContainerPort int32 `json:"containerPort"`
	// Protocol is "tcp", "udp" or "sctp" (case-insensitive on input; default tcp).
	Protocol string `json:"protocol,omitempty"`
	// HostIP optionally restricts the host side to one address.
	HostIP string `json:"hostIP,omitempty"`
}

// Bandwidth is the runtimeConfig "bandwidth" entry (§4.1.2.1.8, CNI CONVENTIONS.md).
// Rates are in bits per second, bursts in bits.
type Bandwidth struct {
	IngressRate  int64 `json:"ingressRate,omitempty"`
	IngressBurst int64 `json:"ingressBurst,omitempty"`
	EgressRate   int64 `json:"egressRate,omitempty"`
	EgressBurst  int64 `json:"egressBurst,omitempty"`
}
