package v1beta2

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// MultiNetworkPolicy is a NetworkPolicy for secondary networks: which
// traffic the selected pods may receive and send on the interfaces of the
// networks the k8s.v1.cni.cncf.io/policy-for annotation names
// (PolicyForAnnotation). A policy without that annotation applies to no
// network. Peers are matched by their addresses on the same network.
//
// +genclient
// +resourceName=multi-networkpolicies
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=multi-networkpolicies,singular=multi-networkpolicy,shortName=multi-policy,scope=Namespaced
// +kubebuilder:storageversion
type MultiNetworkPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the policy's selection and rules.
	// +optional
	Spec MultiNetworkPolicySpec `json:"spec,omitempty"`
}

// MultiNetworkPolicyList is a list of MultiNetworkPolicies.
//
// +kubebuilder:object:root=true
type MultiNetworkPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []MultiNetworkPolicy `json:"items"`
}

// MultiPolicyType is a direction of traffic a policy rules.
// +kubebuilder:validation:Enum=Ingress;Egress
type MultiPolicyType string

const (
	// PolicyTypeIngress: the policy rules the traffic the pods receive.
	PolicyTypeIngress MultiPolicyType = "Ingress"
	// PolicyTypeEgress: the policy rules the traffic the pods send.
	PolicyTypeEgress MultiPolicyType = "Egress"
)

// MultiNetworkPolicySpec selects pods and says which traffic they may
// receive (Ingress) and send (Egress), as NetworkPolicySpec does.
type MultiNetworkPolicySpec struct {
	// PodSelector selects the pods of the policy's namespace the policy
	// applies to; empty selects every pod of the namespace.
	PodSelector metav1.LabelSelector `json:"podSelector"`

	// Ingress rules: traffic matching any rule is allowed in; with none,
	// a pod isolated for ingress receives nothing on the network.
	// +optional
	// +kubebuilder:validation:MaxItems=128
	Ingress []MultiNetworkPolicyIngressRule `json:"ingress,omitempty"`

	// Egress rules: traffic matching any rule is allowed out; with none,
	// a pod isolated for egress sends nothing on the network.
	// +optional
	// +kubebuilder:validation:MaxItems=128
	Egress []MultiNetworkPolicyEgressRule `json:"egress,omitempty"`

	// PolicyTypes are the directions the policy isolates. Unset: Ingress,
	// plus Egress when the policy has egress rules (as NetworkPolicy).
	// +optional
	// +listType=set
	PolicyTypes []MultiPolicyType `json:"policyTypes,omitempty"`
}

// MultiNetworkPolicyIngressRule allows traffic that matches one of Ports
// (every port when empty) from one of From (every source when empty).
type MultiNetworkPolicyIngressRule struct {
	// +optional
	// +kubebuilder:validation:MaxItems=128
	Ports []MultiNetworkPolicyPort `json:"ports,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=128
	From []MultiNetworkPolicyPeer `json:"from,omitempty"`
}

// MultiNetworkPolicyEgressRule allows traffic that matches one of Ports
// (every port when empty) to one of To (every destination when empty).
type MultiNetworkPolicyEgressRule struct {
	// +optional
	// +kubebuilder:validation:MaxItems=128
	Ports []MultiNetworkPolicyPort `json:"ports,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=128
	To []MultiNetworkPolicyPeer `json:"to,omitempty"`
}

// MultiNetworkPolicyPort is a protocol and a port, a named port or a port
// range.
// +kubebuilder:validation:XValidation:rule="!has(self.endPort) || (has(self.port) && type(self.port) == int && self.endPort >= self.port)",message="endPort needs a numeric port not above it"
type MultiNetworkPolicyPort struct {
	// Protocol is TCP (the default), UDP or SCTP.
	// +optional
	// +kubebuilder:validation:Enum=TCP;UDP;SCTP
	Protocol *corev1.Protocol `json:"protocol,omitempty"`

	// Port is a port number or the name of a container port of the
	// selected pod (ingress) or peer (egress). Unset: every port of
	// Protocol.
	// +optional
	// +kubebuilder:validation:XIntOrString
	Port *intstr.IntOrString `json:"port,omitempty"`
	// EndPort, with Port a number, makes the rule match the ports Port to
	// EndPort inclusive; it must not be below Port. Not allowed with a
	// named Port or without Port.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	EndPort *int32 `json:"endPort,omitempty"`
}

// IPBlock is a CIDR, minus the CIDRs in Except.
type IPBlock struct {
	// CIDR is an IPv4 or IPv6 prefix, such as "192.168.1.0/24" or
	// "2001:db8::/64".
	// +kubebuilder:validation:Format=cidr
	// +kubebuilder:validation:MaxLength=43
	CIDR string `json:"cidr"`

	// Except are prefixes inside CIDR that the block leaves out.
	// +optional
	// +kubebuilder:validation:items:Format=cidr
	// +kubebuilder:validation:items:MaxLength=43
	Except []string `json:"except,omitempty"`
}

// MultiNetworkPolicyPeer is a set of peers: pods (PodSelector, in the
// policy's namespace unless NamespaceSelector is set), namespaces
// (NamespaceSelector alone: all their pods) or addresses (IPBlock, alone).
// Pods are matched by their addresses on the policy's network.
type MultiNetworkPolicyPeer struct {
	// +optional
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// +optional
	IPBlock *IPBlock `json:"ipBlock,omitempty"`
}
