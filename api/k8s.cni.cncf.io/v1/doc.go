// Package v1 holds the NetworkAttachmentDefinition API of the NPWG multi-net
// spec v1.3, §3 (group k8s.cni.cncf.io, version v1), and the well-known
// annotation keys the spec and its companions put on NetworkAttachmentDefinitions
// and pods.
//
// The Go types and the generated CRD (deploy/crds) are wire-compatible with the
// upstream NPWG CRD: spec.config is a string and spec is optional (§3.2.4).
//
// +kubebuilder:object:generate=true
// +groupName=k8s.cni.cncf.io
// +groupGoName=K8sCniCncfIo
package v1
