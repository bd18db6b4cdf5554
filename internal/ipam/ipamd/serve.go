package ipamd

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	claimv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1alpha1"
	"github.com/multinet/multinet/internal/ipam"
	"github.com/multinet/multinet/internal/node/cniserver"
	"github.com/multinet/multinet/internal/node/cniserver/api"
	"github.com/multinet/multinet/internal/node/kube"
	corev1client "github.com/multinet/multinet/pkg/client/clientset/kubernetes/typed/core/v1"
	ipamclient "github.com/multinet/multinet/pkg/client/clientset/versioned/typed/ipam.multinet.io/v1alpha1"
	claimclient "github.com/multinet/multinet/pkg/client/clientset/versioned/typed/k8s.cni.cncf.io/v1alpha1"
	claimlisters "github.com/multinet/multinet/pkg/client/listers/k8s.cni.cncf.io/v1alpha1"
)

// DefaultSocketPath is multinet-ipam's socket on the node.
const DefaultSocketPath = api.DefaultIPAMSocketPath

// Defaults of Options.
const (
	DefaultReconcileInterval = 5 * time.Minute
	DefaultReconcileMinAge   = time.Minute
	// cacheSyncWait bounds the wait for the IPAllocation informer's first
	// list before the first reconcile pass.
	cacheSyncWait = time.Minute
)

// Options configure Start.
type Options struct {
	// Config is the API client configuration (multinetd's ServiceAccount).
	// Its QPS and Burst limit the background work (the release of deleted
	// claims' addresses, the reconcile) only: the client of the CNI
	// operations and the informers has no client-side rate limit
	// (allocationConfig).
	Config *rest.Config
	// Node is this node's name (spec.owner.node of its allocations).
	Node string
	// SocketPath is where the plugin connects (internal/node/cniserver.Listen: 0700
	// directory, 0600 socket).
	SocketPath string
	// Pods, when set, checks that a request's pod is this node's.
	Pods Pods
	// ReconcileInterval is the mean time between Reconcile passes over
	// this node's IPAllocations (±50% jitter, so that nodes spread out);
	// < 0 disables them. Default DefaultReconcileInterval. Other nodes'
	// allocations (a dead node's) are multinet-ipam-cleanup's (RunCleanup).
	ReconcileInterval time.Duration
	// ReconcileMinAge spares younger allocations. Default DefaultReconcileMinAge.
	ReconcileMinAge time.Duration
	// GCMinAge spares younger allocations from CNI GC. Default DefaultGCMinAge.
	GCMinAge time.Duration
	// Server tunes the socket's server (slots, timeouts, Observer).
	Server cniserver.Options
	// Registerer, when set, gets the multinet_ipam_* metrics.
	Registerer prometheus.Registerer
	// Tenancy decides which pool a network may use and bounds each
	// namespace's addresses (internal/ipam Tenancy); nil: every pool is the
	// cluster's, no limit.
	Tenancy *ipam.Tenancy
}

// Service is a running multinet-ipam server.
type Service struct {
	server    *cniserver.Server
	allocator *ipam.Allocator
	// background releases deleted claims' addresses and reconciles, with
	// the configuration's rate limit.
	background *ipam.Allocator
	rec        *reconciler
	done       chan struct{}
	cancel     context.CancelFunc
	serveErr   chan error
}

