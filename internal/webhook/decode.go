package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
)

// isKind reports whether the request is about group/kind (any version: the
// configurations use matchPolicy Equivalent) and not a subresource.
func isKind(req admission.Request, group, kind string) bool {
	return req.Kind.Group == group && req.Kind.Kind == kind && req.SubResource == ""
}

func isPod(req admission.Request) bool { return isKind(req, "", "Pod") }

func isNAD(req admission.Request) bool {
	return isKind(req, nadv1.GroupName, nadv1.NetworkAttachmentDefinitionKind)
}

// decodeObject decodes raw (the request's object or oldObject, JSON) into
// out. what names the object for the error ("object", "oldObject").
func decodeObject(raw []byte, out any, what string) error {
	if t := bytes.TrimSpace(raw); len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return fmt.Errorf("admission request has no %s", what)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("decoding admission request %s: %w", what, err)
	}
	return nil
}

// decodePods decodes the request's pod and, on UPDATE, its old pod (else nil).
func decodePods(req admission.Request) (pod, old *corev1.Pod, err error) {
	pod = new(corev1.Pod)
	if err := decodeObject(req.Object.Raw, pod, "object"); err != nil {
		return nil, nil, err
	}
	if req.Operation == admissionv1.Update {
		old = new(corev1.Pod)
		if err := decodeObject(req.OldObject.Raw, old, "oldObject"); err != nil {
			return nil, nil, err
		}
	}
	return pod, old, nil
}

// podNamespace is the pod's namespace: metadata.namespace, which is often
// empty on CREATE, else the request's.
func podNamespace(pod *corev1.Pod, req admission.Request) string {
	if pod.Namespace != "" {
		return pod.Namespace
	}
	return req.Namespace
}

// badRequest is the response to a request the handler cannot read.
func badRequest(err error) admission.Response {
	return admission.Errored(http.StatusBadRequest, err)
}

// errNotSynced is returned while the NAD cache has not synced (HTTP 503).
var errNotSynced = errors.New("NetworkAttachmentDefinition cache not synced yet")

// checkSynced returns errNotSynced until Options.Synced reports true.
func (w *Webhooks) checkSynced() error {
	if w.o.Synced != nil && !w.o.Synced() {
		return errNotSynced
	}
	return nil
}

// respond turns an error into a 503 for errNotSynced, or an internal
// error (500).
func respond(err error) admission.Response {
	if errors.Is(err, errNotSynced) {
		return admission.Errored(http.StatusServiceUnavailable, err)
	}
	return admission.Errored(http.StatusInternalServerError, err)
}
