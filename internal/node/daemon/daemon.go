package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/containernetworking/cni/libcni"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/internal/devices/draclaims"
	"github.com/multinet/multinet/internal/devices/podresources"
	"github.com/multinet/multinet/internal/ipam/ipamd"
	"github.com/multinet/multinet/internal/node/attach"
	"github.com/multinet/multinet/internal/node/cniserver"
	"github.com/multinet/multinet/internal/node/hotplug"
	"github.com/multinet/multinet/internal/node/keyedmutex"
	"github.com/multinet/multinet/internal/node/kube"
	"github.com/multinet/multinet/internal/node/nadlookup"
	"github.com/multinet/multinet/internal/node/netstatus"
	"github.com/multinet/multinet/internal/node/nodeexec"
	"github.com/multinet/multinet/internal/node/policysync"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/internal/process/lifecycle"
	"github.com/multinet/multinet/internal/process/metricsserver"
	corev1client "github.com/multinet/multinet/pkg/client/clientset/kubernetes/typed/core/v1"
	resourcev1client "github.com/multinet/multinet/pkg/client/clientset/kubernetes/typed/resource/v1"
	nadclient "github.com/multinet/multinet/pkg/client/clientset/versioned/typed/k8s.cni.cncf.io/v1"
	nadlisters "github.com/multinet/multinet/pkg/client/listers/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/spec/devinfo"
	"github.com/multinet/multinet/pkg/spec/netconf"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
	"github.com/multinet/multinet/pkg/spec/selection"
)

// shutdownTimeout bounds the whole shutdown: waiting for in-flight CNI
// operations, the network-status writes and the records' group commit.
const shutdownTimeout = 30 * time.Second

// Run runs multinetd with cfg (Complete already called) until ctx ends.
//
// The shim's socket is served at once, before the informers have synced,
// so that DEL, CHECK and GC (which need only the attachment records) work
// while the API server is unreachable; ADD waits for the pod in the
// informer (then one GET), and for the NAD informer's first list (at most
// nadSyncWait; then one GET of a NAD the cache lacks). The CNI config file
// is written once the informers have synced and the default network is
// available (spec §6.1). multinetd's parts start in the order of
// daemon.components and stop in the reverse order (internal/process/lifecycle).
//
// Errors: the API client cannot be built, the state dir or the socket
// cannot be created, the metrics address cannot be bound, the CNI server
// stops serving.
func Run(ctx context.Context, cfg Config) error {
	d, err := newDaemon(cfg)
	if err != nil {
		return err
	}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("node", cfg.NodeName))
	return lifecycle.Group{Components: d.components(), StopTimeout: shutdownTimeout}.Run(ctx)
}

// daemon is multinetd's wiring: what its components share. newDaemon
// fills the caches and the configuration; the components' Start fill the
// rest, in order.
type daemon struct {
	cfg        Config
	restConfig *rest.Config
	clients    *apiClients
	m          *metrics

	pods        *kube.PodCache
	nadInformer cache.SharedIndexInformer
	nsInformer  cache.SharedIndexInformer
	nadTrust    podnetworks.NADTrust

	store          *state.Store
	resolver       *netconf.Resolver
	lookup         *nadlookup.Lookup
	defaultNetwork attach.DefaultNetworkFunc

	// trigger asks the CNI config writer to look again (a NAD changed, the
	// informers synced).
	trigger chan struct{}
	// synced: the pod, NAD and namespace informers have listed once.
	synced atomic.Bool
	// confWritten: the CNI config file has been written once.
	confWritten atomic.Bool

	// locks are the per-container locks of the engine, the network-status
	// publisher, hot-plug and network policy.
	locks *keyedmutex.Map

	// Set by the components' Start.
	policy    *policysync.Controller // nil: MultiNetworkPolicy not enforced
	events    *kube.Events
	devices   attach.Devices
	delegates *nodeexec.Exec
	engine    *attach.Engine
	status    *netstatus.Publisher
	hotPlug   *hotPlugger
	conf      *confFile
}

