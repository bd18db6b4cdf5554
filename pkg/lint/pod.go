package lint

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/containernetworking/cni/libcni"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/netconf"
	"github.com/multinet/multinet/pkg/selection"
)

const (
	defaultNetworkAnnotation = selection.DefaultNetworkAnnotation
	// annotationDomain is the prefix of the spec's annotation keys.
	annotationDomain = "k8s.v1.cni.cncf.io/"
	// defaultIfName is the CNI_IFNAME container runtimes give the
	// cluster-wide default network (spec §6), which the daemon plans around.
	defaultIfName = "eth0"
)

// lintPod checks the annotations of a pod (or pod template) whose fields
// start with prefix ("" or e.g. "spec.template.") in namespace r.Namespace.
func (l *linter) lintPod(r *Result, prefix string, meta *metav1.ObjectMeta, spec *corev1.PodSpec) {
	field := func(key string) string { return prefix + "metadata.annotations[" + key + "]" }
	l.lintAnnotationKeys(r, field, meta.Annotations)

	selects := false
	if v, ok := meta.Annotations[nadv1.NetworksAnnotation]; ok {
		f := field(nadv1.NetworksAnnotation)
		elems, err := selection.Parse(v, r.Namespace)
		if err != nil {
			for _, msg := range joinErrors(err) {
				r.Errors = append(r.Errors, f+": "+msg)
			}
		} else {
			selects = selects || len(elems) > 0
			l.checkNetworks(r, f, elems)
		}
	}
	if v, ok := meta.Annotations[defaultNetworkAnnotation]; ok {
		f := field(defaultNetworkAnnotation)
		e, err := selection.ParseDefaultNetwork(v, r.Namespace)
		if err != nil {
			for _, msg := range joinErrors(err) {
				r.Errors = append(r.Errors, f+": "+msg)
			}
		} else {
			selects = true
			l.checkNAD(r, f, fmt.Sprintf("default network %q", e.Key()), *e)
		}
	}
	if selects && spec.HostNetwork {
		r.Errors = append(r.Errors, prefix+"spec.hostNetwork: true: the pod shares the node's network namespace, so no CNI plugin runs for it and its network selection annotations are never honoured")
	}
}

// lintAnnotationKeys looks for keys in the spec's annotation domain that a
// pod does not use, such as a misspelt networks annotation.
func (l *linter) lintAnnotationKeys(r *Result, field func(string) string, annotations map[string]string) {
	keys := make([]string, 0, len(annotations))
	for k := range annotations {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		lower := strings.ToLower(k)
		switch {
		case k == nadv1.NetworksAnnotation:
		case k == nadv1.NetworkStatusAnnotation:
			r.Notes = append(r.Notes, field(k)+": written by the implementation after the attachments (spec §5); a value in the manifest is replaced")
		case lower == nadv1.NetworksAnnotation || lower == annotationDomain+"network" || strings.TrimSpace(lower) == nadv1.NetworksAnnotation:
			r.Errors = append(r.Errors, fmt.Sprintf("%s: unknown annotation, so no network is selected: did you mean %s? (spec §4.1)", field(k), nadv1.NetworksAnnotation))
		case strings.HasPrefix(lower, annotationDomain):
			r.Notes = append(r.Notes, field(k)+": not a pod annotation of the spec; ignored by multinet")
		}
	}
}

// checkNetworks checks the parsed elements of a networks annotation (field)
// against the NetworkAttachmentDefinitions of the input, and fills
// r.Networks with them and their interface names. Its cost is linear in the
// number of elements.
func (l *linter) checkNetworks(r *Result, field string, elems []selection.Element) {
	nets := make([]netconf.Network, len(elems))
	known := make([]*libcni.NetworkConfigList, len(elems))
	standIns := map[string]*libcni.NetworkConfigList{}
	for i, e := range elems {
		standIn, ok := standIns[e.Key()]
		if !ok {
			var err error
			if standIn, err = netconf.Resolve(e.Namespace, e.Name, l.standIn, nil); err != nil {
				r.Errors = append(r.Errors, fmt.Sprintf("%s: internal: stand-in config for %q: %v", field, e.Key(), err))
				return
			}
			standIns[e.Key()] = standIn
		}
		nets[i] = netconf.Network{Element: e, ConfList: standIn}
		known[i] = l.checkNAD(r, field, fmt.Sprintf("network %q (selection element %d)", e.Key(), i), e)
	}
	// Interface names, as the daemon generates them (spec §4.1.2.1.5); the
	// default network's name is checked separately, so that the names are
	// known even when an element requests it.
	named, err := netconf.Plan(nets, netconf.PlanOptions{})
	if err != nil {
		r.Errors = append(r.Errors, field+": "+err.Error())
		named = nil
	}
	if _, err := netconf.Plan(nets, netconf.PlanOptions{DefaultIfName: defaultIfName}); err != nil && named != nil {
		r.Errors = append(r.Errors, field+": "+err.Error())
	}
	for i := range named {
		elems[i].InterfaceRequest = named[i].IfName
	}
	// Capabilities and cni-args: each network with a known config alone,
	// on the interface name it gets among all of them.
	for i := range elems {
		if known[i] == nil || named == nil {
			continue
		}
		if _, err := netconf.Plan([]netconf.Network{{Element: elems[i], ConfList: known[i]}}, netconf.PlanOptions{}); err != nil {
			// Plan wraps the reason in "network ... (selection element 0 ...)":
			// say which element it really is.
			if inner := errors.Unwrap(err); inner != nil {
				err = inner
			}
			r.Errors = append(r.Errors, fmt.Sprintf("%s: network %q (selection element %d, interface %q): %v", field, elems[i].Key(), i, elems[i].InterfaceRequest, err))
		}
	}
	for _, e := range elems {
		b, err := json.Marshal(e)
		if err != nil {
			r.Errors = append(r.Errors, fmt.Sprintf("%s: internal: encode %q: %v", field, e.Key(), err))
			continue
		}
		r.Networks = append(r.Networks, b)
	}
}

// checkNAD reports a selected NetworkAttachmentDefinition that the pod's
// attachment cannot use, and returns its config list when the input has it.
// what names the selection in messages.
func (l *linter) checkNAD(r *Result, field, what string, e selection.Element) *libcni.NetworkConfigList {
	key := e.Key()
	entry, ok := l.nads[key]
	switch {
	case !ok && (l.opts.RequireNADs || l.nadNamespaces[e.Namespace]):
		why := "--require-nads"
		if !l.opts.RequireNADs {
			why = "the input defines other NetworkAttachmentDefinitions in namespace " + e.Namespace
		}
		r.Errors = append(r.Errors, fmt.Sprintf("%s: %s: NetworkAttachmentDefinition %s is not in the input (%s); the attachment fails without it (spec §3.4.1)", field, what, key, why))
	case !ok:
		r.Notes = append(r.Notes, fmt.Sprintf("%s: %s: NetworkAttachmentDefinition %s is not in the input; its config and capabilities are not checked", field, what, key))
	case entry.invalid:
		r.Errors = append(r.Errors, fmt.Sprintf("%s: %s: NetworkAttachmentDefinition %s is invalid (see its errors); the attachment fails (spec §3.4.1)", field, what, key))
	case entry.list == nil:
		r.Notes = append(r.Notes, fmt.Sprintf("%s: %s: NetworkAttachmentDefinition %s has no spec.config; the node's CNI config is used, so capabilities are not checked", field, what, key))
	}
	if !ok {
		return nil
	}
	return entry.list
}
