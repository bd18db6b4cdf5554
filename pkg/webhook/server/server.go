// Package server runs multinet-webhook: the admission handlers of
// pkg/webhook behind a controller-runtime webhook.Server over TLS, the
// NetworkAttachmentDefinition informer they read, the serving certificate
// (from files, or self-managed through pkg/webhook/certs), the webhook
// configurations' caBundle (pkg/webhook/registration), health endpoints and
// Prometheus metrics.
//
// Paths on the TLS port: webhook.MutatePodsPath, webhook.ValidatePodsPath,
// webhook.ValidateNADsPath, /healthz, /readyz, /metrics. The same /healthz,
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
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/multinet/multinet/pkg/client/clientset/versioned"
	nadinformers "github.com/multinet/multinet/pkg/client/informers/externalversions"
	mnkube "github.com/multinet/multinet/pkg/kube"
	"github.com/multinet/multinet/pkg/nadlookup"
	"github.com/multinet/multinet/pkg/podnetworks"
	"github.com/multinet/multinet/pkg/webhook"
	"github.com/multinet/multinet/pkg/webhook/certs"
	"github.com/multinet/multinet/pkg/webhook/registration"
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
// that stops it
// (listening, a certificate that cannot be made or read). A failure to
// publish the caBundle is logged and retried, not fatal.
func Run(ctx context.Context, c Config) error {
	logger := klog.FromContext(ctx)
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
	if err := c.Registration.Check(); err != nil {
		return err
	}
	kube, nadClient := c.Kube, c.NADClient
	var err error
	if kube == nil {
		if kube, err = kubernetes.NewForConfig(c.REST); err != nil {
			return fmt.Errorf("kubernetes client: %w", err)
		}
	}
	if nadClient == nil {
		if nadClient, err = versioned.NewForConfig(c.REST); err != nil {
			return fmt.Errorf("NetworkAttachmentDefinition client: %w", err)
		}
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics, err := webhook.NewMetrics(reg)
	if err != nil {
		return err
	}

	// Everything below runs on its own context, canceled ShutdownDelay
	// after the caller's ends (values such as the logger are kept).
	outer := ctx
	ctx, cancel := context.WithCancel(context.WithoutCancel(outer))
	defer cancel()
	var draining atomic.Bool

	// The NAD informer of all namespaces (dropping managedFields) is the
	// only informer of nadInformers.
	nadInformers := nadinformers.NewSharedInformerFactoryWithOptions(nadClient, c.InformerResync,
		nadinformers.WithTransform(dropManagedFields))
	nadInformer := nadInformers.K8sCniCncfIo().V1().NetworkAttachmentDefinitions()
	inf := nadInformer.Informer()
	hopts := c.Handlers
	// The informer's cache first; a NAD it has not seen yet (created just
	// before the pod) is read from the API server before a pod is denied.
	hopts.NADs = nadInformer.Lister()
	hopts.LiveNAD = nadlookup.LiveGet(nadClient.K8sCniCncfIoV1())
	// The NAD trust rules and the Pod Security rule select namespaces by
	// label: read from a namespace informer (labels only), a namespace it
	// has not seen yet live (docs/decisions/nad-trust.md). Every pod
	// admission reads them, so a live GET each would queue a burst of pods
	// on the client's rate limiter.
	nsInformers := informers.NewSharedInformerFactoryWithOptions(kube, c.InformerResync, informers.WithTransform(mnkube.NamespaceLabelsOnly))
	nsInformer := nsInformers.Core().V1().Namespaces().Informer()
	hopts.NADTrust.Namespaces = podnetworks.NamespaceLabelsFunc(mnkube.CachedNamespaceLabels(nsInformer.GetStore(), kube.CoreV1().Namespaces()))
	dra, err := draIndex(ctx, kube, c.InformerResync)
	if err != nil {
		return err
	}
	hopts.Synced = func() bool { return inf.HasSynced() && nsInformer.HasSynced() }
	if dra != nil {
		hopts.DRA = dra
		hopts.Synced = func() bool { return inf.HasSynced() && nsInformer.HasSynced() && dra.HasSynced() }
	}
	hopts.Metrics = metrics
	hooks, err := webhook.New(hopts)
	if err != nil {
		return err
	}

	publish := func(ctx context.Context, bundle []byte) error {
		if c.ManageConfigurations {
			return registration.Apply(ctx, kube.AdmissionregistrationV1(), c.Registration, bundle)
		}
		return registration.PatchCABundle(ctx, kube.AdmissionregistrationV1(), c.Registration.MutatingName, c.Registration.ValidatingName, bundle)
	}

	errc := make(chan error, 4)
	var getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	var certReady func() error
	if c.CertFile != "" || c.KeyFile != "" {
		if c.CertFile == "" || c.KeyFile == "" {
			return errors.New("server config: CertFile and KeyFile go together")
		}
		cw, err := certwatcher.New(c.CertFile, c.KeyFile)
		if err != nil {
			return fmt.Errorf("serving certificate files: %w", err)
		}
		go func() { errc <- wrapErr("certificate watcher", cw.Start(ctx)) }()
		getCert = cw.GetCertificate
		certReady = func() error { return nil }
		if c.CAFile != "" || c.ManageConfigurations {
			go publishFileBundle(ctx, c, publish)
		}
	} else {
		spec := c.CertSpec
		if spec.DNSNames, spec.IPs, err = c.certSANs(); err != nil {
			return err
		}
		if spec.CACommonName == "" {
			spec.CACommonName = "multinet-webhook-ca"
		}
		mgr, err := certs.NewManager(kube.CoreV1(), certs.ManagerOptions{
			Namespace: c.Namespace, SecretName: c.SecretName, Spec: spec,
			CheckInterval: c.CertCheckInterval, OnCABundle: publish, Registerer: reg,
		})
		if err != nil {
			return err
		}
		if err := mgr.Sync(ctx); err != nil {
			if mgr.Ready() != nil {
				return err
			}
			logger.Error(err, "publishing the CA bundle failed; retrying")
		}
		go func() { errc <- wrapErr("certificate manager", mgr.Run(ctx)) }()
		getCert = mgr.GetCertificate
		certReady = mgr.Ready
	}

	nadInformers.StartWithContext(ctx)
	nsInformers.StartWithContext(ctx)
	if dra != nil {
		dra.Start(ctx)
	}

	srv := crwebhook.NewServer(crwebhook.Options{
		Host: c.Host,
		Port: c.Port,
		TLSOpts: []func(*tls.Config){func(t *tls.Config) {
			t.GetCertificate = getCert
			t.MinVersion = tls.VersionTLS12
		}},
	})
	for path, h := range hooks.Handlers() {
		srv.Register(path, h)
	}
	probes := probeMux(reg, map[string]healthz.Checker{
		"nad-informer": func(*http.Request) error {
			if !inf.HasSynced() {
				return errors.New("NetworkAttachmentDefinition informer not synced")
			}
			return nil
		},
		"dra-informers": func(*http.Request) error {
			if dra != nil && !dra.HasSynced() {
				return errors.New("ResourceSlice and DeviceClass informers not synced")
			}
			return nil
		},
		"serving-cert": func(*http.Request) error { return certReady() },
		"shutting-down": func(*http.Request) error {
			if draining.Load() {
				return errors.New("shutting down: draining admission requests")
			}
			return nil
		},
	})
	srv.WebhookMux().Handle("/", probes)
	srvDone := make(chan error, 1)
	go func() { srvDone <- srv.Start(ctx) }()

	if c.ProbeAddr != "" {
		ps := &http.Server{Addr: c.ProbeAddr, Handler: probes, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			<-ctx.Done()
			sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer scancel()
			_ = ps.Shutdown(sctx)
		}()
		go func() {
			if err := ps.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("probe server: %w", err)
			}
		}()
	}
	logger.Info("multinet-webhook serving", "host", c.Host, "port", c.Port, "probeAddr", c.ProbeAddr,
		"manageConfigurations", c.ManageConfigurations, "selfManagedCerts", c.CertFile == "")

	var runErr error
	select {
	case <-outer.Done():
		if c.ShutdownDelay > 0 {
			draining.Store(true)
			logger.Info("shutting down: not ready, still serving while endpoints drop this replica", "delay", c.ShutdownDelay)
			select {
			case <-time.After(c.ShutdownDelay):
			case err := <-srvDone:
				return wrapErr("webhook server", err)
			}
		}
	case err := <-errc:
		runErr = err
	case err := <-srvDone:
		// The server stops on its own only when it cannot listen.
		return wrapErr("webhook server", err)
	}
	// Stop everything and let in-flight admission requests finish (the
	// server drains for up to a minute).
	cancel()
	if err := <-srvDone; err != nil && runErr == nil {
		runErr = wrapErr("webhook server", err)
	}
	return runErr
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

func wrapErr(what string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// namespaceGetTimeout bounds the live GET of a NAD's namespace.
