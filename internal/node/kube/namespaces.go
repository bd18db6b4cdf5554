package kube

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// NamespaceGetter reads one Namespace: the Namespaces() of client-go's
// typed CoreV1 client and of multinet's generated one both are.
type NamespaceGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Namespace, error)
}

// NamespaceLabels reads the labels of the namespace name from the API
// server (one GET, bounded by ctx): nil and no error for a namespace that
// does not exist, the API error for any other failure. The NAD trust
// policy and the Pod Security rule read namespace labels through it
// (podnetworks.NamespaceLabelsFunc).
func NamespaceLabels(ctx context.Context, c NamespaceGetter, name string) (map[string]string, error) {
	ns, err := c.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	}
	return ns.Labels, nil
}

// CachedNamespaceLabels reads a namespace's labels from store (a namespace
// informer's) and GETs one the store does not hold yet (created a moment
// ago) through live, within the caller's context (NamespaceLabels): one
// API request per namespace the informer has not seen, none per call
// otherwise, so that a burst of pod admissions or ADDs does not queue on
// the client's rate limiter. Shape: podnetworks.NamespaceLabelsFunc.
func CachedNamespaceLabels(store cache.Store, live NamespaceGetter) func(ctx context.Context, name string) (map[string]string, error) {
	return func(ctx context.Context, name string) (map[string]string, error) {
		if obj, ok, err := store.GetByKey(name); err == nil && ok {
			if ns, ok := obj.(*corev1.Namespace); ok {
				return ns.Labels, nil
			}
		}
		return NamespaceLabels(ctx, live, name)
	}
}

// NamespaceLabelsOnly is a namespace informer's transform: it keeps a
// Namespace's name, labels and resourceVersion, all that
// CachedNamespaceLabels reads.
func NamespaceLabelsOnly(obj any) (any, error) {
	if ns, ok := obj.(*corev1.Namespace); ok {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name, Labels: ns.Labels, ResourceVersion: ns.ResourceVersion}}, nil
	}
	return obj, nil
}
