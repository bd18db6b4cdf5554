package lint

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
	"github.com/multinet/multinet/pkg/spec/selection"
)

const (
	defaultNetworkAnnotation = selection.DefaultNetworkAnnotation
	// annotationDomain is the prefix of the spec's annotation keys.
	annotationDomain = "k8s.v1.cni.cncf.io/"
)

// inputNADs is the NADs source of podnetworks.Check over the
// NetworkAttachmentDefinitions of the input (docs/decisions/lint.md): a NAD
// of the input is found; one that is not there is missing when
// Options.RequireNADs is set or the input defines others in its namespace,
// and not known otherwise. missing records, by "namespace/name", why a NAD
// was taken as missing.
type inputNADs struct {
	l       *linter
	missing map[string]string
}

func (s *inputNADs) Get(_ context.Context, namespace, name string) (*nadv1.NetworkAttachmentDefinition, error) {
	key := namespace + "/" + name
	nad, ok := s.l.nads[key]
	switch {
	case ok && nad == nil:
		return nil, &podnetworks.NotKnownError{Reason: fmt.Sprintf("NetworkAttachmentDefinition %s cannot be decoded (see its errors)", key)}
	case ok:
		return nad, nil
	case s.l.opts.RequireNADs:
		s.missing[key] = "--require-nads"
	case s.l.nadNamespaces[namespace]:
		s.missing[key] = "the input defines other NetworkAttachmentDefinitions in namespace " + namespace
	default:
		return nil, &podnetworks.NotKnownError{Reason: fmt.Sprintf("NetworkAttachmentDefinition %s is not in the input", key)}
	}
	return nil, apierrors.NewNotFound(nadv1.Resource(nadv1.NetworkAttachmentDefinitionResource), name)
}

// lintPod checks the annotations of a pod (or pod template) whose fields
// start with prefix ("" or e.g. "spec.template.") in namespace r.Namespace:
// podnetworks.Check against the NADs of the input, with Options.Policy.
func (l *linter) lintPod(r *Result, prefix string, meta *metav1.ObjectMeta, spec *corev1.PodSpec) {
	l.lintAnnotationKeys(r, func(key string) string { return prefix + podnetworks.AnnotationField(key) }, meta.Annotations)

	src := &inputNADs{l: l, missing: map[string]string{}}
	v, err := podnetworks.Check(context.Background(),
		podnetworks.Pod{Namespace: r.Namespace, Annotations: meta.Annotations, HostNetwork: spec.HostNetwork},
		podnetworks.Options{Policy: l.opts.Policy, NADs: src})
	if err != nil { // the input source never fails a lookup
		r.Errors = append(r.Errors, "internal: "+err.Error())
		return
	}
	for _, p := range v.Problems {
		r.Errors = append(r.Errors, prefix+p.Error())
	}
	for _, n := range v.Notes {
		r.Notes = append(r.Notes, prefix+n)
	}
	l.recordUndeclared(r, prefix, v)
	keys := make([]string, 0, len(src.missing))
	for k := range src.missing {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		r.Notes = append(r.Notes, fmt.Sprintf("NetworkAttachmentDefinition %s is not in the input and is taken as missing (%s)", k, src.missing[k]))
	}
	for _, a := range v.Attachments {
		e := a.Element
		e.InterfaceRequest = a.IfName
		b, err := json.Marshal(e)
		if err != nil {
			r.Errors = append(r.Errors, fmt.Sprintf("internal: encode %q: %v", e.Key(), err))
			continue
		}
		r.Networks = append(r.Networks, b)
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
