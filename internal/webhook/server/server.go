// Package server runs multinet-webhook: the admission handlers of
// internal/webhook behind a controller-runtime webhook.Server over TLS, the
// NetworkAttachmentDefinition informer they read, the serving certificate
// (from files, or self-managed through internal/webhook/certs), the webhook
// configurations' caBundle (internal/webhook/registration), health endpoints and
// Prometheus metrics.
//
// Paths on the TLS port: webhook.MutatePodsPath, webhook.ValidatePodsPath,
// webhook.ValidateNADsPath, webhook.ValidateIPAMClaimsPath, /healthz, /readyz, /metrics. The same /healthz,
// /readyz and /metrics are served over plain HTTP on Config.ProbeAddr when
// set.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	mnkube "github.com/multinet/multinet/internal/node/kube"
	"github.com/multinet/multinet/internal/node/nadlookup"
	"github.com/multinet/multinet/internal/process/lifecycle"
	"github.com/multinet/multinet/internal/webhook"
	"github.com/multinet/multinet/internal/webhook/certs"
	"github.com/multinet/multinet/internal/webhook/registration"
	"github.com/multinet/multinet/pkg/client/clientset/versioned"
	nadinformers "github.com/multinet/multinet/pkg/client/informers/externalversions"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
)

// Config configures Run.
type Config struct {
	// REST is the API server connection. Required unless Kube and NADClient
	// are both set.
	REST *rest.Config
	// Kube and NADClient, when set, are used instead of clients built from
	// REST (tests use fakes, such as the generated
	// pkg/client/clientset/versioned/fake).
	Kube      kubernetes.Interface
	NADClient versioned.Interface

	// Host and Port the TLS server listens on ("" = all addresses; port
	// default 9443).
	Host string
	Port int

	// CertFile and KeyFile, when both set, are the serving certificate and
	// key (PEM), re-read when they change (controller-runtime certwatcher);
	// CAFile, optional, is then the CA bundle published in caBundle. When
	// unset, certificates are self-managed in the Secret SecretName.
	CertFile, KeyFile, CAFile string

	// Namespace is the webhook's own namespace: it holds the certificate
	// Secret. Required.
	Namespace string
	// SecretName is the Secret of self-managed certificates.
	SecretName string
	// CertSpec is the self-managed certificates' spec. DNSNames and IPs are
	// the extra SANs; ServiceDNSNames and the URL's host are added.
	CertSpec certs.Spec
	// CertCheckInterval is the longest time between two certificate checks
	// (and, in file mode, CA file reads); 0 means 10 minutes.
	CertCheckInterval time.Duration
	// ClusterDomain is the cluster's DNS domain for the service SANs
	// (default "cluster.local").
	ClusterDomain string

	// Registration says how the API server reaches the webhook.
	Registration registration.Options
	// ManageConfigurations makes Run create and update the two webhook
	// configurations itself; otherwise it only sets their caBundle.
	ManageConfigurations bool

	// Handlers configure the admission handlers; NADs, Synced and Metrics
	// are filled in by Run.
	Handlers webhook.Options

	// ProbeAddr, when set (e.g. ":8081"), serves /healthz, /readyz and
	// /metrics over plain HTTP.
	ProbeAddr string
	// InformerResync is the NAD informer's resync period (0: none).
	InformerResync time.Duration
	// ShutdownDelay is how long Run keeps serving admission requests after
	// ctx ends, with /readyz failing ("shutting-down"), before it stops
	// the server gracefully. Endpoints drop a terminating pod a moment
	// after it gets SIGTERM, and every API server learns it a moment later
	// still: a request routed to this replica in that window is answered
	// instead of timing out (with failurePolicy Fail, a refused pod). 0
	// stops at once. Keep it below the pod's terminationGracePeriodSeconds.
	ShutdownDelay time.Duration
}

// ServiceDNSNames are the DNS names of Service svc in namespace ns:
// svc, svc.ns, svc.ns.svc and svc.ns.svc.<clusterDomain>.
func ServiceDNSNames(svc, ns, clusterDomain string) []string {
	if svc == "" || ns == "" {
		return nil
	}
	if clusterDomain == "" {
		clusterDomain = "cluster.local"
	}
	return []string{svc, svc + "." + ns, svc + "." + ns + ".svc", svc + "." + ns + ".svc." + clusterDomain}
}

