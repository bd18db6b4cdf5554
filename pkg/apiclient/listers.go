package apiclient

import (
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/api/k8s.cni.cncf.io/v1alpha1"
)

// Lister reads objects of type T from an informer's indexer. The objects are
// the cache's own: never modify them; DeepCopy first.
type Lister[T object] struct {
	indexer  cache.Indexer
	resource schema.GroupResource
}

// NetworkAttachmentDefinitionLister reads NetworkAttachmentDefinitions from an
// informer cache.
type NetworkAttachmentDefinitionLister = Lister[*nadv1.NetworkAttachmentDefinition]

// IPAMClaimLister reads IPAMClaims from an informer cache.
type IPAMClaimLister = Lister[*v1alpha1.IPAMClaim]

// NewNetworkAttachmentDefinitionLister returns a lister over indexer, the
// GetIndexer() of a NetworkAttachmentDefinition informer.
func NewNetworkAttachmentDefinitionLister(indexer cache.Indexer) NetworkAttachmentDefinitionLister {
	return NetworkAttachmentDefinitionLister{indexer: indexer, resource: nadv1.Resource(nadv1.NetworkAttachmentDefinitionResource)}
}

// NewIPAMClaimLister returns a lister over indexer, the GetIndexer() of an
// IPAMClaim informer.
func NewIPAMClaimLister(indexer cache.Indexer) IPAMClaimLister {
	return IPAMClaimLister{indexer: indexer, resource: v1alpha1.Resource(v1alpha1.IPAMClaimResource)}
}

// Get returns the object namespace/name. Errors: a NotFound API error
// (apierrors.IsNotFound) when the cache does not hold it; an error when the
// cache holds an object of another type.
func (l Lister[T]) Get(namespace, name string) (T, error) {
	var zero T
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	item, exists, err := l.indexer.GetByKey(key)
	if err != nil {
		return zero, fmt.Errorf("get %s %q from cache: %w", l.resource, key, err)
	}
	if !exists {
		return zero, apierrors.NewNotFound(l.resource, name)
	}
	obj, ok := item.(T)
	if !ok {
		return zero, fmt.Errorf("get %s %q from cache: cached object is %T, not %T", l.resource, key, item, zero)
	}
	return obj, nil
}

// List returns the objects in namespace (metav1.NamespaceAll for all),
// sorted by namespace then name. Errors: the cache holds an object of
// another type.
func (l Lister[T]) List(namespace string) ([]T, error) {
	var items []any
	if namespace == metav1.NamespaceAll {
		items = l.indexer.List()
	} else {
		var err error
		items, err = l.indexer.ByIndex(cache.NamespaceIndex, namespace)
		if err != nil {
			// No namespace index (an indexer not built by this package):
			// scan.
			items = nil
			for _, it := range l.indexer.List() {
				if o, ok := it.(metav1.Object); ok && o.GetNamespace() == namespace {
					items = append(items, it)
				}
			}
		}
	}
	out := make([]T, 0, len(items))
	for _, it := range items {
		obj, ok := it.(T)
		if !ok {
			var zero T
			return nil, fmt.Errorf("list %s from cache: cached object is %T, not %T", l.resource, it, zero)
		}
		out = append(out, obj)
	}
	sort.Slice(out, func(i, j int) bool {
		if a, b := out[i].GetNamespace(), out[j].GetNamespace(); a != b {
			return a < b
		}
		return out[i].GetName() < out[j].GetName()
	})
	return out, nil
}
