// Package daemon wires multinetd together: the Kubernetes informers, the
// attachment engine (internal/node/attach) behind the shim's socket (internal/node/cniserver),
// the CNI configuration file the container runtime reads (multi-net spec
// §6.1 readiness), Prometheus metrics and the health endpoints.
package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/multinet/multinet/internal/ipam"
	"github.com/multinet/multinet/internal/node/cniserver/api"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/pkg/spec/devinfo"
	"github.com/multinet/multinet/pkg/spec/netconf"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
	"github.com/multinet/multinet/pkg/spec/selection"
)

// Duration is a time.Duration written as a Go duration string ("90s") in
// the config file.
type Duration struct{ time.Duration }

// UnmarshalJSON accepts a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %s: %w", b, err)
	}
	d.Duration = v
	return nil
}

// MarshalJSON writes a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return []byte(`"` + d.String() + `"`), nil }

// DefaultNetworkConfig says where the cluster-wide default network comes
// from (spec §6). At most one of NAD, File and Name is set; none means the
// lexically first config file of DefaultNetworkConfDir (the one the runtime
// would have picked), never multinet's own.
type DefaultNetworkConfig struct {
	// NAD is "namespace/name" of a NetworkAttachmentDefinition.
	NAD string `json:"nad,omitempty"`
	// File is a CNI config file path (.conflist, .conf, .json).
	File string `json:"file,omitempty"`
	// Name is a CNI network name looked up in ConfDir.
	Name string `json:"name,omitempty"`
	// ConfDir is where the default network's config file lives. Default:
	// Config.CNIConfDir.
	ConfDir string `json:"confDir,omitempty"`
}

