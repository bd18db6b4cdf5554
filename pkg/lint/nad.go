package lint

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/netconf"
)

// nadEntry is what pods selecting a NetworkAttachmentDefinition of the
// input need to know about it.
type nadEntry struct {
	// list is the resolved spec.config; nil when there is none or it is
	// unusable.
	list *libcni.NetworkConfigList
	// invalid: spec.config is present and unusable.
	invalid bool
}

// lintNAD checks a NetworkAttachmentDefinition and records it for the pods
// (a nil obj, one that could not be decoded, is recorded as invalid).
func (l *linter) lintNAD(r *Result, obj runtime.Object) {
	l.nadNamespaces[r.Namespace] = true
	key := r.Namespace + "/" + r.Name
	nad, ok := obj.(*nadv1.NetworkAttachmentDefinition)
	if !ok {
		if r.Name != "" {
			l.nads[key] = &nadEntry{invalid: true}
		}
		return
	}
	if r.Name != "" {
		for _, msg := range validation.IsDNS1123Subdomain(r.Name) {
			r.Errors = append(r.Errors, fmt.Sprintf("metadata.name: %q: %s (spec §3.3)", r.Name, msg))
		}
		for _, label := range strings.Split(r.Name, ".") {
			if len(label) > validation.DNS1123LabelMaxLength {
				r.Notes = append(r.Notes, fmt.Sprintf("metadata.name: the unit %q is longer than %d characters, which spec §3.3 recommends against", label, validation.DNS1123LabelMaxLength))
			}
		}
	}
	for _, k := range []string{nadv1.ResourceNameAnnotation, nadv1.LegacyResourceNameAnnotation} {
		v, ok := nad.Annotations[k]
		if !ok {
			continue
		}
		for _, msg := range resourceNameErrors(v) {
			r.Errors = append(r.Errors, fmt.Sprintf("metadata.annotations[%s]: %q: %s", k, v, msg))
		}
		if k == nadv1.LegacyResourceNameAnnotation {
			r.Notes = append(r.Notes, fmt.Sprintf("metadata.annotations[%s]: the spelling of the cni-dp proposal (spec 001); write %s, the key the NPWG implementations read", k, nadv1.ResourceNameAnnotation))
		}
	}
	entry := &nadEntry{}
	defer func() {
		if r.Name != "" {
			l.nads[key] = entry
		}
	}()
	if nad.Spec.Config == "" {
		r.Notes = append(r.Notes, fmt.Sprintf("spec.config: not set: the node's CNI config whose \"name\" is %q is used (spec §3.2.4, §3.4.1 rules 2-3); it is not checked here", r.Name))
		return
	}
	list, warnings, err := netconf.ResolveSpecConfig(r.Namespace, r.Name, nad.Spec.Config)
	if err != nil {
		entry.invalid = true
		r.Errors = append(r.Errors, configErrorMessage(err))
		return
	}
	for _, w := range warnings {
		r.Warnings = append(r.Warnings, configErrorMessage(w))
	}
	entry.list = list
	if list.Name != r.Name {
		r.Notes = append(r.Notes, fmt.Sprintf("spec.config: field name: %q differs from metadata.name %q; allowed, but spec §3.4.3 strongly recommends they match", list.Name, r.Name))
	}
}

// configErrorMessage is a netconf.Resolve error as "spec.config: field F: ...",
// without the NetworkAttachmentDefinition the Result already names.
func configErrorMessage(err error) string {
	var ce *netconf.ConfigError
	if !errors.As(err, &ce) {
		return "spec.config: " + err.Error()
	}
	msg := ce.Source
	if ce.Field != "" {
		msg += ": field " + ce.Field
	}
	return msg + ": " + ce.Err.Error()
}

// resourceNameErrors checks the value of the resourceName annotation: a
// device plugin resource "vendor-domain/resourcetype" (spec 002, "extended
// resource naming scheme"), which the webhook puts in container requests and
// limits (spec 001), so it must be a valid extended resource name.
func resourceNameErrors(v string) []string {
	prefix, _, found := strings.Cut(v, "/")
	if !found {
		return []string{"must be vendor-domain/resourcetype, e.g. example.com/sriov_net (spec 002: extended resource naming scheme)"}
	}
	msgs := validation.IsQualifiedName(v)
	if prefix == "kubernetes.io" || strings.HasSuffix(prefix, ".kubernetes.io") {
		msgs = append(msgs, "the kubernetes.io domain is reserved for native resources, not device plugin resources")
	}
	// The API server checks "requests.<name>" for resource quotas too.
	if len(msgs) == 0 {
		msgs = validation.IsQualifiedName("requests." + v)
	}
	return msgs
}

// standInConfig is the spec.config Lint uses for a network whose CNI config
// it cannot see (its NetworkAttachmentDefinition is not in the input, or has
// no spec.config): a plugin declaring every capability a selection element can
// ask for, so that netconf.Plan checks only what does not depend on the config.
func standInConfig() (string, error) {
	caps := map[string]bool{}
	for _, c := range []string{netconf.CapIPs, netconf.CapMAC, netconf.CapPortMappings, netconf.CapBandwidth, netconf.CapInfinibandGUID, netconf.CapIPAMClaimReference} {
		caps[c] = true
	}
	b, err := json.Marshal(map[string]any{"cniVersion": "1.0.0", "type": "multinet-lint-stand-in", "capabilities": caps})
	if err != nil {
		return "", fmt.Errorf("lint: stand-in CNI config: %w", err)
	}
	return string(b), nil
}
