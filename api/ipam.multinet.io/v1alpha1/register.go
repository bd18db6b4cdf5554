package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	// GroupName is multinet-ipam's API group.
	GroupName = "ipam.multinet.io"
	// Version is the API version of this package.
	Version = "v1alpha1"

	// IPAllocationResource is the plural resource name (REST path segment,
	// RBAC resource) of IPAllocation.
	IPAllocationResource = "ipallocations"
	// IPAllocationKind is the kind of IPAllocation.
	IPAllocationKind = "IPAllocation"
)

// SchemeGroupVersion is group ipam.multinet.io, version v1alpha1. Treat it as
// a constant.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}

// Resource returns the GroupResource of resource in this group, for API
// errors such as apierrors.NewAlreadyExists(Resource("ipallocations"), name).
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

// Kind returns the GroupKind of kind in this group.
func Kind(kind string) schema.GroupKind {
	return SchemeGroupVersion.WithKind(kind).GroupKind()
}

// AddToScheme registers IPAllocation and IPAllocationList under
// SchemeGroupVersion in s, with the meta/v1 option types.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion,
		&IPAllocation{},
		&IPAllocationList{},
	)
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