// Config is multinetd's configuration file (YAML or JSON); every field has
// a default (see Defaults) and the flags of cmd/multinetd override it.
// docs/multinetd.md describes each field.
type Config struct {
	// NodeName selects the pods this daemon serves. Default: $NODE_NAME,
	// else the host name.
	NodeName string `json:"nodeName,omitempty"`
	// Kubeconfig is a kubeconfig path; empty uses the in-cluster config.
	Kubeconfig string `json:"kubeconfig,omitempty"`
	// SocketPath is the shim's socket (directory made 0700, socket 0600).
	SocketPath string `json:"socketPath,omitempty"`
	// CNIConfDir is the container runtime's CNI conf dir, where multinetd
	// writes ConfFileName. Empty: the runtime's (ResolveRuntimeCNI), else
	// DefaultCNIConfDir.
	CNIConfDir string `json:"cniConfDir,omitempty"`
	// ConfFileName is multinet's own CNI config file in CNIConfDir.
	ConfFileName string `json:"confFileName,omitempty"`
	// CNIBinDirs are the delegates' CNI_PATH. Empty: the runtime's plugin
	// dirs as it reports them through the CRI (ResolveRuntimeCNI), else the
	// CNI_PATH of each request.
	CNIBinDirs []string `json:"cniBinDirs,omitempty"`
	// NodeRoot is the node's root file system in the daemon's view: "/" for
	// a host process, "/host" in the shipped DaemonSet (the node's "/"
	// mounted with HostToContainer propagation). Every delegate runs
	// chrooted into it, so it sees the node's binaries, libraries, sockets
	// and state directories; every path handed to a delegate (CNI_PATH,
	// CNI_NETNS, cniBinDirs, device-info files) is a node path.
	NodeRoot string `json:"nodeRoot,omitempty"`
	// DelegateCgroup is the node cgroup (a path from the hierarchy roots,
	// in every hierarchy under NodeRoot/sys/fs/cgroup) delegates run in:
	// they are started by a launcher process placed there once
	// (nodeexec.Launcher). "" (default): "/" when
	// NodeRoot is not "/" (the daemon runs in a container whose CPU weight
	// and memory limit must not apply to delegates), else none; "none":
	// delegates stay in the daemon's cgroup.
	DelegateCgroup string `json:"delegateCgroup,omitempty"`
	// DefaultNetwork is the cluster-wide default network (spec §6).
	DefaultNetwork DefaultNetworkConfig `json:"defaultNetwork,omitempty"`
	// AuxiliaryChain names a chain of plugins run for every pod after its
	// attachments (Multus's auxiliaryCNIChainName): the .conf files of the
	// sub-directory CNIConfDir/<AuxiliaryChain>, on the runtime's interface,
	// chained onto the default network's result. Empty: none.
	AuxiliaryChain string `json:"auxiliaryChain,omitempty"`
	// StateDir holds the attachment records and libcni's cache.
	StateDir string `json:"stateDir,omitempty"`
	// DevInfoRoot is the device-info root ("<root>/dp", "<root>/cni").
	DevInfoRoot string `json:"devInfoRoot,omitempty"`
	// PodResourcesSocket is kubelet's PodResources API socket; empty
	// disables device lookups.
	PodResourcesSocket string `json:"podResourcesSocket,omitempty"`
	// MetricsAddress serves /metrics, /healthz and /readyz ("" disables).
	MetricsAddress string `json:"metricsAddress,omitempty"`
	// MaxInFlight bounds the ADDs run at once, and is the part of the
	// concurrency slots any CNI operation may use; more wait (bounded by
	// their deadline). Default: DefaultMaxInFlight(runtime.NumCPU()), 32
	// on a 2-CPU node.
	MaxInFlight int `json:"maxInFlight,omitempty"`
	// ReservedInFlight are further slots only DEL, CHECK, GC and STATUS
	// use, so that ADDs (hung delegates) never take all the capacity.
	ReservedInFlight int `json:"reservedInFlight,omitempty"`
	// DelegateTimeout bounds one delegate invocation.
	DelegateTimeout Duration `json:"delegateTimeout,omitempty"`
	// DelegateSlotTimeout is how long a delegate may run holding its
	// operation's slot; one that has not answered by then gives it back
	// until it answers.
	DelegateSlotTimeout Duration `json:"delegateSlotTimeout,omitempty"`
	// TeardownGrace is the time per attachment the teardown of a failed
	// ADD gets beyond the request's deadline.
	TeardownGrace Duration `json:"teardownGrace,omitempty"`
	// RequestTimeout bounds one CNI operation in the daemon.
	RequestTimeout Duration `json:"requestTimeout,omitempty"`
	// ShimTimeout is the shim's own deadline, written into ConfFileName.
	ShimTimeout Duration `json:"shimTimeout,omitempty"`
	// NADSyncWait bounds how long an ADD that needs a NAD waits for the NAD
	// informer's first full list (after a restart), besides the request's
	// deadline; then it fails with CNI error 11 (try again later).
	NADSyncWait Duration `json:"nadSyncWait,omitempty"`
	// DefaultNetworks are NetworkAttachmentDefinitions ("namespace/name")
	// attached to every pod after the default network and before the pod's
	// own selection, on net1, net2, … (Multus's defaultNetworks). Not to
	// pods of SystemNamespaces. Namespace isolation does not apply to them;
	// a NAD with a device resource name fails the ADD. Empty: none.
	DefaultNetworks []string `json:"defaultNetworks,omitempty"`
	// SystemNamespaces are namespaces whose pods do not get DefaultNetworks
	// (their own selection still applies, as in Multus). Default:
	// ["kube-system"], Multus's; an explicit empty list means none.
	SystemNamespaces []string `json:"systemNamespaces,omitempty"`
	// NamespaceIsolation restricts selections to the pod's namespace and
	// GlobalNamespaces (spec §7.4).
	NamespaceIsolation bool     `json:"namespaceIsolation,omitempty"`
	GlobalNamespaces   []string `json:"globalNamespaces,omitempty"`
	// UndeclaredCapabilities decides a network selection element key
	// ("ips", "mac", …) whose capability no plugin of the NAD declares:
	// "refuse" (the default; spec §4.1.2.1.3.2, §4.1.2.1.4.2: the ADD
	// fails) or "multus" (handed over as Multus hands it, CNI_ARGS MAC=,
	// IP= and runtimeConfig, with a Warning Event on the pod). The webhook's
	// --undeclared-capabilities must match (docs/migrating-from-multus.md).
	UndeclaredCapabilities string `json:"undeclaredCapabilities,omitempty"`
	// MaxSelectionElements bounds the network selection elements of one
	// pod (default podnetworks.DefaultMaxSelectionElements, 32): an ADD or
	// hot-plug of a pod with more fails, naming the setting. The webhook's
	// --max-selection-elements must match.
	MaxSelectionElements int `json:"maxSelectionElements,omitempty"`
	// NADTrustPolicyFile is the NAD trust policy (docs/nad-trust.md; the
	// ConfigMap multinet-nad-trust): the plugin types and host-reaching keys
	// each namespace's NADs may carry; an ADD to a NAD that breaks it fails
	// with a Warning Event. Empty: the shipped policy
	// (podnetworks.DefaultNADTrustPolicyYAML). Read at start (Run fails on
	// a file that cannot be read or parsed); the webhook's
	// --nad-trust-policy must name the same policy.
	NADTrustPolicyFile string `json:"nadTrustPolicyFile,omitempty"`
	// RemoveCNIConfigOnExit removes ConfFileName when the daemon stops,
	// before it drains in-flight operations. Off by default (spec §6.1: a
	// restart or upgrade must not let pods start without multinet); turned
	// on for an uninstall (docs/install.md), when the runtime should fall
	// back to the next config in CNIConfDir.
	RemoveCNIConfigOnExit bool `json:"removeCNIConfigOnExit,omitempty"`
	// RuntimeEndpoint is the container runtime's CRI socket in the daemon's
	// view ("unix:///path" or "/path"), through which multinetd lists the
	// pod sandboxes the runtime holds, to reap the records of those it
	// removed without a DEL reaching multinetd, and which it asks at start
	// for its CNI settings when CNIConfDir or CNIBinDirs is unset
	// (ResolveRuntimeCNI). "" disables both.
	RuntimeEndpoint string `json:"runtimeEndpoint,omitempty"`
	// ReapInterval is how often multinetd reaps; 0 disables reaping.
	ReapInterval Duration `json:"reapInterval,omitempty"`
	// ReapMinAge is how long a record must have been unchanged before it is
	// reaped: longer than an ADD can run (shimTimeout), since the runtime
	// lists a sandbox only after its ADD returned.
	ReapMinAge Duration `json:"reapMinAge,omitempty"`
	// IPAMSocketPath is multinet-ipam's socket (the plugin's
	// "ipam.socketPath"): multinetd allocates the plugin's addresses in the
	// Kubernetes API with its own ServiceAccount (internal/ipam/ipamd,
	// docs/multinet-ipam.md). Default: ipam.sock in SocketPath's
	// directory; "none" turns multinet-ipam off.
	IPAMSocketPath string `json:"ipamSocketPath,omitempty"`
	// IPAMReconcileInterval is the mean time (±50%) between two passes
	// that release this node's addresses of pods and IPAMClaims that are
	// gone (other nodes' are multinet-ipam-cleanup's); 0 disables them.
	IPAMReconcileInterval Duration `json:"ipamReconcileInterval,omitempty"`
	// IPAMSharedPools are the multinet-ipam pools the admin shares beyond
	// their owner: {pool: "team-a/blue" or a cluster pool "blue",
	// allowedNamespaces: [...] or ["*"]}. Without one, a tenant
	// namespace's NADs allocate from their own namespace's pools only
	// (docs/multinet-ipam.md "Pools and namespaces").
	IPAMSharedPools []ipam.SharedPool `json:"ipamSharedPools,omitempty"`
	// IPAMMaxAllocationsPerNamespace bounds the multinet-ipam addresses
	// the pods and IPAMClaims of one namespace hold (not the admin
	// namespaces: globalNamespaces, systemNamespaces, kube-system,
	// multinet-system); an ADD beyond it fails. Default 1024; 0 turns the
	// limit off.
	IPAMMaxAllocationsPerNamespace *int `json:"ipamMaxAllocationsPerNamespace,omitempty"`
	// IPAMNamespaceMaxAllocations overrides IPAMMaxAllocationsPerNamespace
	// for the named namespaces (0: no limit).
	IPAMNamespaceMaxAllocations map[string]int `json:"ipamNamespaceMaxAllocations,omitempty"`
	// DisableHotPlug turns hot-plug off (docs/hotplug.md): a change of a
	// running pod's k8s.v1.cni.cncf.io/networks annotation then changes
	// nothing on the node (as with Multus without
	// multus-dynamic-networks-controller); the selection applies when the
	// pod's sandbox is next created. Default false: hot-plug is on.
	DisableHotPlug bool `json:"disableHotPlug,omitempty"`
	// AsyncStatus writes network-status after ADD returns.
	AsyncStatus bool `json:"asyncStatus,omitempty"`
	// NetworkPolicy enforces MultiNetworkPolicy in the pods' network
	// namespaces (docs/network-policy.md): "auto" (default) when the
	// MultiNetworkPolicy CRD is installed at multinetd's start, "on"
	// always (ADDs of pods fail while the CRD cannot be listed), "off"
	// never.
	NetworkPolicy string `json:"networkPolicy,omitempty"`
	// RecordSync is when an attachment record becomes durable:
	// "background" (default) fsyncs it in a group commit right after the
	// save returns, "each" before (docs/decisions/state.md "Group commit").
	RecordSync string `json:"recordSync,omitempty"`
	// APIQPS and APIBurst limit the daemon's API client.
	APIQPS   float32 `json:"apiQPS,omitempty"`
	APIBurst int     `json:"apiBurst,omitempty"`
}

