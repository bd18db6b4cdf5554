package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multinet/multinet/internal/testing/apiservertest"
	"github.com/multinet/multinet/pkg/client/clientset/versioned"
)

// tenantConfig is the IPAM configuration of a network whose pool is
// pool; the IPAllocations of every pool named after it (any namespace's)
// are deleted when the test ends.
func tenantConfig(t *testing.T, pool, ranges string) *Config {
	t.Helper()
	c := mustConfig(t, fmt.Sprintf(`{"cniVersion":"1.1.0","name":"net","ipam":{"type":"multinet-ipam","pool":%q,"ranges":%s}}`, pool, ranges))
	_, base, _ := splitPool(pool)
	t.Cleanup(func() {
		cs := versioned.NewForConfigOrDie(apiservertest.Shared(t).Config())
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		list, err := cs.IPAMV1alpha1().IPAllocations().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Errorf("cleaning up pool %s: %v", pool, err)
			return
		}
		for _, o := range list.Items {
			if _, name, _ := splitPool(o.Spec.Pool); name != base {
				continue
			}
			if err := cs.IPAMV1alpha1().IPAllocations().Delete(ctx, o.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("cleaning up pool %s: %v", pool, err)
			}
		}
	})
	return c
}

// nsReq is an ADD of container c, ifName, for a pod of namespace podNS
// through a network of namespace networkNS.
func nsReq(t *testing.T, c, networkNS, podNS string) Request {
	r := req(t, c, "net1")
	r.Pod = &PodRef{Namespace: podNS, Name: "pod-" + c, UID: name(t, c) + "-uid"}
	r.NetworkNamespace = networkNS
	return r
}

