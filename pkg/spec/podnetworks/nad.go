package podnetworks

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	dpconfig "github.com/multinet/multinet/internal/devices/deviceplugin/config"
	"github.com/multinet/multinet/pkg/spec/netconf"
)

// ResourceClaimTemplateAnnotation is the NetworkAttachmentDefinition
// annotation naming the ResourceClaimTemplate (in the pod's namespace) from
// which a pod selecting the network gets its device through Dynamic
// Resource Allocation instead of a device plugin (docs/dra.md,
// docs/decisions/dra.md). A NAD with it must also name the device's
// resource (k8s.v1.cni.cncf.io/resourceName), the value of the allocated
// device's k8s.cni.cncf.io/resourceName attribute.
const ResourceClaimTemplateAnnotation = "multinet.io/resource-claim-template"

// ClaimNamePrefix starts the names of the pod resource claims
// (spec.resourceClaims[].name) the webhook adds for DRA networks: the n-th
// attachment to a NAD with ResourceClaimTemplateAnnotation (the
// default-network override first, then the networks annotation in order)
// gets the claim ClaimNamePrefix + n, e.g. "multinet-net-1".
const ClaimNamePrefix = "multinet-net-"

// ClaimTemplate returns the ResourceClaimTemplate nad names
// (ResourceClaimTemplateAnnotation), "" when none. Errors: the value is not
// a DNS-1123 subdomain, or nad names no resource (resource, its resource
// name, is "").
func ClaimTemplate(nad *nadv1.NetworkAttachmentDefinition, resource string) (string, error) {
	v, ok := nad.Annotations[ResourceClaimTemplateAnnotation]
	if !ok {
		return "", nil
	}
	field := AnnotationField(ResourceClaimTemplateAnnotation)
	if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
		return "", fmt.Errorf("%s: %q is not a ResourceClaimTemplate name: %s", field, v, strings.Join(errs, "; "))
	}
	if resource == "" {
		return "", fmt.Errorf("%s: the network gets its device through DRA, but the NetworkAttachmentDefinition names no resource (%s): multinetd needs it to find the device's device-info and to check the allocated device", field, AnnotationField(nadv1.ResourceNameAnnotation))
	}
	return v, nil
}

// ResourceName returns the device resource name of nad: the value of the
// first of keys present in its annotations, "" when none is. A present value
// must be an extended resource name "vendor-domain/type", as kubelet requires
// of device plugins (spec 002, "extended resource naming scheme"); the error
// names the annotation.
func ResourceName(nad *nadv1.NetworkAttachmentDefinition, keys []string) (string, error) {
	for _, k := range keys {
		v, ok := nad.Annotations[k]
		if !ok {
			continue
		}
		if err := dpconfig.ValidateResourceName(v); err != nil {
			return "", fmt.Errorf("%s: %w", AnnotationField(k), err)
		}
		return v, nil
	}
	return "", nil
}

// Finding is one result of CheckNAD about one field of a
// NetworkAttachmentDefinition.
type Finding struct {
	// Field is the field path: "metadata.name", an annotation
	// (AnnotationField), or "spec.config".
	Field string
	// Message says what is wrong or worth knowing, phrased to follow Field.
	Message string
}

// String is "Field: Message".
func (f Finding) String() string { return f.Field + ": " + f.Message }

// NADFindings are CheckNAD's results, each kind in field order.
type NADFindings struct {
	// Errors make the NAD unusable: every attachment to it fails.
	Errors []Finding
	// Warnings: what the daemon runs, but probably not as the author meant.
	Warnings []Finding
	// Notes: what is allowed but unusual, or not checked.
	Notes []Finding
}

