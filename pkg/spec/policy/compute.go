package policy

import (
	"cmp"
	"fmt"
	"slices"

	v1beta2 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// Compute returns the effective policy of target: one Interface per
// interface of target on a network that the policy-for annotation of a
// policy selecting target names, with each direction isolated or not and
// the rules allowing traffic (NetworkPolicy's semantics, per network).
// Interfaces not in the result are not filtered. Compute never fails: what
// it cannot enforce as written is in Result.Problems, and a rule part it
// cannot read matches nothing (fails closed).
func Compute(c Cluster, target Pod) Result {
	cx := newComputation(c)
	ifaces := map[string]*Interface{}
	for _, p := range sortedPolicies(c.Policies) {
		cx.applyPolicy(p, target, ifaces)
	}
	var res Result
	for _, in := range ifaces {
		slices.SortFunc(in.Policies, compareNames)
		in.Policies = slices.Compact(in.Policies)
		res.Interfaces = append(res.Interfaces, *in)
	}
	slices.SortFunc(res.Interfaces, func(a, b Interface) int { return cmp.Compare(a.Name, b.Name) })
	res.Problems = cx.sortedProblems()
	return res
}

// Check returns the problems of policy p that do not depend on a pod: a
// policy-for annotation that does not parse or names an unknown network,
// selectors that do not parse, invalid peers and ports. Use it for the
// policy's own Events or conditions.
func Check(c Cluster, p *v1beta2.MultiNetworkPolicy) []Problem {
	cx := newComputation(c)
	if _, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector); err != nil {
		cx.problem(p, "", ReasonInvalidSelector, "spec.podSelector: %v: the policy selects no pod", err)
	}
	cx.networks(p)
	for i, r := range p.Spec.Ingress {
		path := fmt.Sprintf("spec.ingress[%d]", i)
		cx.portSpecs(p, path, r.Ports)
		cx.peers(p, path+".from", r.From, types.NamespacedName{})
	}
	for i, r := range p.Spec.Egress {
		path := fmt.Sprintf("spec.egress[%d]", i)
		cx.portSpecs(p, path, r.Ports)
		cx.peers(p, path+".to", r.To, types.NamespacedName{})
	}
	return cx.sortedProblems()
}

// Selects reports whether p selects pod: same namespace and p's
// spec.podSelector matches the pod's labels. Errors: the selector does not
// parse (the policy then selects no pod).
func Selects(p *v1beta2.MultiNetworkPolicy, pod Pod) (bool, error) {
	if p.Namespace != pod.Namespace {
		return false, nil
	}
	sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
	if err != nil {
		return false, fmt.Errorf("policy %s/%s: spec.podSelector: %w", p.Namespace, p.Name, err)
	}
	return sel.Matches(labels.Set(pod.Labels)), nil
}

// PolicyTypes returns whether p isolates ingress and egress: its
// spec.policyTypes when set, else Ingress always and Egress when p has
// egress rules (NetworkPolicy's defaulting).
func PolicyTypes(p *v1beta2.MultiNetworkPolicy) (ingress, egress bool) {
	if len(p.Spec.PolicyTypes) == 0 {
		return true, len(p.Spec.Egress) > 0
	}
	for _, t := range p.Spec.PolicyTypes {
		switch t {
		case v1beta2.PolicyTypeIngress:
			ingress = true
		case v1beta2.PolicyTypeEgress:
			egress = true
		}
	}
	return ingress, egress
}

// computation is one Compute or Check call: the cluster and the problems
// found so far.
type computation struct {
	c        Cluster
	problems map[Problem]bool
}

func newComputation(c Cluster) *computation {
	return &computation{c: c, problems: map[Problem]bool{}}
}

func (cx *computation) problem(p *v1beta2.MultiNetworkPolicy, iface, reason, format string, args ...any) {
	cx.problems[Problem{
		Policy:    nameOf(p),
		Interface: iface,
		Reason:    reason,
		Message:   fmt.Sprintf("MultiNetworkPolicy %s/%s: ", p.Namespace, p.Name) + fmt.Sprintf(format, args...),
	}] = true
}

func (cx *computation) sortedProblems() []Problem {
	var out []Problem
	for p := range cx.problems {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b Problem) int {
		return cmp.Or(compareNames(a.Policy, b.Policy), cmp.Compare(a.Interface, b.Interface),
			cmp.Compare(a.Reason, b.Reason), cmp.Compare(a.Message, b.Message))
	})
	return out
}

// applyPolicy adds what p means for target to ifaces.
func (cx *computation) applyPolicy(p *v1beta2.MultiNetworkPolicy, target Pod, ifaces map[string]*Interface) {
	if p.Namespace != target.Namespace {
		return
	}
	sel, err := metav1.LabelSelectorAsSelector(&p.Spec.PodSelector)
	if err != nil {
		cx.problem(p, "", ReasonInvalidSelector, "spec.podSelector: %v: the policy selects no pod", err)
		return
	}
	if !sel.Matches(labels.Set(target.Labels)) {
		return
	}
	nets := cx.networks(p)
	ingress, egress := PolicyTypes(p)
	for _, a := range target.Attachments {
		if !slices.Contains(nets, a.Network) {
			continue
		}
		if a.NoKernelInterface || a.Interface == "" {
			cx.problem(p, a.Interface, ReasonNoKernelInterface,
				"pod %s/%s: the attachment to %s has no kernel interface in the pod: the policy is not enforced on it",
				target.Namespace, target.Name, a.Network)
			continue
		}
		in := ifaces[a.Interface]
		if in == nil {
			in = &Interface{Name: a.Interface, Network: a.Network}
			ifaces[a.Interface] = in
		}
		in.Policies = append(in.Policies, nameOf(p))
		if ingress {
			in.Ingress.Isolated = true
			in.Ingress.Rules = append(in.Ingress.Rules, cx.ingressRules(p, a.Network, target)...)
		}
		if egress {
			in.Egress.Isolated = true
			in.Egress.Rules = append(in.Egress.Rules, cx.egressRules(p, a.Network)...)
		}
	}
}

// networks returns the networks p is for, reporting an annotation that does
// not parse and networks that do not exist.
func (cx *computation) networks(p *v1beta2.MultiNetworkPolicy) []types.NamespacedName {
	nets, err := p.PolicyFor()
	if err != nil {
		cx.problem(p, "", ReasonInvalidPolicyFor, "%v: the policy applies to no network", err)
		return nil
	}
	if cx.c.NetworkExists != nil {
		for _, n := range nets {
			if !cx.c.NetworkExists(n) {
				cx.problem(p, "", ReasonUnknownNetwork,
					"annotation %s names NetworkAttachmentDefinition %s, which does not exist", v1beta2.PolicyForAnnotation, n)
			}
		}
	}
	return nets
}

func sortedPolicies(in []*v1beta2.MultiNetworkPolicy) []*v1beta2.MultiNetworkPolicy {
	out := slices.Clone(in)
	out = slices.DeleteFunc(out, func(p *v1beta2.MultiNetworkPolicy) bool { return p == nil })
	slices.SortFunc(out, func(a, b *v1beta2.MultiNetworkPolicy) int { return compareNames(nameOf(a), nameOf(b)) })
	return out
}

func nameOf(p *v1beta2.MultiNetworkPolicy) types.NamespacedName {
	return types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
}

func compareNames(a, b types.NamespacedName) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
}
