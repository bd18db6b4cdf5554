package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NetworkAttachmentDefinition describes how to attach a pod to the logical or
// physical network the object refers to (NPWG multi-net spec v1.3, §3). Pods
// select it by name with the k8s.v1.cni.cncf.io/networks annotation (§4).
//
// The object name follows §3.3 (DNS-1123); the API server enforces it on
// metadata.name. Spec is optional: a NetworkAttachmentDefinition without
// spec.config refers to an implementation-known network by its name (§3.2.4),
// which a CNI delegating plugin resolves from the CNI config files on disk
// (§3.4.1).
//
// +genclient
// +resourceName=network-attachment-definitions
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=network-attachment-definitions,singular=network-attachment-definition,shortName=net-attach-def,scope=Namespaced
type NetworkAttachmentDefinition struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata. The name is mandatory (§3.3).
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec describes how to add or remove network attachments for a pod. In
	// the absence of valid keys in spec, the implementation attaches or
	// detaches an implementation-known network referenced by the object's
	// name (§3.1).
	// +optional
	Spec NetworkAttachmentDefinitionSpec `json:"spec"`
}

// NetworkAttachmentDefinitionSpec is the spec of a NetworkAttachmentDefinition
// (§3.1).
type NetworkAttachmentDefinitionSpec struct {
	// Config is a JSON-encoded CNI configuration or configuration list (with a
	// "plugins" array) that defines the plugin chain to execute (§3.2.1,
	// §3.2.2). It may omit the CNI "name" field, which the implementation
	// then fills in with the object's name (§3.4.2).
	// +optional
	Config string `json:"config,omitempty"`
}

// NetworkAttachmentDefinitionList is a list of NetworkAttachmentDefinitions.
//
// +kubebuilder:object:root=true
type NetworkAttachmentDefinitionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []NetworkAttachmentDefinition `json:"items"`
}