// A NAD in namespace B naming namespace A's pool is refused, naming the
// pool, its owner and B, and A's allocations stay as they were; naming
// the same pool name unqualified gives B a pool of its own.
func TestTenancyOtherNamespacesPool(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	nsA, nsB, pool := name(t, "a"), name(t, "b"), name(t, "blue")
	ranges := `[[{"subnet":"10.40.0.0/24"}]]`
	a := e.allocator(t, "node-a", true, nil)
	a.Tenancy = &Tenancy{AdminNamespaces: []string{"default"}}

	mine, err := a.Allocate(ctx, tenantConfig(t, pool, ranges), nsReq(t, "a1", nsA, nsA))
	if err != nil {
		t.Fatal(err)
	}
	keyA := nsA + "/" + pool
	before := e.poolAddresses(keyA)
	if len(before) != 1 || before[0] != addrs(mine)[0] {
		t.Fatalf("namespace %s's pool %s holds %v, want [%s]", nsA, keyA, before, addrs(mine)[0])
	}

	_, err = a.Allocate(ctx, tenantConfig(t, keyA, ranges), nsReq(t, "b1", nsB, nsB))
	if !errors.Is(err, ErrPoolNotAllowed) {
		t.Fatalf("namespace %s naming %s: %v, want ErrPoolNotAllowed", nsB, keyA, err)
	}
	for _, want := range []string{fmt.Sprintf("pool %q", keyA), "namespace " + nsA, fmt.Sprintf("namespace %q", nsB), "ipamSharedPools"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if after := e.poolAddresses(keyA); !slices.Equal(after, before) {
		t.Errorf("namespace %s's pool changed: %v, was %v", nsA, after, before)
	}

	// The same name unqualified in B is B's own pool.
	theirs, err := a.Allocate(ctx, tenantConfig(t, pool, ranges), nsReq(t, "b2", nsB, nsB))
	if err != nil {
		t.Fatal(err)
	}
	if got := e.poolAddresses(nsB + "/" + pool); !slices.Equal(got, addrs(theirs)) {
		t.Errorf("namespace %s's own pool holds %v, want %v", nsB, got, addrs(theirs))
	}
	if after := e.poolAddresses(keyA); !slices.Equal(after, before) {
		t.Errorf("namespace %s's pool changed: %v, was %v", nsA, after, before)
	}
	// A pod of B through a NAD of the admin namespace "default" uses the
	// cluster pool of that name, as before tenancy.
	if _, err := a.Allocate(ctx, tenantConfig(t, pool, ranges), nsReq(t, "b3", "default", nsB)); err != nil {
		t.Fatal(err)
	}
	if got := e.poolObjects(pool); len(got) != 1 || got[0].Spec.Owner.Pod.Namespace != nsB {
		t.Errorf("cluster pool %s: %v, want one allocation of a pod of %s", pool, got, nsB)
	}
}

// A pool the admin shares (ipamSharedPools) admits the namespaces it
// lists: B allocates from A's pool (another address than A's), C still
// may not; a shared cluster pool is what a tenant's unqualified name
// then means, and a tenant it does not list is refused.
func TestTenancySharedPool(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	nsA, nsB, nsC, pool, gold := name(t, "a"), name(t, "b"), name(t, "c"), name(t, "blue"), name(t, "gold")
	ranges := `[[{"subnet":"10.41.0.0/29"}]]`
	keyA := nsA + "/" + pool
	a := e.allocator(t, "node-a", true, nil)
	a.Tenancy = &Tenancy{AdminNamespaces: []string{"default"}, SharedPools: []SharedPool{
		{Pool: keyA, AllowedNamespaces: []string{nsB}},
		{Pool: gold, AllowedNamespaces: []string{nsB}},
	}}
	if err := a.Tenancy.Check(); err != nil {
		t.Fatal(err)
	}
	mine, err := a.Allocate(ctx, tenantConfig(t, pool, ranges), nsReq(t, "a1", nsA, nsA))
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := a.Allocate(ctx, tenantConfig(t, keyA, ranges), nsReq(t, "b1", nsB, nsB))
	if err != nil {
		t.Fatalf("namespace %s, allowed in %s's shared pool: %v", nsB, keyA, err)
	}
	if addrs(theirs)[0] == addrs(mine)[0] {
		t.Errorf("the shared pool gave %s to both namespaces", addrs(mine)[0])
	}
	if got := e.poolAddresses(keyA); len(got) != 2 {
		t.Errorf("pool %s holds %v, want both namespaces' addresses", keyA, got)
	}
	if _, err := a.Allocate(ctx, tenantConfig(t, keyA, ranges), nsReq(t, "c1", nsC, nsC)); !errors.Is(err, ErrPoolNotAllowed) {
		t.Errorf("namespace %s, not listed: %v, want ErrPoolNotAllowed", nsC, err)
	}

	if _, err := a.Allocate(ctx, tenantConfig(t, gold, ranges), nsReq(t, "b2", nsB, nsB)); err != nil {
		t.Fatalf("namespace %s naming the shared cluster pool %s: %v", nsB, gold, err)
	}
	if got := e.poolObjects(gold); len(got) != 1 {
		t.Errorf("cluster pool %s holds %d allocations, want 1", gold, len(got))
	}
	_, err = a.Allocate(ctx, tenantConfig(t, gold, ranges), nsReq(t, "c2", nsC, nsC))
	if !errors.Is(err, ErrPoolNotAllowed) || !strings.Contains(err.Error(), "the cluster") {
		t.Errorf("namespace %s naming the cluster pool %s shared with %s only: %v", nsC, gold, nsB, err)
	}
	// Malformed declarations are named.
	bad := &Tenancy{SharedPools: []SharedPool{{Pool: "Not A Namespace/x", AllowedNamespaces: []string{"b"}}, {Pool: "y"}}}
	if err := bad.Check(); err == nil || !strings.Contains(err.Error(), "ipamSharedPools[0].pool") || !strings.Contains(err.Error(), "ipamSharedPools[1] (y): allowedNamespaces is empty") {
		t.Errorf("Check: %v", err)
	}
}

// The namespace limit refuses the allocation beyond it, naming the
// namespace and the limit, counts IPAMClaims' and earlier allocations of
// any pool, and frees a place on release; admin namespaces have none.
func TestTenancyNamespaceLimit(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	ns, pool := name(t, "q"), name(t, "p")
	cfg := tenantConfig(t, pool, `[[{"subnet":"10.42.0.0/24"}]]`)
	a := e.allocator(t, "node-a", true, nil)
	a.Tenancy = &Tenancy{AdminNamespaces: []string{"default"}, MaxPerNamespace: 100, NamespaceMax: map[string]int{ns: 2}}
	for _, c := range []string{"c1", "c2"} {
		if _, err := a.Allocate(ctx, cfg, nsReq(t, c, ns, ns)); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
	}
	_, err := a.Allocate(ctx, cfg, nsReq(t, "c3", ns, ns))
	if !errors.Is(err, ErrQuota) {
		t.Fatalf("the third allocation of a namespace limited to 2: %v, want ErrQuota", err)
	}
	for _, want := range []string{fmt.Sprintf("namespace %q", ns), "holds 2", "limit is 2"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if n := len(e.poolObjects(ns + "/" + pool)); n != 2 {
		t.Errorf("%d allocations after the refusal, want 2", n)
	}
	// a repeated ADD of an attachment that holds its address is no new one
	if _, err := a.Allocate(ctx, cfg, nsReq(t, "c1", ns, ns)); err != nil {
		t.Errorf("repeated ADD at the limit: %v", err)
	}
	if _, err := a.Release(ctx, name(t, "c1"), "net1"); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Allocate(ctx, cfg, nsReq(t, "c3", ns, ns)); err != nil {
		t.Errorf("after a release: %v", err)
	}
	// the pods of an admin namespace are not counted against a limit
	a.Tenancy.NamespaceMax["default"] = 1
	for _, c := range []string{"d1", "d2"} {
		if _, err := a.Allocate(ctx, cfg, nsReq(t, c, "default", "default")); err != nil {
			t.Errorf("admin namespace: %v", err)
		}
	}
}

// Upgrade: allocations made before pools belonged to namespaces (key
// "blue", no Tenancy) are still the attachments' own once the pool is
// keyed "ns/blue": a repeated ADD gets the same address without a new
// object, CHECK passes, new attachments never get their addresses (with
// and without a Cache), DEL releases them, and they count against the
// namespace's limit.
func TestTenancyUpgradeKeepsAllocations(t *testing.T) {
	for _, cached := range []bool{true, false} {
		t.Run(fmt.Sprintf("cached=%v", cached), func(t *testing.T) {
			e := newEnv(t)
			ctx := ctxT(t)
			ns, pool := name(t, "t"), name(t, "blue")
			// 10.43.0.1 is the gateway: 10.43.0.2-6 are allocatable
			cfg := tenantConfig(t, pool, `[[{"subnet":"10.43.0.0/29"}]]`)
			old := e.allocator(t, "node-a", false, nil) // before the upgrade: no Tenancy
			held, err := old.Allocate(ctx, cfg, nsReq(t, "old", ns, ns))
			if err != nil {
				t.Fatal(err)
			}
			legacy := addrs(held)[0]
			if got := e.poolAddresses(pool); !slices.Equal(got, []string{legacy}) {
				t.Fatalf("before the upgrade pool %s holds %v", pool, got)
			}

			a := e.allocator(t, "node-a", cached, nil)
			a.Tenancy = &Tenancy{AdminNamespaces: []string{"default"}, NamespaceMax: map[string]int{ns: 5}}
			again, err := a.Allocate(ctx, cfg, nsReq(t, "old", ns, ns))
			if err != nil || addrs(again)[0] != legacy {
				t.Fatalf("repeated ADD after the upgrade: %v, %v, want %s", addrs(again), err, legacy)
			}
			if err := a.Check(ctx, cfg, nsReq(t, "old", ns, ns)); err != nil {
				t.Errorf("CHECK after the upgrade: %v", err)
			}
			r := nsReq(t, "want", ns, ns)
			r.IPs = []netip.Addr{netip.MustParsePrefix(legacy).Addr()}
			if _, err := a.Allocate(ctx, cfg, r); !errors.Is(err, ErrTaken) {
				t.Errorf("requesting the address held under the old key: %v, want ErrTaken", err)
			}
			var got []string
			for i := range 4 {
				al, err := a.Allocate(ctx, cfg, nsReq(t, fmt.Sprintf("new%d", i), ns, ns))
				if err != nil {
					t.Fatalf("new attachment %d: %v", i, err)
				}
				got = append(got, addrs(al)[0])
			}
			if slices.Contains(got, legacy) {
				t.Fatalf("a new attachment got %s, held under the old key: %v", legacy, got)
			}
			// 5 allocatable, 1 held under the old key, 4 new: the pool is
			// full, and the namespace at its limit of 5 counts the old one
			_, err = a.Allocate(ctx, cfg, nsReq(t, "full", ns, ns))
			if cached && !errors.Is(err, ErrQuota) {
				t.Errorf("sixth address of a namespace limited to 5: %v, want ErrQuota", err)
			}
			if !cached && !errors.Is(err, ErrExhausted) {
				t.Errorf("sixth address: %v, want ErrExhausted", err)
			}
			if n, err := a.Release(ctx, name(t, "old"), "net1"); err != nil || n != 1 {
				t.Errorf("DEL after the upgrade released %d, %v", n, err)
			}
			if got := e.poolAddresses(pool); len(got) != 0 {
				t.Errorf("the old key still holds %v", got)
			}
			if n := len(e.poolObjects(ns + "/" + pool)); n != 4 {
				t.Errorf("the namespace's pool holds %d, want 4", n)
			}
		})
	}
}

// Resolve: which key each namespace's pool name means.
func TestTenancyResolve(t *testing.T) {
	tn := &Tenancy{AdminNamespaces: []string{"default", "kube-system"}, SharedPools: []SharedPool{{Pool: "gold", AllowedNamespaces: []string{"*"}}}}
	for _, c := range []struct{ pool, ns, key, legacy, err string }{
		{"blue", "", "blue", "", ""},
		{"blue", "default", "blue", "", ""},
		{"team-a/blue", "kube-system", "team-a/blue", "", ""},
		{"blue", "team-a", "team-a/blue", "blue", ""},
		{"team-a/blue", "team-a", "team-a/blue", "", ""},
		{"team-a/blue", "team-b", "", "", `pool "team-a/blue" belongs to namespace team-a; the network's namespace "team-b"`},
		{"gold", "team-b", "gold", "", ""},
		{"Bad/x", "team-b", "", "", "ipam.pool"},
		{"a/", "a", "", "", "ipam.pool"},
	} {
		cfg := &Config{Network: "n", Pool: c.pool}
		got, err := tn.Resolve(cfg, c.ns)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s in %q: %v, want an error with %q", c.pool, c.ns, err, c.err)
			}
		case err != nil:
			t.Errorf("%s in %q: %v", c.pool, c.ns, err)
		case got.Pool != c.key || got.LegacyPool != c.legacy:
			t.Errorf("%s in %q: key %q legacy %q, want %q %q", c.pool, c.ns, got.Pool, got.LegacyPool, c.key, c.legacy)
		}
	}
	// without Tenancy every pool is the cluster's, as before
	if got, err := (*Tenancy)(nil).Resolve(&Config{Pool: "blue"}, "team-a"); err != nil || got.Pool != "blue" {
		t.Errorf("nil Tenancy: %v %v", got, err)
	}
}
