package webhook

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	claimv1alpha1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1alpha1"
	"github.com/multinet/multinet/pkg/spec/selection"
)

// NodeNameExtra is the key of the user's extra that the API server fills
// with the node of the pod a ServiceAccount token is bound to (the
// projected token of a pod, or `kubectl create token --bound-object-kind
// Pod`).
const NodeNameExtra = "authentication.kubernetes.io/node-name"

// DefaultNodeAgentUser is the user multinetd's pods authenticate as (its
// ServiceAccount in the namespace deploy/ installs it in).
const DefaultNodeAgentUser = "system:serviceaccount:multinet-system:multinetd"

// NodeAgentUser is the user of multinetd's ServiceAccount in namespace:
// "system:serviceaccount:<namespace>:multinetd" (DefaultNodeAgentUser for
// multinet-system).
func NodeAgentUser(namespace string) string {
	return "system:serviceaccount:" + namespace + ":multinetd"
}

// DefaultPodLookupTimeout bounds the pod LIST of ValidateIPAMClaimStatus.
const DefaultPodLookupTimeout = 3 * time.Second

// PodsOnNodeFunc returns the pods of namespace bound to node
// (spec.nodeName), read from the API server.
type PodsOnNodeFunc func(ctx context.Context, namespace, node string) ([]corev1.Pod, error)

// ListPodsOnNode is a PodsOnNodeFunc: one LIST of the namespace's pods with
// the field selector spec.nodeName=<node>, served from the API server's
// watch cache (resourceVersion "0"). A pod the kubelet runs has been bound
// long before its CNI ADD, so the cache holds it.
func ListPodsOnNode(pods corev1client.PodsGetter) PodsOnNodeFunc {
	return func(ctx context.Context, namespace, node string) ([]corev1.Pod, error) {
		l, err := pods.Pods(namespace).List(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("spec.nodeName", node).String(),
			ResourceVersion: "0",
		})
		if err != nil {
			return nil, fmt.Errorf("listing the pods of namespace %s on node %s: %w", namespace, node, err)
		}
		return l.Items, nil
	}
}

// ValidateIPAMClaimStatus holds a node's multinetd to the IPAMClaims of
// pods on its node (docs/security.md "Node-scoped authority"). An IPAMClaim
// (multi-net spec §8.2) names no pod and no node; the pod that uses it
// names it in a network selection element's "ipam-claim-reference"
// (§4.1.2.1.11). So an UPDATE of ipamclaims/status by Options.NodeAgentUser
// that adds an address is allowed only when a pod in the claim's namespace,
// bound to the node of the caller's token (user extra NodeNameExtra) and
// not finished, references the claim by name in its
// k8s.v1.cni.cncf.io/networks annotation. An update that adds no address
// is allowed here (the ValidatingAdmissionPolicy multinet-multinetd-ipamclaims
// refuses a changed or removed one); any other user's request is allowed.
//
// Denied (403): a token without a node claim; no such pod. 503 when the pod
// LIST fails (failurePolicy Fail refuses the write; multinetd's ADD fails
// and the kubelet retries it). 400 for an unreadable object.
func (w *Webhooks) ValidateIPAMClaimStatus(ctx context.Context, req admission.Request) admission.Response {
	if !isIPAMClaimStatus(req) || req.Operation != admissionv1.Update {
		return admission.Allowed("not an IPAMClaim status UPDATE")
	}
	if req.UserInfo.Username != w.o.NodeAgentUser {
		return admission.Allowed("not the node agent " + w.o.NodeAgentUser)
	}
	claim, added, err := addedClaimAddresses(req)
	if err != nil {
		return badRequest(err)
	}
	if len(added) == 0 {
		return admission.Allowed("no address added")
	}
	what := fmt.Sprintf("IPAMClaim %s/%s", claim.Namespace, claim.Name)
	nodes := req.UserInfo.Extra[NodeNameExtra]
	if len(nodes) != 1 || nodes[0] == "" {
		return admission.Denied(fmt.Sprintf("multinetd (%s) may write only IPAMClaims of pods of its own node, and this credential carries no node claim (%s): use the token of a multinetd pod; refused: status of %s",
			req.UserInfo.Username, NodeNameExtra, what))
	}
	node := nodes[0]
	if w.o.PodsOnNode == nil {
		return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf("%s: the webhook cannot look up pods (no PodsOnNode)", what))
	}
	lctx, cancel := context.WithTimeout(ctx, w.o.PodLookupTimeout)
	defer cancel()
	pods, err := w.o.PodsOnNode(lctx, claim.Namespace, node)
	if err != nil {
		return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf("%s: %w", what, err))
	}
	if pod := claimingPod(pods, claim.Name); pod != "" {
		return admission.Allowed(fmt.Sprintf("pod %s/%s on node %s references %s", claim.Namespace, pod, node, what))
	}
	return admission.Denied(fmt.Sprintf("multinetd of node %s may write only IPAMClaims of pods of its own node: no pod bound to node %s references %s (%q of a network selection element); refused adding %s",
		node, node, what, "ipam-claim-reference", strings.Join(added, ", ")))
}

// isIPAMClaimStatus reports whether req is about the status subresource of
// an IPAMClaim (any version).
func isIPAMClaimStatus(req admission.Request) bool {
	return req.Kind.Group == claimv1alpha1.SchemeGroupVersion.Group && req.Kind.Kind == "IPAMClaim" && req.SubResource == "status"
}

// addedClaimAddresses decodes the request's claim and old claim and returns
// the new claim and the entries of its status.ips that the old one does not
// have (compared as written, as the policy does).
func addedClaimAddresses(req admission.Request) (*claimv1alpha1.IPAMClaim, []string, error) {
	var claim, old claimv1alpha1.IPAMClaim
	if err := decodeObject(req.Object.Raw, &claim, "object"); err != nil {
		return nil, nil, err
	}
	if err := decodeObject(req.OldObject.Raw, &old, "oldObject"); err != nil {
		return nil, nil, err
	}
	if claim.Namespace == "" {
		claim.Namespace = req.Namespace
	}
	var added []string
	for _, ip := range claim.Status.IPs {
		if !slices.Contains(old.Status.IPs, ip) {
			added = append(added, ip)
		}
	}
	return &claim, added, nil
}

// claimingPod returns the name of the first pod of pods, not finished, whose
// networks annotation has an element with ipam-claim-reference claim; "" if
// none. A pod whose annotation does not parse references nothing.
func claimingPod(pods []corev1.Pod, claim string) string {
	for i := range pods {
		p := &pods[i]
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		elements, err := selection.Parse(p.Annotations[selection.NetworksAnnotation], p.Namespace)
		if err != nil {
			continue
		}
		for _, e := range elements {
			if e.IPAMClaimReference == claim {
				return p.Name
			}
		}
	}
	return ""
}
