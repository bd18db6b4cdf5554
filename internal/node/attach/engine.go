// Package attach performs CNI ADD, DEL, CHECK, GC and STATUS for one pod
// sandbox: it decides the pod's attachments (the cluster-wide default network
// first, then every network selection element of the pod, multi-net spec v1.3
// §4, §6, §7), runs each delegate through libcni, records what it did in the
// state store before answering, and hands the pod's network-status
// annotation (§5) to its publisher (Options.Status, internal/node/netstatus).
//
// Engine takes requests decoded once at the server's edge (internal/node/cnirequest;
// internal/node/cniserver.Decoding adapts it to the server); one planner (plan.go)
// decides the attachments. It needs the API server only on ADD (pod and
// NetworkAttachmentDefinitions from informers); DEL, CHECK and GC work from
// the attachment records, written before ADD answers. Hot-plug (internal/node/hotplug)
// is a client through HotPlugPort.
package attach

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/internal/devices/draclaims"
	"github.com/multinet/multinet/internal/node/keyedmutex"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/pkg/spec/devinfo"
	"github.com/multinet/multinet/pkg/spec/netconf"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
)

// Pods finds the pod a CNI request is for (kube.PodCache).
type Pods interface {
	// Get returns the pod namespace/name whose UID is uid (uid may be empty).
	Get(ctx context.Context, namespace, name, uid string) (*corev1.Pod, error)
}

// NADs reads NetworkAttachmentDefinitions within ctx (multinetd's
// nadlookup.Lookup: the informer's cache once it has synced, one live GET
// when the cache does not have the NAD). Get returns an error for which
// apierrors.IsNotFound is true when the object does not exist; any other
// error (the cache not synced in time, the API server failing) makes ADD
// answer CNI error 11 (try again later).
type NADs interface {
	Get(ctx context.Context, namespace, name string) (*nadv1.NetworkAttachmentDefinition, error)
}

// StatusPublisher publishes the network-status a record carries
// (netstatus.Publisher). The engine calls it holding the container's lock.
type StatusPublisher interface {
	// Publish writes rec's pending network-status after rec was saved.
	Publish(ctx context.Context, pod *corev1.Pod, rec *state.Record)
	// Withdraw marks rec's pending network-status withdrawn (rec may be
	// nil) before its attachments are torn down, and ends its retries.
	Withdraw(containerID string, rec *state.Record)
}

// EventSink posts Events on pods (kube.Events).
type EventSink interface {
	Normal(obj runtime.Object, reason, format string, args ...any)
	Warning(obj runtime.Object, reason, format string, args ...any)
}

// Devices tells which device IDs kubelet allocated to a pod, per resource name
// (podresources.Client).
type Devices interface {
	DeviceIDs(ctx context.Context, namespace, name string) (map[string][]string, error)
}

// ClaimDevices finds the devices of DRA networks and writes their status
// to the ResourceClaims (package draclaims: *draclaims.Client).
type ClaimDevices interface {
	// Device is the device pod's claim podClaim holds for resourceName.
	Device(ctx context.Context, pod *corev1.Pod, podClaim, resourceName string) (*draclaims.Device, error)
	// PodDevices is, per resource of want, the network devices the pod's
	// claims other than those in skip hold, and its extended-resource
	// claim's, sorted by device ID.
	PodDevices(ctx context.Context, pod *corev1.Pod, want, skip map[string]bool) (map[string][]*draclaims.Device, error)
	// SetReady, SetFailed and Clear write the device's status.devices entry.
	SetReady(ctx context.Context, d *draclaims.Device, nd *resourceapi.NetworkDeviceData, msg string) error
	SetFailed(ctx context.Context, d *draclaims.Device, msg string) error
	Clear(ctx context.Context, d *draclaims.Device) error
}

// Observer receives the duration of every delegate invocation (metrics).
type Observer interface {
	// DelegateDone is called after each delegate operation: command is ADD,
	// DEL, CHECK, GC or STATUS; plugin the type of the list's first plugin;
	// err nil on success.
	DelegateDone(command, plugin string, d time.Duration, err error)
}

