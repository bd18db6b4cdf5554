package lint

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/validation"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
)

// DefaultNamespace is the namespace of objects without metadata.namespace
// when Options.Namespace is empty.
const DefaultNamespace = "default"

// Options configure Lint.
type Options struct {
	// Namespace is given to objects without metadata.namespace, as kubectl
	// apply would with --namespace; empty means DefaultNamespace.
	Namespace string
	// RequireNADs makes a selected NetworkAttachmentDefinition that is not in
	// the input an error. Without it, it is an error only when the input
	// defines some NetworkAttachmentDefinition in that namespace, and a note
	// otherwise (docs/decisions/lint.md).
	RequireNADs bool
	// Policy is multinetd's configuration that decides a pod's networks
	// besides its annotations (namespace isolation, defaultNetworks,
	// systemNamespaces, undeclaredCapabilities); the zero value is
	// multinetd's default. With Policy.NADTrust.Policy set, each
	// NetworkAttachmentDefinition is also checked against that NAD trust
	// policy (docs/nad-trust.md), and so are the NADs pods select; the
	// namespaces' labels are NamespaceLabels and those of the input's
	// Namespace objects (Policy.NADTrust.Namespaces is not read).
	Policy podnetworks.Policy
	// NamespaceLabels are namespaces' labels by name, for the NAD trust
	// rules' selectors (kubectl multinet lint --cluster reads them from the
	// cluster); a Namespace object of the input adds or replaces its own.
	NamespaceLabels map[string]map[string]string
}

// Result is the verdict on one object of the input. Its JSON form is the
// `-o json` entry of kubectl-multinet lint (docs/kubectl-multinet.md):
//
//	{"kind","namespace","name","source","valid","errors":[...],"notes":[...],"networks":[...]}
type Result struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	// Name is metadata.name; empty for an object with only generateName.
	Name string `json:"name"`
	// Source is Object.Source: where the object was read.
	Source string `json:"source"`
	// Valid is true when Errors is empty.
	Valid bool `json:"valid"`
	// Skipped is true for kinds Lint does not check; they are valid and are
	// left out of the JSON output.
	Skipped bool `json:"-"`
	// GenerateName is metadata.generateName, for display.
	GenerateName string `json:"-"`
	// Errors say what kubectl apply, the webhook or the daemon would reject,
	// each starting with the field path. Never nil.
	Errors []string `json:"errors"`
	// Warnings say what the daemon runs but probably not as the author
	// meant (a CNI config without cniVersion, run as CNI 0.1.0), each
	// starting with the field path. They do not make the object invalid.
	// Never nil.
	Warnings []string `json:"warnings"`
	// Notes say what was not checked, or what is allowed but unusual. Never nil.
	Notes []string `json:"notes"`
	// UndeclaredCapabilities, for a NetworkAttachmentDefinition, are the
	// capabilities that pods of the input ask of it although no plugin
	// declares them: they rely on undeclaredCapabilities: multus
	// (RelyingNADs lists such NADs). Empty for other kinds.
	UndeclaredCapabilities []string `json:"undeclaredCapabilities,omitempty"`
	// Networks are the pod's network selection elements (spec §4.1.2.1) as
	// the JSON list form writes them, namespace filled in, and "interface"
	// filled in with the name the daemon would generate. Empty (never nil)
	// for a NetworkAttachmentDefinition, a skipped object, or an annotation
	// that does not parse.
	Networks []json.RawMessage `json:"networks"`
}

// Lint checks objs, read by Decode from one or more manifests, and returns
// one Result per object in the same order:
//
//   - NetworkAttachmentDefinition (k8s.cni.cncf.io/v1): podnetworks.CheckNAD,
//     the rules the webhook applies (the name, spec §3.3; the resourceName
//     annotation, spec 001, 002; spec.config as the daemon resolves it,
//     §3.4.1, §3.4.2);
//   - Pod, and the pod template of PodTemplate, ReplicationController,
//     Deployment, StatefulSet, DaemonSet, ReplicaSet, Job and CronJob:
//     podnetworks.Check, the rules the webhook and multinetd apply (the
//     k8s.v1.cni.cncf.io/networks and v1.multus-cni.io/default-network
//     annotations, hostNetwork, namespace isolation per Options.Policy, each
//     selected network against the NetworkAttachmentDefinitions of the
//     input: capabilities, cni-args, interface names with the default
//     network on "eth0"), each problem prefixed with the template's path;
//     and misspelt or misplaced selection annotations;
//   - every checked object is decoded strictly, so unknown and repeated
//     fields are errors, as kubectl apply's server-side validation makes them;
//   - objects of other kinds are Skipped.
//
// The error is not about the input: it reports a failure to set up the decoder.
func Lint(objs []Object, opts Options) ([]Result, error) {
	l, err := newLinter(opts)
	if err != nil {
		return nil, err
	}
	l.readNamespaceLabels(objs)
	results := make([]Result, len(objs))
	decoded := make([]runtime.Object, len(objs))
	// NetworkAttachmentDefinitions first, so that pods see every one of them
	// wherever it stands in the input.
	for i := range objs {
		if isNAD(objs[i]) {
			results[i], decoded[i] = l.begin(objs[i])
			l.lintNAD(&results[i], decoded[i])
		}
	}
	for i := range objs {
		if !isNAD(objs[i]) {
			results[i], decoded[i] = l.begin(objs[i])
			l.lintWorkload(&results[i], decoded[i])
		}
	}
	for i := range objs {
		if isNAD(objs[i]) && decoded[i] != nil {
			l.markReliance(&results[i])
		}
	}
	for i := range results {
		results[i].Valid = len(results[i].Errors) == 0
	}
	return results, nil
}