// certSANs returns the serving certificate's SANs: the service names (when
// the API server reaches the webhook through a Service), the host of the
// URL client config, and the extra ones of c.CertSpec.
func (c *Config) certSANs() ([]string, []net.IP, error) {
	dns := slices.Clone(c.CertSpec.DNSNames)
	ips := slices.Clone(c.CertSpec.IPs)
	r := c.Registration
	if r.URL != "" {
		u, err := url.Parse(r.URL)
		if err != nil {
			return nil, nil, fmt.Errorf("webhook URL %q: %w", r.URL, err)
		}
		if ip := net.ParseIP(u.Hostname()); ip != nil {
			ips = append(ips, ip)
		} else if u.Hostname() != "" {
			dns = append(dns, u.Hostname())
		}
	}
	dns = append(dns, ServiceDNSNames(r.ServiceName, r.ServiceNamespace, c.ClusterDomain)...)
	slices.Sort(dns)
	dns = slices.Compact(dns)
	slices.SortFunc(ips, func(a, b net.IP) int { return slices.Compare(a.To16(), b.To16()) })
	ips = slices.CompactFunc(ips, func(a, b net.IP) bool { return a.Equal(b) })
	if len(dns) == 0 && len(ips) == 0 {
		return nil, nil, errors.New("serving certificate: no SAN (set a service, a URL or extra SANs)")
	}
	return dns, ips, nil
}

// Run serves until ctx ends and returns nil then, ShutdownDelay later and
// once the in-flight admission requests are answered, or the first error
// that stops it (listening, a certificate that cannot be made or read). A
// failure to publish the caBundle is logged and retried, not fatal. The
// webhook's parts start in the order of instance.components and stop in
// the reverse order (internal/process/lifecycle).
func Run(ctx context.Context, c Config) error {
	w, err := newInstance(ctx, c)
	if err != nil {
		return err
	}
	return lifecycle.Group{Components: w.components(ctx)}.Run(ctx)
}

// instance is one multinet-webhook: what its components share.
type instance struct {
	c         Config
	kube      kubernetes.Interface
	nadClient versioned.Interface
	// reg is the registry /metrics serves (with controller-runtime's).
	reg   *prometheus.Registry
	hooks *webhook.Webhooks

	// nadInformers holds the NAD informer of all namespaces (nad, without
	// managedFields), nsInformers the labels-only namespace informer
	// (ns); dra is nil when the API server does not serve
	// resource.k8s.io/v1.
	nadInformers nadinformers.SharedInformerFactory
	nsInformers  informers.SharedInformerFactory
	nad, ns      cache.SharedIndexInformer
	dra          *webhook.DRAIndex

	// Set by the serving certificate's component.
	getCert   func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	certReady func() error

	// draining: ctx has ended, ShutdownDelay runs; /readyz fails.
	draining atomic.Bool
	// srvDone is closed when the webhook server has stopped.
	srvDone chan struct{}
}

// newInstance checks and completes c, builds the API clients, the
// metrics registry, the (not yet started) informers and the admission
// handlers. Errors: a required field is missing, a client or the handlers
// cannot be built, resource.k8s.io/v1 cannot be discovered.
func newInstance(ctx context.Context, c Config) (*instance, error) {
	if err := c.complete(); err != nil {
		return nil, err
	}
	w := &instance{c: c, kube: c.Kube, nadClient: c.NADClient, srvDone: make(chan struct{})}
	var err error
	if w.kube == nil {
		if w.kube, err = kubernetes.NewForConfig(c.REST); err != nil {
			return nil, fmt.Errorf("kubernetes client: %w", err)
		}
	}
	if w.nadClient == nil {
		if w.nadClient, err = versioned.NewForConfig(c.REST); err != nil {
			return nil, fmt.Errorf("NetworkAttachmentDefinition client: %w", err)
		}
	}
	w.reg = prometheus.NewRegistry()
	metrics, err := RegisterMetrics(w.reg)
	if err != nil {
		return nil, err
	}
	if w.dra, err = draIndex(ctx, w.kube, c.InformerResync); err != nil {
		return nil, err
	}
	w.hooks, err = webhook.New(w.handlerOptions(metrics))
	if err != nil {
		return nil, err
	}
	return w, nil
}

// complete checks c and fills its defaults.
func (c *Config) complete() error {
	if c.REST == nil && (c.Kube == nil || c.NADClient == nil) {
		return errors.New("server config: REST is required")
	}
	if c.Namespace == "" {
		return errors.New("server config: Namespace is required")
	}
	if c.Port == 0 {
		c.Port = 9443
	}
	if c.CertCheckInterval <= 0 {
		c.CertCheckInterval = 10 * time.Minute
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errors.New("server config: CertFile and KeyFile go together")
	}
	return c.Registration.Check()
}

