// Package policy computes what MultiNetworkPolicies (the NPWG
// multi-networkpolicy API, k8s.cni.cncf.io v1beta2) mean for one pod: per
// interface of the pod on a network a selecting policy's policy-for names,
// whether ingress and egress are isolated and which peers and ports are
// allowed, with NetworkPolicy's semantics applied per network. Peers that are
// pods are matched by their addresses on the same network (network-status).
//
// The package is pure: it reads no API server and enters no network
// namespace. internal/node/nftpolicy writes its result into the pod's network
// namespace; docs/decisions/multinetworkpolicy.md records where it differs
// from the NPWG reference implementation (multi-networkpolicy-iptables).
package policy

import (
	"net/netip"

	v1beta2 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Pod is a pod as policy sees it: identity, labels, named container ports
// and its secondary-network attachments.
type Pod struct {
	Namespace string
	Name      string
	Labels    map[string]string
	// Ports are the pod's named container ports, for named ports in rules.
	Ports []NamedPort
	// Attachments are the pod's secondary-network attachments
	// (network-status entries other than the default network's).
	Attachments []Attachment
}

// NamedPort is a named container port.
type NamedPort struct {
	Name     string
	Protocol corev1.Protocol // TCP when empty
	Port     int32
}

// Attachment is one network attachment of a pod (a network-status entry).
type Attachment struct {
	// Network is the NetworkAttachmentDefinition (network-status "name").
	Network types.NamespacedName
	// Interface is the interface name in the pod, e.g. "net1".
	Interface string
	// IPs are the attachment's addresses (IPv4 and IPv6).
	IPs []netip.Addr
	// NoKernelInterface: the attachment has no kernel interface in the pod
	// (vhost-user, memif, a VF bound to vfio): nothing can filter it there.
	NoKernelInterface bool
}

// Cluster is what Compute reads.
type Cluster struct {
	// Policies are every MultiNetworkPolicy (any namespace).
	Policies []*v1beta2.MultiNetworkPolicy
	// Namespaces maps a namespace name to its labels.
	// kubernetes.io/metadata.name is implied where missing.
	Namespaces map[string]map[string]string
	// Pods are every pod that can be a peer (all namespaces, all nodes;
	// the target may be among them). Terminated pods are left out by the
	// caller (PodFromObject gives them no attachments).
	Pods []Pod
	// NetworkExists reports whether a NetworkAttachmentDefinition exists;
	// nil takes every network policy-for names to exist.
	NetworkExists func(types.NamespacedName) bool
}

// Result is the effective policy of one pod.
type Result struct {
	// Interfaces are the pod's interfaces isolated in at least one
	// direction, sorted by Name. Interfaces not listed (eth0, networks no
	// selecting policy is for) are not filtered.
	Interfaces []Interface
	// Problems are what the selecting policies ask that is not enforced as
	// written, sorted; the caller turns them into Events or conditions.
	Problems []Problem
}

// Interface is the effective policy of one interface of a pod.
type Interface struct {
	// Name is the interface in the pod.
	Name string
	// Network is its NetworkAttachmentDefinition.
	Network types.NamespacedName
	// Policies are the policies that select the pod for Network, sorted.
	Policies []types.NamespacedName
	Ingress  Direction
	Egress   Direction
}

// Direction is the effective policy of one direction of an interface.
// When Isolated, only traffic that one of Rules matches is allowed (besides
// packets of established or related connections and IPv6 neighbour
// discovery); when not, everything is and Rules is empty.
type Direction struct {
	Isolated bool
	Rules    []Rule
}

// Rule allows traffic from (ingress) or to (egress) Peers on Ports.
type Rule struct {
	// Policy and Index say where the rule comes from: the index in the
	// policy's spec.ingress or spec.egress. An egress rule with named ports
	// gives one Rule per distinct set of resolved ports.
	Policy types.NamespacedName
	Index  int
	// AllPeers: the rule has no from/to, any address matches.
	AllPeers bool
	// Peers are the allowed addresses when !AllPeers: IPv4 and IPv6
	// prefixes, masked, disjoint, sorted (IPv4 first).
	Peers []netip.Prefix
	// AllPorts: the rule has no ports, any protocol and port matches.
	AllPorts bool
	// Ports are the allowed ports when !AllPorts, sorted, without duplicates.
	Ports []Port
}

// MatchesNothing reports whether the rule can match no packet: it has no
// peer or no port left (e.g. selectors that match no pod, a named port no
// container declares).
func (r Rule) MatchesNothing() bool {
	return !r.AllPeers && len(r.Peers) == 0 || !r.AllPorts && len(r.Ports) == 0
}

// Port is a protocol and an inclusive port range; Port 0 means every port
// of Protocol.
type Port struct {
	Protocol corev1.Protocol // TCP, UDP or SCTP
	Port     uint16
	EndPort  uint16 // == Port for a single port; 0 with Port 0
}

// Problem is something a policy asks that is not enforced as written.
type Problem struct {
	Policy types.NamespacedName
	// Interface is set when the problem is about one interface of the pod.
	Interface string
	// Reason is one of the Reason constants (an Event reason).
	Reason  string
	Message string
}

// Problem reasons.
const (
	// ReasonInvalidPolicyFor: the policy-for annotation does not parse; the
	// policy applies to no network.
	ReasonInvalidPolicyFor = "InvalidPolicyFor"
	// ReasonUnknownNetwork: policy-for names a NetworkAttachmentDefinition
	// that does not exist; no pod has an interface on it.
	ReasonUnknownNetwork = "UnknownNetwork"
	// ReasonInvalidSelector: a selector does not parse. In spec.podSelector
	// the policy selects no pod; in a peer the peer matches nothing.
	ReasonInvalidSelector = "InvalidSelector"
	// ReasonInvalidPeer: a peer with no field, or an ipBlock together with a
	// selector, or a CIDR that does not parse; the peer matches nothing.
	ReasonInvalidPeer = "InvalidPeer"
	// ReasonInvalidPort: a protocol other than TCP, UDP, SCTP, a port out of
	// range, endPort below port or with a named port, an invalid port name;
	// the port matches nothing.
	ReasonInvalidPort = "InvalidPort"
	// ReasonNoKernelInterface: a selected attachment has no kernel interface
	// in the pod; the policy is not enforced on it.
	ReasonNoKernelInterface = "NoKernelInterface"
)