// linter holds what one Lint call shares between objects.
type linter struct {
	opts   Options
	scheme *runtime.Scheme
	codec  runtime.Decoder
	// nads by "namespace/name", nil for one that cannot be decoded;
	// nadNamespaces: namespaces the input defines any
	// NetworkAttachmentDefinition in.
	nads          map[string]*nadv1.NetworkAttachmentDefinition
	nadNamespaces map[string]bool
	// seen maps "kind namespace/name" to the Source of its first object.
	seen map[string]string
	// undeclared: by NAD "namespace/name", what pods ask of it that no
	// plugin declares (undeclaredCapabilities).
	undeclared map[string]*reliance
}

func newLinter(opts Options) (*linter, error) {
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, nadv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("lint: build API scheme: %w", err)
		}
	}
	return &linter{
		opts:          opts,
		scheme:        scheme,
		codec:         kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme, kjson.SerializerOptions{Strict: true}),
		nads:          map[string]*nadv1.NetworkAttachmentDefinition{},
		nadNamespaces: map[string]bool{},
		seen:          map[string]string{},
		undeclared:    map[string]*reliance{},
	}, nil
}

// templatePath returns the field path of the pod template of objects of
// kind gk ("" for a Pod itself), and whether Lint checks gk at all.
func templatePath(gk schema.GroupKind) (string, bool) {
	switch gk {
	case schema.GroupKind{Kind: "Pod"}:
		return "", true
	case schema.GroupKind{Kind: "PodTemplate"}:
		return "template.", true
	case schema.GroupKind{Kind: "ReplicationController"},
		schema.GroupKind{Group: "apps", Kind: "Deployment"},
		schema.GroupKind{Group: "apps", Kind: "StatefulSet"},
		schema.GroupKind{Group: "apps", Kind: "DaemonSet"},
		schema.GroupKind{Group: "apps", Kind: "ReplicaSet"},
		schema.GroupKind{Group: "batch", Kind: "Job"}:
		return "spec.template.", true
	case schema.GroupKind{Group: "batch", Kind: "CronJob"}:
		return "spec.jobTemplate.spec.template.", true
	case nadv1.Kind(nadv1.NetworkAttachmentDefinitionKind):
		return "", true
	}
	return "", false
}

func isNAD(o Object) bool {
	gv, err := schema.ParseGroupVersion(o.APIVersion)
	return err == nil && gv.WithKind(o.Kind).GroupKind() == nadv1.Kind(nadv1.NetworkAttachmentDefinitionKind)
}