// newDaemon builds the API clients, the (not yet started) pod, NAD and
// namespace informers, the record store and the NAD and default network
// lookups of cfg. Errors: the API client cannot be built, an informer
// cannot be made, the NAD trust policy cannot be read, the state dir
// cannot be opened.
func newDaemon(cfg Config) (*daemon, error) {
	d := &daemon{cfg: cfg, m: newMetrics(), trigger: make(chan struct{}, 1), locks: &keyedmutex.Map{}}
	var err error
	if d.restConfig, err = restConfig(cfg); err != nil {
		return nil, err
	}
	if d.clients, err = newAPIClients(d.restConfig); err != nil {
		return nil, err
	}
	if d.pods, err = kube.NewPodCache(d.clients.core, kube.PodCacheOptions{NodeName: cfg.NodeName}); err != nil {
		return nil, err
	}
	if d.nadInformer, err = newNADInformer(d.clients.nads); err != nil {
		return nil, err
	}
	if d.nadTrust, d.nsInformer, err = nadTrust(cfg, d.clients.core); err != nil {
		return nil, err
	}
	// Complete checked and normalized recordSync.
	d.store, err = state.OpenStore(filepath.Join(cfg.StateDir, "records"), state.Options{Sync: state.SyncMode(cfg.RecordSync), OnSync: d.m.recordSync})
	if err != nil {
		return nil, fmt.Errorf("state dir: %w", err)
	}
	onDisk, defaultDir := confDirs(cfg)
	d.resolver = netconf.NewResolver(onDisk, 0)
	d.lookup = nadLookup(d.clients.nads, d.nadInformer, cfg.NADSyncWait.Duration, d.m)
	d.defaultNetwork = defaultNetworkFunc(cfg, defaultDir, d.lookup, cfg.NADSyncWait.Duration, d.resolver)
	if err := d.watchNADs(); err != nil {
		return nil, err
	}
	return d, nil
}

// watchNADs makes every NAD change poke the CNI config writer (the default
// network may be a NAD) and a deleted NAD's resolved config forgotten.
func (d *daemon) watchNADs() error {
	_, err := d.nadInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { d.poke() },
		UpdateFunc: func(any, any) { d.poke() },
		DeleteFunc: func(obj any) {
			if gone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = gone.Obj
			}
			if nad, ok := obj.(*nadv1.NetworkAttachmentDefinition); ok {
				d.resolver.Forget(nad.Namespace, nad.Name)
			}
			d.poke()
		},
	})
	if err != nil {
		return fmt.Errorf("NAD informer handler: %w", err)
	}
	return nil
}

// poke asks the CNI config writer to look again, without waiting.
func (d *daemon) poke() {
	select {
	case d.trigger <- struct{}{}:
	default:
	}
}

// ready is the engine's readiness (ADD needs the informers' first list).
func (d *daemon) ready() error {
	if !d.synced.Load() {
		return errors.New("informers not synced")
	}
	return nil
}

// readyz is /readyz: the informers have synced and the CNI config file is
// written.
func (d *daemon) readyz() error {
	if err := d.ready(); err != nil {
		return err
	}
	if !d.confWritten.Load() {
		return errors.New("CNI config not written yet (default network not available)")
	}
	return nil
}

// components are multinetd's parts in start order; they stop in the
// reverse order: the CNI config writer first and the file removed (with
// removeCNIConfigOnExit), so that the runtime stops calling the shim; the
// background loops; the CNI server stops accepting and drains its
// in-flight requests, then multinet-ipam's server (the delegates of those
// requests call it); the informers; the engine's network-status writes
// and the records' group commit; MultiNetworkPolicy enforcement (the
// engine calls it during ADD and DEL); the metrics server; the delegate
// launcher, the kubelet's pod resources client and the Event broadcaster
// last.
func (d *daemon) components() []lifecycle.Component {
	return []lifecycle.Component{
		d.eventsComponent(),
		d.podResourcesComponent(),
		d.delegatesComponent(),
		d.metricsComponent(),
		d.networkPolicyComponent(),
		d.engineComponent(),
		d.informersComponent(),
		d.ipamComponent(),
		d.cniServerComponent(),
		d.hotPlugComponent(),
		d.reaperComponent(),
		d.statusRetriesComponent(),
		d.confFileOnExitComponent(),
		d.confWriterComponent(),
	}
}

