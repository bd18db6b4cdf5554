package kube

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// ListerWatcher is the List and Watch of one resource of a typed client
// (e.g. client.Pods(""), client.IPAllocations(),
// client.NetworkAttachmentDefinitions("")); L is its list type.
type ListerWatcher[L runtime.Object] interface {
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// InformerOptions configure NewInformer.
type InformerOptions struct {
	// FieldSelector restricts what is listed and watched (e.g.
	// "spec.nodeName=node1"); empty: everything.
	FieldSelector string
	// Transform trims each object before it is stored (cache.TransformFunc);
	// nil keeps objects whole.
	Transform cache.TransformFunc
	// Indexers are the informer's indexes; cache.NamespaceIndex is always
	// there.
	Indexers cache.Indexers
	// Resync is the resync period; 0 disables resync.
	Resync time.Duration
	// Client, when it says it cannot stream the initial list
	// (IsWatchListSemanticsUnSupported, client-go's and pkg/client's fake
	// clientsets), makes the informer list, then watch. nil: the real API
	// server's watch-list streaming.
	Client any
}

// NewInformer returns an informer (not started) of what lw lists
// and watches, holding objects of example's type: the typed client of one
// resource alone, without a generated informer factory, which takes a
// whole clientset and so links every group of it (binary size).
// Errors: the transform or the indexers cannot be set.
func NewInformer[L runtime.Object](lw ListerWatcher[L], example runtime.Object, opts InformerOptions) (cache.SharedIndexInformer, error) {
	selector := opts.FieldSelector
	w := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, lo metav1.ListOptions) (runtime.Object, error) {
			lo.FieldSelector = selector
			return lw.List(ctx, lo)
		},
		WatchFuncWithContext: func(ctx context.Context, lo metav1.ListOptions) (watch.Interface, error) {
			lo.FieldSelector = selector
			return lw.Watch(ctx, lo)
		},
	}
	indexers := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	for k, f := range opts.Indexers {
		indexers[k] = f
	}
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(w, opts.Client), example, opts.Resync, indexers)
	if opts.Transform != nil {
		if err := inf.SetTransform(opts.Transform); err != nil {
			return nil, err
		}
	}
	return inf, nil
}

// DropManagedFields is an informer transform (cache.TransformFunc) that
// drops an object's managedFields, which no multinet component reads: the
// cached objects' memory. Objects without metadata (a
// tombstone) pass unchanged.
func DropManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