// Values of networkPolicy.
const (
	NetworkPolicyAuto = "auto"
	NetworkPolicyOn   = "on"
	NetworkPolicyOff  = "off"
)

// IPAMOff as ipamSocketPath turns multinet-ipam off.
const IPAMOff = "none"

// Slot pool sizing (maxInFlight's default), measured on the local cluster
// (2 CPUs shared with other builds, load average 33-90; deployed multinetd;
// docs/bench.md "Slot pool and CPU request", docs/decisions/daemon-resources.md):
// with 4 and 8 slots ADDs queued even at 10 concurrent and bursts of 50 took
// 1.9-2.1x the direct delegates' wall time; with 256 (no bound) every ADD's
// delegates ran at once on the 2 CPUs (1.67x at 50, memory peak 36 MiB
// against 27); 16 and 32 are a plateau, not separated beyond the run-to-run
// noise (1.0-1.7x at 50): 32 cut the wait for a slot at 50 concurrent
// (0.7-0.8 s per ADD against 1.1-1.9 s) and the delegates ran that much
// longer. 16 per CPU puts 2-CPU nodes on that plateau and lets it grow with
// the CPUs the delegates share. An ADD's work is mostly its
// delegates' processes, which run outside the daemon and wait on the kernel,
// the disk and each other as much as on a CPU: a few slots per CPU leave the
// CPUs idle, and many more only move the queue into the kernel's run queue.
const (
	// MaxInFlightPerCPU is the default number of ADD slots per CPU the
	// daemon may use.
	MaxInFlightPerCPU = 16
	// MinMaxInFlight is the smallest default maxInFlight (one CPU or a
	// CPU limit below one).
	MinMaxInFlight = 16
)

