package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	v1beta2 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta2"
	"go4.org/netipx"
	"k8s.io/apimachinery/pkg/types"
)

// ingressRules returns p's ingress rules for target's interface on net.
// Named ports are the target's container ports.
func (cx *computation) ingressRules(p *v1beta2.MultiNetworkPolicy, net types.NamespacedName, target Pod) []Rule {
	var out []Rule
	for i, r := range p.Spec.Ingress {
		path := fmt.Sprintf("spec.ingress[%d]", i)
		rule := Rule{Policy: nameOf(p), Index: i}
		specs, all := cx.portSpecs(p, path, r.Ports)
		rule.AllPorts = all
		rule.Ports = resolvePorts(specs, target.Ports)
		var peers peerSet
		rule.AllPeers, peers = cx.peers(p, path+".from", r.From, net)
		rule.Peers = peers.prefixes(net)
		out = append(out, rule)
	}
	return out
}

// egressRules returns p's egress rules for an interface on net. A named
// port is resolved per peer pod (its container ports): an egress rule with
// named ports gives one Rule for its numeric ports and every peer, and one
// Rule per distinct set of resolved named ports and the pods that have it.
func (cx *computation) egressRules(p *v1beta2.MultiNetworkPolicy, net types.NamespacedName) []Rule {
	var out []Rule
	for i, r := range p.Spec.Egress {
		path := fmt.Sprintf("spec.egress[%d]", i)
		specs, allPorts := cx.portSpecs(p, path, r.Ports)
		allPeers, peers := cx.peers(p, path+".to", r.To, net)
		numeric := resolvePorts(specs, nil)
		base := Rule{Policy: nameOf(p), Index: i, AllPeers: allPeers, Peers: peers.prefixes(net), AllPorts: allPorts, Ports: numeric}
		if !slices.ContainsFunc(specs, portSpec.named) {
			out = append(out, base)
			continue
		}
		if len(numeric) > 0 {
			out = append(out, base)
		}
		if allPeers {
			peers.pods = cx.podsOn(net)
		}
		out = append(out, namedPortRules(base, specs, peers.pods, net)...)
	}
	return out
}

// namedPortRules groups the peer pods by the ports the named port specs
// resolve to on each, and returns one rule per group.
func namedPortRules(base Rule, specs []portSpec, pods []*Pod, net types.NamespacedName) []Rule {
	named := slices.DeleteFunc(slices.Clone(specs), func(s portSpec) bool { return !s.named() })
	groups := map[string]*peerSet{}
	ports := map[string][]Port{}
	var keys []string
	for _, pod := range pods {
		resolved := resolvePorts(named, pod.Ports)
		if len(resolved) == 0 {
			continue
		}
		key := fmt.Sprint(resolved)
		if groups[key] == nil {
			groups[key] = &peerSet{}
			ports[key] = resolved
			keys = append(keys, key)
		}
		groups[key].pods = append(groups[key].pods, pod)
	}
	slices.Sort(keys)
	out := []Rule{}
	for _, key := range keys {
		out = append(out, Rule{Policy: base.Policy, Index: base.Index, Peers: groups[key].prefixes(net), Ports: ports[key]})
	}
	if len(out) == 0 {
		// Nothing resolves: say so as a rule that matches nothing.
		out = append(out, Rule{Policy: base.Policy, Index: base.Index})
	}
	return out
}

// peerSet is what the peers of a rule resolve to: address blocks (ipBlock)
// and pods (selectors).
type peerSet struct {
	blocks netipx.IPSetBuilder
	pods   []*Pod
}

// prefixes returns the set's addresses: its blocks and its pods' addresses
// on net, as disjoint sorted prefixes.
func (s *peerSet) prefixes(net types.NamespacedName) []netip.Prefix {
	b := &s.blocks
	for _, pod := range s.pods {
		for _, a := range pod.Attachments {
			if a.Network != net {
				continue
			}
			for _, ip := range a.IPs {
				b.Add(ip.Unmap())
			}
		}
	}
	set, err := b.IPSet()
	if err != nil || set == nil || len(set.Prefixes()) == 0 {
		return nil
	}
	return set.Prefixes()
}

// peers resolves a rule's from/to list on network net. An empty list allows
// every peer. A peer it cannot read is reported and matches nothing.
func (cx *computation) peers(p *v1beta2.MultiNetworkPolicy, path string, list []v1beta2.MultiNetworkPolicyPeer, net types.NamespacedName) (bool, peerSet) {
	var s peerSet
	if len(list) == 0 {
		return true, s
	}
	for i, peer := range list {
		path := fmt.Sprintf("%s[%d]", path, i)
		switch {
		case peer.IPBlock != nil && (peer.PodSelector != nil || peer.NamespaceSelector != nil):
			cx.problem(p, "", ReasonInvalidPeer, "%s: ipBlock cannot be combined with podSelector or namespaceSelector: the peer matches nothing", path)
		case peer.IPBlock != nil:
			cx.ipBlock(p, path+".ipBlock", peer.IPBlock, &s.blocks)
		case peer.PodSelector != nil || peer.NamespaceSelector != nil:
			s.pods = append(s.pods, cx.selectedPods(p, path, peer, net)...)
		default:
			cx.problem(p, "", ReasonInvalidPeer, "%s: a peer needs podSelector, namespaceSelector or ipBlock: the peer matches nothing", path)
		}
	}
	return false, s
}

// ipBlock adds block's CIDR minus its excepts to b. A CIDR or except that
// does not parse is reported and the block adds nothing.
func (cx *computation) ipBlock(p *v1beta2.MultiNetworkPolicy, path string, block *v1beta2.IPBlock, b *netipx.IPSetBuilder) {
	cidr, err := netip.ParsePrefix(strings.TrimSpace(block.CIDR))
	if err != nil {
		cx.problem(p, "", ReasonInvalidPeer, "%s.cidr %q: %v: the peer matches nothing", path, block.CIDR, err)
		return
	}
	var one netipx.IPSetBuilder
	one.AddPrefix(cidr.Masked())
	for i, e := range block.Except {
		ex, err := netip.ParsePrefix(strings.TrimSpace(e))
		if err != nil {
			cx.problem(p, "", ReasonInvalidPeer, "%s.except[%d] %q: %v: the peer matches nothing", path, i, e, err)
			return
		}
		one.RemovePrefix(ex.Masked())
	}
	set, err := one.IPSet()
	if err == nil {
		b.AddSet(set)
	}
}
