package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	// GroupName is the API group of the IPAMClaim CRD (§8.1).
	GroupName = "k8s.cni.cncf.io"
	// Version is the API version of this package.
	Version = "v1alpha1"

	// IPAMClaimResource is the plural resource name (the REST path segment
	// and the RBAC resource) of IPAMClaim; its status subresource is
	// "ipamclaims/status".
	IPAMClaimResource = "ipamclaims"
	// IPAMClaimKind is the kind of IPAMClaim.
	IPAMClaimKind = "IPAMClaim"
)

// SchemeGroupVersion is group k8s.cni.cncf.io, version v1alpha1. Treat it as
// a constant.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}

// Resource returns the GroupResource of resource in this group, for API
// errors such as apierrors.NewNotFound(Resource("ipamclaims"), name).
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

// Kind returns the GroupKind of kind in this group.
func Kind(kind string) schema.GroupKind {
	return SchemeGroupVersion.WithKind(kind).GroupKind()
}

// AddToScheme registers IPAMClaim and IPAMClaimList under SchemeGroupVersion
// in s, together with the meta/v1 option types a REST client encodes as query
// parameters. Usable as a controller-runtime scheme builder.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion,
		&IPAMClaim{},
		&IPAMClaimList{},
	)
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
