package kube

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// Event reasons multinetd uses on pods.
const (
	// ReasonAddedInterface (Normal): an attachment was made; the message names
	// the interface, the network and the IPs.
	ReasonAddedInterface = "AddedInterface"
	// ReasonAttachFailed (Warning): CNI ADD failed; the message names the
	// network, the plugin and the reason (spec §7.2).
	ReasonAttachFailed = "NetworkAttachFailed"
	// ReasonNetworkStatusFailed (Warning): the network-status PATCH of an ADD
	// failed after its retries; the pod's networks are up, and multinetd
	// keeps retrying in the background (ReasonNetworkStatusWritten when it
	// lands).
	ReasonNetworkStatusFailed = "NetworkStatusFailed"
	// ReasonNetworkStatusWritten (Normal): a network-status that failed at
	// ADD (ReasonNetworkStatusFailed) was written by a background retry; the
	// message says after how many.
	ReasonNetworkStatusWritten = "NetworkStatusWritten"
	// ReasonValueIgnored (Warning): ADD succeeded, but an optional value was
	// unusable and left out: a delegate result's DNS nameserver that is not
	// an IP address, a device-info file that cannot be read or whose version
	// cannot be used, a "default-route": [] whose attachment has no gateway.
	// The message names the network, the field and why.
	ReasonValueIgnored = "NetworkValueIgnored"
	// ReasonCorruptRecord (Warning): an attachment record could not be read
	// at ADD, DEL or GC. multinetd kept its bytes aside, tore down what the
	// record's readable part, libcni's cache and the API server name, and
	// the message says what was recovered and what could not be torn down
	// or known (then the operation fails and is retried).
	ReasonCorruptRecord = "CorruptAttachmentRecord"
	// ReasonStaleSandboxTeardownFailed (Warning): a former sandbox of the
	// pod is gone from the container runtime without a DEL reaching
	// multinetd, and tearing down its attachments failed; multinetd retries
	// at its next reap (multinetd's reapInterval).
	ReasonStaleSandboxTeardownFailed = "StaleSandboxTeardownFailed"
	// ReasonRemovedInterface (Normal): hot-plug tore down an attachment
	// whose network selection element left the pod's networks annotation;
	// the message names the interface and the network.
	ReasonRemovedInterface = "RemovedInterface"
	// ReasonHotPlugFailed (Warning): a change of the pod's networks
	// annotation was not applied, or not entirely: an element that cannot
	// be hot-plugged (refused until the annotation changes), or a delegate
	// or lookup that failed (rolled back, retried). The message names the
	// network, the interface and why.
	ReasonHotPlugFailed = "NetworkHotPlugFailed"
)

// Events posts Events on pods through client-go's broadcaster, which
// aggregates, rate-limits and sends them from its own goroutine: posting never
// waits for the API server, so Events stay off the CNI critical path.
type Events struct {
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
}

// NewEvents starts an event broadcaster that writes to client as component
// (e.g. "multinetd") on host; client is the typed core/v1 client
// (kubernetes.Interface.CoreV1() or corev1client.NewForConfig). Call
// Shutdown when done.
func NewEvents(ctx context.Context, client typedcorev1.EventsGetter, component, host string) *Events {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.Events("")})
	return &Events{
		broadcaster: b,
		recorder:    b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component, Host: host}),
	}
}

// Normal posts a Normal event on obj (usually a *corev1.Pod).
func (e *Events) Normal(obj runtime.Object, reason, format string, args ...any) {
	if e == nil || obj == nil {
		return
	}
	e.recorder.Eventf(obj, corev1.EventTypeNormal, reason, format, args...)
}

// Warning posts a Warning event on obj.
func (e *Events) Warning(obj runtime.Object, reason, format string, args ...any) {
	if e == nil || obj == nil {
		return
	}
	e.recorder.Eventf(obj, corev1.EventTypeWarning, reason, format, args...)
}

// Shutdown stops the broadcaster (pending events may be dropped).
func (e *Events) Shutdown() {
	if e != nil {
		e.broadcaster.Shutdown()
	}
}
