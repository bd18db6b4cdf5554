// Package v1beta1 holds the MultiNetworkPolicy API, version v1beta1, of the
// Network Plumbing Working Group (group k8s.cni.cncf.io; published at
// github.com/k8snetworkplumbingwg/multi-networkpolicy): NetworkPolicy's
// rules applied to the secondary networks of pods, one network at a time.
// The k8s.v1.cni.cncf.io/policy-for annotation of a policy names the
// NetworkAttachmentDefinitions it applies to (PolicyForAnnotation).
//
// v1beta1 is v1beta2 without endPort. The CRD stores v1beta2; a v1beta1 reader
// of a policy that has endPort does not see it
// (docs/decisions/multinetworkpolicy.md).
//
// +kubebuilder:object:generate=true
// +groupName=k8s.cni.cncf.io
// +groupGoName=K8sCniCncfIo
package v1beta1
