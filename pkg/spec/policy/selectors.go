package policy

import (
	"maps"

	v1beta2 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// peerMatcher is a selector peer of a policy, parsed (NetworkPolicy's
// rules: podSelector alone selects in the policy's namespace,
// namespaceSelector alone every pod of the matching namespaces, both
// together the matching pods of the matching namespaces).
type peerMatcher struct {
	namespace string          // the policy's
	pods      labels.Selector // labels.Everything() without podSelector
	nss       labels.Selector // nil without namespaceSelector
}

// newPeerMatcher parses peer's selectors; on error it names the field
// (podSelector or namespaceSelector) that does not parse.
func newPeerMatcher(p *v1beta2.MultiNetworkPolicy, peer v1beta2.MultiNetworkPolicyPeer) (peerMatcher, string, error) {
	m := peerMatcher{namespace: p.Namespace, pods: labels.Everything()}
	if peer.PodSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
		if err != nil {
			return m, "podSelector", err
		}
		m.pods = s
	}
	if peer.NamespaceSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(peer.NamespaceSelector)
		if err != nil {
			return m, "namespaceSelector", err
		}
		m.nss = s
	}
	return m, "", nil
}

// inNamespace reports whether the peer can select pods of namespace ns,
// whose labels nsLabels gives (namespaceLabels' form).
func (m peerMatcher) inNamespace(ns string, nsLabels func() labels.Set) bool {
	if m.nss == nil {
		return ns == m.namespace
	}
	return m.nss.Matches(nsLabels())
}

// selectedPods returns the pods a selector peer selects that have an
// attachment to net. A selector that does not parse is reported and
// selects nothing.
func (cx *computation) selectedPods(p *v1beta2.MultiNetworkPolicy, path string, peer v1beta2.MultiNetworkPolicyPeer, net types.NamespacedName) []*Pod {
	m, field, err := newPeerMatcher(p, peer)
	if err != nil {
		cx.problem(p, "", ReasonInvalidSelector, "%s.%s: %v: the peer matches nothing", path, field, err)
		return nil
	}
	var out []*Pod
	nsMatch := map[string]bool{}
	for i := range cx.c.Pods {
		pod := &cx.c.Pods[i]
		if m.nss == nil && pod.Namespace != p.Namespace || !attachedTo(pod, net) {
			continue
		}
		in, ok := nsMatch[pod.Namespace]
		if !ok {
			in = m.inNamespace(pod.Namespace, func() labels.Set { return cx.namespaceLabels(pod.Namespace) })
			nsMatch[pod.Namespace] = in
		}
		if in && m.pods.Matches(labels.Set(pod.Labels)) {
			out = append(out, pod)
		}
	}
	return out
}

// podsOn returns every pod with an attachment to net.
func (cx *computation) podsOn(net types.NamespacedName) []*Pod {
	var out []*Pod
	for i := range cx.c.Pods {
		if attachedTo(&cx.c.Pods[i], net) {
			out = append(out, &cx.c.Pods[i])
		}
	}
	return out
}

// namespaceLabels returns the labels of namespace ns, with
// kubernetes.io/metadata.name (which the API server sets) where missing.
func (cx *computation) namespaceLabels(ns string) labels.Set {
	return namespaceLabels(ns, cx.c.Namespaces[ns])
}

// namespaceLabels returns a copy of l, the labels of namespace ns, with
// kubernetes.io/metadata.name where missing.
func namespaceLabels(ns string, l map[string]string) labels.Set {
	out := labels.Set(maps.Clone(l))
	if out == nil {
		out = labels.Set{}
	}
	if _, ok := out[corev1.LabelMetadataName]; !ok {
		out[corev1.LabelMetadataName] = ns
	}
	return out
}

func attachedTo(pod *Pod, net types.NamespacedName) bool {
	for _, a := range pod.Attachments {
		if a.Network == net {
			return true
		}
	}
	return false
}
