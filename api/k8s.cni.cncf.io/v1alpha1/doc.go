// Package v1alpha1 holds the IPAMClaim API of the NPWG multi-net spec v1.3,
// §8 (group k8s.cni.cncf.io, version v1alpha1): a claim to IP addresses made
// on behalf of an entity other than a pod (a KubeVirt VirtualMachine, a
// StatefulSet member), so the addresses outlive the pods that run it.
//
// Workload controllers own spec (network, interface); IPAM CNI plugins own
// status (ips), which is a separate status subresource so the two can be
// granted different RBAC (§8.2).
//
// +kubebuilder:object:generate=true
// +groupName=k8s.cni.cncf.io
// +groupGoName=K8sCniCncfIo
package v1alpha1
