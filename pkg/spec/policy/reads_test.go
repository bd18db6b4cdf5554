package policy

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"

	v1beta2 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestReadsPeer(t *testing.T) {
	named := intstr.FromString("http")
	cases := []struct {
		name string
		p    *v1beta2.MultiNetworkPolicy
		pod  Pod
		want bool
	}{
		{"ingress podSelector selects it", pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{
			Ingress: []v1beta2.MultiNetworkPolicyIngressRule{{From: []v1beta2.MultiNetworkPolicyPeer{{PodSelector: sel("app", "web")}}}}}), webProd, true},
		{"podSelector alone: another namespace", pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{
			Ingress: []v1beta2.MultiNetworkPolicyIngressRule{{From: []v1beta2.MultiNetworkPolicyPeer{{PodSelector: sel("app", "web")}}}}}), webDev, false},
		{"namespaceSelector selects its namespace", pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{
			Egress: []v1beta2.MultiNetworkPolicyEgressRule{{To: []v1beta2.MultiNetworkPolicyPeer{{NamespaceSelector: sel("env", "dev")}}}}}), batchDev, true},
		{"both selectors: labels do not match", pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{
			Egress: []v1beta2.MultiNetworkPolicyEgressRule{{To: []v1beta2.MultiNetworkPolicyPeer{{NamespaceSelector: sel("env", "dev"), PodSelector: sel("app", "web")}}}}}), batchDev, false},
		{"metadata.name without the label", pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{
			Ingress: []v1beta2.MultiNetworkPolicyIngressRule{{From: []v1beta2.MultiNetworkPolicyPeer{{NamespaceSelector: sel("kubernetes.io/metadata.name", "dev")}}}}}), webDev, true},
		{"not on the policy's networks", pol("p", "net-b", v1beta2.MultiNetworkPolicySpec{
			Ingress: []v1beta2.MultiNetworkPolicyIngressRule{{From: []v1beta2.MultiNetworkPolicyPeer{{NamespaceSelector: sel()}}}}}), webDev, false},
		{"ipBlock names no pod", pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{
			Ingress: []v1beta2.MultiNetworkPolicyIngressRule{{From: []v1beta2.MultiNetworkPolicyPeer{{IPBlock: &v1beta2.IPBlock{CIDR: "10.0.0.0/8"}}}}}}), webProd, false},
		{"no peers: every address, no pod read", pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{
			Ingress: []v1beta2.MultiNetworkPolicyIngressRule{{}}, Egress: []v1beta2.MultiNetworkPolicyEgressRule{{Ports: []v1beta2.MultiNetworkPolicyPort{tcp(80)}}}}), webProd, false},
		{"egress named port, no peers: every pod of the network", pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{
			Egress: []v1beta2.MultiNetworkPolicyEgressRule{{Ports: []v1beta2.MultiNetworkPolicyPort{{Port: &named}}}}}), webDev, true},
		{"selector that does not parse", pol("p", "net-a", v1beta2.MultiNetworkPolicySpec{
			Ingress: []v1beta2.MultiNetworkPolicyIngressRule{{From: []v1beta2.MultiNetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}}}}}}), webProd, false},
		{"policy-for that does not parse", pol("p", "a/b/c", v1beta2.MultiNetworkPolicySpec{
			Ingress: []v1beta2.MultiNetworkPolicyIngressRule{{From: []v1beta2.MultiNetworkPolicyPeer{{PodSelector: sel()}}}}}), webProd, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := ReadsPeer(tc.p, tc.pod, namespaces[tc.pod.Namespace]); got != tc.want {
				t.Fatalf("ReadsPeer = %v, want %v", got, tc.want)
			}
			if tc.want {
				return
			}
			// Not read: the target's rules are the same without the pod.
			checkNotRead(t, tc.p, tc.pod)
		})
	}
}

// checkNotRead fails when the target's effective policy under p changes
// with pod left out of the cluster.
func checkNotRead(t *testing.T, p *v1beta2.MultiNetworkPolicy, pod Pod) {
	t.Helper()
	with := Cluster{Policies: []*v1beta2.MultiNetworkPolicy{p}, Namespaces: namespaces, Pods: allPods}
	without := with
	without.Pods = slices.DeleteFunc(slices.Clone(allPods), func(x Pod) bool { return x.Namespace == pod.Namespace && x.Name == pod.Name })
	if a, b := Compute(with, target), Compute(without, target); !reflect.DeepEqual(a, b) {
		t.Fatalf("ReadsPeer says pod %s/%s is not read, but the rules change without it:\n%+v\n%+v", pod.Namespace, pod.Name, a, b)
	}
}

// FuzzReadsPeer: for arbitrary policy specs and policy-for values, every
// peer pod that ReadsPeer says the policy does not read can be left out of
// the cluster without changing the target's rules (ReadsPeer never misses
// a pod Compute reads). Corpus in testdata/fuzz/FuzzReadsPeer.
func FuzzReadsPeer(f *testing.F) {
	f.Add(`{"podSelector":{},"ingress":[{"from":[{"podSelector":{"matchLabels":{"app":"web"}}}]}]}`, "net-a")
	f.Add(`{"podSelector":{"matchLabels":{"app":"db"}},"egress":[{"to":[{"namespaceSelector":{"matchLabels":{"env":"dev"}}}],"ports":[{"port":"http"}]}]}`, "net-a,net-b")
	f.Add(`{"podSelector":{},"egress":[{"ports":[{"port":"http"}]}],"policyTypes":["Egress"]}`, "prod/net-a")
	f.Add(`{"podSelector":{},"ingress":[{"from":[{"namespaceSelector":{},"podSelector":{"matchExpressions":[{"key":"app","operator":"NotIn","values":["web"]}]}}]}]}`, "net-a")
	f.Fuzz(func(t *testing.T, spec, policyFor string) {
		p := &v1beta2.MultiNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "p",
			Annotations: map[string]string{v1beta2.PolicyForAnnotation: policyFor}}}
		if err := json.Unmarshal([]byte(spec), &p.Spec); err != nil {
			return
		}
		for _, pod := range allPods {
			if pod.Name != target.Name && !ReadsPeer(p, pod, namespaces[pod.Namespace]) {
				checkNotRead(t, p, pod)
			}
		}
	})
}
