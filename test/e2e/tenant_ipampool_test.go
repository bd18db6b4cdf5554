//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	ipamclaimv1alpha1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1alpha1"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
)

// quotaNamespace is the namespace the local cluster's multinetd limits to
// 2 multinet-ipam addresses (ipamNamespaceMaxAllocations in
// deploy/overlays/local/multinetd.yaml and hack/cluster-cni-multinet.sh).
const quotaNamespace = "multinet-e2e-ipam-quota"

// ipamBridgeNAD creates NAD ns/name: a fresh bridge with multinet-ipam on
// pool (as the NAD writes it) and a /24 of 10.252.0.0/16.
func ipamBridgeNAD(t *testing.T, ns, name, pool string) {
	t.Helper()
	bridge := "mnq" + randHex(4)
	t.Cleanup(func() { target.try("ip", "link", "del", bridge) })
	createNAD(t, ns, name, map[string]any{
		"cniVersion": "1.1.0", "name": name, "type": "bridge", "bridge": bridge,
		"ipam": map[string]any{
			"type": "multinet-ipam", "pool": pool,
			"ranges": [][]map[string]string{{{"subnet": fmt.Sprintf("10.252.%d.0/24", nextSubnet())}}},
		},
	}, nil)
}

// allocationKeys are the names and UIDs of pool's IPAllocations, sorted.
func allocationKeys(t *testing.T, pool string) []string {
	var out []string
	for _, a := range poolAllocations(t, pool) {
		out = append(out, a.Name+"/"+string(a.UID)+"/"+a.Spec.Address)
	}
	slices.Sort(out)
	return out
}

// assertRefusedADD waits for multinetd's Warning Event on pod ns/name
// naming every part, and checks that the pod does not run.
func assertRefusedADD(t *testing.T, ns, name string, parts ...string) {
	t.Helper()
	msg := waitEvent(t, ns, name, "NetworkAttachFailed", parts...)
	t.Logf("event: %s", msg)
	ctx := testContext(t, 30*time.Second)
	events, err := testCluster.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if e.Reason == "NetworkAttachFailed" && e.Type != corev1.EventTypeWarning {
			t.Errorf("event %s is %s, want Warning", e.Reason, e.Type)
		}
	}
	p, err := testCluster.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase == corev1.PodRunning {
		t.Errorf("pod %s/%s runs, though its ADD was refused", ns, name)
	}
}

