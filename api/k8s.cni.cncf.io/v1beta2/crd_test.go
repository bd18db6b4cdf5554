package v1beta2_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta1"
	"github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta2"
	"github.com/multinet/multinet/internal/testing/apiservertest"
	"github.com/multinet/multinet/pkg/client/clientset/versioned"
)

func TestMain(m *testing.M) { os.Exit(apiservertest.Main(m)) }

func port(p intstr.IntOrString) *intstr.IntOrString { return &p }

// policy is a v1beta2 policy for network macvlan1 with one ingress rule
// of ports.
func policy(name string, ports ...v1beta2.MultiNetworkPolicyPort) *v1beta2.MultiNetworkPolicy {
	return &v1beta2.MultiNetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{v1beta2.PolicyForAnnotation: "macvlan1"}},
		Spec: v1beta2.MultiNetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}},
			Ingress: []v1beta2.MultiNetworkPolicyIngressRule{{
				Ports: ports,
				From:  []v1beta2.MultiNetworkPolicyPeer{{IPBlock: &v1beta2.IPBlock{CIDR: "10.1.0.0/16", Except: []string{"10.1.2.0/24"}}}},
			}},
		},
	}
}

// TestMultiNetworkPolicyCRD: the CRD of deploy/crds on a real API server
// serves v1beta1 and v1beta2 (stored as v1beta2: endPort is kept), and its
// validation refuses an invalid CIDR, an invalid except entry, an endPort
// without a numeric port at or below it, a protocol other than TCP, UDP,
// SCTP and a policy type other than Ingress, Egress.
func TestMultiNetworkPolicyCRD(t *testing.T) {
	srv := apiservertest.Shared(t)
	cs := versioned.NewForConfigOrDie(srv.Config())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns := "default"
	v2 := cs.K8sCniCncfIoV1beta2().MultiNetworkPolicies(ns)
	v1 := cs.K8sCniCncfIoV1beta1().MultiNetworkPolicies(ns)
	name := apiservertest.Name(t, "range")
	endPort := int32(5560)
	tcp := corev1.ProtocolTCP
	in := policy(name, v1beta2.MultiNetworkPolicyPort{Protocol: &tcp, Port: port(intstr.FromInt32(5555)), EndPort: &endPort})
	if _, err := v2.Create(ctx, in, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create v1beta2 policy with endPort: %v", err)
	}
	t.Cleanup(func() { _ = v2.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	got, err := v2.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p := got.Spec.Ingress[0].Ports[0]; p.EndPort == nil || *p.EndPort != endPort || p.Port.IntValue() != 5555 {
		t.Errorf("v1beta2 read back: ports %+v, want 5555-5560", got.Spec.Ingress[0].Ports)
	}
	if pf, err := got.PolicyFor(); err != nil || len(pf) != 1 || pf[0].String() != "default/macvlan1" {
		t.Errorf("policy-for of the stored policy: %v, %v", pf, err)
	}
	old, err := v1.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("read through v1beta1: %v", err)
	}
	if p := old.Spec.Ingress[0].Ports[0]; p.Port.IntValue() != 5555 || old.Spec.Ingress[0].From[0].IPBlock.Except[0] != "10.1.2.0/24" {
		t.Errorf("v1beta1 read back: %+v", old.Spec.Ingress[0])
	}
	// A v1beta1 policy is read as v1beta2.
	name1 := apiservertest.Name(t, "v1beta1")
	if _, err := v1.Create(ctx, &v1beta1.MultiNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name1},
		Spec: v1beta1.MultiNetworkPolicySpec{PolicyTypes: []v1beta1.MultiPolicyType{v1beta1.PolicyTypeEgress}}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create v1beta1 policy: %v", err)
	}
	t.Cleanup(func() { _ = v1.Delete(context.Background(), name1, metav1.DeleteOptions{}) })
	if p, err := v2.Get(ctx, name1, metav1.GetOptions{}); err != nil || len(p.Spec.PolicyTypes) != 1 || p.Spec.PolicyTypes[0] != v1beta2.PolicyTypeEgress {
		t.Errorf("v1beta1 policy read through v1beta2: %+v, %v", p, err)
	}

	five := int32(5)
	named := port(intstr.FromString("http"))
	icmp := corev1.Protocol("ICMP")
	for _, tc := range []struct {
		name   string
		mutate func(*v1beta2.MultiNetworkPolicy)
		want   string
	}{
		{"invalid cidr", func(p *v1beta2.MultiNetworkPolicy) { p.Spec.Ingress[0].From[0].IPBlock.CIDR = "10.1.0.0/33" }, "must be of type cidr"},
		{"address without prefix", func(p *v1beta2.MultiNetworkPolicy) { p.Spec.Ingress[0].From[0].IPBlock.CIDR = "10.1.0.1" }, "must be of type cidr"},
		{"invalid except", func(p *v1beta2.MultiNetworkPolicy) { p.Spec.Ingress[0].From[0].IPBlock.Except = []string{"nope"} }, "must be of type cidr"},
		{"endPort below port", func(p *v1beta2.MultiNetworkPolicy) {
			p.Spec.Ingress[0].Ports = []v1beta2.MultiNetworkPolicyPort{{Port: port(intstr.FromInt32(80)), EndPort: &five}}
		}, "endPort needs a numeric port not above it"},
		{"endPort with a named port", func(p *v1beta2.MultiNetworkPolicy) {
			p.Spec.Ingress[0].Ports = []v1beta2.MultiNetworkPolicyPort{{Port: named, EndPort: &endPort}}
		}, "endPort needs a numeric port not above it"},
		{"endPort without port", func(p *v1beta2.MultiNetworkPolicy) {
			p.Spec.Ingress[0].Ports = []v1beta2.MultiNetworkPolicyPort{{EndPort: &endPort}}
		}, "endPort needs a numeric port not above it"},
		{"protocol ICMP", func(p *v1beta2.MultiNetworkPolicy) {
			p.Spec.Ingress[0].Ports = []v1beta2.MultiNetworkPolicyPort{{Protocol: &icmp}}
		}, `Unsupported value: "ICMP"`},
		{"policy type", func(p *v1beta2.MultiNetworkPolicy) { p.Spec.PolicyTypes = []v1beta2.MultiPolicyType{"Both"} }, `Unsupported value: "Both"`},
	} {
		p := policy(apiservertest.Name(t, "bad"))
		tc.mutate(p)
		_, err := v2.Create(ctx, p, metav1.CreateOptions{})
		if err == nil {
			_ = v2.Delete(ctx, p.Name, metav1.DeleteOptions{})
		}
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want Invalid saying %q", tc.name, err, tc.want)
		}
	}
}
