//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	ipamv1alpha1 "github.com/multinet/multinet/api/ipam.multinet.io/v1alpha1"
	ipamclaimv1alpha1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1alpha1"
	"github.com/multinet/multinet/internal/ipam"
	"github.com/multinet/multinet/pkg/client/clientset/versioned"
	"github.com/multinet/multinet/pkg/spec/status"
)

// tokenClients are API clients with one bearer token (no client
// certificate: the kubeconfig's admin identity is dropped).
type tokenClients struct {
	kube  kubernetes.Interface
	multi versioned.Interface
}

// multinetdToken mints a token of multinetd's ServiceAccount bound to the
// multinetd pod on node (as the kubelet projects it into that pod: the API
// server then puts the node into the user's extra,
// authentication.kubernetes.io/node-name); unbound (no node claim) when
// node is "".
func multinetdToken(t *testing.T, ctx context.Context, node string) tokenClients {
	t.Helper()
	args := []string{"-n", systemNamespace, "create", "token", "multinetd", "--duration=10m"}
	if node != "" {
		pods, err := testCluster.kube.CoreV1().Pods(systemNamespace).List(ctx, metav1.ListOptions{
			LabelSelector: "app.kubernetes.io/name=multinetd", FieldSelector: "spec.nodeName=" + node})
		if err != nil || len(pods.Items) != 1 {
			t.Fatalf("the multinetd pod on %s: %v (%d pods)", node, err, len(pods.Items))
		}
		args = append(args, "--bound-object-kind=Pod", "--bound-object-name="+pods.Items[0].Name)
	}
	out, err := kubectl(ctx, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v: %s", strings.Join(args, " "), err, out)
	}
	cfg := rest.AnonymousClientConfig(testCluster.config)
	cfg.BearerToken = strings.TrimSpace(out)
	return tokenClients{kube: kubernetes.NewForConfigOrDie(cfg), multi: versioned.NewForConfigOrDie(cfg)}
}

// wantRefused fails unless err is the API server's 403 carrying every
// one of msgs (the policy's message).
func wantRefused(t *testing.T, what string, err error, msgs ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: allowed, want refused by the node-scoped authority policy", what)
		return
	}
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		t.Errorf("%s: %v, want 403 from the policy", what, err)
	}
	for _, m := range msgs {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("%s: refusal %q does not say %q", what, err, m)
		}
	}
	t.Logf("%s: refused: %v", what, err)
}

func wantAllowed(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: %v, want allowed (the node's own object)", what, err)
	}
}

// patchPodStatus sends the merge patch of pods/status that multinetd
// sends, with the given metadata.
func patchPodStatus(ctx context.Context, c kubernetes.Interface, ns, name string, meta map[string]any) error {
	body, _ := json.Marshal(map[string]any{"metadata": meta})
	_, err := c.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{}, "status")
	return err
}

func testAllocation(pool, addr, node string) *ipamv1alpha1.IPAllocation {
	a := netip.MustParseAddr(addr)
	return &ipamv1alpha1.IPAllocation{
		ObjectMeta: metav1.ObjectMeta{Name: ipam.ObjectName(pool, a)},
		Spec: ipamv1alpha1.IPAllocationSpec{Pool: pool, Address: addr + "/24", Owner: ipamv1alpha1.IPAllocationOwner{
			ContainerID: "e2e-nodetoken", IfName: "net1", Node: node}},
	}
}

