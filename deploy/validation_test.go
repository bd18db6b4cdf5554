package deploy_test

import (
	"slices"
	"strings"
	"testing"

	admv1 "k8s.io/api/admissionregistration/v1"

	"github.com/multinet/multinet/internal/webhook/registration"
)

// TestWebhooksValidateCreateAndUpdate: as installed, the
// API server sends the webhook every pod CREATE and UPDATE that carries a
// selection annotation (the networks annotation or the default-network
// override, so that a hot-plug change is validated too) and every
// NetworkAttachmentDefinition CREATE and UPDATE.
func TestWebhooksValidateCreateAndUpdate(t *testing.T) {
	want := map[string]struct {
		resource string
		ops      []admv1.OperationType
	}{
		registration.PodNetworksWebhook: {"pods", []admv1.OperationType{admv1.Create, admv1.Update}},
		registration.NADConfigWebhook:   {"network-attachment-definitions", []admv1.OperationType{admv1.Create, admv1.Update}},
	}
	eachOverlay(t, func(t *testing.T, dir string, o objects) {
		var v admv1.ValidatingWebhookConfiguration
		o.get(t, "ValidatingWebhookConfiguration/multinet-webhook", &v)
		seen := map[string]bool{}
		for _, w := range v.Webhooks {
			exp, ok := want[w.Name]
			if !ok {
				continue
			}
			seen[w.Name] = true
			covered := false
			for _, r := range w.Rules {
				if slices.Contains(r.Resources, exp.resource) {
					for _, op := range exp.ops {
						if !slices.Contains(r.Operations, op) && !slices.Contains(r.Operations, admv1.OperationAll) {
							t.Errorf("webhook %s: %s %s is not sent to it (operations %v)", w.Name, exp.resource, op, r.Operations)
						}
					}
					covered = true
				}
			}
			if !covered {
				t.Errorf("webhook %s: no rule for %s: %+v", w.Name, exp.resource, w.Rules)
			}
			if w.Name == registration.PodNetworksWebhook {
				for _, key := range []string{"k8s.v1.cni.cncf.io/networks", "v1.multus-cni.io/default-network"} {
					if len(w.MatchConditions) != 1 || !strings.Contains(w.MatchConditions[0].Expression, `"`+key+`" in object.metadata.annotations`) {
						t.Errorf("webhook %s: matchConditions %+v do not send pods carrying %s", w.Name, w.MatchConditions, key)
					}
				}
			}
		}
		for name := range want {
			if !seen[name] {
				t.Errorf("ValidatingWebhookConfiguration has no webhook %s", name)
			}
		}
	})
}
