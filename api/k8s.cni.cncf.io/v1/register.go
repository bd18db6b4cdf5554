package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	// GroupName is the API group of the NetworkAttachmentDefinition CRD (§3.1).
	GroupName = "k8s.cni.cncf.io"
	// Version is the API version of this package.
	Version = "v1"

	// NetworkAttachmentDefinitionResource is the plural resource name (the
	// REST path segment and the RBAC resource) of NetworkAttachmentDefinition.
	NetworkAttachmentDefinitionResource = "network-attachment-definitions"
	// NetworkAttachmentDefinitionKind is the kind of NetworkAttachmentDefinition.
	NetworkAttachmentDefinitionKind = "NetworkAttachmentDefinition"
)

// SchemeGroupVersion is group k8s.cni.cncf.io, version v1. Treat it as a
// constant.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}

// Resource returns the GroupResource of resource in this group, for API
// errors such as apierrors.NewNotFound(Resource("network-attachment-definitions"), name).
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

// Kind returns the GroupKind of kind in this group.
func Kind(kind string) schema.GroupKind {
	return SchemeGroupVersion.WithKind(kind).GroupKind()
}

// AddToScheme registers NetworkAttachmentDefinition and
// NetworkAttachmentDefinitionList under SchemeGroupVersion in s, together with
// the meta/v1 option types (ListOptions, GetOptions, ...) a REST client
// encodes as query parameters. Usable as a controller-runtime scheme builder.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(SchemeGroupVersion,
		&NetworkAttachmentDefinition{},
		&NetworkAttachmentDefinitionList{},
	)
	metav1.AddToGroupVersion(s, SchemeGroupVersion)
	return nil
}
