package policy

import (
	"fmt"
	"net/netip"
	"testing"

	v1beta2 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// benchCluster is make bench's policy shape: pods with 2 networks and 50
// policies in one namespace, each selecting a tenth of the pods and
// allowing another tenth on a port.
func benchCluster(pods int) (Cluster, []Pod) {
	nets := []types.NamespacedName{{Namespace: "bench", Name: "net-a"}, {Namespace: "bench", Name: "net-b"}}
	c := Cluster{Namespaces: map[string]map[string]string{"bench": {"env": "bench"}}}
	for i := range pods {
		p := Pod{Namespace: "bench", Name: fmt.Sprintf("pod-%d", i), Labels: map[string]string{"group": fmt.Sprint(i % 10), "app": fmt.Sprint(i % 50)}}
		for j, n := range nets {
			p.Attachments = append(p.Attachments, Attachment{Network: n, Interface: fmt.Sprintf("net%d", j+1),
				IPs: []netip.Addr{netip.AddrFrom4([4]byte{10, byte(j), byte(i >> 8), byte(i)})}})
		}
		c.Pods = append(c.Pods, p)
	}
	for i := range 50 {
		port := intstr.FromInt32(int32(8000 + i))
		c.Policies = append(c.Policies, &v1beta2.MultiNetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("p-%d", i),
				Annotations: map[string]string{v1beta2.PolicyForAnnotation: "net-a,net-b"}},
			Spec: v1beta2.MultiNetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"group": fmt.Sprint(i % 10)}},
				Ingress: []v1beta2.MultiNetworkPolicyIngressRule{{
					From:  []v1beta2.MultiNetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"group": fmt.Sprint((i + 1) % 10)}}}},
					Ports: []v1beta2.MultiNetworkPolicyPort{{Port: &port}},
				}},
			},
		})
	}
	return c, c.Pods
}

// BenchmarkComputeNode computes the rules of every pod of a 300-pod node
// under 50 policies: what one full re-sync of the node costs in Compute.
func BenchmarkComputeNode(b *testing.B) {
	c, targets := benchCluster(300)
	b.ReportAllocs()
	for b.Loop() {
		for _, t := range targets {
			Compute(c, t)
		}
	}
}
