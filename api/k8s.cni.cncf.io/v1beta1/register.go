package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	// GroupName is the API group of MultiNetworkPolicy.
	GroupName = "k8s.cni.cncf.io"
	// Version is the API version of this package.
	Version = "v1beta1"

	// MultiNetworkPolicyResource is the plural resource name (the REST path
	// segment and the RBAC resource) of MultiNetworkPolicy.
	MultiNetworkPolicyResource = "multi-networkpolicies"
	// MultiNetworkPolicyKind is the kind of MultiNetworkPolicy.
	MultiNetworkPolicyKind = "MultiNetworkPolicy"
)

// SchemeGroupVersion is group k8s.cni.cncf.io, version v1beta1. Treat it as a
// constant.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}

// Resource returns the GroupResource of resource in this group.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

// Kind returns the GroupKind of kind in this group.
func Kind(kind string) schema.GroupKind {
	return SchemeGroupVersion.WithKind(kind).GroupKind()
}

// AddToScheme registers MultiNetworkPolicy and MultiNetworkPolicyList under
// SchemeGroupVersion in s, with the meta/v1 option types.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion,
		&MultiNetworkPolicy{},
		&MultiNetworkPolicyList{},
	)
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
