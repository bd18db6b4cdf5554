package cli

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta2"
	"github.com/multinet/multinet/internal/cli/explain"
	"github.com/multinet/multinet/pkg/spec/policy"
)

// livePhases selects the pods that can be peers, as multinetd's
// cluster-wide pod informer does (policysync.NewPodInformer).
const livePhases = "status.phase!=Succeeded,status.phase!=Failed"

// policySource reads, through c, what a pod's MultiNetworkPolicy rules
// depend on, each call bounded by c.Timeout: the policies of the pod's
// namespace, every namespace's labels, every pod not finished, and a
// NetworkAttachmentDefinition's existence (one GET per network, kept).
// nil when c has no policy client.
func policySource(c *clusterClients) explain.PolicySource {
	if c.Policies == nil {
		return nil
	}
	return func(ctx context.Context, namespace string) (policy.Cluster, error) {
		cl := policy.Cluster{Namespaces: map[string]map[string]string{}, NetworkExists: nadExists(ctx, c)}
		pols, err := call(ctx, c, func(ctx context.Context) (*v1beta2.MultiNetworkPolicyList, error) {
			return c.Policies.MultiNetworkPolicies(namespace).List(ctx, metav1.ListOptions{})
		})
		if apierrors.IsNotFound(err) {
			return cl, fmt.Errorf("the MultiNetworkPolicy CRD is not installed")
		}
		if err != nil {
			return cl, fmt.Errorf("list MultiNetworkPolicies of namespace %s: %w", namespace, err)
		}
		for i := range pols.Items {
			cl.Policies = append(cl.Policies, &pols.Items[i])
		}
		nss, err := call(ctx, c, func(ctx context.Context) (*corev1.NamespaceList, error) {
			return c.Core.Namespaces().List(ctx, metav1.ListOptions{})
		})
		if err != nil {
			return cl, fmt.Errorf("list namespaces (their labels select peers): %w", err)
		}
		for _, ns := range nss.Items {
			cl.Namespaces[ns.Name] = ns.Labels
		}
		pods, err := call(ctx, c, func(ctx context.Context) (*corev1.PodList, error) {
			return c.Core.Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: livePhases})
		})
		if err != nil {
			return cl, fmt.Errorf("list pods (peers): %w", err)
		}
		for i := range pods.Items {
			p, _ := policy.PodFromObject(&pods.Items[i]) // as multinetd: no attachments when network-status does not decode
			cl.Pods = append(cl.Pods, p)
		}
		return cl, nil
	}
}

// nadExists reports whether a NetworkAttachmentDefinition exists: GET
// through c (NotFound: no; any other error: taken to exist, as a policy is
// then not reported for it), once per network.
func nadExists(ctx context.Context, c *clusterClients) func(types.NamespacedName) bool {
	seen := map[types.NamespacedName]bool{}
	return func(n types.NamespacedName) bool {
		if ok, done := seen[n]; done {
			return ok
		}
		_, err := call(ctx, c, func(ctx context.Context) (any, error) {
			return c.NADs.NetworkAttachmentDefinitions(n.Namespace).Get(ctx, n.Name, metav1.GetOptions{})
		})
		seen[n] = !apierrors.IsNotFound(err)
		return seen[n]
	}
}