// Start listens on opts.SocketPath, starts the IPAllocation and IPAMClaim
// informers, the release of deleted claims' addresses and the reconcile
// loop, and serves until ctx ends or Shutdown. Errors: clients cannot be
// built, the socket cannot be created.
func Start(ctx context.Context, opts Options) (*Service, error) {
	if opts.Node == "" {
		return nil, errors.New("multinet-ipam: node name is empty")
	}
	if err := opts.Tenancy.Check(); err != nil {
		return nil, fmt.Errorf("multinet-ipam: %w", err)
	}
	// The typed clients of the groups used, not the generated clientset,
	// whose discovery client links every Kubernetes API group (binary size).
	alloc := allocationConfig(opts.Config)
	ipc, err := ipamclient.NewForConfig(alloc)
	if err != nil {
		return nil, fmt.Errorf("multinet-ipam: client: %w", err)
	}
	cc, err := claimclient.NewForConfig(alloc)
	if err != nil {
		return nil, fmt.Errorf("multinet-ipam: client: %w", err)
	}
	// The background work (claims' releases, reconcile) keeps the
	// configuration's rate limit: many claims deleted at once must not
	// become as many bursts of requests.
	bgIPAM, err := ipamclient.NewForConfig(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("multinet-ipam: client: %w", err)
	}
	bgClaims, err := claimclient.NewForConfig(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("multinet-ipam: client: %w", err)
	}
	kc, err := corev1client.NewForConfig(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("multinet-ipam: client: %w", err)
	}
	mc, err := metadata.NewForConfig(opts.Config)
	if err != nil {
		return nil, fmt.Errorf("multinet-ipam: metadata client: %w", err)
	}
	c, err := ipam.NewCache(ipc)
	if err != nil {
		return nil, err
	}
	m := newMetrics(opts.Registerer)
	a := &ipam.Allocator{IPAM: ipc, Claims: cc, Node: opts.Node, Cache: c, Tenancy: opts.Tenancy, OnConflict: m.conflicts.Inc}
	claimInf, err := kube.NewInformer[*claimv1.IPAMClaimList](cc.IPAMClaims(metav1.NamespaceAll), &claimv1.IPAMClaim{}, kube.InformerOptions{Transform: kube.DropManagedFields})
	if err != nil {
		return nil, fmt.Errorf("multinet-ipam: IPAMClaim informer: %w", err)
	}

	runCtx, cancel := context.WithCancel(ctx)
	s := &Service{allocator: a, done: make(chan struct{}), cancel: cancel, serveErr: make(chan error, 1),
		background: &ipam.Allocator{IPAM: bgIPAM, Claims: bgClaims, Node: opts.Node, Cache: c}}
	if _, err := claimInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) { s.claimDeleted(runCtx, obj, m) },
	}); err != nil {
		cancel()
		return nil, fmt.Errorf("multinet-ipam: IPAMClaim handler: %w", err)
	}
	l, err := cniserver.Listen(opts.SocketPath)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("multinet-ipam socket: %w", err)
	}
	h := &Handler{Allocator: a, Pods: opts.Pods, GCMinAge: opts.GCMinAge}
	s.server = cniserver.New(&observed{h: h, m: m}, opts.Server)
	c.Start(runCtx)
	go claimInf.RunWithContext(runCtx)
	go func() { s.serveErr <- s.server.Serve(l) }()
	s.rec = &reconciler{alloc: s.background, owners: &snapshotOwners{
		meta: mc, claims: claimlisters.NewIPAMClaimLister(claimInf.GetIndexer()),
		live: ipam.LiveOwners{Pods: kc, Claims: cc},
	}}
	go func() {
		defer close(s.done)
		c.WaitForSync(runCtx, cacheSyncWait)
		s.rec.loop(runCtx, opts.ReconcileInterval, opts.ReconcileMinAge, m)
	}()
	klog.FromContext(ctx).Info("serving multinet-ipam", "socket", opts.SocketPath)
	return s, nil
}

// allocationConfig is cfg without a client-side rate limit, for the
// allocations' client: a token bucket (client-go's default 5 QPS, burst
// 10; multinetd's 20, 40) would hold a burst of ADDs back for seconds and
// end some at their per-request deadline. What bounds the requests
// instead is the socket's concurrency (cniserver slots: 16 ADDs and 4
// others at once, each sending its requests one after another), and the
// API server's Priority and Fairness queues multinetd's requests beyond
// its share. docs/decisions/ipam.md.
func allocationConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst, c.RateLimiter = -1, 0, nil
	return c
}

// Allocator is the service's allocator (tests).
func (s *Service) Allocator() *ipam.Allocator { return s.allocator }

// Shutdown stops accepting, waits for requests in flight (until ctx ends),
// then stops the informers and the reconcile loop.
func (s *Service) Shutdown(ctx context.Context) error {
	err := s.server.Shutdown(ctx)
	s.cancel()
	select {
	case <-s.done:
	case <-ctx.Done():
	}
	return err
}

// Err reports the server's end (a closed listener after Shutdown is nil).
func (s *Service) Err() <-chan error { return s.serveErr }

// claimDeleted releases a deleted IPAMClaim's addresses that this node
// allocated (the cache says whether there are any: no request otherwise);
// the others' are released by their node, or by multinet-ipam-cleanup's
// next Reconcile (a node may release only its own: docs/security.md
// "Node-scoped authority").
func (s *Service) claimDeleted(ctx context.Context, obj any, m *metrics) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	claim, ok := obj.(*claimv1.IPAMClaim)
	if !ok {
		return
	}
	mine := false
	for _, o := range s.allocator.Cache.ByClaim(string(claim.UID)) {
		mine = mine || o.Spec.Owner.Node == s.allocator.Node
	}
	if !mine {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		n, err := s.background.ReleaseClaim(ctx, string(claim.UID))
		m.released.WithLabelValues("claim-deleted").Add(float64(n))
		if err != nil {
			klog.FromContext(ctx).Error(err, "releasing a deleted IPAMClaim's addresses (the reconcile retries)", "claim", claim.Namespace+"/"+claim.Name)
		}
	}()
}

