package hotplug

import (
	"context"
	"errors"

	"github.com/containernetworking/cni/pkg/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/multinet/multinet/internal/node/cnirequest"
	"github.com/multinet/multinet/internal/node/keyedmutex"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/pkg/spec/netconf"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
	"github.com/multinet/multinet/pkg/spec/selection"
	"github.com/multinet/multinet/pkg/spec/status"
)

// Engine is what hot-plug needs of the CNI engine (attach.HotPlugPort):
// the planner's answers for added elements and the delegate ADD and DEL of
// one attachment of a sandbox. Errors are *types.Error where the engine's
// ADD would answer one.
type Engine interface {
	// CNIPath is the delegates' CNI_PATH for a sandbox whose record has
	// recorded (empty: the last request's). Errors: none is known yet.
	CNIPath(recorded string) (string, error)
	// ParseSelectionElements parses a networks annotation of a pod of
	// namespace as ADD does (the policy's limits applied).
	ParseSelectionElements(networks, namespace string) ([]selection.Element, error)
	// Check checks pod's network selection as ADD does, defaultIfName the
	// default network's interface.
	Check(ctx context.Context, pod *corev1.Pod, defaultIfName string) (*podnetworks.Verdict, error)
	// IfNamesBeside names the interfaces of elems added to rec's sandbox;
	// errs[i] is element i's naming problem.
	IfNamesBeside(rec *state.Record, elems []selection.Element, defaultIfName string) (names []string, errs []error)
	// Prepare readies planned attachment a of sandbox containerID: its
	// plugins are in cniPath, its device-info file (deviceInfoFile, ""
	// when none) is prepared, its network remembered for GC.
	Prepare(cniPath, containerID string, a netconf.Attachment) (prepared netconf.Attachment, deviceInfoFile string, err error)
	// AddAttachment runs the delegate ADD of a in req's sandbox.
	AddAttachment(ctx context.Context, req *cnirequest.Request, a *netconf.Attachment) (types.Result, error)
	// DelAttachment runs the delegate DEL of recorded attachment a in
	// req's sandbox, bounded by the engine's delegate timeout and teardown
	// grace even when ctx ends.
	DelAttachment(ctx context.Context, req *cnirequest.Request, a *state.Attachment) error
	// StatusEntry is a's network-status entry from its result res.
	StatusEntry(pod *corev1.Pod, a *netconf.Attachment, res types.Result, deviceInfoFile string) (status.NetworkStatus, error)
}

// Publisher publishes a record's pending network-status (netstatus.Publisher).
type Publisher interface {
	Publish(ctx context.Context, pod *corev1.Pod, rec *state.Record)
}

// PolicyEnforcer puts the MultiNetworkPolicy rules of a sandbox in place
// for its attachments as recorded, planned ones included
// (policysync.Controller, as the engine's attach.PolicyEnforcer); called
// holding the sandbox's lock, before the delegates of the added
// attachments run and again after them.
type PolicyEnforcer interface {
	Enforce(ctx context.Context, pod *corev1.Pod, rec *state.Record) error
}

// EventSink posts Events on pods (kube.Events).
type EventSink interface {
	Normal(obj runtime.Object, reason, format string, args ...any)
	Warning(obj runtime.Object, reason, format string, args ...any)
}

// Options configure a HotPlugger. Engine, Sandboxes, Store and Locks are
// required.
type Options struct {
	Engine Engine
	// Sandboxes is each pod's sandbox, kept by the engine's ADD and DEL
	// (attach.Options.Sandboxes).
	Sandboxes *Sandboxes
	// Store keeps the attachment records.
	Store *state.Store
	// Locks are the engine's per-container locks: a hot-plug holds its
	// sandbox's.
	Locks *keyedmutex.Map
	// Status publishes network-status after a change; nil: none.
	Status Publisher
	// NetworkPolicy puts the sandbox's rules in place after a change,
	// before its network-status is published; nil: none.
	NetworkPolicy PolicyEnforcer
	// Events posts the pod's Events; may be nil.
	Events EventSink
	// Observer is told about hot-plugs; may be nil.
	Observer Observer
}

// HotPlugger hot-plugs the networks of running pod sandboxes. Create it
// with New; it is safe for concurrent use.
type HotPlugger struct {
	opts Options
}

// New returns a HotPlugger. Errors: a required option is missing.
func New(opts Options) (*HotPlugger, error) {
	if opts.Engine == nil || opts.Sandboxes == nil || opts.Store == nil || opts.Locks == nil {
		return nil, errors.New("hotplug: Options.Engine, Sandboxes, Store and Locks are required")
	}
	return &HotPlugger{opts: opts}, nil
}

func (hp *HotPlugger) normalEvent(pod *corev1.Pod, reason, format string, args ...any) {
	if hp.opts.Events != nil && pod != nil {
		hp.opts.Events.Normal(pod, reason, format, args...)
	}
}

func (hp *HotPlugger) warningEvent(pod *corev1.Pod, reason, format string, args ...any) {
	if hp.opts.Events != nil && pod != nil {
		hp.opts.Events.Warning(pod, reason, format, args...)
	}
}

// Sandboxes is what hot-plug keeps per sandbox: each pod's sandbox (its
// newest complete attachment record, built from the store on first use)
// and what hot-plug has reported. The engine keeps it current: Attached
// after an ADD, Removed after a DEL or GC removed a record.
type Sandboxes struct {
	index sandboxIndex
	memo  hotplugMemo
}

// Attached notes rec (saved by ADD) as its pod's sandbox when it is
// complete and newer than the one known.
func (s *Sandboxes) Attached(rec *state.Record) { s.index.set(rec) }

// Removed drops what is kept of container id (its record was removed).
func (s *Sandboxes) Removed(id string) {
	s.index.forget(id)
	s.memo.forget(id)
}
