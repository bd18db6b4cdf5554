package policy

import (
	"slices"

	v1beta2 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta2"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ReadsPeer reports whether Compute can read pod as a peer of policy p,
// so that a change of pod (its labels, its network-status addresses, its
// named ports, its creation or deletion) can change the rules of the pods
// p selects. It is true when pod has an attachment to a network of p's
// policy-for annotation and either a podSelector or namespaceSelector peer
// of one of p's ingress or egress rules selects pod (NetworkPolicy's
// rules, as in Compute), or an egress rule of p has named ports and no
// peers (its named ports resolve on every pod of the network).
// nsLabels are the labels of pod's namespace. A selector that does not
// parse selects nothing; a policy-for that does not parse names no
// network. Callers ask for a pod's old and new versions both: a change
// matters when either is read.
func ReadsPeer(p *v1beta2.MultiNetworkPolicy, pod Pod, nsLabels map[string]string) bool {
	nets, err := p.PolicyFor()
	if err != nil || !slices.ContainsFunc(nets, func(n types.NamespacedName) bool { return attachedTo(&pod, n) }) {
		return false
	}
	for _, r := range p.Spec.Ingress {
		if peerListSelects(p, r.From, pod, nsLabels) {
			return true
		}
	}
	for _, r := range p.Spec.Egress {
		if len(r.To) == 0 && slices.ContainsFunc(r.Ports, namedPort) || peerListSelects(p, r.To, pod, nsLabels) {
			return true
		}
	}
	return false
}

// peerListSelects reports whether a selector peer of list selects pod.
func peerListSelects(p *v1beta2.MultiNetworkPolicy, list []v1beta2.MultiNetworkPolicyPeer, pod Pod, nsLabels map[string]string) bool {
	for _, peer := range list {
		if peer.IPBlock != nil || peer.PodSelector == nil && peer.NamespaceSelector == nil {
			continue // an ipBlock names no pod; an empty peer matches nothing
		}
		if peerSelects(p, peer, pod, nsLabels) {
			return true
		}
	}
	return false
}

// peerSelects reports whether selector peer of policy p selects pod (the
// rules of selectedPods; a selector that does not parse selects nothing).
func peerSelects(p *v1beta2.MultiNetworkPolicy, peer v1beta2.MultiNetworkPolicyPeer, pod Pod, nsLabels map[string]string) bool {
	m, _, err := newPeerMatcher(p, peer)
	return err == nil && m.inNamespace(pod.Namespace, func() labels.Set { return namespaceLabels(pod.Namespace, nsLabels) }) &&
		m.pods.Matches(labels.Set(pod.Labels))
}

// namedPort reports whether a rule's port is a named one.
func namedPort(p v1beta2.MultiNetworkPolicyPort) bool {
	return p.Port != nil && p.Port.Type == intstr.String
}
