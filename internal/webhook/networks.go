package webhook

import (
	"context"
	"errors"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/multinet/multinet/pkg/spec/podnetworks"
	"github.com/multinet/multinet/pkg/spec/selection"
)

// selectionAnnotations returns the pod's networks and default-network
// annotations ("" when absent).
func selectionAnnotations(pod *corev1.Pod) (networks, defaultNetwork string) {
	return pod.Annotations[selection.NetworksAnnotation], pod.Annotations[selection.DefaultNetworkAnnotation]
}

// selects reports whether pod has a selection annotation.
func selects(pod *corev1.Pod) bool {
	_, n := pod.Annotations[selection.NetworksAnnotation]
	_, d := pod.Annotations[selection.DefaultNetworkAnnotation]
	return n || d
}

// undeclaredWarnings are the admission warnings of a valid verdict whose
// attachments hand keys over without a declaring plugin
// (undeclaredCapabilities: multus): one per attachment, naming the NAD and
// the missing capability; nil when there are none.
func undeclaredWarnings(v *podnetworks.Verdict) []string {
	var out []string
	for _, u := range v.Undeclared() {
		out = append(out, "multinet: "+u.Message())
	}
	return out
}

// check decides the pod's network selection with podnetworks.Check, the
// rules multinetd applies at ADD and lint offline, against the NAD lookup
// (cache, then one live GET) and Options.Policy; the pod's namespace
// defaults as podNamespace says. On a verdict with problems, resp is the
// denial whose message is the verdict's error, the message multinetd's ADD
// error and Event would carry. When a lookup failed (the API server did not
// answer), resp follows Options.OnLookupFailure. resp is nil when the
// selection is valid.
func (w *Webhooks) check(ctx context.Context, pod *corev1.Pod, req admission.Request) (*podnetworks.Verdict, *admission.Response) {
	v, err := podnetworks.Check(ctx,
		podnetworks.Pod{Namespace: podNamespace(pod, req), Annotations: pod.Annotations, HostNetwork: pod.Spec.HostNetwork},
		podnetworks.Options{Policy: w.o.Policy, NADs: w.nads, ResourceNameKeys: w.o.ResourceNameAnnotations})
	var le *podnetworks.LookupError
	switch {
	case errors.As(err, &le) && w.o.OnLookupFailure == AdmitOnLookupFailure:
		resp := admission.Allowed("a NetworkAttachmentDefinition lookup failed; admitted, multinetd checks the selection at ADD")
		resp.Warnings = []string{"multinet: " + err.Error() + "; the pod was admitted without checking its networks: multinetd checks them when it attaches the pod, and reports a problem as an Event"}
		return nil, &resp
	case err != nil:
		resp := admission.Errored(http.StatusServiceUnavailable, err)
		return nil, &resp
	}
	if err := v.Err(); err != nil {
		resp := admission.Denied(err.Error())
		return v, &resp
	}
	return v, nil
}
