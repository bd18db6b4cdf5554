package policy

import (
	"reflect"
	"slices"
	"testing"

	v1beta2 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestComputeProblems: what a policy asks that cannot be enforced as
// written is reported with its reason, and the part it concerns fails
// closed (a peer or port that matches nothing) or, for the policy's own
// selector and policy-for, the policy applies to nothing.
func TestComputeProblems(t *testing.T) {
	badSel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}
	port := func(proto corev1.Protocol, p intstr.IntOrString, end int32) v1beta2.MultiNetworkPolicyPort {
		out := v1beta2.MultiNetworkPolicyPort{Protocol: &proto, Port: &p}
		if end != 0 {
			out.EndPort = &end
		}
		return out
	}
	nothing := Direction{Isolated: true, Rules: []Rule{{Policy: byName("p"), AllPorts: true}}}
	noPort := Direction{Isolated: true, Rules: []Rule{{Policy: byName("p"), AllPeers: true}}}
	cases := []struct {
		name        string
		policy      *v1beta2.MultiNetworkPolicy
		target      Pod
		wantReasons []string
		wantIngress *Direction // of net1; nil: no interface in the result
	}{
		{"unknown network: reported, the known one enforced", pol("p", "net-a,missing", v1beta2.MultiNetworkPolicySpec{}), target,
			[]string{ReasonUnknownNetwork}, &Direction{Isolated: true}},
		{"policy-for does not parse: no network", pol("p", "a/b/c", v1beta2.MultiNetworkPolicySpec{}), target,
			[]string{ReasonInvalidPolicyFor}, nil},
		{"spec.podSelector does not parse: selects no pod", pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{PodSelector: *badSel}), target,
			[]string{ReasonInvalidSelector}, nil},
		{"peer selector does not parse: matches nothing", pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{Ingress: ingress(peers(v1beta2.MultiNetworkPolicyPeer{PodSelector: badSel}))}), target,
			[]string{ReasonInvalidSelector}, &nothing},
		{"empty peer: matches nothing", pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{Ingress: ingress(peers(v1beta2.MultiNetworkPolicyPeer{}))}), target,
			[]string{ReasonInvalidPeer}, &nothing},
		{"ipBlock with a selector: matches nothing", pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{Ingress: ingress(peers(v1beta2.MultiNetworkPolicyPeer{
			IPBlock: &v1beta2.IPBlock{CIDR: "10.0.0.0/8"}, PodSelector: sel()}))}), target,
			[]string{ReasonInvalidPeer}, &nothing},
		{"CIDR that does not parse: matches nothing", pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{Ingress: ingress(peers(v1beta2.MultiNetworkPolicyPeer{
			IPBlock: &v1beta2.IPBlock{CIDR: "10.0.0.0/33"}}))}), target,
			[]string{ReasonInvalidPeer}, &nothing},
		{"except that does not parse: the block matches nothing", pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{Ingress: ingress(peers(v1beta2.MultiNetworkPolicyPeer{
			IPBlock: &v1beta2.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"nope"}}}))}), target,
			[]string{ReasonInvalidPeer}, &nothing},
		{"protocol ICMP, port 0, endPort below port, endPort with a name, bad name: each matches nothing", pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{Ingress: ingress(nil,
			port("ICMP", intstr.FromInt32(1), 0), port(corev1.ProtocolTCP, intstr.FromInt32(0), 0), port(corev1.ProtocolTCP, intstr.FromInt32(90), 80),
			port(corev1.ProtocolTCP, intstr.FromString("sql"), 6000), port(corev1.ProtocolTCP, intstr.FromString("-no-"), 0))}), target,
			[]string{ReasonInvalidPort, ReasonInvalidPort, ReasonInvalidPort, ReasonInvalidPort, ReasonInvalidPort}, &noPort},
		{"attachment without a kernel interface: reported, not in the result", pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{}),
			Pod{Namespace: "prod", Name: "dpdk", Attachments: []Attachment{{Network: netA, Interface: "net1", NoKernelInterface: true}}},
			[]string{ReasonNoKernelInterface}, nil},
	}
	exists := func(n types.NamespacedName) bool { return n == netA || n == netB }
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := Cluster{Policies: []*v1beta2.MultiNetworkPolicy{tc.policy}, Namespaces: namespaces, Pods: allPods, NetworkExists: exists}
			got := Compute(c, tc.target)
			var reasons []string
			for _, p := range got.Problems {
				reasons = append(reasons, p.Reason)
				if p.Policy != byName("p") || p.Message == "" {
					t.Errorf("problem %+v: want policy prod/p and a message", p)
				}
			}
			if !slices.Equal(reasons, tc.wantReasons) {
				t.Errorf("reasons %v, want %v (%+v)", reasons, tc.wantReasons, got.Problems)
			}
			var ingress *Direction
			for _, in := range got.Interfaces {
				if in.Name == "net1" {
					ingress = &in.Ingress
				}
			}
			if !reflect.DeepEqual(ingress, tc.wantIngress) {
				t.Errorf("net1 ingress %+v, want %+v", ingress, tc.wantIngress)
			}
			if tc.target.Name == target.Name {
				if check := Check(c, tc.policy); !reflect.DeepEqual(check, got.Problems) {
					t.Errorf("Check: %+v, want Compute's %+v", check, got.Problems)
				}
			}
		})
	}
}