// CheckNAD applies the rules of a NetworkAttachmentDefinition object (the
// webhook's on CREATE/UPDATE, and lint's):
//
//   - metadata.name, when set, is a DNS-1123 subdomain (spec §3.3; a note
//     for a label longer than 63 characters, which §3.3 recommends against);
//   - each of resourceNameKeys present (nil: DefaultResourceNameKeys) is an
//     extended resource name (ResourceName's rule; a note for the legacy key);
//   - ResourceClaimTemplateAnnotation, when present, names a
//     ResourceClaimTemplate (a DNS-1123 subdomain) and the NAD names a
//     resource (ClaimTemplate's rules);
//   - spec.config, when not empty, resolves as multinetd resolves it
//     (§3.4.1 rule 1, §3.4.2; netconf.ResolveSpecConfig): an error naming the
//     field, warnings for what libcni runs differently than written (no
//     cniVersion), a note when its name differs from metadata.name (§3.4.3);
//     empty, a note: the node's config is used (§3.2.4).
//
// A NAD with only metadata.generateName is resolved under a stand-in name.
func CheckNAD(nad *nadv1.NetworkAttachmentDefinition, resourceNameKeys []string) NADFindings {
	if resourceNameKeys == nil {
		resourceNameKeys = DefaultResourceNameKeys
	}
	var f NADFindings
	if nad.Name != "" {
		for _, msg := range validation.IsDNS1123Subdomain(nad.Name) {
			f.Errors = append(f.Errors, Finding{"metadata.name", fmt.Sprintf("%q: %s (spec §3.3)", nad.Name, msg)})
		}
		for _, label := range strings.Split(nad.Name, ".") {
			if len(label) > validation.DNS1123LabelMaxLength {
				f.Notes = append(f.Notes, Finding{"metadata.name", fmt.Sprintf("the unit %q is longer than %d characters, which spec §3.3 recommends against", label, validation.DNS1123LabelMaxLength)})
			}
		}
	}
	for _, k := range resourceNameKeys {
		v, ok := nad.Annotations[k]
		if !ok {
			continue
		}
		if err := dpconfig.ValidateResourceName(v); err != nil {
			f.Errors = append(f.Errors, Finding{AnnotationField(k), err.Error()})
		}
		if k == nadv1.LegacyResourceNameAnnotation {
			f.Notes = append(f.Notes, Finding{AnnotationField(k), fmt.Sprintf("the spelling of the cni-dp proposal (spec 001); write %s, the key the NPWG implementations read", nadv1.ResourceNameAnnotation)})
		}
	}
	if _, ok := nad.Annotations[ResourceClaimTemplateAnnotation]; ok {
		rn, _ := ResourceName(nad, resourceNameKeys)
		if _, err := ClaimTemplate(nad, rn); err != nil {
			field, msg, _ := strings.Cut(err.Error(), ": ")
			f.Errors = append(f.Errors, Finding{field, msg})
		}
	}
	name := nad.Name
	if name == "" {
		// metadata.generateName: the final name is not known yet; any valid
		// network name stands in for the §3.4.2 name injection.
		name = "generated"
	}
	if nad.Spec.Config == "" {
		f.Notes = append(f.Notes, Finding{"spec.config", fmt.Sprintf("not set: the node's CNI config whose \"name\" is %q is used (spec §3.2.4, §3.4.1 rules 2-3); it is not checked here", name)})
		return f
	}
	list, warnings, err := netconf.ResolveSpecConfig(nad.Namespace, name, nad.Spec.Config)
	if err != nil {
		f.Errors = append(f.Errors, configFinding(err))
		return f
	}
	for _, w := range warnings {
		f.Warnings = append(f.Warnings, configFinding(w))
	}
	if nad.Name != "" && list.Name != nad.Name {
		f.Notes = append(f.Notes, Finding{"spec.config", fmt.Sprintf("field name: %q differs from metadata.name %q; allowed, but spec §3.4.3 strongly recommends they match", list.Name, nad.Name)})
	}
	return f
}

// configFinding is a netconf config error as a spec.config Finding, "field
// F: ...", without the NAD the caller already names.
func configFinding(err error) Finding {
	var ce *netconf.ConfigError
	if !errors.As(err, &ce) {
		return Finding{"spec.config", err.Error()}
	}
	msg := ""
	if ce.Field != "" {
		msg = "field " + ce.Field + ": "
	}
	return Finding{ce.Source, msg + ce.Err.Error()}
}
