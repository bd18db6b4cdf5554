package daemon

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/multinet/multinet/internal/node/kube"
	corev1client "github.com/multinet/multinet/pkg/client/clientset/kubernetes/typed/core/v1"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
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
		kube.InformerOptions{Transform: kube.NamespaceLabelsOnly, Client: core})
	if err != nil {
		return podnetworks.NADTrust{}, nil, fmt.Errorf("namespace informer: %w", err)
	}
	return podnetworks.NADTrust{Policy: policy, Namespaces: podnetworks.NamespaceLabelsFunc(kube.CachedNamespaceLabels(inf.GetStore(), core.Namespaces()))}, inf, nil
}
