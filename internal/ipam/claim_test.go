package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multinet/multinet/api/k8s.cni.cncf.io/v1alpha1"
)

// A pod with an IPAMClaim gets addresses recorded in the claim's
// status.ips; DEL keeps them; the pod's successor on another node gets the
// same addresses; a claim-owned allocation names the claim (UID) and has
// no attachment label, so no DEL or GC finds it.
func TestClaimReuseAcrossNodes(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	ns := name(t, "ns")
	e.namespace(ns)
	claim := e.claim(ns, "vm-a.net.net1")
	pool := name(t, "p")
	cfg := config(t, pool, `"ranges":[[{"subnet":"10.30.0.0/24"}],[{"subnet":"fd30::/64"}]]`)
	nodeA, nodeB := e.allocator(t, "node-a", true, nil), e.allocator(t, "node-b", false, nil)

	first := req(t, "c1", "net1")
	first.Pod = &PodRef{Namespace: ns, Name: "vm-a-pod1", UID: "u1"}
	first.Claim = claim.Name
	al, err := nodeA.Allocate(ctx, cfg, first)
	if err != nil {
		t.Fatal(err)
	}
	if al.Claim != ns+"/"+claim.Name || len(al.Addresses) != 2 {
		t.Fatalf("allocation %+v", al)
	}
	got, err := e.cs.K8sCniCncfIoV1alpha1().IPAMClaims(ns).Get(ctx, claim.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Status.IPs, addrs(al)) {
		t.Errorf("status.ips %v, allocated %v", got.Status.IPs, addrs(al))
	}
	for _, o := range e.poolObjects(pool) {
		c := o.Spec.Owner.Claim
		if c == nil || c.Namespace != ns || c.Name != claim.Name || c.UID != string(claim.UID) ||
			o.Labels[LabelClaimUID] != string(claim.UID) || o.Labels[LabelAttachment] != "" {
			t.Errorf("allocation %s: owner %+v labels %v", o.Name, o.Spec.Owner, o.Labels)
		}
	}

	// CNI DEL of the first pod's attachment releases nothing.
	if n, err := nodeA.Release(ctx, first.ContainerID, "net1"); err != nil || n != 0 {
		t.Errorf("DEL released %d, %v", n, err)
	}
	// The successor, on another node, gets the claim's addresses.
	second := req(t, "c2", "net1")
	second.Pod = &PodRef{Namespace: ns, Name: "vm-a-pod2", UID: "u2"}
	second.Claim = claim.Name
	al2, err := nodeB.Allocate(ctx, cfg, second)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(addrs(al2), addrs(al)) {
		t.Errorf("successor got %v, the claim has %v", addrs(al2), addrs(al))
	}
	if n := len(e.poolObjects(pool)); n != 2 {
		t.Errorf("%d IPAllocations, want the claim's 2", n)
	}

	// A claim whose allocation was lost gets it back; one whose address
	// another holds fails.
	objs := e.poolObjects(pool)
	if err := e.cs.IPAMV1alpha1().IPAllocations().Delete(ctx, objs[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if al3, err := nodeB.Allocate(ctx, cfg, second); err != nil || !slices.Equal(addrs(al3), addrs(al)) {
		t.Errorf("after losing an allocation: %v, %v", al3, err)
	}
	if n := len(e.poolObjects(pool)); n != 2 {
		t.Errorf("%d IPAllocations after re-creation, want 2", n)
	}
}

// Pods on several nodes using one new claim at the same moment all get the
// same addresses: one node's status write wins, the others release theirs.
func TestClaimConcurrentFirstUse(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	ns := name(t, "ns")
	e.namespace(ns)
	claim := e.claim(ns, "sts-0.net.net1")
	pool := name(t, "p")
	cfg := config(t, pool, `"ranges":[[{"subnet":"10.31.0.0/24"}]]`)
	var wg sync.WaitGroup
	results := make([]*Allocation, 6)
	errs := make([]error, 6)
	for i := range results {
		a := e.allocator(t, fmt.Sprintf("node-%d", i), false, nil)
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := req(t, fmt.Sprintf("c%d", i), "net1")
			r.Pod = &PodRef{Namespace: ns, Name: fmt.Sprintf("p%d", i)}
			r.Claim = claim.Name
			results[i], errs[i] = a.Allocate(ctx, cfg, r)
		}()
	}
	wg.Wait()
	for i := range results {
		if errs[i] != nil {
			t.Fatalf("node %d: %v", i, errs[i])
		}
		if !slices.Equal(addrs(results[i]), addrs(results[0])) {
			t.Errorf("node %d got %v, node 0 %v", i, addrs(results[i]), addrs(results[0]))
		}
	}
	if got := e.poolAddresses(pool); !slices.Equal(got, addrs(results[0])) {
		t.Errorf("IPAllocations %v, want only the claim's %v", got, addrs(results[0]))
	}
}

// Claim errors: a missing claim, a pod without namespace, requested ips
// with a claim, a claim whose addresses belong to another pool's ranges.
func TestClaimErrors(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	ns := name(t, "ns")
	e.namespace(ns)
	pool := name(t, "p")
	cfg := config(t, pool, `"ranges":[[{"subnet":"10.32.0.0/24"}]]`)
	a := e.allocator(t, "node-a", false, nil)
	r := req(t, "c1", "net1")
	r.Pod = &PodRef{Namespace: ns, Name: "p"}
	r.Claim = "missing"
	if _, err := a.Allocate(ctx, cfg, r); !errors.Is(err, ErrClaim) || !strings.Contains(err.Error(), ns+"/missing does not exist") {
		t.Errorf("missing claim: %v", err)
	}
	noNS := req(t, "c1", "net1")
	noNS.Claim = "x"
	if _, err := a.Allocate(ctx, cfg, noNS); !errors.Is(err, ErrClaim) {
		t.Errorf("no namespace: %v", err)
	}
	c := e.claim(ns, "other-net")
	c.Status = v1alpha1.IPAMClaimStatus{IPs: []string{"192.168.7.7/24"}}
	if _, err := e.cs.K8sCniCncfIoV1alpha1().IPAMClaims(ns).UpdateStatus(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.Claim = c.Name
	if _, err := a.Allocate(ctx, cfg, r); !errors.Is(err, ErrClaim) || !strings.Contains(err.Error(), "192.168.7.7/24 is in none of pool") {
		t.Errorf("foreign claim: %v", err)
	}
	r.IPs = []netip.Addr{mustAddr("10.32.0.5")}
	if _, err := a.Allocate(ctx, cfg, r); !errors.Is(err, ErrClaim) {
		t.Errorf("ips with a claim: %v", err)
	}
	if n := len(e.poolObjects(pool)); n != 0 {
		t.Errorf("failed claim allocations left %d IPAllocations", n)
	}
}

// Deleting the IPAMClaim releases its addresses: ReleaseClaim (multinetd,
// on the claim's delete event) and Reconcile (any claim gone while no
// multinetd watched). The test API server runs no garbage collector, and
// none would help: a cluster-scoped IPAllocation cannot be the dependent
// of a namespaced IPAMClaim (docs/decisions/ipam.md), so allocations carry
// no ownerReferences; this asserts that too.
func TestClaimDeletionReleases(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	ns := name(t, "ns")
	e.namespace(ns)
	pool := name(t, "p")
	cfg := config(t, pool, `"ranges":[[{"subnet":"10.33.0.0/24"}],[{"subnet":"fd33::/64"}]]`)
	a := e.allocator(t, "node-a", false, nil)
	owners := LiveOwners{Pods: e.pods, Claims: e.cs.K8sCniCncfIoV1alpha1()}
	claims := map[string]*v1alpha1.IPAMClaim{}
	for _, c := range []string{"kept", "by-event", "by-reconcile"} {
		claims[c] = e.claim(ns, c)
		r := req(t, c, "net1")
		r.Pod = &PodRef{Namespace: ns, Name: c}
		r.Claim = c
		if _, err := a.Allocate(ctx, cfg, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range e.poolObjects(pool) {
		if len(o.OwnerReferences) != 0 {
			t.Errorf("%s has ownerReferences %v", o.Name, o.OwnerReferences)
		}
	}
	// While every claim exists, Reconcile keeps their addresses.
	e.syncWatchCache(pool)
	if res, err := a.Reconcile(ctx, ReconcileOptions{Owners: owners}); err != nil || res.ReleasedClaim != 0 {
		t.Fatalf("reconcile with live claims: %+v, %v", res, err)
	}
	for _, c := range []string{"by-event", "by-reconcile"} {
		if err := e.cs.K8sCniCncfIoV1alpha1().IPAMClaims(ns).Delete(ctx, c, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Another node's daemon releases none of them: a node releases only its
	// own allocations (docs/security.md "Node-scoped authority").
	b := e.allocator(t, "node-b", false, nil)
	if n, err := b.ReleaseClaim(ctx, string(claims["by-event"].UID)); err != nil || n != 0 {
		t.Errorf("node-b's ReleaseClaim released %d of node-a's allocations, %v", n, err)
	}
	if n, err := a.ReleaseClaim(ctx, string(claims["by-event"].UID)); err != nil || n != 2 {
		t.Errorf("ReleaseClaim released %d, %v", n, err)
	}
	e.syncWatchCache(pool)
	res, err := a.Reconcile(ctx, ReconcileOptions{Owners: owners})
	if err != nil || res.ReleasedClaim != 2 {
		t.Errorf("reconcile after deletion: %+v, %v", res, err)
	}
	left := e.poolObjects(pool)
	if len(left) != 2 {
		t.Fatalf("%d IPAllocations left, want the kept claim's 2", len(left))
	}
	for _, o := range left {
		if o.Spec.Owner.Claim.Name != "kept" {
			t.Errorf("left %s of %s", o.Name, o.Spec.Owner.Claim.Name)
		}
	}
	// A claim re-created under the same name is another claim: the old
	// one's addresses go.
	if err := e.cs.K8sCniCncfIoV1alpha1().IPAMClaims(ns).Delete(ctx, "kept", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.claim(ns, "kept")
	e.syncWatchCache(pool)
	if res, err := a.Reconcile(context.Background(), ReconcileOptions{Owners: owners}); err != nil || res.ReleasedClaim != 2 {
		t.Errorf("reconcile after re-creation: %+v, %v", res, err)
	}
}

// A claim's status.ips written again with an address of a new range set
// keeps each recorded entry as written (the node-scoped authority policy
// lets a daemon only add entries).
func TestStatusIPsOnlyAdds(t *testing.T) {
	addrs := []Address{{Prefix: netip.MustParsePrefix("10.1.2.3/24")}, {Prefix: netip.MustParsePrefix("fd00::3/64")}}
	got := statusIPs([]string{"10.1.2.3"}, addrs)
	if want := []string{"10.1.2.3", "fd00::3/64"}; !slices.Equal(got, want) {
		t.Errorf("statusIPs = %q, want %q", got, want)
	}
	if got := statusIPs(nil, addrs); !slices.Equal(got, []string{"10.1.2.3/24", "fd00::3/64"}) {
		t.Errorf("statusIPs of a new claim = %q", got)
	}
}
