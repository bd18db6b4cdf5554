package daemon

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	corev1client "github.com/multinet/multinet/pkg/client/clientset/kubernetes/typed/core/v1"
	"github.com/multinet/multinet/pkg/kube"
	"github.com/multinet/multinet/pkg/podnetworks"
)

// nadTrust returns the NAD trust policy ADD enforces (cfg's
// nadTrustPolicyFile, else the shipped one) with the namespace informer
// (not started) whose labels its rules select by. Errors: the policy file,
// the informer.
func nadTrust(cfg Config, core corev1client.NamespacesGetter) (podnetworks.NADTrust, cache.SharedIndexInformer, error) {
	policy, err := podnetworks.ReadNADTrustPolicy(cfg.NADTrustPolicyFile)
	if err != nil {
		return podnetworks.NADTrust{}, nil, fmt.Errorf("nadTrustPolicyFile: %w", err)
	}
	inf, err := kube.NewInformer[*corev1.NamespaceList](core.Namespaces(), &corev1.Namespace{},
		kube.InformerOptions{Transform: namespaceLabelsOnly, Client: core})
	if err != nil {
		return podnetworks.NADTrust{}, nil, fmt.Errorf("namespace informer: %w", err)
	}
	return podnetworks.NADTrust{Policy: policy, Namespaces: namespaceLabels(inf.GetStore(), core)}, inf, nil
}

// namespaceLabelsOnly keeps a namespace's name and labels: the rest is never
// read.
func namespaceLabelsOnly(obj any) (any, error) {
	if ns, ok := obj.(*corev1.Namespace); ok {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name, Labels: ns.Labels, ResourceVersion: ns.ResourceVersion}}, nil
	}
	return obj, nil
}

// namespaceLabels reads a namespace's labels from store (the informer's),
// and GETs one the store does not hold (created a moment ago) within the
// ADD's context; nil for one that does not exist.
func namespaceLabels(store cache.Store, core corev1client.NamespacesGetter) podnetworks.NamespaceLabelsFunc {
	return func(ctx context.Context, name string) (map[string]string, error) {
		if obj, ok, err := store.GetByKey(name); err == nil && ok {
			if ns, ok := obj.(*corev1.Namespace); ok {
				return ns.Labels, nil
			}
		}
		return kube.NamespaceLabels(ctx, core.Namespaces(), name)
	}
}