// DefaultNetworkFunc returns the cluster-wide default network's config list
// and its name for records and network-status (spec §6), or an error when
// it is not available (then ADD fails and STATUS reports not ready).
type DefaultNetworkFunc func() (*libcni.NetworkConfigList, string, error)

// AuxiliaryChainFunc returns the auxiliary chain, a config list run for
// every pod after its attachments, in cniVersion (the default network's);
// nil and no error when there is none.
type AuxiliaryChainFunc func(cniVersion string) (*libcni.NetworkConfigList, error)

// Options configure an Engine. Store, DefaultNetwork and NADs are required.
type Options struct {
	// Store keeps the attachment records.
	Store *state.Store
	// DefaultNetwork gives the default network's config (spec §6).
	DefaultNetwork DefaultNetworkFunc
	// AuxiliaryChain gives the chain run for every pod after its
	// attachments, on the runtime's interface, chained onto the default
	// network's result (multinetd's auxiliaryChain). May be nil.
	AuxiliaryChain AuxiliaryChainFunc
	// Pods and NADs are read on ADD. Pods may be nil: then every ADD attaches
	// the default network only.
	Pods Pods
	NADs NADs
	// Resolver turns a NAD into its config list (spec §3.4.1); when nil a
	// Resolver without an on-disk source is used.
	Resolver *netconf.Resolver
	// Policy is the namespace isolation policy (spec §7.4; it does not
	// apply to DefaultNetworks), the DefaultNetworks attached to every pod
	// after the default network and before the pod's own selection
	// (multinetd's defaultNetworks, Multus's; on generated interfaces net1,
	// net2, … that the pod's networks then skip; not for pods of
	// SystemNamespaces, nor for an ADD that names no pod; a NAD with a
	// device resource name fails the ADD), and the SystemNamespaces (their
	// own selection still applies, as in Multus). podnetworks.Check applies
	// it, as the webhook and lint do.
	podnetworks.Policy
	// Status publishes network-status (netstatus.Publisher, over Locks);
	// nil disables it.
	Status StatusPublisher
	// Locks are the per-container locks (spec §7.3), shared with the
	// network-status publisher and hot-plug; nil: the engine's own.
	Locks *keyedmutex.Map
	// Sandboxes is told each pod's sandbox (hotplug.Sandboxes); may be nil.
	Sandboxes SandboxWatcher
	// Policy puts each sandbox's MultiNetworkPolicy rules in place before
	// ADD answers and removes them on DEL and GC (policysync.Controller);
	// nil: no network policy.
	NetworkPolicy PolicyEnforcer
	// Events posts pod Events; nil disables them.
	Events EventSink
	// Devices looks up allocated devices (resourceName networks); nil makes
	// an attachment to such a network fail.
	Devices Devices
	// Claims finds the devices of DRA networks in the pods' ResourceClaims
	// and writes their status back (KEP-4817); nil makes an attachment to
	// such a network fail.
	Claims ClaimDevices
	// DevInfo is where device-info files live (device-info spec §4).
	DevInfo devinfo.Store
	// ResourceNameKeys are the NAD annotations naming a device resource, in
	// order of preference. Default: ResourceNameAnnotation, then the legacy key.
	ResourceNameKeys []string
	// BinDirs are the delegates' CNI_PATH. When empty, the runtime's CNI_PATH
	// of each request is used.
	BinDirs []string
	// CacheDir is libcni's result cache (prevResult for CHECK and DEL, GC's
	// list of attachments). Default: <Store dir>/cni-cache.
	CacheDir string
	// DelegateTimeout bounds one delegate invocation (one ADD/DEL/CHECK of a
	// config list). Default 60 s.
	DelegateTimeout time.Duration
	// DelegateSlotTimeout is how long one delegate process may run holding
	// its request's concurrency slot (cniserver); one that has not answered
	// by then gives it back until it answers, so that hung delegates do not
	// keep other pods from being attached. Default 10 s.
	DelegateSlotTimeout time.Duration
	// TeardownGrace is the time per attachment the teardown of a failed ADD
	// gets beyond the request's deadline: the teardown ends at the latest
	// TeardownGrace × attachments after it; what is not torn down by then
	// stays in the record for the runtime's DEL. Default 5 s.
	TeardownGrace time.Duration
	// DeviceWait is how long ADD waits for kubelet to report a pod's devices
	// through PodResources. Default 2 s.
	DeviceWait time.Duration
	// Exec replaces the plugin executor (tests); nil uses the real one.
	Exec invoke.Exec
	// Observer is told about delegate invocations; may be nil.
	Observer Observer
	// Ready reports why the daemon cannot serve ADD yet (informers not
	// synced), nil when it can; STATUS uses it. May be nil.
	Ready func() error
}

