package ipam

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/multinet/multinet/pkg/client/clientset/versioned"
)

// frozenCache is a Cache that synced and then stopped: it never shows
// what happens after (an informer lagging without end).
func (e *env) frozenCache(t *testing.T) *Cache {
	t.Helper()
	c, err := NewCache(versioned.NewForConfigOrDie(e.cfg).IPAMV1alpha1())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.Start(ctx)
	if !c.WaitForSync(ctx, 30*time.Second) {
		t.Fatal("IPAllocation cache did not sync")
	}
	cancel()
	<-c.stopped // the informer has stopped
	if !c.HasSynced() {
		t.Fatal("a stopped cache no longer reports synced")
	}
	return c
}

// counted is an allocator of node-a whose requests rc counts, with cache c
// (nil: none).
func (e *env) counted(rc *requestCounter, c *Cache) *Allocator {
	cs := versioned.NewForConfigOrDie(rc.wrap(e.cfg))
	return &Allocator{IPAM: cs.IPAMV1alpha1(), Claims: cs.K8sCniCncfIoV1alpha1(), Node: "node-a", Cache: c}
}

// requests runs f and returns the requests rc counted meanwhile.
func requests(t *testing.T, rc *requestCounter, f func() error) int64 {
	t.Helper()
	before := rc.n.Load()
	if err := f(); err != nil {
		t.Fatal(err)
	}
	return rc.n.Load() - before
}

// With a synced Cache, the ADD of an attachment that holds nothing sends
// one request per range set: the creates (no list of the attachment's
// allocations). A Cache that has not synced is not trusted: a list first,
// and an ADD repeated through it still gets the attachment's address.
func TestAllocateRequestsWithCache(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	v4 := config(t, name(t, "v4"), `"ranges":[[{"subnet":"10.25.0.0/24"}]]`)
	dual := config(t, name(t, "dual"), `"ranges":[[{"subnet":"10.25.1.0/24"}],[{"subnet":"fd25::/64"}]]`)
	var rc requestCounter
	a := e.counted(&rc, e.allocator(t, "node-a", true, nil).Cache)
	var first *Allocation
	if n := requests(t, &rc, func() (err error) { first, err = a.Allocate(ctx, v4, req(t, "c1", "net1")); return err }); n != 1 {
		t.Errorf("IPv4 ADD with a synced cache: %d requests, want 1 (the create)", n)
	}
	if n := requests(t, &rc, func() error { _, err := a.Allocate(ctx, dual, req(t, "c2", "net1")); return err }); n != 2 {
		t.Errorf("dual-stack ADD with a synced cache: %d requests, want 2 (the creates)", n)
	}

	unsynced, err := NewCache(versioned.NewForConfigOrDie(e.cfg).IPAMV1alpha1()) // never started
	if err != nil {
		t.Fatal(err)
	}
	b := e.counted(&rc, unsynced)
	if n := requests(t, &rc, func() error { _, err := b.Allocate(ctx, v4, req(t, "c3", "net1")); return err }); n != 2 {
		t.Errorf("ADD with an unsynced cache: %d requests, want 2 (a list, the create)", n)
	}
	again, err := b.Allocate(ctx, v4, req(t, "c1", "net1"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(addrs(again), addrs(first)) {
		t.Errorf("ADD repeated with an unsynced cache got %v, first ADD %v", addrs(again), addrs(first))
	}
	if got := len(e.poolObjects(v4.Pool)); got != 2 {
		t.Errorf("%d IPAllocations in pool %s, want 2 (c1, c3)", got, v4.Pool)
	}
}

// An ADD repeated without DEL gets the attachment's addresses again and
// creates nothing, however far the Cache lags: its informer stopped before
// the first ADD (the process remembers its own creates), or in a new
// process (multinetd restarted) whose Cache synced after the first ADD.
// A Cache that still shows an allocation DEL released is not believed:
// the ADD after the DEL gets an address whose IPAllocation exists.
func TestAllocateRepeatedWithCacheLag(t *testing.T) {
	e := newEnv(t)
	ctx := ctxT(t)
	pool := name(t, "p")
	cfg := config(t, pool, `"ranges":[[{"subnet":"10.26.0.0/24"}],[{"subnet":"fd26::/64"}]]`)
	var rc requestCounter
	lagging := e.counted(&rc, e.frozenCache(t))
	first, err := lagging.Allocate(ctx, cfg, req(t, "c1", "net1"))
	if err != nil {
		t.Fatal(err)
	}
	again, err := lagging.Allocate(ctx, cfg, req(t, "c1", "net1"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(addrs(again), addrs(first)) {
		t.Errorf("repeated ADD with a lagging cache got %v, first ADD %v", addrs(again), addrs(first))
	}
	if got := e.poolAddresses(pool); !slices.Equal(got, sortedAddrs(first)) {
		t.Errorf("IPAllocations %v, want only the first ADD's %v", got, addrs(first))
	}

	// A restarted multinetd: a new process, its Cache synced after the ADD.
	restarted := e.counted(&rc, e.frozenCache(t))
	if n := len(restarted.Cache.ByAttachment(name(t, "c1"), "net1")); n != 2 {
		t.Fatalf("the restarted process's cache shows %d allocations of the attachment, want 2", n)
	}
	again, err = restarted.Allocate(ctx, cfg, req(t, "c1", "net1"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(addrs(again), addrs(first)) {
		t.Errorf("repeated ADD after a restart got %v, first ADD %v", addrs(again), addrs(first))
	}

	// DEL, then ADD again: the cache still shows the released allocations.
	if n, err := restarted.Release(ctx, name(t, "c1"), "net1"); err != nil || n != 2 {
		t.Fatalf("Release: %d, %v", n, err)
	}
	if n := len(restarted.Cache.ByAttachment(name(t, "c1"), "net1")); n != 2 {
		t.Fatalf("the frozen cache shows %d allocations after DEL, want the 2 released", n)
	}
	after, err := restarted.Allocate(ctx, cfg, req(t, "c1", "net1"))
	if err != nil {
		t.Fatal(err)
	}
	if got := e.poolAddresses(pool); !slices.Equal(got, sortedAddrs(after)) {
		t.Errorf("after DEL and ADD: IPAllocations %v, the ADD returned %v", got, addrs(after))
	}
}

func sortedAddrs(al *Allocation) []string {
	s := addrs(al)
	slices.Sort(s)
	return s
}
