package ipamd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	claimv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1alpha1"
	"github.com/multinet/multinet/internal/ipam"
	"github.com/multinet/multinet/internal/node/kube"
	corev1client "github.com/multinet/multinet/pkg/client/clientset/kubernetes/typed/core/v1"
	ipamclient "github.com/multinet/multinet/pkg/client/clientset/versioned/typed/ipam.multinet.io/v1alpha1"
	claimclient "github.com/multinet/multinet/pkg/client/clientset/versioned/typed/k8s.cni.cncf.io/v1alpha1"
	claimlisters "github.com/multinet/multinet/pkg/client/listers/k8s.cni.cncf.io/v1alpha1"
)

// CleanupOptions configure RunCleanup.
type CleanupOptions struct {
	// Config is the API client configuration (multinet-ipam-cleanup's
	// ServiceAccount: list and delete IPAllocations, read pods' metadata
	// and IPAMClaims). Its QPS and Burst limit the passes.
	Config *rest.Config
	// Interval is the mean time between passes (±50%). Default
	// DefaultReconcileInterval.
	Interval time.Duration
	// MinAge spares younger allocations (an ADD in flight). Default
	// DefaultReconcileMinAge.
	MinAge time.Duration
	// Registerer, when set, gets the reconcile passes' metrics
	// (CleanupMetricCollectors: multinet_ipam_reconcile_*,
	// multinet_ipam_released_total).
	Registerer prometheus.Registerer
}

// RunCleanup releases the IPAllocations of every node whose holder is gone
// (ipam.Reconcile over all nodes: the pods of a dead node, force-deleted
// pods no DEL came for, deleted IPAMClaims) every opts.Interval until ctx
// ends; it returns nil then. The node daemons release only their own
// node's allocations (the node-scoped authority policies refuse them any
// other); this is the one component that crosses nodes. Passes are
// idempotent (each delete carries the allocation's UID as precondition),
// so a second replica would only repeat work. Errors: clients or the
// IPAMClaim informer cannot be built.
func RunCleanup(ctx context.Context, opts CleanupOptions) error {
	if opts.Config == nil {
		return errors.New("multinet-ipam-cleanup: no API client configuration")
	}
	m := newMetrics(nil)
	if opts.Registerer != nil {
		for _, c := range m.reconcileCollectors() {
			if err := opts.Registerer.Register(c); err != nil {
				return fmt.Errorf("multinet-ipam-cleanup: metrics: %w", err)
			}
		}
	}
	ipc, err := ipamclient.NewForConfig(opts.Config)
	if err != nil {
		return fmt.Errorf("multinet-ipam-cleanup: client: %w", err)
	}
	cc, err := claimclient.NewForConfig(opts.Config)
	if err != nil {
		return fmt.Errorf("multinet-ipam-cleanup: client: %w", err)
	}
	kc, err := corev1client.NewForConfig(opts.Config)
	if err != nil {
		return fmt.Errorf("multinet-ipam-cleanup: client: %w", err)
	}
	mc, err := metadata.NewForConfig(opts.Config)
	if err != nil {
		return fmt.Errorf("multinet-ipam-cleanup: metadata client: %w", err)
	}
	claimInf, err := kube.NewInformer[*claimv1.IPAMClaimList](cc.IPAMClaims(metav1.NamespaceAll), &claimv1.IPAMClaim{}, kube.InformerOptions{Transform: kube.DropManagedFields})
	if err != nil {
		return fmt.Errorf("multinet-ipam-cleanup: IPAMClaim informer: %w", err)
	}
	go claimInf.RunWithContext(ctx)
	syncCtx, cancel := context.WithTimeout(ctx, cacheSyncWait)
	synced := cache.WaitForCacheSync(syncCtx.Done(), claimInf.HasSynced)
	cancel()
	if !synced && ctx.Err() == nil {
		// Not fatal: a claim missing from the lister is confirmed by a GET.
		klog.FromContext(ctx).Info("IPAMClaim informer not synced; claims are checked with GETs until it is")
	}
	r := newCleanupReconciler(ipc, cc, kc, mc, claimlisters.NewIPAMClaimLister(claimInf.GetIndexer()))
	klog.FromContext(ctx).Info("releasing the allocations of gone holders on every node", "interval", opts.Interval, "minAge", opts.MinAge)
	r.loop(ctx, opts.Interval, opts.MinAge, m)
	return nil
}

// newCleanupReconciler is the reconciler of every node's allocations.
func newCleanupReconciler(ipc ipamclient.IPAllocationsGetter, cc claimclient.IPAMClaimsGetter, kc corev1client.PodsGetter, mc metadata.Interface, claims claimlisters.IPAMClaimLister) *reconciler {
	return &reconciler{
		alloc:  &ipam.Allocator{IPAM: ipc, Claims: cc},
		owners: &snapshotOwners{meta: mc, claims: claims, live: ipam.LiveOwners{Pods: kc, Claims: cc}},
	}
}
