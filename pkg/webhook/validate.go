package webhook

import (
	"context"
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/netconf"
)

// ValidatePods validates the selection annotations of a Pod on CREATE, and
// on UPDATE when the k8s.v1.cni.cncf.io/networks or
// v1.multus-cni.io/default-network annotation changed; every other request
// is allowed.
//
// Denied (403), with a message naming the annotation and pkg/selection's
// element and field:
//   - a malformed annotation (spec §4.1; DESIGN: rejected, not ignored);
//   - a selection that Options.Isolation forbids (spec §7.4), the
//     default-network override included;
//   - on UPDATE, a selection that needs more of a resource than the pod's
//     containers request: a pod's resources cannot change after creation,
//     so the added attachments could never get their devices. NADs that do
//     not exist (yet) are not counted on UPDATE.
//
// 400 for an unreadable object; 503 on UPDATE before the NAD cache synced.
func (w *Webhooks) ValidatePods(ctx context.Context, req admission.Request) admission.Response {
	if !isPod(req) || (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return admission.Allowed("not a pod CREATE or UPDATE")
	}
	pod, old, err := decodePods(req)
	if err != nil {
		return badRequest(err)
	}
	networks, defNet := selectionAnnotations(pod)
	if old != nil {
		oldNetworks, oldDefNet := selectionAnnotations(old)
		if networks == oldNetworks && defNet == oldDefNet {
			return admission.Allowed("network selection unchanged")
		}
	}
	sel, err := w.allowedSelection(pod, req)
	if err != nil {
		return respond(err)
	}
	if old != nil && len(sel) > 0 {
		if err := w.checkSynced(); err != nil {
			return respond(err)
		}
		if err := w.checkDevices(ctx, pod, sel); err != nil {
			return respond(err)
		}
	}
	return admission.Allowed("network selection valid")
}

// checkDevices denies a selection that needs more of a resource than the
// pod's app containers request.
func (w *Webhooks) checkDevices(ctx context.Context, pod *corev1.Pod, sel []selected) error {
	d, err := w.demand(ctx, sel)
	if err != nil {
		return err
	}
	var problems []string
	for _, rn := range d.order {
		have := podValue(pod, corev1.ResourceName(rn))
		if need := d.counts[rn]; have < need {
			problems = append(problems, fmt.Sprintf("the selected networks need %d of resource %q but the pod's containers request %d", need, rn, have))
		}
	}
	if len(problems) > 0 {
		return denyf("%s: %s; a pod's resources cannot change after creation, so recreate the pod with the new selection",
			annotationField(nadv1.NetworksAnnotation), strings.Join(problems, "; "))
	}
	return nil
}

// ValidateNADs validates a NetworkAttachmentDefinition on CREATE and UPDATE;
// every other request is allowed. On UPDATE only the fields that changed are
// checked, so an object stored before this webhook existed can still get
// unrelated updates (finalizers, labels).
//
// Denied (403):
//   - spec.config that is not empty and not a usable CNI config or config
//     list (multi-net spec §3.2, §3.4.1): pkg/netconf's *ConfigError message,
//     which names the field (e.g. "field plugins[1].type");
//   - a resource name annotation (Options.ResourceNameAnnotations) that is
//     not an extended resource name "vendor-domain/type".
//
// 400 for an unreadable object.
func (w *Webhooks) ValidateNADs(ctx context.Context, req admission.Request) admission.Response {
	if !isNAD(req) || (req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return admission.Allowed("not a NetworkAttachmentDefinition CREATE or UPDATE")
	}
	nad := new(nadv1.NetworkAttachmentDefinition)
	if err := decodeObject(req.Object.Raw, nad, "object"); err != nil {
		return badRequest(err)
	}
	var old *nadv1.NetworkAttachmentDefinition
	if req.Operation == admissionv1.Update {
		old = new(nadv1.NetworkAttachmentDefinition)
		if err := decodeObject(req.OldObject.Raw, old, "oldObject"); err != nil {
			return badRequest(err)
		}
	}
	var problems []string
	if nad.Spec.Config != "" && (old == nil || old.Spec.Config != nad.Spec.Config) {
		ns, name := nad.Namespace, nad.Name
		if ns == "" {
			ns = req.Namespace
		}
		if name == "" {
			name = req.Name
		}
		if name == "" {
			// metadata.generateName: the final name is not known yet; any
			// valid network name stands in for the §3.4.2 name injection.
			name = "generated"
		}
		if _, err := netconf.Resolve(ns, name, nad.Spec.Config, nil); err != nil {
			problems = append(problems, err.Error())
		}
	}
	for _, k := range w.o.ResourceNameAnnotations {
		v, ok := nad.Annotations[k]
		if !ok {
			continue
		}
		if old != nil {
			if ov, had := old.Annotations[k]; had && ov == v {
				continue
			}
		}
		if err := checkResourceName(k, v); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(problems) > 0 {
		return admission.Denied(strings.Join(problems, "; "))
	}
	return admission.Allowed("NetworkAttachmentDefinition valid")
}
