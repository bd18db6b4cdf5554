// Package v1beta2 holds the MultiNetworkPolicy API, version v1beta2, of the
// Network Plumbing Working Group (group k8s.cni.cncf.io; published at
// github.com/k8snetworkplumbingwg/multi-networkpolicy): NetworkPolicy's
// rules applied to the secondary networks of pods, one network at a time.
// The k8s.v1.cni.cncf.io/policy-for annotation of a policy names the
// NetworkAttachmentDefinitions it applies to (PolicyForAnnotation).
//
// v1beta2 is v1beta1 with endPort (a port range) added; it is the storage
// version: a v1beta1 object is a v1beta2 object without endPort, so the CRD
// converts between them with strategy None
// (docs/decisions/multinetworkpolicy.md).
//
// +kubebuilder:object:generate=true
// +groupName=k8s.cni.cncf.io
// +groupGoName=K8sCniCncfIo
package v1beta2