// eventsComponent posts the Events of multinetd (kube.Events) on their own
// API client.
func (d *daemon) eventsComponent() lifecycle.Component {
	return lifecycle.Component{
		Name: "Event broadcaster",
		Start: func(ctx context.Context) error {
			d.events = kube.NewEvents(ctx, d.clients.events, "multinetd", d.cfg.NodeName)
			return nil
		},
		Stop: func(context.Context) error {
			d.events.Shutdown()
			return nil
		},
	}
}

// podResourcesComponent is the kubelet's pod resources client (the devices
// allocated to a pod), when podResourcesSocket is set.
func (d *daemon) podResourcesComponent() lifecycle.Component {
	var pr *podresources.Client
	return lifecycle.Component{
		Name: "pod resources client",
		Start: func(context.Context) error {
			if d.cfg.PodResourcesSocket == "" {
				return nil
			}
			var err error
			if pr, err = podresources.New(d.cfg.PodResourcesSocket, podresources.Options{}); err != nil {
				return fmt.Errorf("podResourcesSocket: %w", err)
			}
			d.devices = pr
			return nil
		},
		Stop: func(context.Context) error {
			if pr == nil {
				return nil
			}
			return pr.Close()
		},
	}
}

// delegatesComponent is how delegates run (delegateExec), with the
// launcher process when delegateCgroup is set, and multinet-ipam's socket
// in their environment.
func (d *daemon) delegatesComponent() lifecycle.Component {
	var launcher *nodeexec.Launcher
	return lifecycle.Component{
		Name: "delegate launcher",
		Start: func(context.Context) error {
			if err := exportIPAMSocket(d.cfg); err != nil {
				return err
			}
			var err error
			d.delegates, launcher, err = delegateExec(d.cfg)
			return err
		},
		Stop: func(context.Context) error {
			if launcher == nil {
				return nil
			}
			return launcher.Close()
		},
	}
}

// metricsComponent serves /metrics, /healthz and /readyz on
// metricsAddress, when set.
func (d *daemon) metricsComponent() lifecycle.Component {
	var s *http.Server
	return lifecycle.Component{
		Name: "metrics server",
		Start: func(ctx context.Context) error {
			if d.cfg.MetricsAddress == "" {
				return nil
			}
			var err error
			s, err = metricsserver.Start(ctx, d.cfg.MetricsAddress, d.m.registry, d.readyz)
			return err
		},
		Stop: func(ctx context.Context) error {
			if s == nil {
				return nil
			}
			return s.Shutdown(ctx)
		},
	}
}

// engineComponent is the attachment engine (attach.Engine), the
// network-status publisher it publishes through (netstatus.Publisher, over
// the engine's per-container locks) and its hot-plug loop's handler on the
// pod informer. Stopping it waits for the network-status writes and the
// records' group commit; pending network-status writes stay in their
// records for the next start.
func (d *daemon) engineComponent() lifecycle.Component {
	return lifecycle.Component{
		Name: "attachment engine",
		Start: func(context.Context) error {
			locks := d.locks
			var err error
			if d.status, err = netstatus.New(netstatus.Options{
				Store: d.store, Writer: kube.NewStatusPatcher(d.clients.core), Locks: locks,
				Events: d.events, Observer: d.m, Async: d.cfg.AsyncStatus,
			}); err != nil {
				return err
			}
			sandboxes := &hotplug.Sandboxes{}
			if d.engine, err = d.newEngine(locks, sandboxes); err != nil {
				return err
			}
			hp, err := hotplug.New(hotplug.Options{
				Engine: d.engine.HotPlugPort(), Sandboxes: sandboxes, Store: d.store, Locks: locks,
				Status: d.status, Events: d.events, Observer: d.m, NetworkPolicy: d.policyEnforcer(),
			})
			if err != nil {
				return err
			}
			// A pod deleted before its network-status landed: stop retrying it.
			if err := d.pods.OnDelete(d.status.PodGone); err != nil {
				return err
			}
			// A running pod whose networks annotation changes is hot-plugged
			// (hotplug.go); so is every pod of the first list, to converge what
			// changed while multinetd was down.
			d.hotPlug, err = startHotPlug(d.cfg, d.pods, hp)
			return err
		},
		Stop: func(ctx context.Context) error {
			if err := d.status.Wait(ctx); err != nil {
				return fmt.Errorf("waiting for network-status writes: %w", err)
			}
			if err := d.store.Flush(ctx); err != nil {
				return fmt.Errorf("waiting for the records' group commit: %w", err)
			}
			return nil
		},
	}
}