// handlerOptions makes the NAD and namespace informers and returns the
// admission handlers' options: c.Handlers with the informers' caches, the
// live lookups behind them, the DRA index and metrics.
func (w *instance) handlerOptions(metrics *webhook.Metrics) webhook.Options {
	// The NAD informer of all namespaces (dropping managedFields) is the
	// only informer of nadInformers.
	w.nadInformers = nadinformers.NewSharedInformerFactoryWithOptions(w.nadClient, w.c.InformerResync,
		nadinformers.WithTransform(dropManagedFields))
	nadInformer := w.nadInformers.K8sCniCncfIo().V1().NetworkAttachmentDefinitions()
	w.nad = nadInformer.Informer()
	hopts := w.c.Handlers
	// The informer's cache first; a NAD it has not seen yet (created just
	// before the pod) is read from the API server before a pod is denied.
	hopts.NADs = nadInformer.Lister()
	hopts.LiveNAD = nadlookup.LiveGet(w.nadClient.K8sCniCncfIoV1())
	// The NAD trust rules and the Pod Security rule select namespaces by
	// label: read from a namespace informer (labels only), a namespace it
	// has not seen yet live (docs/decisions/nad-trust.md). Every pod
	// admission reads them, so a live GET each would queue a burst of pods
	// on the client's rate limiter.
	w.nsInformers = informers.NewSharedInformerFactoryWithOptions(w.kube, w.c.InformerResync, informers.WithTransform(mnkube.NamespaceLabelsOnly))
	w.ns = w.nsInformers.Core().V1().Namespaces().Informer()
	hopts.NADTrust.Namespaces = podnetworks.NamespaceLabelsFunc(mnkube.CachedNamespaceLabels(w.ns.GetStore(), w.kube.CoreV1().Namespaces()))
	hopts.Synced = func() bool { return w.nad.HasSynced() && w.ns.HasSynced() }
	if w.dra != nil {
		hopts.DRA = w.dra
		hopts.Synced = func() bool { return w.nad.HasSynced() && w.ns.HasSynced() && w.dra.HasSynced() }
	}
	hopts.Metrics = metrics
	// IPAMClaim status writes of multinetd: the pods of the writer's node.
	hopts.PodsOnNode = webhook.ListPodsOnNode(w.kube.CoreV1())
	return hopts
}

// components are the webhook's parts in start order; they stop in the
// reverse order: ShutdownDelay first (only when ctx ended: /readyz fails
// while admission requests are still answered), the probe server, the
// webhook server (draining its in-flight requests), the informers, the
// caBundle publisher and the serving certificate last.
func (w *instance) components(ctx context.Context) []lifecycle.Component {
	cs := []lifecycle.Component{w.certComponent()}
	if w.c.CertFile != "" && (w.c.CAFile != "" || w.c.ManageConfigurations) {
		cs = append(cs, lifecycle.Component{Name: "caBundle publisher", Run: func(ctx context.Context) error {
			publishFileBundle(ctx, w.c, w.publish)
			return nil
		}})
	}
	probes := w.probes()
	cs = append(cs, w.informersComponent(), w.serverComponent(probes))
	if w.c.ProbeAddr != "" {
		cs = append(cs, w.probeComponent(probes))
	}
	return append(cs, w.shutdownDelayComponent(ctx))
}

// publish sets bundle as the webhook configurations' caBundle, or creates
// and updates both configurations with it (ManageConfigurations).
func (w *instance) publish(ctx context.Context, bundle []byte) error {
	if w.c.ManageConfigurations {
		return registration.Apply(ctx, w.kube.AdmissionregistrationV1(), w.c.Registration, bundle)
	}
	return registration.PatchCABundle(ctx, w.kube.AdmissionregistrationV1(), w.c.Registration.MutatingName, w.c.Registration.ValidatingName, bundle)
}

// certComponent is the serving certificate: CertFile and KeyFile, re-read
// when they change, or self-managed in the Secret SecretName.
func (w *instance) certComponent() lifecycle.Component {
	if w.c.CertFile != "" {
		var cw *certwatcher.CertWatcher
		return lifecycle.Component{
			Name: "certificate watcher",
			Start: func(context.Context) error {
				var err error
				if cw, err = certwatcher.New(w.c.CertFile, w.c.KeyFile); err != nil {
					return fmt.Errorf("serving certificate files: %w", err)
				}
				w.getCert, w.certReady = cw.GetCertificate, func() error { return nil }
				return nil
			},
			Run: func(ctx context.Context) error { return untilStopped(ctx, "certificate watcher", cw.Start(ctx)) },
		}
	}
	var mgr *certs.Manager
	return lifecycle.Component{
		Name: "certificate manager",
		Start: func(ctx context.Context) error {
			var err error
			if mgr, err = w.certManager(ctx); err != nil {
				return err
			}
			w.getCert, w.certReady = mgr.GetCertificate, mgr.Ready
			return nil
		},
		Run: func(ctx context.Context) error { return untilStopped(ctx, "certificate manager", mgr.Run(ctx)) },
	}
}

