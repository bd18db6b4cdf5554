package webhook

import (
	"context"
	"net/http"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
	"github.com/multinet/multinet/pkg/spec/selection"
)

// ValidatePods validates the network selection of a Pod on CREATE, and on
// UPDATE when the k8s.v1.cni.cncf.io/networks or
// v1.multus-cni.io/default-network annotation changed (hot-plug: the same
// rules apply); every other request, and an UPDATE that leaves both
// annotations as they were, is allowed at once.
//
// Denied (403), with the message multinetd's ADD error and Event would
// carry (podnetworks.Check: docs/validation.md lists the cases): a
// malformed annotation (spec §4.1; rejected, not ignored: docs/decisions/selection.md), a
// selection Options.Policy's isolation forbids (§7.4), a missing or
// unusable NAD, a key no plugin is capable of, colliding interface names,
// cni-args that cannot merge, …; on UPDATE, also a selection that needs
// more of a device resource than the pod's containers request (a pod's
// resources cannot change after creation, so the added attachments could
// never get their devices), and what multinetd cannot hot-plug into a
// running pod (podnetworks.Verdict.HotPlugProblems: an added element whose
// NAD names a device resource, an element with "default-route" added,
// removed or changed).
//
// 400 for an unreadable object; 503 before the NAD cache synced, and when a
// NAD lookup fails unless Options.OnLookupFailure admits.
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
	if !selects(pod) {
		return admission.Allowed("no network selection")
	}
	if err := w.checkSynced(); err != nil {
		return respond(err)
	}
	v, resp := w.check(ctx, pod, req)
	if resp != nil {
		return *resp
	}
	if old != nil {
		// Hot-plug (docs/hotplug.md): no device network added, no
		// "default-route" element added or removed.
		oldElements, _ := selection.Parse(old.Annotations[selection.NetworksAnnotation], podNamespace(old, req))
		problems := append(v.DeviceProblems(pod), v.HotPlugProblems(oldElements)...)
		if err := (&podnetworks.Error{Problems: problems}); len(err.Problems) > 0 {
			return admission.Denied(err.Error())
		}
	}
	allowed := admission.Allowed("network selection valid")
	allowed.Warnings = undeclaredWarnings(v)
	return allowed
}

// ValidateNADs validates a NetworkAttachmentDefinition on CREATE and UPDATE
// with podnetworks.CheckNAD, the rules kubectl multinet lint applies to a
// NAD; every other request is allowed. On UPDATE an error the old object
// already had is not reported again, so an object stored before this
// webhook existed can still get unrelated updates (finalizers, labels).
//
// Denied (403), each error "field: message" (joined by "; "):
//   - spec.config that is not empty and not a usable CNI config or config
//     list (multi-net spec §3.2, §3.4.1): "spec.config: field
//     plugins[1].type: …";
//   - a resource name annotation (Options.ResourceNameAnnotations) that is
//     not an extended resource name "vendor-domain/type";
//   - a metadata.name that is not a DNS-1123 subdomain (§3.3);
//   - a plugin type or host-reaching key the NAD trust policy
//     (Options.Policy.NADTrust, docs/nad-trust.md) does not allow in the
//     NAD's namespace, naming the key, the plugin and the rule:
//     "spec.config: key "device" ("eth0") of plugin "host-device" names a
//     node object (…): NAD trust rule "tenants" of namespace "team-a" does
//     not allow it".
//
// 400 for an unreadable object; 503 when the namespace's labels cannot be
// read (the trust rule is not known).
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
	if nad.Namespace == "" {
		nad.Namespace = req.Namespace
	}
	if nad.Name == "" {
		nad.Name = req.Name
	}
	var problems []string
	var known map[string]bool // the old object's errors, not reported again
	if old != nil {
		known = map[string]bool{}
		if old.Namespace == "" {
			old.Namespace = nad.Namespace
		}
		for _, f := range podnetworks.CheckNAD(old, w.o.ResourceNameAnnotations).Errors {
			known[f.String()] = true
		}
	}
	findings := podnetworks.CheckNAD(nad, w.o.ResourceNameAnnotations).Errors
	trust, resp := w.checkTrust(ctx, nad, old, known)
	if resp != nil {
		return *resp
	}
	for _, f := range append(findings, trust...) {
		if msg := f.String(); !known[msg] {
			problems = append(problems, msg)
		}
	}
	if len(problems) > 0 {
		return admission.Denied(strings.Join(problems, "; "))
	}
	return admission.Allowed("NetworkAttachmentDefinition valid")
}

// checkTrust returns the NAD trust policy's findings on nad (errors on
// spec.config); on UPDATE, old's own violations go into known, so that a NAD
// stored before the policy can still get unrelated updates (multinetd
// refuses its ADDs). resp is the 503 answer when the namespace's labels
// cannot be read.
func (w *Webhooks) checkTrust(ctx context.Context, nad, old *nadv1.NetworkAttachmentDefinition, known map[string]bool) ([]podnetworks.Finding, *admission.Response) {
	if w.o.NADTrust.Policy == nil {
		return nil, nil
	}
	if old != nil {
		fs, err := podnetworks.CheckNADTrustFindings(ctx, old, w.o.Policy)
		if err != nil {
			resp := admission.Errored(http.StatusServiceUnavailable, err)
			return nil, &resp
		}
		for _, f := range fs {
			known[f.String()] = true
		}
	}
	fs, err := podnetworks.CheckNADTrustFindings(ctx, nad, w.o.Policy)
	if err != nil {
		resp := admission.Errored(http.StatusServiceUnavailable, err)
		return nil, &resp
	}
	return fs, nil
}