// begin returns the Result of o with what applies to every kind (identity,
// apiVersion and kind, duplicates, strict decoding) and the decoded object,
// nil when o is skipped or cannot be decoded.
func (l *linter) begin(o Object) (Result, runtime.Object) {
	r := Result{
		Kind:         o.Kind,
		Namespace:    o.Namespace,
		Name:         o.Name,
		GenerateName: o.GenerateName,
		Source:       o.Source,
		Errors:       []string{},
		Warnings:     []string{},
		Notes:        []string{},
		Networks:     []json.RawMessage{},
	}
	if r.Namespace == "" {
		r.Namespace = l.opts.Namespace
	}
	gv, err := schema.ParseGroupVersion(o.APIVersion)
	switch {
	case o.Kind == "":
		r.Errors = append(r.Errors, "kind: required: not a Kubernetes object")
		return r, nil
	case o.APIVersion == "":
		r.Errors = append(r.Errors, "apiVersion: required: not a Kubernetes object")
		return r, nil
	case err != nil:
		r.Errors = append(r.Errors, fmt.Sprintf("apiVersion: %q: %v", o.APIVersion, err))
		return r, nil
	}
	gvk := gv.WithKind(o.Kind)
	if _, ok := templatePath(gvk.GroupKind()); !ok {
		r.Skipped = true
		return r, nil
	}
	if !l.scheme.Recognizes(gvk) {
		served := l.scheme.PrioritizedVersionsForGroup(gvk.Group)[0]
		r.Errors = append(r.Errors, fmt.Sprintf("apiVersion: %q is not a served version of %s: use %q", o.APIVersion, o.Kind, served.String()))
		return r, nil
	}
	for _, d := range o.DuplicateKeys {
		r.Errors = append(r.Errors, "YAML "+d+" (a repeated key: only its last value is used)")
	}
	if o.Name != "" {
		key := fmt.Sprintf("%s %s/%s", gvk.GroupKind(), r.Namespace, o.Name)
		if first, dup := l.seen[key]; dup {
			r.Errors = append(r.Errors, fmt.Sprintf("metadata.name: %s %s/%s is also defined at %s", o.Kind, r.Namespace, o.Name, first))
		} else {
			l.seen[key] = o.Source
		}
	} else if o.GenerateName == "" || isNAD(o) {
		r.Errors = append(r.Errors, "metadata.name: required")
	}
	if o.Namespace != "" {
		for _, msg := range validation.IsDNS1123Label(o.Namespace) {
			r.Errors = append(r.Errors, fmt.Sprintf("metadata.namespace: %q: %s", o.Namespace, msg))
		}
	}
	obj, _, err := l.codec.Decode(o.JSON, nil, nil)
	if strict, ok := runtime.AsStrictDecodingError(err); ok {
		for _, e := range strict.Errors() {
			r.Errors = append(r.Errors, strictMessage(e))
		}
		err = nil
	}
	if err != nil {
		r.Errors = append(r.Errors, fmt.Sprintf("cannot decode %s: %v", o.Kind, err))
		return r, nil
	}
	return r, obj
}

// lintWorkload checks a Pod or the pod template of a workload.
func (l *linter) lintWorkload(r *Result, obj runtime.Object) {
	if obj == nil {
		return
	}
	var own *metav1.ObjectMeta
	var tmpl *corev1.PodTemplateSpec
	switch o := obj.(type) {
	case *corev1.Pod:
		l.lintPod(r, "", &o.ObjectMeta, &o.Spec)
		return
	case *corev1.PodTemplate:
		own, tmpl = &o.ObjectMeta, &o.Template
	case *corev1.ReplicationController:
		own, tmpl = &o.ObjectMeta, o.Spec.Template
	case *appsv1.Deployment:
		own, tmpl = &o.ObjectMeta, &o.Spec.Template
	case *appsv1.StatefulSet:
		own, tmpl = &o.ObjectMeta, &o.Spec.Template
	case *appsv1.DaemonSet:
		own, tmpl = &o.ObjectMeta, &o.Spec.Template
	case *appsv1.ReplicaSet:
		own, tmpl = &o.ObjectMeta, &o.Spec.Template
	case *batchv1.Job:
		own, tmpl = &o.ObjectMeta, &o.Spec.Template
	case *batchv1.CronJob:
		own, tmpl = &o.ObjectMeta, &o.Spec.JobTemplate.Spec.Template
	default:
		r.Errors = append(r.Errors, fmt.Sprintf("internal: no pod template for %T", obj))
		return
	}
	path, _ := templatePath(obj.GetObjectKind().GroupVersionKind().GroupKind())
	for _, key := range []string{nadv1.NetworksAnnotation, defaultNetworkAnnotation} {
		if _, ok := own.Annotations[key]; ok {
			r.Errors = append(r.Errors, fmt.Sprintf("%s: on a %s this annotation selects nothing: pods take their annotations from %smetadata.annotations", podnetworks.AnnotationField(key), r.Kind, path))
		}
	}
	if tmpl == nil { // a ReplicationController without a template
		return
	}
	l.lintPod(r, path, &tmpl.ObjectMeta, &tmpl.Spec)
}

// strictMessage turns the strict decoder's `unknown field "a.b"` and
// `duplicate field "a.b"` into "a.b: unknown field", path first like every
// other message; anything else is kept as it is.
func strictMessage(err error) string {
	msg := err.Error()
	for _, what := range []string{"unknown field", "duplicate field"} {
		if q, ok := strings.CutPrefix(msg, what+" "); ok {
			if path, err := strconv.Unquote(q); err == nil {
				return path + ": " + what
			}
		}
	}
	return msg
}
