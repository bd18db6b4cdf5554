//go:build e2e

package e2e

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// webhookSA is kubectl's impersonation of the deployed webhook's
// ServiceAccount.
const webhookSA = "--as=system:serviceaccount:" + systemNamespace + ":multinet-webhook"

// webhookPolicyMessage is the refusal of deploy/base/webhook-policies.yaml.
const webhookPolicyMessage = "multinet-webhook may change only webhooks[*].clientConfig.caBundle of a webhook configuration"

// TestTenantWebhookIdentity: whoever holds the webhook's ServiceAccount token
// (a compromised webhook pod) cannot widen or switch off admission. As that
// ServiceAccount (kubectl --as): changing a rule or the namespaceSelector of
// multinet-webhook's configurations is refused with the
// ValidatingAdmissionPolicy's message (dry-run: admission runs, nothing is
// stored either way); changing only the caBundle is allowed (the same CA
// twice, restored after); creating a Secret is forbidden.
func TestTenantWebhookIdentity(t *testing.T) {
	requireDeployed(t)
	ctx := testContext(t, 2*time.Minute)

	refusals := []struct{ what, kind, patch string }{
		{"a rule's operations", "validatingwebhookconfiguration", `[{"op":"replace","path":"/webhooks/0/rules/0/operations","value":["DELETE"]}]`},
		{"the namespaceSelector", "validatingwebhookconfiguration", `[{"op":"replace","path":"/webhooks/1/namespaceSelector","value":{"matchLabels":{"nobody":"here"}}}]`},
		{"the failurePolicy", "mutatingwebhookconfiguration", `[{"op":"replace","path":"/webhooks/0/failurePolicy","value":"Ignore"}]`},
		{"the namespaceSelector", "mutatingwebhookconfiguration", `[{"op":"replace","path":"/webhooks/0/namespaceSelector","value":{}}]`},
	}
	for _, r := range refusals {
		out, err := kubectl(ctx, webhookSA, "patch", r.kind, "multinet-webhook", "--type=json", "-p", r.patch, "--dry-run=server")
		if err == nil || !strings.Contains(out, webhookPolicyMessage) {
			t.Errorf("as the webhook, changing %s of %s multinet-webhook: err %v, output %q; want the policy's refusal %q", r.what, r.kind, err, out, webhookPolicyMessage)
		}
	}

	// caBundle only: allowed. The same CA twice is still the same trust,
	// so admission keeps working while it is there; restored after.
	mwc, err := testCluster.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "multinet-webhook", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	orig := mwc.Webhooks[0].ClientConfig.CABundle
	if len(orig) == 0 {
		t.Fatal("mutating multinet-webhook has no caBundle")
	}
	setBundle := func(b []byte) error {
		p := fmt.Sprintf(`[{"op":"replace","path":"/webhooks/0/clientConfig/caBundle","value":%q}]`, base64.StdEncoding.EncodeToString(b))
		out, err := kubectl(ctx, webhookSA, "patch", "mutatingwebhookconfiguration", "multinet-webhook", "--type=json", "-p", p)
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	doubled := append(append([]byte(nil), orig...), orig...)
	if err := setBundle(doubled); err != nil {
		t.Errorf("as the webhook, changing only caBundle: %v", err)
	} else {
		t.Cleanup(func() {
			if err := setBundle(orig); err != nil {
				t.Errorf("restoring caBundle: %v", err)
			}
		})
		got, err := testCluster.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "multinet-webhook", metav1.GetOptions{})
		if err != nil || !bytes.Equal(got.Webhooks[0].ClientConfig.CABundle, doubled) {
			t.Errorf("caBundle change not stored (%v)", err)
		}
	}

	// No Secret create, not even in its own namespace.
	out, err := kubectl(ctx, webhookSA, "-n", systemNamespace, "create", "secret", "generic", "tenant-webhook-try", "--dry-run=server")
	if err == nil || !strings.Contains(out, "forbidden") {
		t.Errorf("as the webhook, creating a Secret: err %v, output %q; want forbidden", err, out)
	}
}
