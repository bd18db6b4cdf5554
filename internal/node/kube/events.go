package kube

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/multinet/multinet/pkg/client/clientset/kubernetes/scheme"
	corev1client "github.com/multinet/multinet/pkg/client/clientset/kubernetes/typed/core/v1"
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
	// ReasonUndeclaredCapability (Warning): under multinetd's
	// undeclaredCapabilities: multus, a network selection element key
	// ("mac", "ips", …) whose capability no plugin of the NAD declares was
	// handed over as Multus hands it instead of failing the attachment (spec
	// §4.1.2.1.x.2); the message names the element, the NAD, the missing
	// capability and how the value was handed over.
	ReasonUndeclaredCapability = "UndeclaredCapability"
)

// Events posts Events on pods through client-go's broadcaster, which
// aggregates, rate-limits and sends them from its own goroutine: posting never
// waits for the API server, so Events stay off the CNI critical path.
type Events struct {
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
}

// NewEvents starts an event broadcaster that writes to client as component
// (e.g. "multinetd") on host; client is the typed core/v1 client of
// pkg/client/clientset/kubernetes (corev1client.NewForConfig), best one of
// its own, so that its rate limiter serves Events only. Call Shutdown when
// done.
func NewEvents(ctx context.Context, client corev1client.EventsGetter, component, host string) *Events {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&eventSink{ctx: ctx, client: client})
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

// eventSink writes the broadcaster's Events, each in its own namespace
// (record.EventSink; client-go's EventSinkImpl needs client-go's own typed
// client, whose scheme registers every API group).
type eventSink struct {
	ctx    context.Context
	client corev1client.EventsGetter
}

func (s *eventSink) Create(e *corev1.Event) (*corev1.Event, error) {
	return s.client.Events(e.Namespace).Create(s.ctx, e, metav1.CreateOptions{})
}

func (s *eventSink) Update(e *corev1.Event) (*corev1.Event, error) {
	return s.client.Events(e.Namespace).Update(s.ctx, e, metav1.UpdateOptions{})
}

// Patch applies the broadcaster's strategic merge patch (a repeated
// Event's count and last timestamp) to old.
func (s *eventSink) Patch(old *corev1.Event, data []byte) (*corev1.Event, error) {
	return s.client.Events(old.Namespace).Patch(s.ctx, old.Name, types.StrategicMergePatchType, data, metav1.PatchOptions{})
}