// reconciler runs Reconcile passes with a fresh pod snapshot each: over
// its allocator's node's allocations (multinetd), or every node's when the
// allocator's Node is empty (multinet-ipam-cleanup, the one component
// allowed to release other nodes' allocations: docs/security.md
// "Node-scoped authority").
type reconciler struct {
	alloc  *ipam.Allocator
	owners *snapshotOwners
}

// once is one pass: a fresh pod snapshot, then Reconcile.
func (r *reconciler) once(ctx context.Context, minAge time.Duration) (ipam.ReconcileResult, error) {
	if err := r.owners.refresh(ctx); err != nil {
		return ipam.ReconcileResult{}, err
	}
	return r.alloc.Reconcile(ctx, ipam.ReconcileOptions{Owners: r.owners, MinAge: minAge, Node: r.alloc.Node})
}

// loop runs a pass every `every` ±50% (so that nodes spread out) until ctx
// ends; every < 0 returns at once, 0 is DefaultReconcileInterval, minAge 0
// DefaultReconcileMinAge.
func (r *reconciler) loop(ctx context.Context, every, minAge time.Duration, m *metrics) {
	if every == 0 {
		every = DefaultReconcileInterval
	}
	if every < 0 {
		return
	}
	if minAge == 0 {
		minAge = DefaultReconcileMinAge
	}
	log := klog.FromContext(ctx).WithName("ipam-reconcile")
	for {
		d := time.Duration(float64(every) * (0.5 + rand.Float64()))
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		_, _ = r.pass(ctx, minAge, m, log)
	}
}

// pass is one pass of loop within 5 minutes, counted in m and logged.
func (r *reconciler) pass(ctx context.Context, minAge time.Duration, m *metrics, log klog.Logger) (ipam.ReconcileResult, error) {
	pctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	res, err := r.once(pctx, minAge)
	cancel()
	m.reconciled(res, err, time.Now())
	if err != nil {
		log.Error(err, "reconcile pass (retried next time)", "failed", res.Failed)
	}
	if res.ReleasedPod+res.ReleasedClaim > 0 {
		log.Info("released the addresses of gone holders", "node", r.alloc.Node, "pods", res.ReleasedPod, "claims", res.ReleasedClaim, "checked", res.Checked)
	}
	return res, err
}

// reconcileOnce is one pass of the service's reconciler (tests).
func (s *Service) reconcileOnce(ctx context.Context, minAge time.Duration) (ipam.ReconcileResult, error) {
	return s.rec.once(ctx, minAge)
}

// snapshotOwners answers Reconcile's questions from one metadata list of
// every pod (from the API server's watch cache) and the IPAMClaim
// informer; an owner missing from them is confirmed gone by a GET.
type snapshotOwners struct {
	meta   metadata.Interface
	claims claimlisters.IPAMClaimLister
	live   ipam.LiveOwners
	pods   map[[2]string]*corev1.Pod
}

func (o *snapshotOwners) refresh(ctx context.Context) error {
	list, err := o.meta.Resource(corev1.SchemeGroupVersion.WithResource("pods")).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return fmt.Errorf("multinet-ipam: listing pods: %w", err)
	}
	o.pods = make(map[[2]string]*corev1.Pod, len(list.Items))
	for _, p := range list.Items {
		o.pods[[2]string{p.Namespace, p.Name}] = &corev1.Pod{ObjectMeta: p.ObjectMeta}
	}
	return nil
}

func (o *snapshotOwners) PodExists(ctx context.Context, namespace, name, uid string) (bool, error) {
	if p, ok := o.pods[[2]string{namespace, name}]; ok && kube.IsRuntimePod(p, uid) {
		return true, nil
	}
	return o.live.PodExists(ctx, namespace, name, uid)
}

func (o *snapshotOwners) ClaimExists(ctx context.Context, namespace, name, uid string) (bool, error) {
	c, err := o.claims.IPAMClaims(namespace).Get(name)
	if err == nil && (uid == "" || string(c.UID) == uid) {
		return true, nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	return o.live.ClaimExists(ctx, namespace, name, uid)
}
