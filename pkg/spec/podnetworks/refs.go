package podnetworks

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/multinet/multinet/pkg/spec/selection"
)

// ParseDefaultNetworks parses multinetd's defaultNetworks setting (and the
// flags that mirror it in the webhook and kubectl multinet): each a NAD
// reference "namespace/name", none twice. Multus also accepted a plain name
// (a NAD of its multusNamespace, or a network of its conf dir) and a file or
// directory path; the errors say what to write instead. Every problem is
// reported, joined (errors.Join), each starting with
// `defaultNetworks[i] "ref"`; the elements are returned only without error.
func ParseDefaultNetworks(refs []string) ([]selection.Element, error) {
	var errs []error
	out := make([]selection.Element, 0, len(refs))
	seen := make(map[string]int, len(refs))
	for i, ref := range refs {
		field := fmt.Sprintf("defaultNetworks[%d] %q", i, ref)
		ns, name, ok := strings.Cut(ref, "/")
		switch {
		case strings.HasPrefix(ref, "/"):
			errs = append(errs, fmt.Errorf("%s: a path; want a NetworkAttachmentDefinition namespace/name (for a config file of cniConfDir, create a NAD without spec.config named after its network, multi-net spec §3.4.1)", field))
			continue
		case !ok:
			errs = append(errs, fmt.Errorf("%s: want a NetworkAttachmentDefinition namespace/name (Multus looked a plain name up in its multusNamespace, kube-system by default: kube-system/%s)", field, ref))
			continue
		}
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s: namespace %q: %s", field, ns, strings.Join(msgs, "; ")))
		}
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s: name %q: %s", field, name, strings.Join(msgs, "; ")))
		}
		if j, dup := seen[ref]; dup {
			errs = append(errs, fmt.Errorf("%s: listed twice (also defaultNetworks[%d])", field, j))
		} else {
			seen[ref] = i
		}
		out = append(out, selection.Element{Namespace: ns, Name: name})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}