// certManager is the self-managed certificates' manager, synced once: the
// serving certificate is there (a caBundle that could not be published is
// logged and retried by its Run). Errors: no SAN, the Secret cannot be
// read or written.
func (w *instance) certManager(ctx context.Context) (*certs.Manager, error) {
	spec := w.c.CertSpec
	var err error
	if spec.DNSNames, spec.IPs, err = w.c.certSANs(); err != nil {
		return nil, err
	}
	if spec.CACommonName == "" {
		spec.CACommonName = "multinet-webhook-ca"
	}
	mgr, err := certs.NewManager(w.kube.CoreV1(), certs.ManagerOptions{
		Namespace: w.c.Namespace, SecretName: w.c.SecretName, Spec: spec,
		CheckInterval: w.c.CertCheckInterval, OnCABundle: w.publish, Registerer: w.reg,
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.Sync(ctx); err != nil {
		if mgr.Ready() != nil {
			return nil, err
		}
		klog.FromContext(ctx).Error(err, "publishing the CA bundle failed; retrying")
	}
	return mgr, nil
}

// informersComponent starts the NAD, namespace and DRA informers.
func (w *instance) informersComponent() lifecycle.Component {
	return lifecycle.Component{
		Name: "informers",
		Start: func(ctx context.Context) error {
			w.nadInformers.StartWithContext(ctx)
			w.nsInformers.StartWithContext(ctx)
			if w.dra != nil {
				w.dra.Start(ctx)
			}
			return nil
		},
	}
}

// serverComponent is the TLS webhook server (controller-runtime's) of the
// admission handlers and of probes; its end closes w.srvDone. It stops on
// its own only when it cannot listen; stopped, it lets the in-flight
// admission requests finish (it drains for up to a minute).
func (w *instance) serverComponent(probes http.Handler) lifecycle.Component {
	srv := crwebhook.NewServer(crwebhook.Options{
		Host: w.c.Host,
		Port: w.c.Port,
		TLSOpts: []func(*tls.Config){func(t *tls.Config) {
			t.GetCertificate = w.getCert
			t.MinVersion = tls.VersionTLS12
		}},
	})
	for path, h := range w.hooks.Handlers() {
		srv.Register(path, h)
	}
	srv.WebhookMux().Handle("/", probes)
	return lifecycle.Component{
		Name: "webhook server",
		Run: func(ctx context.Context) error {
			defer close(w.srvDone)
			klog.FromContext(ctx).Info("multinet-webhook serving", "host", w.c.Host, "port", w.c.Port, "probeAddr", w.c.ProbeAddr,
				"manageConfigurations", w.c.ManageConfigurations, "selfManagedCerts", w.c.CertFile == "")
			return wrapErr("webhook server", srv.Start(ctx))
		},
	}
}

// probes serves /healthz, /readyz (the informers synced, a serving
// certificate, not shutting down) and /metrics.
func (w *instance) probes() *http.ServeMux {
	return probeMux(w.reg, map[string]healthz.Checker{
		"nad-informer": func(*http.Request) error {
			if !w.nad.HasSynced() {
				return errors.New("NetworkAttachmentDefinition informer not synced")
			}
			return nil
		},
		"dra-informers": func(*http.Request) error {
			if w.dra != nil && !w.dra.HasSynced() {
				return errors.New("ResourceSlice and DeviceClass informers not synced")
			}
			return nil
		},
		"serving-cert": func(*http.Request) error { return w.certReady() },
		"shutting-down": func(*http.Request) error {
			if w.draining.Load() {
				return errors.New("shutting down: draining admission requests")
			}
			return nil
		},
	})
}

// probeComponent serves probes over plain HTTP on ProbeAddr; stopped, it
// waits at most 5 s for its requests.
func (w *instance) probeComponent(probes http.Handler) lifecycle.Component {
	ps := &http.Server{Addr: w.c.ProbeAddr, Handler: probes, ReadHeaderTimeout: 10 * time.Second}
	return lifecycle.Component{
		Name: "probe server",
		Run: func(context.Context) error {
			if err := ps.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("probe server: %w", err)
			}
			return nil
		},
		Stop: func(ctx context.Context) error {
			sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_ = ps.Shutdown(sctx)
			return nil
		},
	}
}

// shutdownDelayComponent keeps the webhook serving ShutdownDelay after
// outer ends, with /readyz failing, before the others stop: endpoints drop
// the replica first. Nothing when the webhook stops because a component
// failed, or when the server stops during the delay.
func (w *instance) shutdownDelayComponent(outer context.Context) lifecycle.Component {
	return lifecycle.Component{
		Name: "shutdown delay",
		Stop: func(ctx context.Context) error {
			if outer.Err() == nil || w.c.ShutdownDelay <= 0 {
				return nil
			}
			w.draining.Store(true)
			klog.FromContext(ctx).Info("shutting down: not ready, still serving while endpoints drop this replica", "delay", w.c.ShutdownDelay)
			select {
			case <-time.After(w.c.ShutdownDelay):
			case <-w.srvDone:
			}
			return nil
		},
	}
}

// RegisterMetrics registers with reg the Go and process collectors and the
// handlers' metrics (webhook.NewMetrics), as Run does for /metrics; Run's
// certificate manager adds multinet_webhook_cert_* (certs.ManagerOptions
// Registerer) and controller-runtime's registry is served beside it. Tools
// that check dashboards and alert rules against the webhook's metric names
// call it with a registerer of their own (deploy/observability). Errors: reg
// refused a collector.
func RegisterMetrics(reg prometheus.Registerer) (*webhook.Metrics, error) {
	for _, c := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("registering webhook metrics: %w", err)
		}
	}
	return webhook.NewMetrics(reg)
}

