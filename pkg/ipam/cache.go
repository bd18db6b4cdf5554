package ipam

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/tools/cache"

	ipamv1 "github.com/multinet/multinet/api/ipam.multinet.io/v1alpha1"
	"github.com/multinet/multinet/pkg/client/clientset/versioned"
	"github.com/multinet/multinet/pkg/client/informers/externalversions"
)

// IndexClaimUID indexes the Cache by spec.owner.claim.uid.
const IndexClaimUID = "claimUID"

// Cache is an informer of every IPAllocation: the Allocator skips the
// addresses it holds without a request, and claim-owned allocations are
// found by claim UID. It may lag behind the API server; nothing relies on
// it for correctness (a create stays the arbiter).
type Cache struct {
	factory  externalversions.SharedInformerFactory
	informer cache.SharedIndexInformer
}

// NewCache builds (but does not start) the informer.
func NewCache(client versioned.Interface) (*Cache, error) {
	f := externalversions.NewSharedInformerFactory(client, 0)
	inf := f.IPAM().V1alpha1().IPAllocations().Informer()
	if err := inf.SetTransform(func(obj any) (any, error) {
		if o, ok := obj.(*ipamv1.IPAllocation); ok {
			o.ManagedFields = nil
		}
		return obj, nil
	}); err != nil {
		return nil, fmt.Errorf("multinet-ipam cache: transform: %w", err)
	}
	if err := inf.AddIndexers(cache.Indexers{IndexClaimUID: func(obj any) ([]string, error) {
		if o, ok := obj.(*ipamv1.IPAllocation); ok && o.Spec.Owner.Claim != nil {
			return []string{o.Spec.Owner.Claim.UID}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, fmt.Errorf("multinet-ipam cache: indexer: %w", err)
	}
	return &Cache{factory: f, informer: inf}, nil
}

// Start runs the informer until ctx ends.
func (c *Cache) Start(ctx context.Context) { c.factory.StartWithContext(ctx) }

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