// TestTenantIPAMPool (another tenant's pool):
// a pool named by tenant A's NAD is A's; tenant B's NAD naming it
// ("A/blue") fails the ADD of B's pod, with a Warning Event naming the
// pool, its owner and B, and A's allocations stay exactly as they were
// (the same IPAllocations, names and UIDs); B's NAD naming "blue"
// unqualified gets a pool of B's own. A namespace at its limit of
// multinet-ipam addresses gets its next ADD refused, naming the namespace
// and the limit; and the standard ResourceQuota object count
// count/ipamclaims.k8s.cni.cncf.io bounds a namespace's IPAMClaims.
func TestTenantIPAMPool(t *testing.T) {
	nsA, nsB := newNamespace(t), newNamespace(t)
	ipamBridgeNAD(t, nsA, "net-a", "blue")
	keyA := nsA + "/blue"
	runPod(t, podSpec(nsA, "holder", "net-a"))
	before := allocationKeys(t, keyA)
	if len(before) != 1 {
		t.Fatalf("pool %s holds %v, want the holder's one address", keyA, before)
	}

	ipamBridgeNAD(t, nsB, "steal", keyA)
	ctx := testContext(t, 30*time.Second)
	if _, err := testCluster.kube.CoreV1().Pods(nsB).Create(ctx, podSpec(nsB, "thief", "steal"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	assertRefusedADD(t, nsB, "thief", nsB+"/steal", fmt.Sprintf("pool %q belongs to namespace %s", keyA, nsA), fmt.Sprintf("namespace %q may not allocate from it", nsB))
	if after := allocationKeys(t, keyA); !slices.Equal(after, before) {
		t.Errorf("pool %s changed: %v, was %v", keyA, after, before)
	}

	ipamBridgeNAD(t, nsB, "own", "blue")
	runPod(t, podSpec(nsB, "own", "own"))
	if got := poolAllocations(t, nsB+"/blue"); len(got) != 1 {
		t.Errorf("namespace %s's own pool blue holds %d allocations, want 1", nsB, len(got))
	}
	if after := allocationKeys(t, keyA); !slices.Equal(after, before) {
		t.Errorf("pool %s changed: %v, was %v", keyA, after, before)
	}

	t.Run("quota", testTenantIPAMQuota)
}

// testTenantIPAMQuota: quotaNamespace (limit 2) runs two pods with one
// address each; the third pod's ADD is refused naming the namespace and
// the limit. Then a ResourceQuota of one IPAMClaim admits one claim and
// refuses the second.
func testTenantIPAMQuota(t *testing.T) {
	ns := fixedNamespace(t, quotaNamespace)
	ipamBridgeNAD(t, ns, "net", "q")
	runPod(t, podSpec(ns, "p1", "net"))
	runPod(t, podSpec(ns, "p2", "net"))
	ctx := testContext(t, 2*time.Minute)
	if _, err := testCluster.kube.CoreV1().Pods(ns).Create(ctx, podSpec(ns, "p3", "net"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	assertRefusedADD(t, ns, "p3", ns+"/net", fmt.Sprintf("namespace %q holds 2 addresses, its limit is 2", ns))
	if got := poolAllocations(t, ns+"/q"); len(got) != 2 {
		t.Errorf("pool %s/q holds %d allocations, want 2", ns, len(got))
	}

	quotas := testCluster.kube.CoreV1().ResourceQuotas(ns)
	if _, err := quotas.Create(ctx, &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "ipamclaims"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/ipamclaims.k8s.cni.cncf.io": resource.MustParse("1")}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// the quota controller computes status before admission enforces it
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		q, err := quotas.Get(ctx, "ipamclaims", metav1.GetOptions{})
		return err == nil && q.Status.Hard != nil, nil
	}); err != nil {
		t.Fatalf("ResourceQuota ipamclaims has no status: %v", err)
	}
	claims := testCluster.multi.K8sCniCncfIoV1alpha1().IPAMClaims(ns)
	claim := func(name string) error {
		_, err := claims.Create(ctx, &ipamclaimv1alpha1.IPAMClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       ipamclaimv1alpha1.IPAMClaimSpec{Network: "net", Interface: "net1"},
		}, metav1.CreateOptions{})
		return err
	}
	if err := claim("c1"); err != nil {
		t.Fatalf("first IPAMClaim under a quota of 1: %v", err)
	}
	err := claim("c2")
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota") {
		t.Errorf("second IPAMClaim under a quota of 1: %v, want Forbidden: exceeded quota", err)
	}
}

// fixedNamespace creates namespace name (deleting one left by an earlier
// run first) for one test and deletes it when the test ends. Like
// newNamespace it carries the admin's NAD trust label (its NADs name node
// bridges; docs/nad-trust.md).
func fixedNamespace(t *testing.T, name string) string {
	t.Helper()
	ctx := testContext(t, 3*time.Minute)
	nss := testCluster.kube.CoreV1().Namespaces()
	if err := nss.Delete(ctx, name, metav1.DeleteOptions{}); err == nil {
		if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := nss.Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		}); err != nil {
			t.Fatalf("namespace %s of an earlier run is still there: %v", name, err)
		}
	}
	if _, err := nss.Create(ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"multinet.io/e2e": "true", podnetworks.NADTrustLabel: podnetworks.NADTrustUnrestricted}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := nss.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete namespace %s: %v", name, err)
		}
	})
	return name
}
