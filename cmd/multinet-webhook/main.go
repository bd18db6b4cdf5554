// Command multinet-webhook is multinet's admission webhook: it injects the
// extended resources of device-backed networks into pods (spec 001
// "NetworkResource" admission controller), validates network selection
// annotations and NetworkAttachmentDefinitions, serves TLS with its own or
// given certificates and keeps the webhook configurations' caBundle current.
// Flags and deployment: docs/webhook.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	"github.com/multinet/multinet/internal/process/version"
	"github.com/multinet/multinet/internal/webhook"
	"github.com/multinet/multinet/internal/webhook/certs"
	"github.com/multinet/multinet/internal/webhook/registration"
	"github.com/multinet/multinet/internal/webhook/server"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
	"github.com/multinet/multinet/pkg/spec/selection"
)

func main() {
	var c server.Config
	var f flags
	registerServerFlags(&c, &f)
	registerCertFlags(&c, &f)
	registerHandlerFlags(&c, &f)
	klog.InitFlags(nil)
	version.ParseFlags("multinet-webhook", "multinet admission webhook (docs/webhook.md).")
	crlog.SetLogger(klog.NewKlogr())

	f.completeServer(&c)
	if err := f.completeHandlers(&c); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if f.printConfigs {
		if err := printConfigurations(c.Registration); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	run(c, f.kubeconfig)
}

// flags are the command line's values that server.Config does not take as
// they are: completeServer and completeHandlers put them in.
type flags struct {
	kubeconfig    string
	port          int
	excluded      string
	timeout       int
	printConfigs  bool
	nodeAgent     string
	extraSANs     string
	rnKeys        string
	existing      string
	isolation     bool
	globals       string
	defaultNets   string
	systemNS      string
	undeclared    string
	trustFile     string
	lookupFailure string
}

// registerServerFlags registers the flags of the listener, the API
// server connection and the webhook configurations.
func registerServerFlags(c *server.Config, f *flags) {
	flag.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file; empty: in-cluster config")
	flag.StringVar(&c.Host, "bind-address", "", "address the TLS server listens on (empty: all)")
	flag.IntVar(&c.Port, "port", 9443, "port the TLS server listens on")
	flag.StringVar(&c.ProbeAddr, "probe-bind-address", "", "plain HTTP address for /healthz, /readyz, /metrics (empty: off; they are always on the TLS port)")
	flag.StringVar(&c.Namespace, "namespace", envOr("POD_NAMESPACE", "multinet-system"), "the webhook's namespace (certificate Secret; excluded from admission)")
	flag.StringVar(&c.Registration.ServiceName, "service-name", "multinet-webhook", "Service in front of the webhook (service clientConfig and certificate SANs)")
	flag.IntVar(&f.port, "service-port", 443, "port of that Service")
	flag.StringVar(&c.Registration.URL, "url", "", "base URL https://host:port for a url clientConfig instead of the Service (e.g. https://127.0.0.1:9443 for a host process); its host is added to the certificate SANs")
	flag.StringVar(&c.ClusterDomain, "cluster-domain", "cluster.local", "cluster DNS domain for the service SANs")
	flag.StringVar(&c.Registration.MutatingName, "mutating-webhook-configuration", "multinet-webhook", "name of the MutatingWebhookConfiguration")
	flag.StringVar(&c.Registration.ValidatingName, "validating-webhook-configuration", "multinet-webhook", "name of the ValidatingWebhookConfiguration")
	flag.BoolVar(&c.ManageConfigurations, "manage-webhook-configurations", false, "create and update both webhook configurations (else only their caBundle is set)")
	flag.StringVar(&f.excluded, "exclude-namespaces", "kube-system", "comma-separated namespaces never sent to the webhook, besides --namespace")
	flag.IntVar(&f.timeout, "timeout-seconds", registration.DefaultTimeoutSeconds, "timeoutSeconds of each webhook (1-30)")
	flag.BoolVar(&f.printConfigs, "print-webhook-configurations", false, "print the webhook configurations these flags give (YAML, without caBundle) and exit")
	flag.BoolVar(&c.Registration.NoMatchConditions, "no-match-conditions", false, "leave out the matchConditions that send only pods with a selection annotation (API servers < 1.28)")
	flag.StringVar(&f.nodeAgent, "node-agent-user", "", "user of multinetd's node credentials whose IPAMClaim status writes are held to their node's pods (empty: system:serviceaccount:<--namespace>:multinetd)")
}

// registerCertFlags registers the flags of the serving certificate and of
// shutting down.
func registerCertFlags(c *server.Config, f *flags) {
	flag.StringVar(&c.CertFile, "tls-cert-file", "", "serving certificate (PEM); with --tls-private-key-file disables self-managed certificates")
	flag.StringVar(&c.KeyFile, "tls-private-key-file", "", "serving certificate's key (PEM)")
	flag.StringVar(&c.CAFile, "ca-bundle-file", "", "with --tls-cert-file: CA bundle (PEM) to publish as caBundle")
	flag.StringVar(&c.SecretName, "cert-secret", "multinet-webhook-certs", "Secret in --namespace holding the self-managed CA and serving certificate")
	flag.DurationVar(&c.CertSpec.CAValidity, "ca-validity", 3*365*24*time.Hour, "lifetime of a self-managed CA; renewed at 2/3")
	flag.DurationVar(&c.CertSpec.CertValidity, "cert-validity", 365*24*time.Hour, "lifetime of a self-managed serving certificate; renewed at 2/3")
	flag.DurationVar(&c.CertCheckInterval, "cert-check-interval", 10*time.Minute, "longest time between certificate and caBundle checks")
	flag.DurationVar(&c.ShutdownDelay, "shutdown-delay", 5*time.Second, "on SIGTERM, keep answering admission requests this long with /readyz failing, so that endpoints drop this replica first (0: stop at once)")
	flag.StringVar(&f.extraSANs, "extra-sans", "", "comma-separated extra DNS names and IP addresses for the serving certificate")
}

// registerHandlerFlags registers the flags of the admission handlers.
func registerHandlerFlags(c *server.Config, f *flags) {
	flag.StringVar(&f.rnKeys, "resource-name-annotations", strings.Join(webhook.DefaultResourceNameAnnotations, ","), "comma-separated NAD annotation keys holding the resource name, first present wins")
	flag.StringVar(&c.Handlers.ContainerName, "inject-container", "", "name of the container that gets the resources (empty or absent: --inject-container-index)")
	flag.IntVar(&c.Handlers.ContainerIndex, "inject-container-index", 0, "index of the container that gets the resources (out of range: 0)")
	flag.StringVar(&f.existing, "existing-requests", string(webhook.KeepExisting), "keep: the pod's existing requests count toward N; add: N is added to the container's existing value")
	flag.BoolVar(&f.isolation, "namespace-isolation", false, "pods may select only NADs in their own namespace and --global-namespaces (spec §7.4), as multinetd's namespaceIsolation")
	flag.StringVar(&f.globals, "global-namespaces", "", "comma-separated namespaces whose NADs every pod may select under --namespace-isolation (none by default, as multinetd's globalNamespaces)")
	flag.StringVar(&f.defaultNets, "default-networks", "", "comma-separated NADs namespace/name multinetd attaches to every pod on net1, net2, … (as multinetd's defaultNetworks): a pod may not request those interface names")
	flag.StringVar(&f.systemNS, "system-namespaces", "kube-system", "comma-separated namespaces whose pods do not get --default-networks (as multinetd's systemNamespaces)")
	flag.StringVar(&f.undeclared, "undeclared-capabilities", string(podnetworks.RefuseUndeclared), "a key (mac, ips, …) whose capability no plugin of the NAD declares: refuse (deny the pod, spec §4.1.2.1.x.2) or multus (admit it with a warning; multinetd hands the value over as Multus does), as multinetd's undeclaredCapabilities")
	flag.IntVar(&c.Handlers.MaxSelectionElements, "max-selection-elements", podnetworks.DefaultMaxSelectionElements, "most network selection elements a pod may have (its networks annotation), as multinetd's maxSelectionElements; more are denied")
	flag.StringVar(&f.trustFile, "nad-trust-policy", "", "NAD trust policy file (docs/nad-trust.md; the ConfigMap multinet-nad-trust): the plugin types and host-reaching keys each namespace's NADs may carry; empty: the shipped policy. Set it as multinetd's nadTrustPolicyFile")
	flag.StringVar(&f.lookupFailure, "nad-lookup-failure", string(webhook.RejectOnLookupFailure), "when the API server does not answer a NAD lookup: reject (answer 503; the client retries) or admit (with a warning; multinetd checks the selection at ADD)")
}

// completeServer puts the registration and certificate flags into c.
func (f *flags) completeServer(c *server.Config) {
	c.Registration.ServiceNamespace = c.Namespace
	c.Registration.ServicePort = int32(f.port)
	c.Registration.TimeoutSeconds = int32(f.timeout)
	c.Registration.ExcludeNamespaces = appendUnique(splitList(f.excluded), c.Namespace)
	if f.nodeAgent == "" {
		f.nodeAgent = webhook.NodeAgentUser(c.Namespace)
	}
	c.Registration.NodeAgentUser, c.Handlers.NodeAgentUser = f.nodeAgent, f.nodeAgent
	c.CertSpec = certs.Spec{CAValidity: c.CertSpec.CAValidity, CertValidity: c.CertSpec.CertValidity}
	for _, s := range splitList(f.extraSANs) {
		if ip := net.ParseIP(s); ip != nil {
			c.CertSpec.IPs = append(c.CertSpec.IPs, ip)
		} else {
			c.CertSpec.DNSNames = append(c.CertSpec.DNSNames, s)
		}
	}
}

// completeHandlers puts the admission handlers' flags into c. Errors name
// the flag: --default-networks or --nad-trust-policy that cannot be read.
func (f *flags) completeHandlers(c *server.Config) error {
	c.Handlers.ResourceNameAnnotations = splitList(f.rnKeys)
	c.Handlers.Existing = webhook.ExistingPolicy(f.existing)
	c.Handlers.Isolation = selection.IsolationPolicy{Enabled: f.isolation, GlobalNamespaces: splitList(f.globals)}
	c.Handlers.OnLookupFailure = webhook.LookupFailurePolicy(f.lookupFailure)
	c.Handlers.SystemNamespaces = splitList(f.systemNS)
	c.Handlers.UndeclaredCapabilities = podnetworks.UndeclaredCapabilities(strings.TrimSpace(f.undeclared)) // checked by webhook.New
	nets, err := podnetworks.ParseDefaultNetworks(splitList(f.defaultNets))
	if err != nil {
		return fmt.Errorf("--default-networks: %w", err)
	}
	c.Handlers.DefaultNetworks = nets
	trust, err := podnetworks.ReadNADTrustPolicy(f.trustFile)
	if err != nil {
		return fmt.Errorf("--nad-trust-policy: %w", err)
	}
	c.Handlers.NADTrust.Policy = trust
	return nil
}

// run runs the webhook of c with the API server of kubeconfig (empty:
// in-cluster) until SIGINT or SIGTERM; it exits 1 when it fails.
func run(c server.Config, kubeconfig string) {
	rest, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		klog.ErrorS(err, "loading kubeconfig", "path", kubeconfig)
		klog.Flush()
		os.Exit(1)
	}
	c.REST = rest

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := server.Run(ctx, c); err != nil {
		klog.ErrorS(err, "multinet-webhook failed")
		klog.Flush()
		os.Exit(1)
	}
	klog.InfoS("multinet-webhook stopped")
	klog.Flush()
}

// printConfigurations writes the rendered configurations as a YAML stream.
func printConfigurations(o registration.Options) error {
	mwc, vwc, err := registration.Render(o, nil)
	if err != nil {
		return err
	}
	for i, obj := range []any{mwc, vwc} {
		b, err := yaml.Marshal(obj)
		if err != nil {
			return fmt.Errorf("encoding webhook configuration: %w", err)
		}
		if i > 0 {
			fmt.Println("---")
		}
		fmt.Print(string(b))
	}
	return nil
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// splitList splits a comma-separated flag value, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func appendUnique(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}
