package policy

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"testing"

	v1beta2 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var (
	netA = types.NamespacedName{Namespace: "prod", Name: "net-a"}
	netB = types.NamespacedName{Namespace: "prod", Name: "net-b"}
	netC = types.NamespacedName{Namespace: "other", Name: "net-c"}
)

func ips(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func prefixes(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, a := range s {
		out = append(out, netip.MustParsePrefix(a))
	}
	return out
}

// The cluster of the tests: the target in prod on net-a and net-b; peers in
// prod, dev and other.
var (
	target = Pod{Namespace: "prod", Name: "target", Labels: map[string]string{"app": "db"},
		Ports: []NamedPort{{Name: "sql", Port: 5432}, {Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53}},
		Attachments: []Attachment{
			{Network: netA, Interface: "net1", IPs: ips("10.0.0.1", "fd00::1")},
			{Network: netB, Interface: "net2", IPs: ips("10.1.0.1")},
		}}
	webProd = Pod{Namespace: "prod", Name: "web", Labels: map[string]string{"app": "web"},
		Ports:       []NamedPort{{Name: "http", Port: 8080}},
		Attachments: []Attachment{{Network: netA, Interface: "net1", IPs: ips("10.0.0.2", "fd00::2")}, {Network: netB, Interface: "net2", IPs: ips("10.1.0.2")}}}
	webDev = Pod{Namespace: "dev", Name: "web", Labels: map[string]string{"app": "web"},
		Ports:       []NamedPort{{Name: "http", Port: 8000}},
		Attachments: []Attachment{{Network: netA, Interface: "net1", IPs: ips("10.0.0.3")}}}
	batchDev = Pod{Namespace: "dev", Name: "batch", Labels: map[string]string{"app": "batch"},
		Attachments: []Attachment{{Network: netA, Interface: "net1", IPs: ips("10.0.0.4")}}}
	webOther = Pod{Namespace: "other", Name: "web", Labels: map[string]string{"app": "web"},
		Attachments: []Attachment{{Network: netC, Interface: "net1", IPs: ips("10.0.0.5")}}}
	namespaces = map[string]map[string]string{"prod": {"env": "prod"}, "dev": {"env": "dev"}, "other": {"env": "other"}}
	allPods    = []Pod{target, webProd, webDev, batchDev, webOther}
)

func pol(name, policyFor string, spec v1beta2.MultiNetworkPolicySpec) *v1beta2.MultiNetworkPolicy {
	p := &v1beta2.MultiNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name}, Spec: spec}
	if policyFor != "" {
		p.Annotations = map[string]string{v1beta2.PolicyForAnnotation: policyFor}
	}
	return p
}

func sel(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

func tcp(p int32) v1beta2.MultiNetworkPolicyPort {
	v := intstr.FromInt32(p)
	return v1beta2.MultiNetworkPolicyPort{Port: &v}
}

func named(proto corev1.Protocol, name string) v1beta2.MultiNetworkPolicyPort {
	v := intstr.FromString(name)
	return v1beta2.MultiNetworkPolicyPort{Protocol: &proto, Port: &v}
}

func ingress(from []v1beta2.MultiNetworkPolicyPeer, ports ...v1beta2.MultiNetworkPolicyPort) []v1beta2.MultiNetworkPolicyIngressRule {
	return []v1beta2.MultiNetworkPolicyIngressRule{{From: from, Ports: ports}}
}

func egress(to []v1beta2.MultiNetworkPolicyPeer, ports ...v1beta2.MultiNetworkPolicyPort) []v1beta2.MultiNetworkPolicyEgressRule {
	return []v1beta2.MultiNetworkPolicyEgressRule{{To: to, Ports: ports}}
}

func peers(p ...v1beta2.MultiNetworkPolicyPeer) []v1beta2.MultiNetworkPolicyPeer { return p }

func byName(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: "prod", Name: name}
}

// iface is the Interface of target for net1 (net-a) with the given policy
// names.
func iface(name string, network types.NamespacedName, policies []string, in, eg Direction) Interface {
	out := Interface{Name: name, Network: network, Ingress: in, Egress: eg}
	for _, p := range policies {
		out.Policies = append(out.Policies, byName(p))
	}
	return out
}

