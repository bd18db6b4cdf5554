package v1beta2

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// PolicyForAnnotation on a MultiNetworkPolicy names the
// NetworkAttachmentDefinitions (the networks) the policy applies to: a
// comma-separated list of "namespace/name" or "name", a bare name being in
// the policy's namespace (the NPWG multi-networkpolicy API).
const PolicyForAnnotation = "k8s.v1.cni.cncf.io/policy-for"

// PolicyFor returns the NetworkAttachmentDefinitions p applies to, parsed
// from its PolicyForAnnotation (ParsePolicyFor with p's namespace).
func (p *MultiNetworkPolicy) PolicyFor() ([]types.NamespacedName, error) {
	return ParsePolicyFor(p.Annotations[PolicyForAnnotation], p.Namespace)
}

// ParsePolicyFor parses a PolicyForAnnotation value: entries separated by
// commas, blanks around each ignored, each "namespace/name" or "name" (then
// in namespace). The result keeps the order of first appearance without
// duplicates; an empty value gives nil (a policy for no network).
//
// Errors name the entry: an empty entry, more than one "/", a namespace that
// is not a DNS-1123 label, a name that is not a DNS-1123 subdomain (the
// names the API server allows for namespaces and NetworkAttachmentDefinitions).
func ParsePolicyFor(value, namespace string) ([]types.NamespacedName, error) {
	if strings.TrimSpace(value) == "" {
		return nil, nil
	}
	var out []types.NamespacedName
	seen := map[types.NamespacedName]bool{}
	for i, raw := range strings.Split(value, ",") {
		n, err := parsePolicyForEntry(strings.TrimSpace(raw), namespace)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: entry %d %q: %w", PolicyForAnnotation, i, strings.TrimSpace(raw), err)
		}
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out, nil
}

func parsePolicyForEntry(entry, namespace string) (types.NamespacedName, error) {
	if entry == "" {
		return types.NamespacedName{}, fmt.Errorf("empty: want namespace/name or name")
	}
	ns, name, qualified := strings.Cut(entry, "/")
	if !qualified {
		ns, name = namespace, entry
	}
	if strings.Contains(name, "/") {
		return types.NamespacedName{}, fmt.Errorf("more than one \"/\": want namespace/name or name")
	}
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return types.NamespacedName{}, fmt.Errorf("namespace %q: %s", ns, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return types.NamespacedName{}, fmt.Errorf("NetworkAttachmentDefinition name %q: %s", name, strings.Join(errs, "; "))
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}
