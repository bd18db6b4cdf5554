package webhook

import (
	"context"
	"errors"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	claimv1alpha1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1alpha1"
)

// podsOn is a PodsOnNodeFunc over pods, filtered by namespace and
// spec.nodeName as the API server's field selector does.
func podsOn(pods ...*corev1.Pod) PodsOnNodeFunc {
	return func(_ context.Context, ns, node string) ([]corev1.Pod, error) {
		var out []corev1.Pod
		for _, p := range pods {
			if p.Namespace == ns && p.Spec.NodeName == node {
				out = append(out, *p)
			}
		}
		return out, nil
	}
}

func podOnNode(ns, name, node, networksValue string, phase corev1.PodPhase) *corev1.Pod {
	p := pod(ns, networks(networksValue))
	p.Name, p.Spec.NodeName, p.Status.Phase = name, node, phase
	return p
}

// claimStatusRequest is multinetd's (of node; no node claim when node is
// "") ipamclaims/status UPDATE of claim ns/name from oldIPs to ips.
func claimStatusRequest(t *testing.T, user, node, ns, name string, oldIPs, ips []string) admission.Request {
	t.Helper()
	claim := func(ips []string) *claimv1alpha1.IPAMClaim {
		return &claimv1alpha1.IPAMClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec:       claimv1alpha1.IPAMClaimSpec{Network: "spanning", Interface: "net1"},
			Status:     claimv1alpha1.IPAMClaimStatus{IPs: ips},
		}
	}
	u := authnv1.UserInfo{Username: user}
	if node != "" {
		u.Extra = map[string]authnv1.ExtraValue{NodeNameExtra: {node}}
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:         "uid-3",
		Kind:        metav1.GroupVersionKind{Group: "k8s.cni.cncf.io", Version: "v1alpha1", Kind: "IPAMClaim"},
		Resource:    metav1.GroupVersionResource{Group: "k8s.cni.cncf.io", Version: "v1alpha1", Resource: "ipamclaims"},
		SubResource: "status",
		Namespace:   ns, Name: name,
		Operation: admissionv1.Update,
		UserInfo:  u,
		Object:    raw(t, claim(ips)),
		OldObject: raw(t, claim(oldIPs)),
	}}
}

// TestValidateIPAMClaimStatus: a node's multinetd may add addresses only
// to an IPAMClaim that a pod bound to its node references
// (ipam-claim-reference); another node's claim, a claim no pod references
// and a credential without a node claim are refused with a message naming
// the node, the claim and the addresses.
func TestValidateIPAMClaimStatus(t *testing.T) {
	const agent = DefaultNodeAgentUser
	pods := podsOn(
		podOnNode("t", "db-0", "node-a", `[{"name":"spanning","interface":"net1","ipam-claim-reference":"db-0.spanning.net1"}]`, corev1.PodPending),
		podOnNode("t", "db-1", "node-b", `[{"name":"spanning","ipam-claim-reference":"db-1.spanning.net1"}]`, corev1.PodRunning),
		podOnNode("t", "done", "node-a", `[{"name":"spanning","ipam-claim-reference":"done.spanning.net1"}]`, corev1.PodSucceeded),
		podOnNode("other", "db-1", "node-a", `[{"name":"spanning","ipam-claim-reference":"db-1.spanning.net1"}]`, corev1.PodRunning),
	)
	w := newHooks(t, Options{PodsOnNode: pods})
	ip := []string{"10.250.1.5/24"}
	for _, tc := range []struct {
		name        string
		req         admission.Request
		result      string
		msgs        []string
		podsOnNodes PodsOnNodeFunc
	}{
		{name: "own node's pod, first address", req: claimStatusRequest(t, agent, "node-a", "t", "db-0.spanning.net1", nil, ip),
			result: ResultAllowed, msgs: []string{"pod t/db-0 on node node-a references IPAMClaim t/db-0.spanning.net1"}},
		{name: "own node's pod, an added address", req: claimStatusRequest(t, agent, "node-a", "t", "db-0.spanning.net1", ip, append(ip, "fd00::5/64")),
			result: ResultAllowed},
		{name: "another node's pod", req: claimStatusRequest(t, agent, "node-a", "t", "db-1.spanning.net1", nil, ip),
			result: ResultDenied, msgs: []string{"multinetd of node node-a may write only IPAMClaims of pods of its own node",
				"no pod bound to node node-a references IPAMClaim t/db-1.spanning.net1", "refused adding 10.250.1.5/24"}},
		{name: "another node's pod, an added address", req: claimStatusRequest(t, agent, "node-a", "t", "db-1.spanning.net1", ip, append(ip, "10.250.2.5/24")),
			result: ResultDenied, msgs: []string{"refused adding 10.250.2.5/24"}},
		{name: "no pod references it", req: claimStatusRequest(t, agent, "node-a", "t", "orphan", nil, ip),
			result: ResultDenied, msgs: []string{"no pod bound to node node-a references IPAMClaim t/orphan"}},
		{name: "a finished pod references it", req: claimStatusRequest(t, agent, "node-a", "t", "done.spanning.net1", nil, ip),
			result: ResultDenied},
		{name: "no node claim", req: claimStatusRequest(t, agent, "", "t", "db-0.spanning.net1", nil, ip),
			result: ResultDenied, msgs: []string{"carries no node claim (authentication.kubernetes.io/node-name)", "status of IPAMClaim t/db-0.spanning.net1"}},
		{name: "no address added", req: claimStatusRequest(t, agent, "node-a", "t", "orphan", ip, ip), result: ResultAllowed},
		{name: "another user", req: claimStatusRequest(t, "system:admin", "", "t", "orphan", nil, ip), result: ResultAllowed},
		{name: "pod lookup fails", req: claimStatusRequest(t, agent, "node-a", "t", "db-0.spanning.net1", nil, ip), result: ResultErrored,
			msgs:        []string{"IPAMClaim t/db-0.spanning.net1: api down"},
			podsOnNodes: func(context.Context, string, string) ([]corev1.Pod, error) { return nil, errors.New("api down") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := w
			if tc.podsOnNodes != nil {
				h = newHooks(t, Options{PodsOnNode: tc.podsOnNodes})
			}
			checkResponse(t, h.ValidateIPAMClaimStatus(context.Background(), tc.req), tc.result, tc.msgs...)
		})
	}
}