func TestCompute(t *testing.T) {
	anyPort := func(pol string, peers ...string) Rule {
		return Rule{Policy: byName(pol), AllPorts: true, Peers: prefixes(peers...)}
	}
	isolated := func(rules ...Rule) Direction { return Direction{Isolated: true, Rules: rules} }
	cases := []struct {
		name     string
		policies []*v1beta2.MultiNetworkPolicy
		want     []Interface
	}{
		{"no policy", nil, nil},
		{"policy-for missing: no network", []*v1beta2.MultiNetworkPolicy{pol("p", "", v1beta2.MultiNetworkPolicySpec{})}, nil},
		{"podSelector does not match", []*v1beta2.MultiNetworkPolicy{pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{PodSelector: *sel("app", "web")})}, nil},
		{"podSelector matchExpressions", []*v1beta2.MultiNetworkPolicy{pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{PodSelector: metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"db"}}}}})}, nil},
		{"policy of another namespace", []*v1beta2.MultiNetworkPolicy{func() *v1beta2.MultiNetworkPolicy {
			p := pol("p", "prod/net-a", v1beta2.MultiNetworkPolicySpec{})
			p.Namespace = "dev"
			return p
		}()}, nil},
		{"no rules, no policyTypes: ingress isolated, egress not; only the policy's network",
			[]*v1beta2.MultiNetworkPolicy{pol("deny", "net-a", v1beta2.MultiNetworkPolicySpec{})},
			[]Interface{iface("net1", netA, []string{"deny"}, isolated(), Direction{})}},
		{"egress rules, no policyTypes: both isolated",
			[]*v1beta2.MultiNetworkPolicy{pol("p", "net-b", v1beta2.MultiNetworkPolicySpec{Egress: egress(nil)})},
			[]Interface{iface("net2", netB, []string{"p"}, isolated(), isolated(Rule{Policy: byName("p"), AllPeers: true, AllPorts: true}))}},
		{"policyTypes Egress: ingress rules ignored",
			[]*v1beta2.MultiNetworkPolicy{pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{PolicyTypes: []v1beta2.MultiPolicyType{v1beta2.PolicyTypeEgress},
				Ingress: ingress(nil)})},
			[]Interface{iface("net1", netA, []string{"p"}, Direction{}, isolated())}},
		{"podSelector peer: the policy's namespace only, addresses on the same network",
			[]*v1beta2.MultiNetworkPolicy{pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{Ingress: ingress(peers(v1beta2.MultiNetworkPolicyPeer{PodSelector: sel("app", "web")}))})},
			[]Interface{iface("net1", netA, []string{"p"}, isolated(anyPort("p", "10.0.0.2/32", "fd00::2/128")), Direction{})}},
		{"namespaceSelector peer: every pod of the matching namespaces",
			[]*v1beta2.MultiNetworkPolicy{pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{Ingress: ingress(peers(v1beta2.MultiNetworkPolicyPeer{NamespaceSelector: sel("env", "dev")}))})},
			[]Interface{iface("net1", netA, []string{"p"}, isolated(anyPort("p", "10.0.0.3/32", "10.0.0.4/32")), Direction{})}},
		{"both selectors: the matching pods of the matching namespaces",
			[]*v1beta2.MultiNetworkPolicy{pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{Ingress: ingress(peers(v1beta2.MultiNetworkPolicyPeer{NamespaceSelector: sel(), PodSelector: sel("app", "web")}))})},
			[]Interface{iface("net1", netA, []string{"p"}, isolated(anyPort("p", "10.0.0.2/31", "fd00::2/128")), Direction{})}},
		{"namespaceSelector by kubernetes.io/metadata.name",
			[]*v1beta2.MultiNetworkPolicy{pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{Ingress: ingress(peers(v1beta2.MultiNetworkPolicyPeer{NamespaceSelector: sel(corev1.LabelMetadataName, "dev"), PodSelector: sel("app", "batch")}))})},
			[]Interface{iface("net1", netA, []string{"p"}, isolated(anyPort("p", "10.0.0.4/32")), Direction{})}},
		{"selector matching no pod: the rule matches nothing",
			[]*v1beta2.MultiNetworkPolicy{pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{Ingress: ingress(peers(v1beta2.MultiNetworkPolicyPeer{PodSelector: sel("app", "none")}))})},
			[]Interface{iface("net1", netA, []string{"p"}, isolated(Rule{Policy: byName("p"), AllPorts: true}), Direction{})}},
		{"ipBlock with except, IPv4 and IPv6, host bits masked",
			[]*v1beta2.MultiNetworkPolicy{pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{Ingress: ingress(peers(
				v1beta2.MultiNetworkPolicyPeer{IPBlock: &v1beta2.IPBlock{CIDR: "192.168.1.7/24", Except: []string{"192.168.1.128/25"}}},
				v1beta2.MultiNetworkPolicyPeer{IPBlock: &v1beta2.IPBlock{CIDR: "2001:db8::/32", Except: []string{"2001:db8::/33"}}}))})},
			[]Interface{iface("net1", netA, []string{"p"}, isolated(anyPort("p", "192.168.1.0/25", "2001:db8:8000::/33")), Direction{})}},
		{"two peers: each ipBlock's except narrows only its own block",
			[]*v1beta2.MultiNetworkPolicy{pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{Ingress: ingress(peers(
				v1beta2.MultiNetworkPolicyPeer{IPBlock: &v1beta2.IPBlock{CIDR: "10.0.0.0/24", Except: []string{"10.0.0.0/25"}}},
				v1beta2.MultiNetworkPolicyPeer{IPBlock: &v1beta2.IPBlock{CIDR: "10.0.0.0/25"}}))})},
			[]Interface{iface("net1", netA, []string{"p"}, isolated(anyPort("p", "10.0.0.0/24")), Direction{})}},
		{"ports: TCP by default, endPort range, protocol only, ingress named port from the target (protocol must match)",
			[]*v1beta2.MultiNetworkPolicy{pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{Ingress: ingress(nil,
				tcp(80), func() v1beta2.MultiNetworkPolicyPort { p := tcp(9000); e := int32(9010); p.EndPort = &e; return p }(),
				v1beta2.MultiNetworkPolicyPort{Protocol: ptr(corev1.ProtocolSCTP)},
				named(corev1.ProtocolTCP, "sql"), named(corev1.ProtocolTCP, "dns"), named(corev1.ProtocolUDP, "dns"))})},
			[]Interface{iface("net1", netA, []string{"p"}, isolated(Rule{Policy: byName("p"), AllPeers: true, Ports: []Port{
				{Protocol: corev1.ProtocolSCTP}, {Protocol: corev1.ProtocolTCP, Port: 80, EndPort: 80}, {Protocol: corev1.ProtocolTCP, Port: 5432, EndPort: 5432},
				{Protocol: corev1.ProtocolTCP, Port: 9000, EndPort: 9010}, {Protocol: corev1.ProtocolUDP, Port: 53, EndPort: 53}}}), Direction{})}},
		{"ingress named port the target lacks: the rule matches nothing",
			[]*v1beta2.MultiNetworkPolicy{pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{Ingress: ingress(nil, named(corev1.ProtocolTCP, "http"))})},
			[]Interface{iface("net1", netA, []string{"p"}, isolated(Rule{Policy: byName("p"), AllPeers: true}), Direction{})}},
		{"egress named port resolved per peer pod",
			[]*v1beta2.MultiNetworkPolicy{pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{PolicyTypes: []v1beta2.MultiPolicyType{v1beta2.PolicyTypeEgress},
				Egress: egress(peers(v1beta2.MultiNetworkPolicyPeer{NamespaceSelector: sel(), PodSelector: sel("app", "web")},
					v1beta2.MultiNetworkPolicyPeer{IPBlock: &v1beta2.IPBlock{CIDR: "172.16.0.0/16"}}), named(corev1.ProtocolTCP, "http"), tcp(443))})},
			[]Interface{iface("net1", netA, []string{"p"}, Direction{}, isolated(
				Rule{Policy: byName("p"), Peers: prefixes("10.0.0.2/31", "172.16.0.0/16", "fd00::2/128"), Ports: []Port{{Protocol: corev1.ProtocolTCP, Port: 443, EndPort: 443}}},
				Rule{Policy: byName("p"), Peers: prefixes("10.0.0.3/32"), Ports: []Port{{Protocol: corev1.ProtocolTCP, Port: 8000, EndPort: 8000}}},
				Rule{Policy: byName("p"), Peers: prefixes("10.0.0.2/32", "fd00::2/128"), Ports: []Port{{Protocol: corev1.ProtocolTCP, Port: 8080, EndPort: 8080}}}))}},
		{"egress named port to every destination: every pod on the network that has it",
			[]*v1beta2.MultiNetworkPolicy{pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{PolicyTypes: []v1beta2.MultiPolicyType{v1beta2.PolicyTypeEgress},
				Egress: egress(nil, named(corev1.ProtocolTCP, "http"))})},
			[]Interface{iface("net1", netA, []string{"p"}, Direction{}, isolated(
				Rule{Policy: byName("p"), Peers: prefixes("10.0.0.3/32"), Ports: []Port{{Protocol: corev1.ProtocolTCP, Port: 8000, EndPort: 8000}}},
				Rule{Policy: byName("p"), Peers: prefixes("10.0.0.2/32", "fd00::2/128"), Ports: []Port{{Protocol: corev1.ProtocolTCP, Port: 8080, EndPort: 8080}}}))}},
		{"two policies on two networks: rules add up per interface",
			[]*v1beta2.MultiNetworkPolicy{
				pol("b", "net-a,net-b", v1beta2.MultiNetworkPolicySpec{Ingress: ingress(peers(v1beta2.MultiNetworkPolicyPeer{PodSelector: sel("app", "web")}))}),
				pol("a", "net-a", v1beta2.MultiNetworkPolicySpec{Ingress: ingress(peers(v1beta2.MultiNetworkPolicyPeer{IPBlock: &v1beta2.IPBlock{CIDR: "10.9.0.0/16"}}))})},
			[]Interface{
				iface("net1", netA, []string{"a", "b"}, isolated(anyPort("a", "10.9.0.0/16"), anyPort("b", "10.0.0.2/32", "fd00::2/128")), Direction{}),
				iface("net2", netB, []string{"b"}, isolated(anyPort("b", "10.1.0.2/32")), Direction{})}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Compute(Cluster{Policies: tc.policies, Namespaces: namespaces, Pods: allPods}, target)
			if len(got.Problems) > 0 {
				t.Errorf("problems: %+v", got.Problems)
			}
			if !reflect.DeepEqual(got.Interfaces, tc.want) {
				g, _ := json.MarshalIndent(got.Interfaces, "", " ")
				w, _ := json.MarshalIndent(tc.want, "", " ")
				t.Errorf("got\n%s\nwant\n%s", g, w)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