// DefaultMaxInFlight returns maxInFlight's default on a node whose
// delegates may use procs CPUs (runtime.NumCPU(): the CPUs of multinetd's
// affinity mask; not GOMAXPROCS, which the deployed multinetd sets to 1 for
// its own goroutines while its delegates run on every CPU in the node's
// cgroup): MaxInFlightPerCPU × procs, at least MinMaxInFlight (also for
// procs < 1).
func DefaultMaxInFlight(procs int) int {
	return max(MinMaxInFlight, MaxInFlightPerCPU*procs)
}

// Defaults returns the configuration used for fields left empty.
func Defaults() Config {
	return Config{
		SocketPath:            api.DefaultSocketPath,
		NodeRoot:              "/",
		ConfFileName:          "00-multinet.conflist",
		StateDir:              "/var/lib/multinet",
		DevInfoRoot:           devinfo.DefaultRoot,
		PodResourcesSocket:    "/var/lib/kubelet/pod-resources/kubelet.sock",
		MetricsAddress:        "127.0.0.1:9390",
		MaxInFlight:           DefaultMaxInFlight(runtime.NumCPU()),
		ReservedInFlight:      4,
		DelegateTimeout:       Duration{60 * time.Second},
		DelegateSlotTimeout:   Duration{10 * time.Second},
		TeardownGrace:         Duration{5 * time.Second},
		RequestTimeout:        Duration{110 * time.Second},
		ShimTimeout:           Duration{120 * time.Second},
		NADSyncWait:           Duration{10 * time.Second},
		RuntimeEndpoint:       "unix:///run/containerd/containerd.sock",
		ReapInterval:          Duration{time.Minute},
		ReapMinAge:            Duration{3 * time.Minute},
		IPAMReconcileInterval: Duration{5 * time.Minute},
		SystemNamespaces:      []string{"kube-system"},
		APIQPS:                20,
		APIBurst:              40,
	}
}

