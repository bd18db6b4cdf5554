package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IPAllocation is one IP address allocated from a multinet-ipam pool. It is
// cluster-scoped: a pool serves the networks of every namespace that use it,
// and an address must be unique across them.
//
// Its name is "<pool part>.<address part>" (internal/ipam.ObjectName), a function
// of spec.pool and the address only, so two allocators racing for one address
// both send a create of the same name and the API server lets exactly one
// win (the other gets AlreadyExists and picks another address). Nothing
// ever updates an IPAllocation: spec is immutable, the object is created
// (allocated) and deleted (released).
//
// Who holds the address is spec.owner: the pod's container and interface (CNI
// DEL and GC, and the reconcile of pods that are gone, release it), or an
// IPAMClaim (multi-net spec §8; then only the claim's deletion releases it).
//
// +genclient
// +genclient:nonNamespaced
// +genclient:onlyVerbs=create,delete,get,list,watch
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=ipallocations,singular=ipallocation,scope=Cluster,shortName=ipalloc
// +kubebuilder:selectablefield:JSONPath=".spec.pool"
// +kubebuilder:selectablefield:JSONPath=".spec.owner.node"
// +kubebuilder:printcolumn:name="Pool",type=string,JSONPath=".spec.pool"
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=".spec.address"
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=".spec.owner.pod.name"
// +kubebuilder:printcolumn:name="Claim",type=string,JSONPath=".spec.owner.claim.name"
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=".spec.owner.node"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=".metadata.creationTimestamp"
type IPAllocation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the allocation: which address of which pool, held by whom.
	Spec IPAllocationSpec `json:"spec"`
}

// IPAllocationSpec is an allocated address and its holder. Immutable.
//
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
type IPAllocationSpec struct {
	// Pool names the address space the address was allocated from: the
	// IPAM configuration's "pool", by default the CNI network name;
	// "<namespace>/<pool>" for a pool of a tenant namespace (named by a
	// NetworkAttachmentDefinition there).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Pool string `json:"pool"`
	// Address is the allocated address with the prefix length of its range's
	// subnet, in CIDR form: "10.1.2.3/24", "fd00::3/64".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Address string `json:"address"`
	// Owner is who holds the address.
	Owner IPAllocationOwner `json:"owner"`
}

// IPAllocationOwner is the holder of an allocated address. The CNI
// attachment fields (pod, containerID, ifName, node) say which attachment
// first got the address. When Claim is set, the address belongs to that
// IPAMClaim and is released only when the claim is deleted (multi-net spec
// §8); the attachment fields are then informative.
type IPAllocationOwner struct {
	// Pod is the pod of the attachment (CNI_ARGS K8S_POD_NAMESPACE,
	// K8S_POD_NAME, K8S_POD_UID).
	// +optional
	Pod *ObjectReference `json:"pod,omitempty"`
	// ContainerID is the attachment's CNI_CONTAINERID (the pod sandbox).
	// +kubebuilder:validation:MinLength=1
	ContainerID string `json:"containerID"`
	// IfName is the attachment's CNI_IFNAME (the interface in the pod).
	// +kubebuilder:validation:MinLength=1
	IfName string `json:"ifName"`
	// Network is the attachment's CNI network name (the network
	// configuration's "name"); with ContainerID and IfName it identifies the
	// attachment (CNI spec: container ID, network name, CNI_IFNAME), so that
	// CNI GC of one network never releases another network's addresses in a
	// shared pool.
	// +optional
	Network string `json:"network,omitempty"`
	// Node is the node whose multinetd made the allocation.
	// +kubebuilder:validation:MinLength=1
	Node string `json:"node"`
	// Claim is the IPAMClaim (k8s.cni.cncf.io/v1alpha1, in the pod's
	// namespace) the address belongs to (§4.1.2.1.11, §8).
	// +optional
	Claim *ObjectReference `json:"claim,omitempty"`
}

// ObjectReference names a namespaced object and the UID of the incarnation
// meant (a re-created object of the same name is another object).
type ObjectReference struct {
	// +kubebuilder:validation:MinLength=1
	Namespace string `json:"namespace"`
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// UID is the object's metadata.uid; empty when unknown.
	// +optional
	UID string `json:"uid,omitempty"`
}

// IPAllocationList is a list of IPAllocations.
//
// +kubebuilder:object:root=true
type IPAllocationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []IPAllocation `json:"items"`
}
