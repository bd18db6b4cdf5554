package explain

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/multinet/multinet/pkg/spec/policy"
)

// PolicySource reads what the MultiNetworkPolicy rules of a pod of
// namespace depend on: the policies of namespace, every namespace's
// labels, every pod that can be a peer (not finished) and whether a
// NetworkAttachmentDefinition exists (kubectl multinet explain: the API
// server). Give every call a deadline.
type PolicySource func(ctx context.Context, namespace string) (policy.Cluster, error)

// NetworkPolicy is what the MultiNetworkPolicies mean for a pod's
// interfaces: policy.Compute over its network-status, the computation
// multinetd writes into the pod's network namespace
// (docs/network-policy.md). JSON: the field tags; lists are never null.
type NetworkPolicy struct {
	// Interfaces are the pod's isolated interfaces, by name; the others
	// are not filtered.
	Interfaces []PolicyInterface `json:"interfaces"`
	// Problems are what cannot be enforced as written (multinetd posts
	// them as Warning Events).
	Problems []PolicyProblem `json:"problems"`
	// Error says why the policies could not be read; then the rest is
	// empty.
	Error string `json:"error,omitempty"`
}

// PolicyInterface is one isolated interface of the pod.
type PolicyInterface struct {
	Interface string          `json:"interface"`
	Network   string          `json:"network"`
	Policies  []string        `json:"policies"`
	Ingress   PolicyDirection `json:"ingress"`
	Egress    PolicyDirection `json:"egress"`
}

// PolicyDirection is one direction of an interface: when Isolated, only
// what a rule allows passes (and replies of established connections).
type PolicyDirection struct {
	Isolated bool         `json:"isolated"`
	Rules    []PolicyRule `json:"rules"`
}

// PolicyRule allows traffic from (ingress) or to (egress) Peers on Ports.
type PolicyRule struct {
	// Policy and Index name the rule: spec.ingress[Index] or
	// spec.egress[Index] of the policy.
	Policy string `json:"policy"`
	Index  int    `json:"index"`
	// Peers are address prefixes; ["any"] when the rule names no peer.
	Peers []string `json:"peers"`
	// Ports are PROTOCOL, PROTOCOL/PORT or PROTOCOL/FIRST-LAST; ["any"]
	// when the rule names no port.
	Ports []string `json:"ports"`
}

// PolicyProblem is something a policy asks that cannot be enforced.
type PolicyProblem struct {
	Policy    string `json:"policy"`
	Interface string `json:"interface,omitempty"`
	Reason    string `json:"reason"`
	Message   string `json:"message"`
}

// explainPolicy computes pod's policies from what src reads.
func explainPolicy(ctx context.Context, pod *corev1.Pod, src PolicySource) *NetworkPolicy {
	np := &NetworkPolicy{Interfaces: []PolicyInterface{}, Problems: []PolicyProblem{}}
	cluster, err := src(ctx, pod.Namespace)
	if err != nil {
		np.Error = err.Error()
		return np
	}
	target, err := policy.PodFromObject(pod)
	if err != nil {
		np.Error = fmt.Sprintf("network-status: %v", err)
		return np
	}
	res := policy.Compute(cluster, target)
	for _, in := range res.Interfaces {
		pi := PolicyInterface{Interface: in.Name, Network: in.Network.String(), Policies: []string{},
			Ingress: direction(in.Ingress), Egress: direction(in.Egress)}
		for _, p := range in.Policies {
			pi.Policies = append(pi.Policies, p.String())
		}
		np.Interfaces = append(np.Interfaces, pi)
	}
	for _, p := range res.Problems {
		np.Problems = append(np.Problems, PolicyProblem{Policy: p.Policy.String(), Interface: p.Interface, Reason: p.Reason, Message: p.Message})
	}
	return np
}

func direction(d policy.Direction) PolicyDirection {
	out := PolicyDirection{Isolated: d.Isolated, Rules: []PolicyRule{}}
	for _, r := range d.Rules {
		pr := PolicyRule{Policy: r.Policy.String(), Index: r.Index, Peers: []string{}, Ports: []string{}}
		if r.AllPeers {
			pr.Peers = append(pr.Peers, "any")
		}
		for _, p := range r.Peers {
			pr.Peers = append(pr.Peers, p.String())
		}
		if r.AllPorts {
			pr.Ports = append(pr.Ports, "any")
		}
		for _, p := range r.Ports {
			pr.Ports = append(pr.Ports, portString(p))
		}
		out.Rules = append(out.Rules, pr)
	}
	return out
}

// portString is PROTOCOL, PROTOCOL/PORT or PROTOCOL/FIRST-LAST.
func portString(p policy.Port) string {
	switch {
	case p.Port == 0:
		return string(p.Protocol)
	case p.EndPort > p.Port:
		return fmt.Sprintf("%s/%d-%d", p.Protocol, p.Port, p.EndPort)
	}
	return string(p.Protocol) + "/" + strconv.Itoa(int(p.Port))
}

// writePolicy writes np for people: per isolated interface its policies
// and each direction's rules, then the problems.
func writePolicy(b *strings.Builder, np *NetworkPolicy) {
	switch {
	case np.Error != "":
		fmt.Fprintf(b, "Network policy: not known: %s\n", np.Error)
		return
	case len(np.Interfaces) == 0 && len(np.Problems) == 0:
		b.WriteString("Network policy: no MultiNetworkPolicy isolates an interface of this pod\n")
		return
	}
	b.WriteString("Network policy:\n")
	for _, in := range np.Interfaces {
		fmt.Fprintf(b, "  %s (%s): %s\n", in.Interface, in.Network, strings.Join(in.Policies, ", "))
		writeDirection(b, "ingress", "from", in.Ingress)
		writeDirection(b, "egress", "to", in.Egress)
	}
	for _, p := range np.Problems {
		fmt.Fprintf(b, "  problem: %s: %s\n", p.Reason, p.Message)
	}
}

func writeDirection(b *strings.Builder, name, peers string, d PolicyDirection) {
	if !d.Isolated {
		fmt.Fprintf(b, "    %s: not isolated\n", name)
		return
	}
	fmt.Fprintf(b, "    %s: isolated, %d rule(s) (replies of established connections pass)\n", name, len(d.Rules))
	for _, r := range d.Rules {
		fmt.Fprintf(b, "      allow %s %s ports %s  (%s %s[%d])\n", peers, strings.Join(r.Peers, ","), strings.Join(r.Ports, ","), r.Policy, name, r.Index)
	}
}
