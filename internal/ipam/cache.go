package ipam

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	ipamv1 "github.com/multinet/multinet/api/ipam.multinet.io/v1alpha1"
	"github.com/multinet/multinet/internal/node/kube"
	ipamclient "github.com/multinet/multinet/pkg/client/clientset/versioned/typed/ipam.multinet.io/v1alpha1"
)

// Indexes of the Cache.
const (
	// IndexClaimUID indexes the Cache by spec.owner.claim.uid.
	IndexClaimUID = "claimUID"
	// IndexAttachment indexes attachment-owned allocations by their
	// LabelAttachment (AttachmentKey of container ID and interface name).
	IndexAttachment = "attachment"
	// IndexNamespace indexes allocations by the namespace they count
	// against: their pod's (spec.owner.pod) or IPAMClaim's.
	IndexNamespace = "ownerNamespace"
)

// ownerNamespace is the namespace an allocation counts against ("" when
// none: outside Kubernetes).
func ownerNamespace(o *ipamv1.IPAllocation) string {
	switch {
	case o.Spec.Owner.Claim != nil:
		return o.Spec.Owner.Claim.Namespace
	case o.Spec.Owner.Pod != nil:
		return o.Spec.Owner.Pod.Namespace
	}
	return ""
}

// pendingTTL bounds how long the Cache remembers a create of its own that
// its informer has not shown yet (normally milliseconds; an entry past it
// only costs a list on a repeated ADD of that attachment).
const pendingTTL = 10 * time.Minute

// Cache is an informer of every IPAllocation: the Allocator skips the
// addresses it holds without a request, tells a first ADD of an
// attachment from a repeated one without a request (ByAttachment), and
// claim-owned allocations are found by claim UID. It may lag behind the
// API server: a create stays the arbiter of an address, and an attachment
// the Cache shows holding addresses is looked up in the API server
// (docs/decisions/ipam.md). The allocations this process created are
// remembered until the informer shows them, so that the lag never hides
// its own creates.
type Cache struct {
	informer cache.SharedIndexInformer
	// stopped is closed when the informer started by Start has stopped.
	stopped chan struct{}

	mu sync.Mutex
	// pending are this process's creates the informer has not shown yet,
	// by object name.
	pending map[string]pendingCreate
	// released are this process's deletes the informer has not shown yet
	// (by object name: the UID deleted), so that a namespace's count
	// frees the place at once.
	released map[string]pendingDelete
}

type pendingDelete struct {
	uid types.UID
	at  time.Time
}

type pendingCreate struct {
	obj *ipamv1.IPAllocation
	at  time.Time
}

// NewCache builds (but does not start) the informer on client (the typed
// ipam.multinet.io client: Allocator.IPAM). Errors: the informer's
// transform, indexers or handler cannot be set.
func NewCache(client ipamclient.IPAllocationsGetter) (*Cache, error) {
	inf, err := kube.NewInformer[*ipamv1.IPAllocationList](client.IPAllocations(), &ipamv1.IPAllocation{}, kube.InformerOptions{
		Transform: kube.DropManagedFields,
	})
	if err != nil {
		return nil, fmt.Errorf("multinet-ipam cache: %w", err)
	}
	if err := inf.AddIndexers(cache.Indexers{
		IndexClaimUID: func(obj any) ([]string, error) {
			if o, ok := obj.(*ipamv1.IPAllocation); ok && o.Spec.Owner.Claim != nil {
				return []string{o.Spec.Owner.Claim.UID}, nil
			}
			return nil, nil
		},
		IndexNamespace: func(obj any) ([]string, error) {
			if o, ok := obj.(*ipamv1.IPAllocation); ok && ownerNamespace(o) != "" {
				return []string{ownerNamespace(o)}, nil
			}
			return nil, nil
		},
		IndexAttachment: func(obj any) ([]string, error) {
			if o, ok := obj.(*ipamv1.IPAllocation); ok && o.Labels[LabelAttachment] != "" {
				return []string{o.Labels[LabelAttachment]}, nil
			}
			return nil, nil
		},
	}); err != nil {
		return nil, fmt.Errorf("multinet-ipam cache: indexer: %w", err)
	}
	c := &Cache{informer: inf, stopped: make(chan struct{}), pending: map[string]pendingCreate{}, released: map[string]pendingDelete{}}
	// The store is updated before handlers are told: once a create is
	// shown here, ByAttachment finds it in the store.
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.shown,
		UpdateFunc: func(_, obj any) { c.shown(obj) },
		DeleteFunc: c.shownDeleted,
	}); err != nil {
		return nil, fmt.Errorf("multinet-ipam cache: handler: %w", err)
	}
	return c, nil
}

// shown forgets the pending create of an object the informer showed.
func (c *Cache) shown(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if o, ok := obj.(*ipamv1.IPAllocation); ok {
		c.forget(o.Name, o.UID)
	}
}

