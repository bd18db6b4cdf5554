package webhook

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	dpconfig "github.com/multinet/multinet/pkg/deviceplugin/config"
	"github.com/multinet/multinet/pkg/selection"
)

// selected is one network a pod selects.
type selected struct {
	// annotation is selection.NetworksAnnotation or
	// selection.DefaultNetworkAnnotation.
	annotation string
	// index is the element's position in the networks annotation; -1 for
	// the default-network override.
	index int
	elem  selection.Element
}

// where names the selecting element for messages, e.g.
// `metadata.annotations["k8s.v1.cni.cncf.io/networks"] element 1`.
func (s selected) where() string {
	if s.index < 0 {
		return annotationField(s.annotation)
	}
	return annotationField(s.annotation) + " element " + strconv.Itoa(s.index)
}

// selectionAnnotations returns the pod's networks and default-network
// annotations ("" when absent).
func selectionAnnotations(pod *corev1.Pod) (networks, defaultNetwork string) {
	return pod.Annotations[selection.NetworksAnnotation], pod.Annotations[selection.DefaultNetworkAnnotation]
}

// parseSelection parses the pod's selection annotations (spec §4.1, and the
// default-network override), namespaces defaulting to ns. Errors are
// denials that name the annotation and carry pkg/selection's field-precise
// message.
func parseSelection(pod *corev1.Pod, ns string) ([]selected, error) {
	networks, defNet := selectionAnnotations(pod)
	var out []selected
	var problems []string
	if _, ok := pod.Annotations[selection.DefaultNetworkAnnotation]; ok {
		e, err := selection.ParseDefaultNetwork(defNet, ns)
		if err != nil {
			problems = append(problems, annotationField(selection.DefaultNetworkAnnotation)+": "+err.Error())
		} else {
			out = append(out, selected{annotation: selection.DefaultNetworkAnnotation, index: -1, elem: *e})
		}
	}
	elems, err := selection.Parse(networks, ns)
	if err != nil {
		problems = append(problems, annotationField(selection.NetworksAnnotation)+": "+err.Error())
	}
	for i, e := range elems {
		out = append(out, selected{annotation: selection.NetworksAnnotation, index: i, elem: e})
	}
	if len(problems) > 0 {
		return nil, denyf("%s", strings.Join(problems, "; "))
	}
	return out, nil
}

// allowedSelection parses the pod's selection (namespace defaulting as
// podNamespace says) and enforces namespace isolation; errors are denials.
func (w *Webhooks) allowedSelection(pod *corev1.Pod, req admission.Request) ([]selected, error) {
	ns := podNamespace(pod, req)
	sel, err := parseSelection(pod, ns)
	if err != nil {
		return nil, err
	}
	if err := w.checkIsolation(ns, sel); err != nil {
		return nil, err
	}
	return sel, nil
}

// checkIsolation enforces the namespace isolation policy (spec §7.4) on
// every selected network, the default-network override included. The error
// is a denial listing each forbidden selection.
func (w *Webhooks) checkIsolation(ns string, sel []selected) error {
	var problems []string
	for _, s := range sel {
		if err := w.o.Isolation.Check(ns, s.elem); err != nil {
			problems = append(problems, s.where()+": "+err.Error())
		}
	}
	if len(problems) > 0 {
		return denyf("%s", strings.Join(problems, "; "))
	}
	return nil
}

// demand is what a pod's selection needs of extended resources.
type demand struct {
	// counts[resource] is the number of attachments to NADs with that
	// resource (the same NAD twice counts twice).
	counts map[string]int64
	// order lists the resources in the order they were first selected.
	order []string
	// missing lists the NADs not found, "namespace/name (where)", once each.
	missing []string
}

// maxMissingLookups is how many distinct missing NADs demand looks up
// before it stops: each miss may cost a live GET (Options.LiveNAD), and one
// missing NAD already denies the pod.
const maxMissingLookups = 8

// demand looks every selected NAD up, each distinct one once (a selection
// may name the same NAD thousands of times). A NAD whose resourceName
// annotation is malformed gives a denial naming the NAD and the annotation;
// a lookup error other than NotFound an internal error. After
// maxMissingLookups distinct missing NADs the remaining selections are not
// looked up, and the missing list says so.
func (w *Webhooks) demand(ctx context.Context, sel []selected) (demand, error) {
	d := demand{counts: map[string]int64{}}
	type lookup struct {
		rn      string // resource name, "" when none
		missing bool
	}
	seen := map[string]lookup{}
	for _, s := range sel {
		key := s.elem.Key()
		l, ok := seen[key]
		if !ok {
			if len(d.missing) >= maxMissingLookups {
				d.missing = append(d.missing, fmt.Sprintf("(lookups stopped after %d missing NADs)", maxMissingLookups))
				break
			}
			nad, err := w.nads.Get(ctx, s.elem.Namespace, s.elem.Name)
			switch {
			case apierrors.IsNotFound(err):
				l.missing = true
				d.missing = append(d.missing, fmt.Sprintf("%q (selected by %s)", key, s.where()))
			case err != nil:
				return demand{}, fmt.Errorf("looking up NetworkAttachmentDefinition %q: %w", key, err)
			default:
				rn, has, err := w.resourceName(nad)
				if err != nil {
					return demand{}, denyf("NetworkAttachmentDefinition %q (selected by %s): %v", key, s.where(), err)
				}
				if has {
					l.rn = rn
				}
			}
			seen[key] = l
		}
		if l.missing || l.rn == "" {
			continue
		}
		if d.counts[l.rn] == 0 {
			d.order = append(d.order, l.rn)
		}
		d.counts[l.rn]++
	}
	return d, nil
}

// missingError is the denial for NADs that do not exist (spec 001 slide 5:
// "If object not found, fail with error").
func (d demand) missingError() error {
	if len(d.missing) == 0 {
		return nil
	}
	noun := "NetworkAttachmentDefinition"
	if len(d.missing) > 1 {
		noun += "s"
	}
	return denyf("%s not found: %s", noun, strings.Join(d.missing, ", "))
}

// resourceName returns the NAD's resource name from the first configured
// annotation present. ok is false when none is present. A present value must
// be an extended resource name "vendor-domain/type"; the error names the
// annotation.
func (w *Webhooks) resourceName(nad *nadv1.NetworkAttachmentDefinition) (name string, ok bool, err error) {
	for _, k := range w.o.ResourceNameAnnotations {
		v, present := nad.Annotations[k]
		if !present {
			continue
		}
		if err := checkResourceName(k, v); err != nil {
			return "", false, err
		}
		return v, true, nil
	}
	return "", false, nil
}

// checkResourceName checks the value v of resource name annotation key: an
// extended resource name "vendor-domain/type" as kubelet requires of device
// plugins (spec 002). The error names the annotation.
func checkResourceName(key, v string) error {
	if err := dpconfig.ValidateResourceName(v); err != nil {
		return fmt.Errorf("%s: %w", annotationField(key), err)
	}
	return nil
}
