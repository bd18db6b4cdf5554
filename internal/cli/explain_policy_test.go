package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta2"
	"github.com/multinet/multinet/internal/cli/explain"
	fakeversioned "github.com/multinet/multinet/pkg/client/clientset/versioned/fake"
	"github.com/multinet/multinet/pkg/spec/policy"
)

// TestExplainNetworkPolicy: explain shows, per interface, the policies
// that select it and the effective rules (the peers' addresses on that
// network, the ports), and what cannot be enforced (an attachment without
// a kernel interface); text and JSON.
func TestExplainNetworkPolicy(t *testing.T) {
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(8080)
	pol := &v1beta2.MultiNetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "web-in", Annotations: map[string]string{v1beta2.PolicyForAnnotation: "net-a,vhost"}},
		Spec: v1beta2.MultiNetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Ingress: []v1beta2.MultiNetworkPolicyIngressRule{{
				Ports: []v1beta2.MultiNetworkPolicyPort{{Protocol: &tcp, Port: &port}},
				From:  []v1beta2.MultiNetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}}},
			}},
		},
	}
	web := testPod("ns1", "web", map[string]string{"app": "web"}, map[string]string{statusAnnotation: `[` +
		`{"name":"default-net","interface":"eth0","ips":["10.244.0.5"],"default":true},` +
		`{"name":"ns1/net-a","interface":"net1","ips":["10.1.0.5"]},` +
		`{"name":"ns1/vhost","device-info":{"type":"vhost-user","version":"1.1.0","vhost-user":{"mode":"server","path":"/var/run/vhu.sock"}}}]`})
	client := testPod("ns1", "client", map[string]string{"role": "client"}, map[string]string{statusAnnotation: `[{"name":"ns1/net-a","interface":"net1","ips":["10.1.0.9"]}]`})
	objs := []runtime.Object{web, client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns1"}}}
	nads := explainNADs()
	nads.nads["ns1/vhost"] = &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: "vhost"}}

	run := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		cmd, o := explainCommand(Streams{Out: &out, ErrOut: &errOut})
		core := fake.NewClientset(objs...).CoreV1()
		// Created through the client: the fake's tracker would file an
		// object given to NewSimpleClientset under "multinetworkpolicies",
		// not the CRD's plural the client lists.
		policies := fakeversioned.NewSimpleClientset().K8sCniCncfIoV1beta2()
		if _, err := policies.MultiNetworkPolicies("ns1").Create(context.Background(), pol, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		o.clients = func() (*clusterClients, error) {
			return &clusterClients{Core: core, NADs: nads, Policies: policies, Namespace: "ns1", Timeout: time.Minute}, nil
		}
		code, stdout, stderr := execute(t, cmd, &out, &errOut, args...)
		if code != 0 || stderr != "" {
			t.Fatalf("exit %d, stderr %q", code, stderr)
		}
		return stdout
	}
	text := run("web")
	for _, want := range []string{
		"Network policy:\n  net1 (ns1/net-a): ns1/web-in\n",
		"    ingress: isolated, 1 rule(s)",
		"      allow from 10.1.0.9/32 ports TCP/8080  (ns1/web-in ingress[0])\n",
		"    egress: not isolated\n",
		"  problem: " + policy.ReasonNoKernelInterface + ": ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
	var x explain.Explanation
	if err := json.Unmarshal([]byte(run("web", "-o", "json")), &x); err != nil {
		t.Fatal(err)
	}
	np := x.NetworkPolicy
	if np == nil || len(np.Interfaces) != 1 || np.Interfaces[0].Interface != "net1" || len(np.Problems) != 1 || np.Problems[0].Reason != policy.ReasonNoKernelInterface {
		t.Errorf("networkPolicy = %+v", np)
	}
	if !strings.Contains(run("client"), "Network policy: no MultiNetworkPolicy isolates an interface of this pod\n") {
		t.Error("a pod no policy selects: no network policy line")
	}
}