// LoadConfig reads the config file at path (YAML or JSON; "" for none) over
// Defaults. Errors: unreadable file, unknown or malformed field (named).
func LoadConfig(path string) (Config, error) {
	c := Defaults()
	if path == "" {
		return c, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("config file: %w", err)
	}
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return c, fmt.Errorf("config file %s: %w", path, err)
	}
	return c, nil
}

// Complete fills NodeName and DefaultNetwork.ConfDir and checks the
// configuration. Errors name the field.
func (c *Config) Complete() error {
	if c.NodeName == "" {
		c.NodeName = os.Getenv("NODE_NAME")
	}
	if c.NodeName == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("nodeName: not set and no host name: %w", err)
		}
		c.NodeName = strings.ToLower(h)
	}
	if c.CNIConfDir == "" { // ResolveRuntimeCNI not called
		c.CNIConfDir = DefaultCNIConfDir
	}
	if c.DefaultNetwork.ConfDir == "" {
		c.DefaultNetwork.ConfDir = c.CNIConfDir
	}
	return errors.Join(slices.Concat(c.checkNetworks(), c.checkPolicy(), c.checkPaths(), c.checkIPAM(), c.checkTimeouts())...)
}

// checkNetworks checks defaultNetwork, defaultNetworks and auxiliaryChain.
func (c *Config) checkNetworks() []error {
	var errs []error
	set := 0
	for _, v := range []string{c.DefaultNetwork.NAD, c.DefaultNetwork.File, c.DefaultNetwork.Name} {
		if v != "" {
			set++
		}
	}
	if set > 1 {
		errs = append(errs, errors.New("defaultNetwork: set at most one of nad, file, name"))
	}
	if n := c.DefaultNetwork.NAD; n != "" {
		if ns, name, ok := strings.Cut(n, "/"); !ok || ns == "" || name == "" {
			errs = append(errs, fmt.Errorf("defaultNetwork.nad %q: want namespace/name", n))
		}
	}
	if c.DefaultNetwork.File != "" && filepath.Clean(c.DefaultNetwork.File) == filepath.Join(c.CNIConfDir, c.ConfFileName) {
		errs = append(errs, fmt.Errorf("defaultNetwork.file %q is multinet's own config file", c.DefaultNetwork.File))
	}
	if _, err := podnetworks.ParseDefaultNetworks(c.DefaultNetworks); err != nil {
		errs = append(errs, err)
	}
	if c.AuxiliaryChain != "" {
		if err := netconf.ValidateNetworkName(c.AuxiliaryChain); err != nil {
			errs = append(errs, fmt.Errorf("auxiliaryChain: %w", err))
		}
	}
	return errs
}