// policyEnforcer is the network policy controller as the engine's
// attach.PolicyEnforcer, nil (an interface holding no value) when policy is
// not enforced.
func (d *daemon) policyEnforcer() attach.PolicyEnforcer {
	if d.policy == nil {
		return nil
	}
	return d.policy
}

// newEngine is the attachment engine of d's configuration, caches and
// clients, publishing network-status through d.status, over locks,
// telling sandboxes (hot-plug's) each pod's sandbox.
func (d *daemon) newEngine(locks *keyedmutex.Map, sandboxes *hotplug.Sandboxes) (*attach.Engine, error) {
	cfg := d.cfg
	if cfg.UndeclaredCapabilities == string(podnetworks.MultusUndeclared) {
		klog.InfoS("undeclaredCapabilities: multus: a key whose capability no plugin of the NAD declares is handed over as Multus does, with a Warning Event, instead of failing the ADD (spec §4.1.2.1.x.2; docs/migrating-from-multus.md)")
	}
	if len(cfg.DefaultNetworks) > 0 {
		klog.InfoS("every pod outside systemNamespaces gets defaultNetworks", "defaultNetworks", cfg.DefaultNetworks, "systemNamespaces", cfg.SystemNamespaces)
	}
	return attach.New(attach.Options{
		Store:           d.store,
		DefaultNetwork:  d.defaultNetwork,
		AuxiliaryChain:  auxiliaryChainFunc(cfg),
		Pods:            d.pods,
		NADs:            d.lookup,
		Resolver:        d.resolver,
		Status:          d.status,
		Locks:           locks,
		Sandboxes:       sandboxes,
		NetworkPolicy:   d.policyEnforcer(),
		Events:          d.events,
		Devices:         d.devices,
		Claims:          draclaims.New(d.clients.core, d.clients.resource, cfg.NodeName),
		DevInfo:         devinfo.Store{Root: cfg.DevInfoRoot},
		BinDirs:         cfg.CNIBinDirs,
		CacheDir:        filepath.Join(cfg.StateDir, "cni-cache"),
		DelegateTimeout: cfg.DelegateTimeout.Duration,
		Observer:        d.m,
		Ready:           d.ready,
		Exec:            d.delegates,

		// Hung delegates hold no slot and no teardown forever.
		DelegateSlotTimeout: cfg.DelegateSlotTimeout.Duration,
		TeardownGrace:       cfg.TeardownGrace.Duration,

		Policy: podnetworks.Policy{
			Isolation:        selection.IsolationPolicy{Enabled: cfg.NamespaceIsolation, GlobalNamespaces: cfg.GlobalNamespaces},
			DefaultNetworks:  cfg.DefaultNetworkElements(),
			SystemNamespaces: cfg.SystemNamespaces,
			// Checked by Complete.
			UndeclaredCapabilities: podnetworks.UndeclaredCapabilities(cfg.UndeclaredCapabilities),
			MaxSelectionElements:   cfg.MaxSelectionElements,
			NADTrust:               d.nadTrust,
		},
	})
}

