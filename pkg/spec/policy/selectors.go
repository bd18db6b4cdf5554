package policy

import (
	"maps"

	v1beta2 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// selectedPods returns the pods a selector peer selects that have an
// attachment to net (NetworkPolicy's rules: podSelector alone selects in
// the policy's namespace, namespaceSelector alone every pod of the matching
// namespaces, both together the matching pods of the matching namespaces).
// A selector that does not parse is reported and selects nothing.
func (cx *computation) selectedPods(p *v1beta2.MultiNetworkPolicy, path string, peer v1beta2.MultiNetworkPolicyPeer, net types.NamespacedName) []*Pod {
	podSel := labels.Everything()
	if peer.PodSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
		if err != nil {
			cx.problem(p, "", ReasonInvalidSelector, "%s.podSelector: %v: the peer matches nothing", path, err)
			return nil
		}
		podSel = s
	}
	var nsSel labels.Selector
	if peer.NamespaceSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(peer.NamespaceSelector)
		if err != nil {
			cx.problem(p, "", ReasonInvalidSelector, "%s.namespaceSelector: %v: the peer matches nothing", path, err)
			return nil
		}
		nsSel = s
	}
	var out []*Pod
	nsMatch := map[string]bool{}
	for i := range cx.c.Pods {
		pod := &cx.c.Pods[i]
		if nsSel == nil && pod.Namespace != p.Namespace || !attachedTo(pod, net) {
			continue
		}
		if nsSel != nil {
			m, ok := nsMatch[pod.Namespace]
			if !ok {
				m = nsSel.Matches(cx.namespaceLabels(pod.Namespace))
				nsMatch[pod.Namespace] = m
			}
			if !m {
				continue
			}
		}
		if podSel.Matches(labels.Set(pod.Labels)) {
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
	l := labels.Set(maps.Clone(cx.c.Namespaces[ns]))
	if l == nil {
		l = labels.Set{}
	}
	if _, ok := l[corev1.LabelMetadataName]; !ok {
		l[corev1.LabelMetadataName] = ns
	}
	return l
}

func attachedTo(pod *Pod, net types.NamespacedName) bool {
	for _, a := range pod.Attachments {
		if a.Network == net {
			return true
		}
	}
	return false
}