// checkPolicy checks (and normalizes) undeclaredCapabilities,
// maxSelectionElements and systemNamespaces.
func (c *Config) checkPolicy() []error {
	var errs []error
	if u, err := podnetworks.ParseUndeclaredCapabilities(c.UndeclaredCapabilities); err != nil {
		errs = append(errs, err)
	} else {
		c.UndeclaredCapabilities = string(u)
	}
	if c.MaxSelectionElements < 0 {
		errs = append(errs, fmt.Errorf("maxSelectionElements %d: must be positive (0 or unset: %d)", c.MaxSelectionElements, podnetworks.DefaultMaxSelectionElements))
	}
	for i, ns := range c.SystemNamespaces {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("systemNamespaces[%d] %q: not a namespace name: %s", i, ns, strings.Join(msgs, "; ")))
		}
	}
	return errs
}

// checkPaths checks (and completes) nodeRoot, delegateCgroup, socketPath,
// networkPolicy, recordSync, confFileName and stateDir.
func (c *Config) checkPaths() []error {
	var errs []error
	if !filepath.IsAbs(c.NodeRoot) {
		errs = append(errs, fmt.Errorf("nodeRoot %q: want an absolute path", c.NodeRoot))
	}
	if c.DelegateCgroup == "" && filepath.Clean(c.NodeRoot) != "/" {
		c.DelegateCgroup = "/"
	}
	if g := c.DelegateCgroup; g != "" && g != "none" && !filepath.IsAbs(g) {
		errs = append(errs, fmt.Errorf("delegateCgroup %q: want an absolute cgroup path or none", g))
	}
	if !filepath.IsAbs(c.SocketPath) {
		errs = append(errs, fmt.Errorf("socketPath %q: want an absolute path", c.SocketPath))
	}
	switch c.NetworkPolicy {
	case "":
		c.NetworkPolicy = NetworkPolicyAuto
	case NetworkPolicyAuto, NetworkPolicyOn, NetworkPolicyOff:
	default:
		errs = append(errs, fmt.Errorf("networkPolicy %q: want auto, on or off", c.NetworkPolicy))
	}
	if mode, err := state.ParseSyncMode(c.RecordSync); err != nil {
		errs = append(errs, fmt.Errorf("recordSync: %w", err))
	} else {
		c.RecordSync = string(mode)
	}
	if c.ConfFileName == "" || strings.ContainsRune(c.ConfFileName, '/') || !strings.HasSuffix(c.ConfFileName, ".conflist") {
		errs = append(errs, fmt.Errorf("confFileName %q: want a file name ending in .conflist", c.ConfFileName))
	}
	if c.StateDir == "" {
		errs = append(errs, errors.New("stateDir: empty"))
	}
	return errs
}