// informersComponent runs the pod, NAD and namespace informers; once all
// three have listed, the engine is ready and the CNI config writer looks
// again.
func (d *daemon) informersComponent() lifecycle.Component {
	return lifecycle.Component{
		Name: "informers",
		Run: func(ctx context.Context) error {
			go d.pods.Run(ctx)
			go d.nadInformer.RunWithContext(ctx)
			go d.nsInformer.RunWithContext(ctx)
			if cache.WaitForCacheSync(ctx.Done(), d.pods.HasSynced, d.nadInformer.HasSynced, d.nsInformer.HasSynced) {
				d.synced.Store(true)
				klog.FromContext(ctx).Info("informers synced")
				d.poke()
			}
			return nil
		},
	}
}

// ipamComponent serves multinet-ipam's socket: the plugin's operations,
// allocated with the daemon's ServiceAccount (docs/decisions/ipam.md).
func (d *daemon) ipamComponent() lifecycle.Component {
	var svc *ipamd.Service
	return lifecycle.Component{
		Name: "multinet-ipam server",
		Start: func(ctx context.Context) error {
			var err error
			svc, err = startIPAM(ctx, d.cfg, d.restConfig, d.pods, d.m)
			return err
		},
		Stop: func(ctx context.Context) error {
			if svc == nil {
				return nil
			}
			return svc.Shutdown(ctx)
		},
	}
}

// cniServerComponent serves the shim's socket (cniserver). Stopping it
// stops accepting and waits for the in-flight requests.
func (d *daemon) cniServerComponent() lifecycle.Component {
	var server *cniserver.Server
	var listener net.Listener
	return lifecycle.Component{
		Name: "CNI server",
		Start: func(context.Context) error {
			var err error
			if listener, err = cniserver.Listen(d.cfg.SocketPath); err != nil {
				return fmt.Errorf("shim socket: %w", err)
			}
			server = cniserver.New(cniserver.Decoding(d.engine), cniserver.Options{
				MaxInFlight:      d.cfg.MaxInFlight,
				ReservedInFlight: d.cfg.ReservedInFlight,
				RequestTimeout:   d.cfg.RequestTimeout.Duration,
				Observer:         d.m,
			})
			return nil
		},
		Run: func(ctx context.Context) error {
			klog.FromContext(ctx).Info("serving CNI requests", "socket", d.cfg.SocketPath)
			if err := server.Serve(listener); err != nil && !errors.Is(err, cniserver.ErrServerClosed) {
				return fmt.Errorf("CNI server: %w", err)
			}
			return nil
		},
		Stop: func(ctx context.Context) error { return server.Shutdown(ctx) },
	}
}

// hotPlugComponent runs the hot-plug loop (hotplug.go) unless hot-plug is
// off; it works once the pod and NAD informers have listed.
func (d *daemon) hotPlugComponent() lifecycle.Component {
	return lifecycle.Component{
		Name: "hot-plug",
		Run: func(ctx context.Context) error {
			if d.hotPlug != nil {
				d.hotPlug.run(ctx, hotPlugWorkers, func() bool { return d.pods.HasSynced() && d.nadInformer.HasSynced() })
			}
			return nil
		},
	}
}

// reaperComponent reaps the records of sandboxes the runtime no longer
// lists (reap.go).
func (d *daemon) reaperComponent() lifecycle.Component {
	return lifecycle.Component{
		Name: "sandbox reaper",
		Run: func(ctx context.Context) error {
			runReaper(ctx, d.cfg, d.engine, d.m)
			return nil
		},
	}
}

// statusRetriesComponent retries the network-status PATCHes that failed
// (API server unreachable during an ADD), also those of the records a
// previous multinetd left pending, until they land or the pod is gone
// (internal/node/netstatus).
func (d *daemon) statusRetriesComponent() lifecycle.Component {
	return lifecycle.Component{
		Name: "network-status retries",
		Run: func(ctx context.Context) error {
			if err := d.status.Run(ctx, netstatus.RetryOptions{}); err != nil {
				klog.FromContext(ctx).Error(err, "network-status retries")
			}
			return nil
		},
	}
}

