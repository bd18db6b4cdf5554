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
	"github.com/prometheus/client_golang/prometheus/promhttp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/attach"
	corev1client "github.com/multinet/multinet/pkg/client/clientset/kubernetes/typed/core/v1"
	resourcev1client "github.com/multinet/multinet/pkg/client/clientset/kubernetes/typed/resource/v1"
	nadclient "github.com/multinet/multinet/pkg/client/clientset/versioned/typed/k8s.cni.cncf.io/v1"
	nadlisters "github.com/multinet/multinet/pkg/client/listers/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/cniserver"
	"github.com/multinet/multinet/pkg/devinfo"
	"github.com/multinet/multinet/pkg/draclaims"
	"github.com/multinet/multinet/pkg/kube"
	"github.com/multinet/multinet/pkg/nadlookup"
	"github.com/multinet/multinet/pkg/netconf"
	"github.com/multinet/multinet/pkg/nodeexec"
	"github.com/multinet/multinet/pkg/podnetworks"
	"github.com/multinet/multinet/pkg/podresources"
	"github.com/multinet/multinet/pkg/selection"
	"github.com/multinet/multinet/pkg/state"
)

// shutdownTimeout bounds waiting for in-flight CNI operations on stop.
const shutdownTimeout = 30 * time.Second

// Run runs multinetd with cfg (Complete already called) until ctx ends.
//
// The shim's socket is served at once, before the informers have synced,
// so that DEL, CHECK and GC (which need only the attachment records) work
// while the API server is unreachable; ADD waits for the pod in the
// informer (then one GET), and for the NAD informer's first list (at most
// nadSyncWait; then one GET of a NAD the cache lacks). The CNI config file
// is written once the informers have synced and the default network is
// available (spec §6.1).
//
// Errors: the API client cannot be built, the state dir or the socket
// cannot be created, the metrics address cannot be bound.
func Run(ctx context.Context, cfg Config) error {
	log := klog.FromContext(ctx).WithValues("node", cfg.NodeName)
	restConfig, err := restConfig(cfg)
	if err != nil {
		return err
	}
	clients, err := newAPIClients(restConfig)
	if err != nil {
		return err
	}
	pods, err := kube.NewPodCache(clients.core, kube.PodCacheOptions{NodeName: cfg.NodeName})
	if err != nil {
		return err
	}
	nadInformer, err := newNADInformer(clients.nads)
	if err != nil {
		return err
	}
	nadTrust, nsInformer, err := nadTrust(cfg, clients.core)
	if err != nil {
		return err
	}

	m := newMetrics()
	// Complete checked and normalized recordSync.
	store, err := state.OpenStore(filepath.Join(cfg.StateDir, "records"), state.Options{Sync: state.SyncMode(cfg.RecordSync), OnSync: m.recordSync})
	if err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	onDisk, defaultDir := confDirs(cfg)
	resolver := netconf.NewResolver(onDisk, 0)
	lookup := nadLookup(clients.nads, nadInformer, cfg.NADSyncWait.Duration, m)
	defaultNetwork := defaultNetworkFunc(cfg, defaultDir, lookup, cfg.NADSyncWait.Duration, resolver)

	trigger := make(chan struct{}, 1)
	poke := func() {
		select {
		case trigger <- struct{}{}:
		default:
		}
	}
	if _, err := nadInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if nad, ok := obj.(*nadv1.NetworkAttachmentDefinition); ok {
				resolver.Forget(nad.Namespace, nad.Name)
			}
			poke()
		},
	}); err != nil {
		return fmt.Errorf("NAD informer handler: %w", err)
	}

	var synced atomic.Bool
	ready := func() error {
		if !synced.Load() {
			return errors.New("informers not synced")
		}
		return nil
	}

	events := kube.NewEvents(ctx, clients.events, "multinetd", cfg.NodeName)
	defer events.Shutdown()

	var devices attach.Devices
	if cfg.PodResourcesSocket != "" {
		pr, err := podresources.New(cfg.PodResourcesSocket, podresources.Options{})
		if err != nil {
			return fmt.Errorf("podResourcesSocket: %w", err)
		}
		defer pr.Close()
		devices = pr
	}

	if err := exportIPAMSocket(cfg); err != nil {
		return err
	}
	delegates, launcher, err := delegateExec(cfg)
	if err != nil {
		return err
	}
	if launcher != nil {
		defer launcher.Close()
	}
	if cfg.UndeclaredCapabilities == string(podnetworks.MultusUndeclared) {
		klog.InfoS("undeclaredCapabilities: multus: a key whose capability no plugin of the NAD declares is handed over as Multus does, with a Warning Event, instead of failing the ADD (spec §4.1.2.1.x.2; docs/migrating-from-multus.md)")
	}
	if len(cfg.DefaultNetworks) > 0 {
		klog.InfoS("every pod outside systemNamespaces gets defaultNetworks", "defaultNetworks", cfg.DefaultNetworks, "systemNamespaces", cfg.SystemNamespaces)
	}
	engine, err := attach.New(attach.Options{
		Store:           store,
		DefaultNetwork:  defaultNetwork,
		AuxiliaryChain:  auxiliaryChainFunc(cfg),
		Pods:            pods,
		NADs:            lookup,
		Resolver:        resolver,
		Status:          kube.NewStatusPatcher(clients.core),
		Events:          events,
		Devices:         devices,
		Claims:          draclaims.New(clients.core, clients.resource, cfg.NodeName),
		DevInfo:         devinfo.Store{Root: cfg.DevInfoRoot},
		BinDirs:         cfg.CNIBinDirs,
		CacheDir:        filepath.Join(cfg.StateDir, "cni-cache"),
		DelegateTimeout: cfg.DelegateTimeout.Duration,
		AsyncStatus:     cfg.AsyncStatus,
		Observer:        m,
		Ready:           ready,
		Exec:            delegates,

		// Hung delegates hold no slot and no teardown forever (issue 10 item 4).
		DelegateSlotTimeout: cfg.DelegateSlotTimeout.Duration,
		TeardownGrace:       cfg.TeardownGrace.Duration,

		Policy: podnetworks.Policy{
			Isolation:        selection.IsolationPolicy{Enabled: cfg.NamespaceIsolation, GlobalNamespaces: cfg.GlobalNamespaces},
			DefaultNetworks:  cfg.DefaultNetworkElements(),
			SystemNamespaces: cfg.SystemNamespaces,
			// Checked by Complete.
			UndeclaredCapabilities: podnetworks.UndeclaredCapabilities(cfg.UndeclaredCapabilities),
			MaxSelectionElements:   cfg.MaxSelectionElements,
			NADTrust:               nadTrust,
		},
	})
	if err != nil {
		return err
	}
	// A pod deleted before its network-status landed: stop retrying it.
	if err := pods.OnDelete(engine.StatusPodGone); err != nil {
		return err
	}
	// A running pod whose networks annotation changes is hot-plugged
	// (hotplug.go); so is every pod of the first list, to converge what
	// changed while multinetd was down.
	hotPlug, err := startHotPlug(cfg, pods, engine)
	if err != nil {
		return err
	}

	listener, err := cniserver.Listen(cfg.SocketPath)
	if err != nil {
		return fmt.Errorf("shim socket: %w", err)
	}
	server := cniserver.New(engine, cniserver.Options{
		MaxInFlight:      cfg.MaxInFlight,
		ReservedInFlight: cfg.ReservedInFlight,
		RequestTimeout:   cfg.RequestTimeout.Duration,
		Observer:         m,
	})
	serveErr := make(chan error, 1)
	go func() { serveErr <- server.Serve(listener) }()
	log.Info("serving CNI requests", "socket", cfg.SocketPath)
	// multinet-ipam's socket: the plugin's operations, allocated with the
	// daemon's ServiceAccount (docs/decisions/ipam.md).
	ipamSvc, err := startIPAM(ctx, cfg, restConfig, pods, m)
	if err != nil {
		_ = server.Shutdown(context.Background())
		return err
	}

	var confWritten atomic.Bool
	var httpServer *http.Server
	if cfg.MetricsAddress != "" {
		httpServer, err = serveHTTP(ctx, cfg.MetricsAddress, m, func() error {
			if err := ready(); err != nil {
				return err
			}
			if !confWritten.Load() {
				return errors.New("CNI config not written yet (default network not available)")
			}
			return nil
		})
		if err != nil {
			_ = server.Shutdown(context.Background())
			return err
		}
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go pods.Run(runCtx)
	go nadInformer.RunWithContext(runCtx)
	go nsInformer.RunWithContext(runCtx)
	// network-status PATCHes that failed (API server unreachable during an
	// ADD), also those of the records a previous multinetd left pending, are
	// retried until they land or the pod is gone (attach/netstatus.go).
	retriesDone := make(chan struct{})
	go func() {
		defer close(retriesDone)
		if err := engine.RunStatusRetries(runCtx, attach.StatusRetryOptions{}); err != nil {
			log.Error(err, "network-status retries")
		}
	}()
	go func() {
		if cache.WaitForCacheSync(runCtx.Done(), pods.HasSynced, nadInformer.HasSynced, nsInformer.HasSynced) {
			synced.Store(true)
			log.Info("informers synced")
			poke()
		}
	}()

	hotPlugDone := make(chan struct{})
	go func() {
		defer close(hotPlugDone)
		if hotPlug != nil {
			hotPlug.run(runCtx, hotPlugWorkers, func() bool { return pods.HasSynced() && nadInformer.HasSynced() })
		}
	}()

	reaperDone := make(chan struct{})
	go func() {
		defer close(reaperDone)
		runReaper(runCtx, cfg, engine, m)
	}()

	// cniConfDir and the default network's dirs are node paths, read
	// through nodeRoot; written and watched where the daemon sees them.
	confView, _ := ViewPath(cfg.NodeRoot, cfg.CNIConfDir)
	defaultView, _ := ViewPath(cfg.NodeRoot, cfg.DefaultNetwork.ConfDir)
	cf := &confFile{
		path:           filepath.Join(confView, cfg.ConfFileName),
		socketPath:     cfg.SocketPath,
		shimTimeout:    cfg.ShimTimeout.Duration,
		defaultNetwork: defaultNetwork,
		ready:          ready,
		watchDirs:      uniqueDirs(confView, defaultView, fileDir(cfg.DefaultNetwork.File)),
		trigger:        trigger,
	}
	confCtx, stopConf := context.WithCancel(runCtx)
	defer stopConf()
	confDone := make(chan struct{})
	go func() {
		defer close(confDone)
		cf.run(confCtx, 10*time.Second, func() { confWritten.Store(true) })
	}()

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		return fmt.Errorf("CNI server: %w", err)
	}
	if cfg.RemoveCNIConfigOnExit {
		// First, so that the runtime stops calling the shim; then drain.
		stopConf()
		<-confDone
		if err := cf.remove(); err != nil {
			log.Error(err, "removing the CNI config file on exit")
		} else {
			log.Info("shutting down; removed the CNI config file (removeCNIConfigOnExit)", "file", cf.path)
		}
	} else {
		log.Info("shutting down; the CNI config file stays in place")
	}
	sctx, scancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer scancel()
	if err := server.Shutdown(sctx); err != nil {
		log.Error(err, "CNI server shutdown")
	}
	if ipamSvc != nil {
		if err := ipamSvc.Shutdown(sctx); err != nil {
			log.Error(err, "multinet-ipam shutdown")
		}
	}
	if err := engine.Wait(sctx); err != nil {
		log.Error(err, "waiting for network-status writes")
	}
	if err := store.Flush(sctx); err != nil {
		log.Error(err, "waiting for the records' group commit")
	}
	// Pending network-status writes stay in their records for the next start.
	cancel()
	select {
	case <-retriesDone:
	case <-sctx.Done():
	}
	select {
	case <-reaperDone:
	case <-sctx.Done():
	}
	select {
	case <-hotPlugDone:
	case <-sctx.Done():
	}
	if httpServer != nil {
		_ = httpServer.Shutdown(sctx)
	}
	return nil
}

// apiClients are multinetd's API clients: typed clients of the groups it
// uses (pkg/client/clientset/kubernetes: pods, Events, ResourceClaims,
// ResourceSlices; pkg/client's NADs), from which its informers are made.
// client-go's clientsets, their scheme and discovery, and the generated
// informer factories would link every API group into multinetd (issue 14:
// binary size, RSS; internal/depgraph). multinet-ipam makes its own
// (pkg/ipamd).
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
// resolved as the node resolves them (issue 29): a conf dir, config file or
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

// serveHTTP serves /metrics, /healthz and /readyz on addr.
func serveHTTP(ctx context.Context, addr string, m *metrics, ready func() error) (*http.Server, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics address: %w", err)
	}
	s := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := s.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			klog.FromContext(ctx).Error(err, "metrics server")
		}
	}()
	return s, nil
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