// checkIPAM checks (and completes) multinet-ipam's fields: its socket,
// reconcile interval and allocation limits.
func (c *Config) checkIPAM() []error {
	var errs []error
	if c.IPAMSocketPath == "" {
		c.IPAMSocketPath = filepath.Join(filepath.Dir(c.SocketPath), "ipam.sock")
	}
	if p := c.IPAMSocketPath; p != IPAMOff && (!filepath.IsAbs(p) || filepath.Clean(p) == filepath.Clean(c.SocketPath)) {
		errs = append(errs, fmt.Errorf("ipamSocketPath %q: want an absolute path other than socketPath, or %q", p, IPAMOff))
	}
	if c.IPAMReconcileInterval.Duration < 0 {
		errs = append(errs, fmt.Errorf("ipamReconcileInterval %s: want 0 (off) or a positive duration", c.IPAMReconcileInterval))
	}
	if c.IPAMMaxAllocationsPerNamespace == nil {
		n := ipam.DefaultMaxAllocationsPerNamespace
		c.IPAMMaxAllocationsPerNamespace = &n
	}
	if *c.IPAMMaxAllocationsPerNamespace < 0 {
		errs = append(errs, fmt.Errorf("ipamMaxAllocationsPerNamespace %d: want 0 (no limit) or more", *c.IPAMMaxAllocationsPerNamespace))
	}
	for ns, n := range c.IPAMNamespaceMaxAllocations {
		if n < 0 {
			errs = append(errs, fmt.Errorf("ipamNamespaceMaxAllocations[%s] %d: want 0 (no limit) or more", ns, n))
		}
	}
	if err := c.IPAMTenancy().Check(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// checkTimeouts checks the in-flight limits, timeouts and intervals, and
// that they fit together (requestTimeout within shimTimeout, reapMinAge
// past shimTimeout).
func (c *Config) checkTimeouts() []error {
	var errs []error
	if c.MaxInFlight < 1 {
		errs = append(errs, fmt.Errorf("maxInFlight %d: want at least 1", c.MaxInFlight))
	}
	if c.ReservedInFlight < 1 {
		errs = append(errs, fmt.Errorf("reservedInFlight %d: want at least 1 (DEL, CHECK, GC and STATUS must run while ADDs hang)", c.ReservedInFlight))
	}
	if c.DelegateTimeout.Duration <= 0 || c.RequestTimeout.Duration <= 0 || c.ShimTimeout.Duration <= 0 {
		errs = append(errs, errors.New("delegateTimeout, requestTimeout, shimTimeout: want positive durations"))
	}
	if c.DelegateSlotTimeout.Duration <= 0 || c.TeardownGrace.Duration <= 0 {
		errs = append(errs, errors.New("delegateSlotTimeout, teardownGrace: want positive durations"))
	}
	if c.NADSyncWait.Duration <= 0 {
		errs = append(errs, fmt.Errorf("nadSyncWait %s: want a positive duration", c.NADSyncWait))
	}
	if c.ReapInterval.Duration < 0 {
		errs = append(errs, fmt.Errorf("reapInterval %s: want 0 (off) or a positive duration", c.ReapInterval))
	}
	if c.ReapInterval.Duration > 0 && c.RuntimeEndpoint != "" && c.ReapMinAge.Duration <= c.ShimTimeout.Duration {
		errs = append(errs, fmt.Errorf("reapMinAge %s: must exceed shimTimeout %s (a sandbox whose ADD is still running is not listed by the runtime yet)", c.ReapMinAge, c.ShimTimeout))
	}
	if c.RequestTimeout.Duration > c.ShimTimeout.Duration {
		errs = append(errs, fmt.Errorf("requestTimeout %s: must not exceed shimTimeout %s (the shim would give up first)", c.RequestTimeout, c.ShimTimeout))
	}
	return errs
}

// DefaultNetworkElements returns DefaultNetworks as the engine takes them
// (attach.Options.DefaultNetworks), in order. Call it after Complete
// succeeded.
func (c *Config) DefaultNetworkElements() []selection.Element {
	out, _ := podnetworks.ParseDefaultNetworks(c.DefaultNetworks) // checked by Complete
	if len(out) == 0 {
		return nil
	}
	return out
}

// IPAMTenancy is multinet-ipam's pool and limit rules of this
// configuration (internal/ipam Tenancy): the admin namespaces are
// globalNamespaces, systemNamespaces, kube-system and multinet-system.
func (c *Config) IPAMTenancy() *ipam.Tenancy {
	admin := slices.Concat(c.GlobalNamespaces, c.SystemNamespaces, []string{"kube-system", "multinet-system"})
	slices.Sort(admin)
	t := &ipam.Tenancy{
		AdminNamespaces: slices.Compact(admin),
		SharedPools:     c.IPAMSharedPools,
		NamespaceMax:    c.IPAMNamespaceMaxAllocations,
	}
	if c.IPAMMaxAllocationsPerNamespace != nil {
		t.MaxPerNamespace = *c.IPAMMaxAllocationsPerNamespace
	} else {
		t.MaxPerNamespace = ipam.DefaultMaxAllocationsPerNamespace
	}
	return t
}