// confFileOnExitComponent removes the CNI config file when multinetd
// stops, with removeCNIConfigOnExit (after the writer has stopped, before
// the CNI server drains: the runtime stops calling the shim first).
func (d *daemon) confFileOnExitComponent() lifecycle.Component {
	return lifecycle.Component{
		Name: "CNI config file on exit",
		Stop: func(ctx context.Context) error {
			log := klog.FromContext(ctx)
			if d.conf == nil {
				return nil
			}
			if !d.cfg.RemoveCNIConfigOnExit {
				log.Info("shutting down; the CNI config file stays in place")
				return nil
			}
			if err := d.conf.remove(); err != nil {
				return fmt.Errorf("removing the CNI config file on exit: %w", err)
			}
			log.Info("shutting down; removed the CNI config file (removeCNIConfigOnExit)", "file", d.conf.path)
			return nil
		},
	}
}

// confWriterComponent writes the CNI config file once the informers have
// synced and the default network is available, and keeps it current
// (conffile.go). cniConfDir and the default network's dirs are node
// paths, read through nodeRoot; written and watched where the daemon sees
// them.
func (d *daemon) confWriterComponent() lifecycle.Component {
	return lifecycle.Component{
		Name: "CNI config writer",
		Start: func(context.Context) error {
			confView, _ := ViewPath(d.cfg.NodeRoot, d.cfg.CNIConfDir)
			defaultView, _ := ViewPath(d.cfg.NodeRoot, d.cfg.DefaultNetwork.ConfDir)
			d.conf = &confFile{
				path:           filepath.Join(confView, d.cfg.ConfFileName),
				socketPath:     d.cfg.SocketPath,
				shimTimeout:    d.cfg.ShimTimeout.Duration,
				defaultNetwork: d.defaultNetwork,
				ready:          d.ready,
				watchDirs:      uniqueDirs(confView, defaultView, fileDir(d.cfg.DefaultNetwork.File)),
				trigger:        d.trigger,
			}
			return nil
		},
		Run: func(ctx context.Context) error {
			d.conf.run(ctx, 10*time.Second, func() { d.confWritten.Store(true) })
			return nil
		},
	}
}

// apiClients are multinetd's API clients: typed clients of the groups it
// uses (pkg/client/clientset/kubernetes: pods, Events, ResourceClaims,
// ResourceSlices; pkg/client's NADs), from which its informers are made.
// client-go's clientsets, their scheme and discovery, and the generated
// informer factories would link every API group into multinetd (binary
// size, RSS; internal/checks/depgraph). multinet-ipam makes its own
// (internal/ipam/ipamd).
//
// Each client has its own rate limiter of the configuration's QPS and
// burst (apiQPS, apiBurst): Events have a client of their own, so that a
// burst of pods' Events never holds back the network-status PATCHes and
// the pod reads of ADD, which share core.
type apiClients struct {
	// core reads pods (the informer, a GET on a cache miss) and PATCHes
	// their network-status.
	core *corev1client.CoreV1Client
	// events posts Events only (kube.Events).
	events *corev1client.CoreV1Client
	// resource reads ResourceClaims and ResourceSlices and writes claims'
	// status (draclaims).
	resource *resourcev1client.ResourceV1Client
	// nads reads NetworkAttachmentDefinitions (the informer, a GET on a
	// cache miss).
	nads *nadclient.K8sCniCncfIoV1Client
}

