package lint

import (
	"context"
	"encoding/json"

	"github.com/multinet/multinet/pkg/spec/podnetworks"
)

// readNamespaceLabels sets the namespace labels the checks read (the NAD
// trust policy's selectors, a pod namespace's Pod Security level for
// portMappings): Options.NamespaceLabels, with each Namespace (v1) object of
// objs adding or replacing its own. Without a NAD trust policy and without
// any such labels, the Policy's own reader (if any) is kept.
func (l *linter) readNamespaceLabels(objs []Object) {
	labels := map[string]map[string]string{}
	for k, v := range l.opts.NamespaceLabels {
		labels[k] = v
	}
	for _, o := range objs {
		if o.APIVersion != "v1" || o.Kind != "Namespace" || o.Name == "" {
			continue
		}
		var ns struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
		}
		if json.Unmarshal(o.JSON, &ns) == nil {
			labels[o.Name] = ns.Metadata.Labels
		}
	}
	if l.opts.Policy.NADTrust.Policy == nil && len(labels) == 0 {
		return
	}
	l.opts.Policy.NADTrust.Namespaces = podnetworks.NamespaceLabelsFunc(func(_ context.Context, name string) (map[string]string, error) {
		return labels[name], nil
	})
}
