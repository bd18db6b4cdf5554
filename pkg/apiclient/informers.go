package apiclient

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/api/k8s.cni.cncf.io/v1alpha1"
)

// TweakListOptionsFunc edits the ListOptions of an informer's list and watch
// calls, e.g. to set a label selector.
type TweakListOptionsFunc func(*metav1.ListOptions)

// NewNetworkAttachmentDefinitionInformer returns an informer (not started)
// of the NetworkAttachmentDefinitions in namespace (metav1.NamespaceAll for
// all). resync is the resync period of its event handlers (0: none).
// indexers may be nil; the namespace index (cache.NamespaceIndex) is always
// added, so NewNetworkAttachmentDefinitionLister(inf.GetIndexer()).List(ns)
// is an index lookup. Run it with inf.RunWithContext(ctx); call
// inf.SetTransform before that to drop fields the caller does not need.
// It fills its cache with a streaming list; a fake cs whose watch cannot
// stream one must have IsWatchListSemanticsUnSupported() return true.
func NewNetworkAttachmentDefinitionInformer(cs Interface, namespace string, resync time.Duration, indexers cache.Indexers) cache.SharedIndexInformer {
	return NewFilteredNetworkAttachmentDefinitionInformer(cs, namespace, resync, indexers, nil)
}

// NewFilteredNetworkAttachmentDefinitionInformer is
// NewNetworkAttachmentDefinitionInformer whose list and watch calls pass
// through tweak (may be nil).
func NewFilteredNetworkAttachmentDefinitionInformer(cs Interface, namespace string, resync time.Duration, indexers cache.Indexers, tweak TweakListOptionsFunc) cache.SharedIndexInformer {
	c := cs.NetworkAttachmentDefinitions(namespace)
	lw := listWatch(cs, tweak,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) },
		c.Watch)
	return cache.NewSharedIndexInformer(lw, &nadv1.NetworkAttachmentDefinition{}, resync, withNamespaceIndex(indexers))
}

// NewIPAMClaimInformer returns an informer (not started) of the IPAMClaims
// in namespace (metav1.NamespaceAll for all); otherwise as
// NewNetworkAttachmentDefinitionInformer.
func NewIPAMClaimInformer(cs Interface, namespace string, resync time.Duration, indexers cache.Indexers) cache.SharedIndexInformer {
	return NewFilteredIPAMClaimInformer(cs, namespace, resync, indexers, nil)
}

// NewFilteredIPAMClaimInformer is NewIPAMClaimInformer whose list and watch
// calls pass through tweak (may be nil).
func NewFilteredIPAMClaimInformer(cs Interface, namespace string, resync time.Duration, indexers cache.Indexers, tweak TweakListOptionsFunc) cache.SharedIndexInformer {
	c := cs.IPAMClaims(namespace)
	lw := listWatch(cs, tweak,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return c.List(ctx, o) },
		c.Watch)
	return cache.NewSharedIndexInformer(lw, &v1alpha1.IPAMClaim{}, resync, withNamespaceIndex(indexers))
}

// listWatch is the informer's ListerWatcher. Its reflector fills the cache
// with a streaming list (a watch with sendInitialEvents; client-go's
// WatchListClient, on by default since 1.35) and falls back to list and watch
// when the API server refuses one. A cs that reports
// IsWatchListSemanticsUnSupported() true (a unit-test fake that cannot stream
// a list) gets list and watch at once, as with client-go's own informers.
func listWatch(cs Interface, tweak TweakListOptionsFunc,
	list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
) cache.ListerWatcher {
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			if tweak != nil {
				tweak(&o)
			}
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if tweak != nil {
				tweak(&o)
			}
			return watchFn(ctx, o)
		},
	}, cs)
}

// withNamespaceIndex returns a copy of indexers with cache.NamespaceIndex.
func withNamespaceIndex(indexers cache.Indexers) cache.Indexers {
	out := cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc}
	for k, v := range indexers {
		out[k] = v
	}
	return out
}
