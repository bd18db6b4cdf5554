package ipam

import (
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/multinet/multinet/pkg/client/clientset/versioned"
)

// Every allocatable address of a pool is handed out exactly once: not the
// network or broadcast address, the gateway, addresses outside
// rangeStart..rangeEnd or in an excluded prefix; then ErrExhausted.
func TestAllocateRangesExclusionsGateway(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	for _, cached := range []bool{false, true} {
		t.Run(fmt.Sprintf("cached=%v", cached), func(t *testing.T) {
			pool := name(t, "p")
			cfg := config(t, pool, `"ranges":[[{"subnet":"10.20.0.0/28","gateway":"10.20.0.14"},{"subnet":"10.20.1.0/29","rangeStart":"10.20.1.3","rangeEnd":"10.20.1.5"}]],
				"exclude":["10.20.0.4/30","10.20.1.4/32"]`)
			a := e.allocator(t, "node-a", cached, nil)
			// 10.20.0.0/28: .1-.14 usable, .14 gateway, .4-.7 excluded -> .1-.3, .8-.13 (9);
			// 10.20.1.3-.5 with .4 excluded -> .3, .5 (2); the /29's default gateway .1 is outside the range.
			want := []string{"10.20.0.1/28", "10.20.0.10/28", "10.20.0.11/28", "10.20.0.12/28", "10.20.0.13/28",
				"10.20.0.2/28", "10.20.0.3/28", "10.20.0.8/28", "10.20.0.9/28", "10.20.1.3/29", "10.20.1.5/29"}
			var got []string
			for i := 0; ; i++ {
				al, err := a.Allocate(ctx, cfg, req(t, fmt.Sprintf("c%d", i), "net1"))
				if err != nil {
					if !errors.Is(err, ErrExhausted) || !strings.Contains(err.Error(), pool) {
						t.Fatalf("allocation %d: %v, want ErrExhausted naming the pool", i, err)
					}
					break
				}
				if i > len(want) {
					t.Fatalf("more allocations than addresses: %v", got)
				}
				got = append(got, addrs(al)...)
				if gw := al.Addresses[0].Gateway.String(); al.Addresses[0].Prefix.Bits() == 28 && gw != "10.20.0.14" {
					t.Errorf("gateway %s, want 10.20.0.14", gw)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("allocated %v\nwant      %v", got, want)
			}
			if objs := e.poolAddresses(pool); !slices.Equal(objs, want) {
				t.Errorf("IPAllocations %v, want %v", objs, want)
			}
		})
	}
}

// One address from each range set, IPv4 and IPv6, with their subnets'
// prefix lengths and gateways; the objects record the attachment.
func TestAllocateDualStack(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	pool := name(t, "p")
	cfg := config(t, pool, `"ranges":[[{"subnet":"10.21.0.0/24"}],[{"subnet":"fd21::/64","gateway":"fd21::fe"}]]`)
	a := e.allocator(t, "node-a", false, nil)
	r := req(t, "c1", "net1")
	r.Pod = &PodRef{Namespace: "ns", Name: "p", UID: "u1"}
	al, err := a.Allocate(ctx, cfg, r)
	if err != nil {
		t.Fatal(err)
	}
	if len(al.Addresses) != 2 {
		t.Fatalf("addresses %v", addrs(al))
	}
	v4, v6 := al.Addresses[0], al.Addresses[1]
	if !v4.Prefix.Addr().Is4() || v4.Prefix.Bits() != 24 || v4.Gateway.String() != "10.21.0.1" {
		t.Errorf("IPv4 %v gw %v", v4.Prefix, v4.Gateway)
	}
	if !v6.Prefix.Addr().Is6() || v6.Prefix.Bits() != 64 || v6.Gateway.String() != "fd21::fe" {
		t.Errorf("IPv6 %v gw %v", v6.Prefix, v6.Gateway)
	}
	objs := e.poolObjects(pool)
	if len(objs) != 2 {
		t.Fatalf("%d objects", len(objs))
	}
	for _, o := range objs {
		ow := o.Spec.Owner
		if ow.ContainerID != name(t, "c1") || ow.IfName != "net1" || ow.Node != "node-a" || ow.Network != pool || ow.Pod == nil || ow.Pod.UID != "u1" || ow.Claim != nil {
			t.Errorf("owner %+v", ow)
		}
		if o.Labels[LabelAttachment] != AttachmentKey(name(t, "c1"), "net1") {
			t.Errorf("labels %v", o.Labels)
		}
		p := netip.MustParsePrefix(o.Spec.Address)
		if o.Name != ObjectName(pool, p.Addr()) {
			t.Errorf("name %s, address %s", o.Name, o.Spec.Address)
		}
	}
}

// runtimeConfig "ips": a free address is given as asked; a taken one fails
// naming its holder; one out of range fails; a failed dual-stack request
// leaves nothing behind.
func TestAllocateRequestedIPs(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	pool := name(t, "p")
	cfg := config(t, pool, `"ranges":[[{"subnet":"10.22.0.0/24"}],[{"subnet":"fd22::/64"}]],"exclude":["10.22.0.128/25"]`)
	a := e.allocator(t, "node-a", false, nil)
	first := req(t, "c1", "net1")
	first.Pod = &PodRef{Namespace: "ns", Name: "first"}
	first.IPs = []netip.Addr{mustAddr("10.22.0.50"), mustAddr("fd22::50")}
	al, err := a.Allocate(ctx, cfg, first)
	if err != nil {
		t.Fatal(err)
	}
	if got := addrs(al); !slices.Equal(got, []string{"10.22.0.50/24", "fd22::50/64"}) {
		t.Errorf("got %v", got)
	}
	// Only the IPv6 address requested: IPv4 is allocated freely.
	half := req(t, "c2", "net1")
	half.IPs = []netip.Addr{mustAddr("fd22::51")}
	al, err = a.Allocate(ctx, cfg, half)
	if err != nil || al.Addresses[1].Prefix.String() != "fd22::51/64" || al.Addresses[0].Prefix.Addr() == mustAddr("10.22.0.50") {
		t.Fatalf("got %v, %v", al, err)
	}
	before := e.poolAddresses(pool)

	taken := req(t, "c3", "net1")
	taken.IPs = []netip.Addr{mustAddr("10.22.0.50"), mustAddr("fd22::99")}
	_, err = a.Allocate(ctx, cfg, taken)
	if !errors.Is(err, ErrTaken) || !strings.Contains(err.Error(), "10.22.0.50") || !strings.Contains(err.Error(), "pod ns/first") {
		t.Errorf("taken: %v", err)
	}
	for _, ip := range []string{"10.23.0.1", "10.22.0.200", "10.22.0.1", "10.22.0.0"} {
		r := req(t, "c4", "net1")
		r.IPs = []netip.Addr{mustAddr(ip)}
		if _, err := a.Allocate(ctx, cfg, r); !errors.Is(err, ErrOutOfRange) || !strings.Contains(err.Error(), ip) {
			t.Errorf("%s: %v, want ErrOutOfRange", ip, err)
		}
	}
	// The IPv4 address of c3 was taken after its IPv6... in any order:
	// nothing of c3 or c4 stays.
	if after := e.poolAddresses(pool); !slices.Equal(before, after) {
		t.Errorf("failed requests left allocations: before %v after %v", before, after)
	}
	// Taken IPv6 after a free IPv4: the IPv4 one is rolled back.
	late := req(t, "c5", "net1")
	late.IPs = []netip.Addr{mustAddr("10.22.0.60"), mustAddr("fd22::50")}
	if _, err := a.Allocate(ctx, cfg, late); !errors.Is(err, ErrTaken) {
		t.Errorf("late: %v", err)
	}
	if after := e.poolAddresses(pool); !slices.Equal(before, after) {
		t.Errorf("rollback: before %v after %v", before, after)
	}
}

// An ADD repeated for the same container and interface (no DEL between)
// gets the same addresses and creates nothing; a different interface of
// the same container gets others.
func TestAllocateIdempotent(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	pool := name(t, "p")
	cfg := config(t, pool, `"ranges":[[{"subnet":"10.24.0.0/24"}],[{"subnet":"fd24::/64"}]]`)
	a := e.allocator(t, "node-a", true, nil)
	one, err := a.Allocate(ctx, cfg, req(t, "c1", "net1"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.allocator(t, "node-a", false, nil).Allocate(ctx, cfg, req(t, "c1", "net1"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(addrs(one), addrs(again)) {
		t.Errorf("re-ADD got %v, first ADD %v", addrs(again), addrs(one))
	}
	other, err := a.Allocate(ctx, cfg, req(t, "c1", "net2"))
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(addrs(one)[:1], addrs(other)[:1]) {
		t.Errorf("another interface got the same address %v", addrs(other))
	}
	if n := len(e.poolObjects(pool)); n != 4 {
		t.Errorf("%d IPAllocations, want 4", n)
	}
	// A re-ADD asking for another address than it holds is refused.
	r := req(t, "c1", "net1")
	r.IPs = []netip.Addr{mustAddr("10.24.0.77")}
	if _, err := a.Allocate(ctx, cfg, r); !errors.Is(err, ErrTaken) || !strings.Contains(err.Error(), "already holds") {
		t.Errorf("re-ADD with another address: %v", err)
	}
}

// Release (CNI DEL) removes the attachment's allocations and no other;
// releasing again is no error.
func TestRelease(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	pool := name(t, "p")
	cfg := config(t, pool, `"ranges":[[{"subnet":"10.25.0.0/24"}],[{"subnet":"fd25::/64"}]]`)
	a := e.allocator(t, "node-a", false, nil)
	mine, err := a.Allocate(ctx, cfg, req(t, "c1", "net1"))
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := a.Allocate(ctx, cfg, req(t, "c2", "net1"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := a.Release(ctx, name(t, "c1"), "net1")
	if err != nil || n != 2 {
		t.Fatalf("released %d, %v", n, err)
	}
	got := e.poolAddresses(pool)
	want := addrs(theirs)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("left %v, want %v (released %v)", got, want, addrs(mine))
	}
	if n, err := a.Release(ctx, name(t, "c1"), "net1"); err != nil || n != 0 {
		t.Errorf("second release: %d, %v", n, err)
	}
	// A released address can be allocated again.
	r := req(t, "c3", "net1")
	r.IPs = []netip.Addr{mine.Addresses[0].Prefix.Addr()}
	if _, err := a.Allocate(ctx, cfg, r); err != nil {
		t.Errorf("allocating a released address: %v", err)
	}
}

// Many allocators ("nodes") allocating from one small pool at the same
// time: never a duplicate (the API server holds one object per address),
// no failure while addresses remain, ErrExhausted only for the requests
// beyond the pool's size. Without a cache every allocator races blindly
// from its hashed offset; with one, it skips what it has seen.
func TestAllocateConcurrently(t *testing.T) {
	e := newEnv(t)
	const nodes, perNode = 8, 40
	for _, tc := range []struct {
		cached   bool
		capacity int
	}{
		{cached: true, capacity: 340},  // more addresses than requests: all succeed
		{cached: false, capacity: 300}, // 20 requests beyond the pool: ErrExhausted
	} {
		t.Run(fmt.Sprintf("cached=%v,capacity=%d", tc.cached, tc.capacity), func(t *testing.T) {
			ctx := ctxT(t)
			pool := name(t, "p")
			// 10.26.0.0/23 has 510 usable addresses less the gateway .1;
			// rangeEnd cuts it to capacity.
			end := netip.MustParseAddr("10.26.0.1")
			for range tc.capacity {
				end = end.Next()
			}
			cfg := config(t, pool, fmt.Sprintf(`"ranges":[[{"subnet":"10.26.0.0/23","rangeEnd":%q}]]`, end))
			var conflicts atomicCounter
			var mu sync.Mutex
			got := map[string]string{}
			var dups, exhausted, other []string
			var wg sync.WaitGroup
			for n := range nodes {
				a := e.allocator(t, fmt.Sprintf("node-%d", n), tc.cached, nil)
				a.OnConflict = conflicts.inc
				for g := range perNode {
					wg.Add(1)
					go func() {
						defer wg.Done()
						id := fmt.Sprintf("n%d-c%d", n, g)
						al, err := a.Allocate(ctx, cfg, req(t, id, "net1"))
						mu.Lock()
						defer mu.Unlock()
						switch {
						case errors.Is(err, ErrExhausted):
							exhausted = append(exhausted, id)
						case err != nil:
							other = append(other, fmt.Sprintf("%s: %v", id, err))
						default:
							ad := al.Addresses[0].Prefix.String()
							if prev, dup := got[ad]; dup {
								dups = append(dups, fmt.Sprintf("%s to %s and %s", ad, prev, id))
							}
							got[ad] = id
						}
					}()
				}
			}
			wg.Wait()
			wantOK := min(nodes*perNode, tc.capacity)
			if len(dups) > 0 || len(other) > 0 || len(got) != wantOK || len(exhausted) != nodes*perNode-wantOK {
				t.Errorf("%d allocated (want %d), %d exhausted, duplicates %v, other failures %v", len(got), wantOK, len(exhausted), dups, other)
			}
			if objs := e.poolObjects(pool); len(objs) != len(got) {
				t.Errorf("%d IPAllocations for %d allocations", len(objs), len(got))
			}
			t.Logf("%d allocations by %d nodes x %d goroutines: %d create conflicts", len(got), nodes, perNode, conflicts.get())
		})
	}
}

type atomicCounter struct {
	mu sync.Mutex
	n  int
}

func (c *atomicCounter) inc() { c.mu.Lock(); c.n++; c.mu.Unlock() }
func (c *atomicCounter) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// A create whose answer is lost (the API server stored the object, or
// never got the request) is settled, not failed: under a burst, one
// IPAllocation create hit the call timeout after the server had stored
// it, and the ADD failed on its own address. Allocate reads the object
// back and keeps it when it is the attachment's, or creates it again when
// it was never stored; either way one IPAllocation, the attachment's.
func TestAllocateSettlesAnUnknownCreate(t *testing.T) {
	for _, stored := range []bool{true, false} {
		t.Run(fmt.Sprintf("stored=%v", stored), func(t *testing.T) {
			e := newEnv(t)
			pool := name(t, "p")
			cfg := config(t, pool, `"ranges":[[{"subnet":"10.26.0.0/24"}]]`)
			var lost atomic.Int64
			c := rest.CopyConfig(e.cfg)
			c.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
				return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
					if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/ipallocations") || !lost.CompareAndSwap(0, 1) {
						return rt.RoundTrip(r)
					}
					if stored {
						if resp, err := rt.RoundTrip(r); err == nil {
							resp.Body.Close()
						}
					}
					return nil, errors.New("connection reset by peer (the answer was lost)")
				})
			}
			cs := versioned.NewForConfigOrDie(c)
			a := &Allocator{IPAM: cs.IPAMV1alpha1(), Claims: cs.K8sCniCncfIoV1alpha1(), Node: "node-a"}
			got, err := a.Allocate(ctxT(t), cfg, req(t, "c1", "net1"))
			if err != nil {
				t.Fatalf("Allocate after a lost create answer: %v", err)
			}
			if lost.Load() != 1 {
				t.Fatal("the test's transport lost no answer")
			}
			objs := e.poolObjects(pool)
			if len(objs) != 1 || objs[0].Spec.Owner.ContainerID != name(t, "c1") || objs[0].Spec.Address != got.Addresses[0].Prefix.String() {
				t.Errorf("pool holds %+v, want one IPAllocation of %s for %v", objs, name(t, "c1"), addrs(got))
			}
		})
	}
}