// newAPIClients makes the clients of rc (copied: each client gets its own
// rate limiter even when rc carries one); those of built-in kinds ask for
// protobuf, the NAD client (a CRD: JSON only) for JSON. Errors: a client
// cannot be made of rc.
func newAPIClients(rc *rest.Config) (*apiClients, error) {
	own := func() *rest.Config {
		c := rest.CopyConfig(rc)
		c.RateLimiter = nil // a token bucket of c.QPS and c.Burst per client
		return c
	}
	// Built-in kinds travel as protobuf, as the kubelet's and the
	// controllers' do (docs/decisions/daemon-resources.md "Protobuf"): a
	// pod's watch event and the PATCH's answer cost multinetd less to
	// decode, and the API server serializes a pod's watch event once for
	// every protobuf watcher instead of once more as JSON for multinetd.
	builtin := func() *rest.Config {
		c := own()
		c.ContentType = runtime.ContentTypeProtobuf
		c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
		return c
	}
	var c apiClients
	var err error
	if c.core, err = corev1client.NewForConfig(builtin()); err != nil {
		return nil, fmt.Errorf("core/v1 API client: %w", err)
	}
	if c.events, err = corev1client.NewForConfig(builtin()); err != nil {
		return nil, fmt.Errorf("API client for Events: %w", err)
	}
	if c.resource, err = resourcev1client.NewForConfig(builtin()); err != nil {
		return nil, fmt.Errorf("resource.k8s.io API client: %w", err)
	}
	if c.nads, err = nadclient.NewForConfig(own()); err != nil {
		return nil, fmt.Errorf("NetworkAttachmentDefinition API client: %w", err)
	}
	return &c, nil
}

// nadLookup is how ADD reads the NADs a pod selects: it waits for the NAD
// informer's first full list (at most wait, and the request's deadline:
// after a restart the runtime calls ADD at once, the CNI config file having
// stayed in place), reads the cache, and GETs a NAD the cache does not have
// (applied together with its pod, its watch event not delivered yet) through
// client. m counts the GETs and the waits.
func nadLookup(client nadclient.NetworkAttachmentDefinitionsGetter, inf cache.SharedIndexInformer, wait time.Duration, m *metrics) *nadlookup.Lookup {
	return &nadlookup.Lookup{
		Cache:      nadlisters.NewNetworkAttachmentDefinitionLister(inf.GetIndexer()),
		Live:       nadlookup.LiveGet(client),
		Synced:     inf.HasSynced,
		SyncWait:   wait,
		OnLive:     m.NADLiveLookup,
		OnSyncWait: m.NADSyncWait,
	}
}

// newNADInformer is the NAD informer of all namespaces, without resync, on
// client (not started). A client implementing
// IsWatchListSemanticsUnSupported (a fake) is listed, then watched.
func newNADInformer(client nadclient.NetworkAttachmentDefinitionsGetter) (cache.SharedIndexInformer, error) {
	inf, err := kube.NewInformer[*nadv1.NetworkAttachmentDefinitionList](client.NetworkAttachmentDefinitions(metav1.NamespaceAll),
		&nadv1.NetworkAttachmentDefinition{}, kube.InformerOptions{Transform: kube.DropManagedFields, Client: client})
	if err != nil {
		return nil, fmt.Errorf("NAD informer: %w", err)
	}
	return inf, nil
}

// confDirs returns the ConfDir of cniConfDir (NADs without spec.config)
// and that of the default network's confDir, the same one when they are one
// directory. Both are the node's, read through nodeRoot with their symlinks
// resolved as the node resolves them: a conf dir, config file or
// sub-directory linked to an absolute path of the node is found there, not
// in the daemon's own file system.
func confDirs(cfg Config) (onDisk, defaultDir *netconf.ConfDir) {
	onDisk = netconf.NewConfDir(netconf.ConfDirOptions{Dir: cfg.CNIConfDir, SkipFile: cfg.ConfFileName, Root: cfg.NodeRoot})
	defaultDir = onDisk
	if filepath.Clean(cfg.DefaultNetwork.ConfDir) != filepath.Clean(cfg.CNIConfDir) {
		defaultDir = netconf.NewConfDir(netconf.ConfDirOptions{Dir: cfg.DefaultNetwork.ConfDir, SkipFile: cfg.ConfFileName, Root: cfg.NodeRoot})
	}
	return onDisk, defaultDir
}

