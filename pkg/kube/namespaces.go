package kube

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