// shownDeleted forgets the pending create and the pending delete of an
// object the informer showed deleted.
func (c *Cache) shownDeleted(obj any) {
	c.shown(obj)
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if o, ok := obj.(*ipamv1.IPAllocation); ok {
		c.mu.Lock()
		defer c.mu.Unlock()
		if r, ok := c.released[o.Name]; ok && r.uid == o.UID {
			delete(c.released, o.Name)
		}
	}
}

// deleted remembers an allocation this process released until the
// informer shows its delete (or pendingTTL passes).
func (c *Cache) deleted(name string, uid types.UID) {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for n, r := range c.released {
		if now.Sub(r.at) > pendingTTL {
			delete(c.released, n)
		}
	}
	if shown := c.Get(name); shown != nil && shown.UID == uid {
		c.released[name] = pendingDelete{uid: uid, at: now}
	}
}

// created remembers an allocation this process created until the
// informer shows it (or pendingTTL passes).
func (c *Cache) created(o *ipamv1.IPAllocation) {
	if o == nil || o.Labels[LabelAttachment] == "" {
		return
	}
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for name, p := range c.pending {
		if now.Sub(p.at) > pendingTTL {
			delete(c.pending, name)
		}
	}
	if shown := c.Get(o.Name); shown == nil || shown.UID != o.UID {
		kept := *o
		kept.ManagedFields = nil
		c.pending[o.Name] = pendingCreate{obj: &kept, at: now}
	}
}

// forget drops the pending create of that object (shown, or released).
func (c *Cache) forget(name string, uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.pending[name]; ok && p.obj.UID == uid {
		delete(c.pending, name)
	}
}

// Start runs the informer until ctx ends.
func (c *Cache) Start(ctx context.Context) {
	go func() {
		defer close(c.stopped)
		c.informer.RunWithContext(ctx)
	}()
}

// WaitForSync waits for the first list, at most d.
func (c *Cache) WaitForSync(ctx context.Context, d time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return cache.WaitForCacheSync(ctx.Done(), c.informer.HasSynced)
}

// HasSynced reports whether the first list arrived.
func (c *Cache) HasSynced() bool { return c.informer.HasSynced() }

// Informer is the underlying informer (event handlers).
func (c *Cache) Informer() cache.SharedIndexInformer { return c.informer }

// Held reports whether the cache has an IPAllocation of that name.
func (c *Cache) Held(name string) bool {
	_, ok, err := c.informer.GetStore().GetByKey(name)
	return err == nil && ok
}

// Get returns the cached IPAllocation of that name, or nil.
func (c *Cache) Get(name string) *ipamv1.IPAllocation {
	obj, ok, err := c.informer.GetStore().GetByKey(name)
	if err != nil || !ok {
		return nil
	}
	return obj.(*ipamv1.IPAllocation)
}

// ByAttachment returns the attachment-owned allocations of (containerID,
// ifName) the Cache knows: the informer's, and this process's creates it
// has not shown yet. It may still show one that was released meanwhile.
func (c *Cache) ByAttachment(containerID, ifName string) []*ipamv1.IPAllocation {
	key := AttachmentKey(containerID, ifName)
	var out []*ipamv1.IPAllocation
	mine := func(o *ipamv1.IPAllocation) bool {
		return o.Spec.Owner.Claim == nil && o.Spec.Owner.ContainerID == containerID && o.Spec.Owner.IfName == ifName
	}
	objs, _ := c.informer.GetIndexer().ByIndex(IndexAttachment, key)
	seen := map[types.UID]bool{}
	for _, obj := range objs {
		if o := obj.(*ipamv1.IPAllocation); mine(o) {
			out = append(out, o)
			seen[o.UID] = true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.pending {
		if p.obj.Labels[LabelAttachment] == key && mine(p.obj) && !seen[p.obj.UID] {
			out = append(out, p.obj)
		}
	}
	return out
}

// CountNamespace is the number of allocations counting against namespace
// ns (IndexNamespace) the Cache knows: the informer's but those this
// process released, and this process's creates it has not shown yet. No
// request.
func (c *Cache) CountNamespace(ns string) int {
	objs, _ := c.informer.GetIndexer().ByIndex(IndexNamespace, ns)
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, obj := range objs {
		o := obj.(*ipamv1.IPAllocation)
		if r, ok := c.released[o.Name]; !ok || r.uid != o.UID {
			n++
		}
	}
	for name, p := range c.pending {
		if ownerNamespace(p.obj) == ns && !c.shownLocked(name, p.obj) {
			n++
		}
	}
	return n
}

// shownLocked reports whether the informer has the object of that name
// and UID.
func (c *Cache) shownLocked(name string, o *ipamv1.IPAllocation) bool {
	got := c.Get(name)
	return got != nil && got.UID == o.UID
}

// ByClaim returns the cached allocations of the IPAMClaim with that UID.
func (c *Cache) ByClaim(uid string) []*ipamv1.IPAllocation {
	objs, err := c.informer.GetIndexer().ByIndex(IndexClaimUID, uid)
	if err != nil {
		return nil
	}
	out := make([]*ipamv1.IPAllocation, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*ipamv1.IPAllocation))
	}
	return out
}