// TestMultiNodeTenantNodeToken: a node's multinetd credentials reach only
// its own node's objects (deploy/base/multinetd-node-policy.yaml). With the
// token of node A's multinetd pod, an attacker who owns node A is refused,
// with the policy's message naming the node and the object: patching the
// network-status of a pod on node B, any other annotation or a label of a
// pod on node A, creating or deleting an IPAllocation of node B, changing
// the addresses of an IPAMClaim in use, adding an address to the IPAMClaim
// of a pod on node B or to one no pod references; the same writes to node
// A's own objects go through. A token of multinetd's ServiceAccount without a node
// claim (minted unbound) is refused everything (fail closed).
func TestMultiNodeTenantNodeToken(t *testing.T) {
	requireDeployed(t)
	nodes := requireNodes(t, 2)
	nodeA, nodeB := nodes[0].Name, nodes[1].Name
	ns := newNamespace(t)
	ctx := testContext(t, 4*time.Minute)
	// Each pod attaches to the spanning network with an IPAMClaim of its
	// own: its node's multinetd records the claim's first address.
	spanningNAD(t, ns)
	var pods []*corev1.Pod
	for name, node := range map[string]string{"on-a": nodeA, "on-b": nodeB} {
		claim := createClaim(t, ctx, ns, name+".spanning.net1")
		sel := `[{"name":"spanning","interface":"net1","ipam-claim-reference":"` + claim.Name + `"}]`
		pods = append(pods, onNode(podSpec(ns, name, sel), node))
	}
	createPods(t, pods)
	waitPodsRunning(t, ns, 2, 2*time.Minute)
	a := multinetdToken(t, ctx, nodeA)
	statusValue := `[{"name":"e2e","interface":"net9","ips":["10.9.9.9"]}]`

	// Pods: only network-status, only of pods on node A.
	wantRefused(t, "network-status of a pod on node B",
		patchPodStatus(ctx, a.kube, ns, "on-b", map[string]any{"annotations": map[string]string{status.Annotation: statusValue}}),
		"multinetd of node "+nodeA+" may write only pods of its own node: pod "+ns+"/on-b is bound to node "+nodeB)
	wantAllowed(t, "network-status of a pod on node A",
		patchPodStatus(ctx, a.kube, ns, "on-a", map[string]any{"annotations": map[string]string{status.Annotation: statusValue}}))
	wantRefused(t, "another annotation of a pod on node A",
		patchPodStatus(ctx, a.kube, ns, "on-a", map[string]any{"annotations": map[string]string{"example.com/x": "y"}}),
		"multinetd of node "+nodeA+" may change only the annotation k8s.v1.cni.cncf.io/network-status of pod "+ns+"/on-a, not its annotation example.com/x")
	wantRefused(t, "a label of a pod on node A",
		patchPodStatus(ctx, a.kube, ns, "on-a", map[string]any{"labels": map[string]string{"app": "evil"}}),
		"not its labels")

	// IPAllocations: create and delete only node A's.
	pool := "e2e-nodetoken-" + ns
	ipc := a.multi.IPAMV1alpha1().IPAllocations()
	admin := testCluster.multi.IPAMV1alpha1().IPAllocations()
	_, err := ipc.Create(ctx, testAllocation(pool, "10.250.0.10", nodeB), metav1.CreateOptions{})
	wantRefused(t, "creating an IPAllocation for node B", err,
		"multinetd of node "+nodeA+" may allocate only addresses of its own node", "is of node "+nodeB)
	own, err := ipc.Create(ctx, testAllocation(pool, "10.250.0.11", nodeA), metav1.CreateOptions{})
	wantAllowed(t, "creating an IPAllocation for node A", err)
	if err == nil {
		wantAllowed(t, "deleting node A's IPAllocation", ipc.Delete(ctx, own.Name, metav1.DeleteOptions{}))
	}
	theirs, err := admin.Create(ctx, testAllocation(pool, "10.250.0.12", nodeB), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create node B's IPAllocation (admin): %v", err)
	}
	t.Cleanup(func() { _ = admin.Delete(context.Background(), theirs.Name, metav1.DeleteOptions{}) })
	wantRefused(t, "deleting an IPAllocation of node B", ipc.Delete(ctx, theirs.Name, metav1.DeleteOptions{}),
		"multinetd of node "+nodeA+" may release only addresses of its own node: IPAllocation "+theirs.Name, "is of node "+nodeB)
	if _, err := admin.Get(ctx, theirs.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("node B's IPAllocation after the refused delete: %v", err)
	}

	// IPAMClaims: each node's multinetd recorded the first address of its
	// own pod's claim (the webhook let it through); node A may add an
	// address only to the claim of a pod on node A: not to node B's pod's
	// claim, not to a claim no pod references; and no node may change or
	// remove an address recorded (the policy).
	claims := a.multi.K8sCniCncfIoV1alpha1().IPAMClaims(ns)
	onB := recordedClaim(t, ctx, ns, "on-b.spanning.net1")
	onB.Status.IPs = []string{"10.250.1.6/24"}
	_, err = claims.UpdateStatus(ctx, onB, metav1.UpdateOptions{})
	wantRefused(t, "changing the address of an IPAMClaim in use", err,
		"multinetd of node "+nodeA+" may only add addresses to IPAMClaim "+ns+"/on-b.spanning.net1, not change or remove")
	onB = recordedClaim(t, ctx, ns, "on-b.spanning.net1")
	recorded := onB.Status.IPs[0]
	onB.Status.IPs = append(onB.Status.IPs, "10.250.1.99/24")
	_, err = claims.UpdateStatus(ctx, onB, metav1.UpdateOptions{})
	wantRefused(t, "adding an address to the IPAMClaim of a pod on node B", err,
		"multinetd of node "+nodeA+" may write only IPAMClaims of pods of its own node: no pod bound to node "+nodeA+
			" references IPAMClaim "+ns+"/on-b.spanning.net1", "refused adding 10.250.1.99/24")
	if got := recordedClaim(t, ctx, ns, "on-b.spanning.net1").Status.IPs; len(got) != 1 || got[0] != recorded {
		t.Errorf("node B's pod's IPAMClaim after the refused writes: status.ips %v, want [%s]", got, recorded)
	}
	orphan := createClaim(t, ctx, ns, "orphan.spanning.net1")
	orphan.Status.IPs = []string{"10.250.1.7/24"}
	_, err = claims.UpdateStatus(ctx, orphan, metav1.UpdateOptions{})
	wantRefused(t, "the first address of an IPAMClaim no pod references", err,
		"no pod bound to node "+nodeA+" references IPAMClaim "+ns+"/orphan.spanning.net1")
	onA := recordedClaim(t, ctx, ns, "on-a.spanning.net1")
	onA.Status.IPs = append(onA.Status.IPs, "10.250.1.8/24")
	_, err = claims.UpdateStatus(ctx, onA, metav1.UpdateOptions{})
	wantAllowed(t, "an address added to the IPAMClaim of a pod on node A", err)

	// A token without a node claim is refused everything: fail closed.
	unbound := multinetdToken(t, ctx, "")
	wantRefused(t, "network-status with a token without node claim",
		patchPodStatus(ctx, unbound.kube, ns, "on-a", map[string]any{"annotations": map[string]string{status.Annotation: statusValue}}),
		"carries no node claim (authentication.kubernetes.io/node-name)")
	_, err = unbound.multi.IPAMV1alpha1().IPAllocations().Create(ctx, testAllocation(pool, "10.250.0.13", nodeA), metav1.CreateOptions{})
	wantRefused(t, "an IPAllocation with a token without node claim", err, "carries no node claim")
	if left := poolAllocations(t, pool); len(left) != 1 {
		t.Errorf("pool %s has %d allocations, want node B's only: %+v", pool, len(left), left)
	}
}

// createClaim creates IPAMClaim ns/name (network "spanning", interface
// net1) as the cluster admin.
func createClaim(t *testing.T, ctx context.Context, ns, name string) *ipamclaimv1alpha1.IPAMClaim {
	t.Helper()
	c, err := testCluster.multi.K8sCniCncfIoV1alpha1().IPAMClaims(ns).Create(ctx, &ipamclaimv1alpha1.IPAMClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       ipamclaimv1alpha1.IPAMClaimSpec{Network: "spanning", Interface: "net1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create IPAMClaim %s: %v", name, err)
	}
	return c
}

// recordedClaim reads IPAMClaim ns/name and fails unless its status holds
// exactly one address (recorded by the multinetd of its pod's node).
func recordedClaim(t *testing.T, ctx context.Context, ns, name string) *ipamclaimv1alpha1.IPAMClaim {
	t.Helper()
	c, err := testCluster.multi.K8sCniCncfIoV1alpha1().IPAMClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("IPAMClaim %s: %v", name, err)
	}
	if len(c.Status.IPs) != 1 {
		t.Fatalf("IPAMClaim %s: status.ips %v, want the one address its pod's node recorded", name, c.Status.IPs)
	}
	return c
}
