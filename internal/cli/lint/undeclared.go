package lint

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/multinet/multinet/pkg/spec/podnetworks"
)

// reliance is what the pods of the input ask of one NAD without a
// declaring plugin: by capability, the objects that ask.
type reliance struct {
	// users by capability, e.g. "mac" → ["Pod team/web"].
	users map[string][]string
	// sections by capability, e.g. "mac" → "4.1.2.1.4.2".
	sections map[string]string
}

// recordUndeclared notes, for the NADs' results, every attachment of v
// whose element asks for a key no plugin of the NAD declares, and under
// undeclaredCapabilities: multus warns on the pod's result (it runs, but
// not by the spec).
func (l *linter) recordUndeclared(r *Result, prefix string, v *podnetworks.Verdict) {
	who := r.Kind + " " + r.Namespace + "/" + r.Name
	for _, u := range v.Undeclared() {
		if l.opts.Policy.UndeclaredCapabilities == podnetworks.MultusUndeclared {
			r.Warnings = append(r.Warnings, prefix+u.Message())
		}
		rel := l.undeclared[u.NAD]
		if rel == nil {
			rel = &reliance{users: map[string][]string{}, sections: map[string]string{}}
			l.undeclared[u.NAD] = rel
		}
		for _, k := range u.Keys {
			if !slices.Contains(rel.users[k.Capability], who) {
				rel.users[k.Capability] = append(rel.users[k.Capability], who)
			}
			rel.sections[k.Capability] = k.Section
		}
	}
}

// markReliance gives the result of each NAD of the input that pods rely on
// through undeclaredCapabilities its UndeclaredCapabilities and a warning
// naming the capabilities and who asks for them.
func (l *linter) markReliance(r *Result) {
	rel := l.undeclared[r.Namespace+"/"+r.Name]
	if rel == nil {
		return
	}
	caps := make([]string, 0, len(rel.users))
	for c := range rel.users {
		caps = append(caps, c)
	}
	sort.Strings(caps)
	r.UndeclaredCapabilities = caps
	for _, c := range caps {
		r.Warnings = append(r.Warnings, fmt.Sprintf(
			`no plugin declares "capabilities": {%q: true}, which %s asks for (spec §%s): runs only with undeclaredCapabilities: %s (multinetd, the webhook), which hands the value over as Multus does; declare it on the plugin that reads the value to run by the spec (docs/migrating-from-multus.md)`,
			c, strings.Join(rel.users[c], ", "), rel.sections[c], podnetworks.MultusUndeclared))
	}
}

// RelyingNADs lists the NetworkAttachmentDefinitions of results that pods
// rely on through undeclaredCapabilities, each as
// `namespace/name ("mac", "ips")`, in input order.
func RelyingNADs(results []Result) []string {
	var out []string
	for _, r := range results {
		if len(r.UndeclaredCapabilities) == 0 {
			continue
		}
		q := make([]string, len(r.UndeclaredCapabilities))
		for i, c := range r.UndeclaredCapabilities {
			q[i] = fmt.Sprintf("%q", c)
		}
		out = append(out, fmt.Sprintf("%s/%s (%s)", r.Namespace, r.Name, strings.Join(q, ", ")))
	}
	return out
}