// Engine runs CNI operations for pod sandboxes. Create it with New; it is
// safe for concurrent use. One operation per container runs at a time
// (spec §7.3); operations on different containers run in parallel.
type Engine struct {
	opts  Options
	exec  invoke.Exec     // opts.Exec (or libcni's) behind guardedExec
	locks *keyedmutex.Map // Options.Locks

	planner planner // over opts (plan.go)

	cniMu    sync.Mutex
	cni      map[string]*libcni.CNIConfig // by CNI_PATH
	lastPath string                       // the last request's CNI_PATH, for Reap

	// remembered holds, by file path, the config list bytes this engine
	// last found in or wrote to the remembered-networks dir (networks.go),
	// so that an ADD of an unchanged network touches no file.
	remembered sync.Map
}

// New returns an Engine. Errors: a required option is missing.
func New(opts Options) (*Engine, error) {
	if opts.Store == nil {
		return nil, errors.New("attach: Options.Store is required")
	}
	if opts.DefaultNetwork == nil {
		return nil, errors.New("attach: Options.DefaultNetwork is required")
	}
	if opts.NADs == nil && opts.Pods != nil {
		return nil, errors.New("attach: Options.NADs is required with Options.Pods")
	}
	if opts.Resolver == nil {
		opts.Resolver = netconf.NewResolver(nil, 0)
	}
	if len(opts.ResourceNameKeys) == 0 {
		opts.ResourceNameKeys = []string{nadv1.ResourceNameAnnotation, nadv1.LegacyResourceNameAnnotation}
	}
	if opts.CacheDir == "" {
		opts.CacheDir = filepath.Join(opts.Store.Dir(), "cni-cache")
	}
	if opts.DelegateTimeout <= 0 {
		opts.DelegateTimeout = 60 * time.Second
	}
	if opts.DelegateSlotTimeout <= 0 {
		opts.DelegateSlotTimeout = 10 * time.Second
	}
	if opts.TeardownGrace <= 0 {
		opts.TeardownGrace = 5 * time.Second
	}
	if opts.DeviceWait <= 0 {
		opts.DeviceWait = 2 * time.Second
	}
	exec := opts.Exec
	if exec == nil { // what libcni uses without one
		exec = &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: os.Stderr}, PluginDecoder: version.PluginDecoder{}}
	}
	if opts.Locks == nil {
		opts.Locks = &keyedmutex.Map{}
	}
	e := &Engine{
		opts:  opts,
		locks: opts.Locks,
		exec:  &guardedExec{Exec: exec, slotTimeout: opts.DelegateSlotTimeout},
		cni:   map[string]*libcni.CNIConfig{},
	}
	e.planner = planner{opts: &e.opts}
	return e, nil
}

// cniFor returns the libcni runner for a request's CNI_PATH.
func (e *Engine) cniFor(reqPath string) *libcni.CNIConfig {
	dirs := e.opts.BinDirs
	key := strings.Join(dirs, ":")
	if len(dirs) == 0 {
		key = reqPath
		for _, d := range filepath.SplitList(reqPath) {
			if d != "" {
				dirs = append(dirs, d)
			}
		}
	}
	e.cniMu.Lock()
	defer e.cniMu.Unlock()
	if reqPath != "" {
		e.lastPath = reqPath
	}
	c, ok := e.cni[key]
	if !ok {
		c = libcni.NewCNIConfigWithCacheDir(dirs, e.opts.CacheDir, e.exec)
		e.cni[key] = c
	}
	return c
}