// auxiliaryChainFunc loads the auxiliary chain from its sub-directory of
// cniConfDir on every ADD (the files may change at any time, as Multus reads
// them), through the node's root; nil when auxiliaryChain is not set.
func auxiliaryChainFunc(cfg Config) attach.AuxiliaryChainFunc {
	if cfg.AuxiliaryChain == "" {
		return nil
	}
	return func(cniVersion string) (*libcni.NetworkConfigList, error) {
		return netconf.LoadAuxiliaryChainIn(cfg.NodeRoot, cfg.CNIConfDir, cfg.AuxiliaryChain, cniVersion)
	}
}

// defaultNetworkFunc returns how the engine finds the default network (§6).
// A NAD (defaultNetwork.nad) is read through nads, as the pods' own NADs
// are (the informer once synced, a live GET on a miss), each read bounded
// by wait: right after a restart the runtime's first ADD must not fail
// with "not found" because the informer has not listed yet.
func defaultNetworkFunc(cfg Config, dir *netconf.ConfDir, nads attach.NADs, wait time.Duration, resolver *netconf.Resolver) attach.DefaultNetworkFunc {
	if key := cfg.DefaultNetwork.NAD; key != "" {
		ns, name, _ := strings.Cut(key, "/")
		return func() (*libcni.NetworkConfigList, string, error) {
			ctx, cancel := context.WithTimeout(context.Background(), wait)
			defer cancel()
			nad, err := nads.Get(ctx, ns, name)
			if err != nil {
				return nil, key, fmt.Errorf("NetworkAttachmentDefinition %s: %w", key, err)
			}
			list, err := resolver.Resolve(ns, name, nad.Spec.Config)
			return list, key, err
		}
	}
	src := netconf.DefaultNetwork{Path: cfg.DefaultNetwork.File, Name: cfg.DefaultNetwork.Name}
	return func() (*libcni.NetworkConfigList, string, error) {
		list, label, err := netconf.LoadDefault(src, dir)
		if err != nil {
			return nil, label, err
		}
		// network-status names the default network by its CNI name (§5.3.1).
		return list, list.Name, nil
	}
}

func restConfig(cfg Config) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if cfg.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("API client config: %w", err)
	}
	rc.QPS, rc.Burst = cfg.APIQPS, cfg.APIBurst
	rc.UserAgent = "multinetd/" + cfg.NodeName
	rc.Timeout = 30 * time.Second
	return rc, nil
}

func fileDir(p string) string {
	if p == "" {
		return ""
	}
	return filepath.Dir(p)
}

func uniqueDirs(dirs ...string) []string {
	seen := map[string]bool{}
	var out []string
	for _, d := range dirs {
		if d == "" {
			continue
		}
		d = filepath.Clean(d)
		if !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	return out
}

// delegateExec returns the executor of every delegate: chrooted into
// cfg.NodeRoot and, with cfg.DelegateCgroup, started by a launcher process
// that lives in that node cgroup (docs/decisions/deploy.md "How delegates
// run"). The launcher is started now, so that a cgroup it cannot use fails
// the daemon's start. Close the returned launcher (nil without a cgroup)
// when the daemon stops.
func delegateExec(cfg Config) (*nodeexec.Exec, *nodeexec.Launcher, error) {
	e := &nodeexec.Exec{Root: cfg.NodeRoot, Stderr: os.Stderr}
	g := cfg.DelegateCgroup
	if g == "" || g == "none" {
		klog.InfoS("delegates run in the node's view", "nodeRoot", cfg.NodeRoot, "cgroup", "the daemon's")
		return e, nil, nil
	}
	cg, err := nodeexec.NewCgroup(cfg.NodeRoot, g)
	if err != nil {
		return nil, nil, fmt.Errorf("delegateCgroup: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("delegateCgroup: the launcher is found from this binary's path: %w", err)
	}
	launcher := nodeexec.LauncherCommand(self)
	l, err := nodeexec.NewLauncher([]string{launcher}, cg)
	if err == nil {
		err = l.Start()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("delegateCgroup %s: %w", g, err)
	}
	e.Launcher = l
	klog.InfoS("delegates run in the node's view", "nodeRoot", cfg.NodeRoot, "cgroup", g, "hierarchies", len(cg.Dirs()), "launcher", launcher)
	return e, l, nil
}