// probeMux serves /healthz (process alive), /readyz (checks) and /metrics
// (reg and controller-runtime's registry with its webhook latency metrics).
func probeMux(reg *prometheus.Registry, ready map[string]healthz.Checker) *http.ServeMux {
	mux := http.NewServeMux()
	live := &healthz.Handler{Checks: map[string]healthz.Checker{"ping": healthz.Ping}}
	rd := &healthz.Handler{Checks: ready}
	mux.Handle("/healthz", http.StripPrefix("/healthz", live))
	mux.Handle("/healthz/", http.StripPrefix("/healthz", live))
	mux.Handle("/readyz", http.StripPrefix("/readyz", rd))
	mux.Handle("/readyz/", http.StripPrefix("/readyz", rd))
	mux.Handle("/metrics", promhttp.HandlerFor(prometheus.Gatherers{reg, crmetrics.Registry}, promhttp.HandlerOpts{}))
	return mux
}

// publishFileBundle publishes the CA file's content (nil without one) at
// start and after every CertCheckInterval, until ctx ends.
func publishFileBundle(ctx context.Context, c Config, publish func(context.Context, []byte) error) {
	logger := klog.FromContext(ctx)
	for {
		var bundle []byte
		var err error
		if c.CAFile != "" {
			if bundle, err = os.ReadFile(c.CAFile); err != nil {
				logger.Error(err, "reading the CA file", "path", c.CAFile)
			} else if _, err = certs.ParseCertificates(bundle); err != nil {
				logger.Error(err, "CA file holds no certificate", "path", c.CAFile)
			}
		}
		wait := c.CertCheckInterval
		if err == nil {
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err = publish(cctx, bundle)
			cancel()
			if err != nil {
				logger.Error(err, "publishing the CA bundle failed; retrying")
			}
		}
		if err != nil {
			wait = min(wait, 10*time.Second)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// draIndex is the webhook's index of the resources DRA serves
// (webhook.DRAIndex), nil when the API server does not serve
// resource.k8s.io/v1 (Kubernetes before 1.34, or the group turned off):
// then every device resource is requested as before.
func draIndex(ctx context.Context, kube kubernetes.Interface, resync time.Duration) (*webhook.DRAIndex, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err := discovery.ToDiscoveryInterfaceWithContext(kube.Discovery()).ServerResourcesForGroupVersionWithContext(ctx, "resource.k8s.io/v1")
	switch {
	case apierrors.IsNotFound(err):
		klog.FromContext(ctx).Info("resource.k8s.io/v1 not served: every device resource is requested as an extended resource")
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("discovering resource.k8s.io/v1: %w", err)
	}
	return webhook.NewDRAIndex(kube, resync)
}

// dropManagedFields is the NAD informer's transform: managedFields are
// never read and are most of a NAD's size.
func dropManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// untilStopped is the error of what's loop that returned err: nil once ctx
// has ended (the loop was stopped), else err wrapped.
func untilStopped(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return wrapErr(what, err)
}

func wrapErr(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// namespaceGetTimeout bounds the live GET of a NAD's namespace.
