package webhook

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/multinet/multinet/pkg/spec/podnetworks"
)

// The pod handlers deny what a pod's author may not put in the networks
// annotation, mutating and validating alike, at CREATE
// and at the hot-plug UPDATE: more elements than MaxSelectionElements,
// cni-args to a NAD that does not opt in, portMappings in a namespace
// whose Pod Security level is baseline. The same pods pass where allowed.
func TestPodAnnotationLimits(t *testing.T) {
	optIn := nad("ns1", "args-ok", "")
	optIn.Annotations = map[string]string{podnetworks.AcceptCNIArgsAnnotation: "true"}
	levels := map[string]string{"ns1": "baseline", "open": "privileged"}
	labels := podnetworks.NamespaceLabelsFunc(func(_ context.Context, ns string) (map[string]string, error) {
		if l, ok := levels[ns]; ok {
			return map[string]string{podnetworks.PodSecurityEnforceLabel: l}, nil
		}
		return nil, nil
	})
	open := nad("open", "plain", "")
	w := newHooks(t, Options{NADs: lister(t, append(standardNADs(), optIn, open)...),
		Policy: podnetworks.Policy{MaxSelectionElements: 4, NADTrust: podnetworks.NADTrust{Namespaces: labels}}})
	const pm = `[{"name":"plain","portMappings":[{"hostPort":8080,"containerPort":80}]}]`
	for _, c := range []struct {
		name, ns, networks, deny string
	}{
		{"five elements, at most four", "ns1", "plain,plain,plain,plain,plain", "selects 5 network selection elements; a pod may have at most 4"},
		{"cni-args, no opt-in", "ns1", `[{"name":"plain","cni-args":{"sysctl":{"net.ipv4.ip_forward":"1"}}}]`, `NetworkAttachmentDefinition ns1/plain does not accept cni-args`},
		{"portMappings, baseline", "ns1", pm, `namespace ns1 enforces Pod Security level "baseline"`},
		{"four elements", "ns1", "plain,plain@n2,plain@n3,plain@n4", ""},
		{"cni-args, opt-in", "ns1", `[{"name":"args-ok","cni-args":{"sysctl":{"net.ipv4.ip_forward":"1"}}}]`, ""},
		{"portMappings, privileged", "open", pm, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			p := pod(c.ns, networks(c.networks))
			for name, resp := range map[string]admission.Response{
				"mutate CREATE":              w.MutatePods(ctx, podRequest(t, admissionv1.Create, c.ns, p, nil)),
				"validate CREATE":            w.ValidatePods(ctx, podRequest(t, admissionv1.Create, c.ns, p, nil)),
				"validate UPDATE (hot-plug)": w.ValidatePods(ctx, podRequest(t, admissionv1.Update, c.ns, p, pod(c.ns, nil))),
			} {
				switch {
				case c.deny == "" && !resp.Allowed:
					t.Errorf("%s: denied %q, want allowed", name, message(resp))
				case c.deny != "" && (resp.Allowed || !strings.Contains(message(resp), c.deny)):
					t.Errorf("%s: allowed %v, %q; want denied with %q", name, resp.Allowed, message(resp), c.deny)
				}
			}
		})
	}
}
