package policy

import (
	"encoding/json"
	"net/netip"
	"reflect"
	"testing"

	v1beta2 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzCompute feeds arbitrary policy specs (JSON, as the API server could
// store them through an older schema) and policy-for values to Compute and
// Check: they never panic, are deterministic, and every rule they return is
// well formed (peers masked, sorted, disjoint; ports valid). Corpus in
// testdata/fuzz/FuzzCompute.
func FuzzCompute(f *testing.F) {
	f.Add(`{"podSelector":{},"ingress":[{"from":[{"ipBlock":{"cidr":"10.0.0.0/8","except":["10.1.0.0/16"]}}],"ports":[{"port":80,"endPort":90}]}]}`, "net-a")
	f.Add(`{"podSelector":{"matchLabels":{"app":"db"}},"egress":[{"to":[{"podSelector":{}, "namespaceSelector":{}}],"ports":[{"port":"http"}]}],"policyTypes":["Egress"]}`, "prod/net-a,net-b")
	f.Add(`{"podSelector":{},"ingress":[{"from":[{}],"ports":[{"protocol":"SCTP"}]}]}`, " net-a , ,")
	f.Fuzz(func(t *testing.T, spec, policyFor string) {
		p := &v1beta2.MultiNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "p",
			Annotations: map[string]string{v1beta2.PolicyForAnnotation: policyFor}}}
		if err := json.Unmarshal([]byte(spec), &p.Spec); err != nil {
			return
		}
		c := Cluster{Policies: []*v1beta2.MultiNetworkPolicy{p}, Namespaces: namespaces, Pods: allPods}
		got := Compute(c, target)
		if again := Compute(c, target); !reflect.DeepEqual(got, again) {
			t.Fatalf("Compute is not deterministic:\n%+v\n%+v", got, again)
		}
		_ = Check(c, p)
		for _, in := range got.Interfaces {
			for _, r := range append(in.Ingress.Rules, in.Egress.Rules...) {
				checkRule(t, r)
			}
		}
	})
}

func checkRule(t *testing.T, r Rule) {
	t.Helper()
	if r.AllPeers && r.Peers != nil || r.AllPorts && r.Ports != nil {
		t.Fatalf("rule %+v: All* with a list", r)
	}
	var last netip.Prefix
	for i, p := range r.Peers {
		if p != p.Masked() {
			t.Fatalf("rule %+v: peer %s not masked", r, p)
		}
		if i > 0 && (last.Overlaps(p) || last.Addr().Compare(p.Addr()) >= 0) {
			t.Fatalf("rule %+v: peers not sorted and disjoint at %s", r, p)
		}
		last = p
	}
	for _, p := range r.Ports {
		valid := p.Protocol == corev1.ProtocolTCP || p.Protocol == corev1.ProtocolUDP || p.Protocol == corev1.ProtocolSCTP
		if !valid || p.EndPort < p.Port || p.Port == 0 && p.EndPort != 0 {
			t.Fatalf("rule %+v: bad port %+v", r, p)
		}
	}
}
