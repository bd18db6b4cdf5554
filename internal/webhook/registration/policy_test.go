package registration

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/multinet/multinet/internal/testing/apiservertest"
	"github.com/multinet/multinet/internal/webhook/certs"
)

func TestMain(m *testing.M) { os.Exit(apiservertest.Main(m)) }

// policyMessage is the message of deploy/base/webhook-policies.yaml's
// update rule.
const policyMessage = "multinet-webhook may change only webhooks[*].clientConfig.caBundle of a webhook configuration"

// TestWebhookPolicyAgainstAPIServer installs what deploy/base ships for the
// webhook (its RBAC, its empty certificate Secret, its two webhook
// configurations and the ValidatingAdmissionPolicy with its binding) on a
// real API server and acts as the webhook's ServiceAccount: the certificate
// Manager fills the shipped Secret and PatchCABundle publishes the bundle;
// a change to rules, namespaceSelector, failurePolicy or labels is refused
// with the policy's message, and creating a Secret or a configuration is
// forbidden.
func TestWebhookPolicyAgainstAPIServer(t *testing.T) {
	srv := apiservertest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	admin := kubernetes.NewForConfigOrDie(srv.Config())
	saCfg := srv.ServiceAccountConfig(t, "deploy/base/webhook-rbac.yaml", "multinet-system", "multinet-webhook")
	sa := kubernetes.NewForConfigOrDie(saCfg)

	for _, doc := range manifestDocs(t, "webhook-rbac.yaml", "webhook-configurations.yaml", "webhook-policies.yaml") {
		createManifest(ctx, t, admin, doc)
	}

	// The Manager, as the ServiceAccount, fills the shipped empty Secret
	// and publishes through PatchCABundle.
	published := 0
	m, err := certs.NewManager(sa.CoreV1(), certs.ManagerOptions{
		Namespace: "multinet-system", SecretName: "multinet-webhook-certs",
		Spec: certs.Spec{CACommonName: "ca", DNSNames: []string{"multinet-webhook.multinet-system.svc"}, CAValidity: time.Hour, CertValidity: time.Hour},
		OnCABundle: func(ctx context.Context, b []byte) error {
			published++
			return PatchCABundle(ctx, sa.AdmissionregistrationV1(), "multinet-webhook", "multinet-webhook", b)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// The policy is enforced once the API server has loaded it: until a
	// dry-run change of rules is refused, the Sync's caBundle update proves
	// nothing about it.
	waitPolicyEnforced(ctx, t, sa)
	if err := m.Sync(ctx); err != nil {
		t.Fatalf("Manager.Sync as the webhook's ServiceAccount: %v", err)
	}
	mwc, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "multinet-webhook", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if published != 1 || !bytes.Equal(mwc.Webhooks[0].ClientConfig.CABundle, m.CABundle()) {
		t.Fatalf("caBundle not published (OnCABundle ran %d times)", published)
	}

	adm := sa.AdmissionregistrationV1()
	for name, change := range map[string]func(*admv1.ValidatingWebhookConfiguration){
		"namespaceSelector": func(v *admv1.ValidatingWebhookConfiguration) {
			v.Webhooks[0].NamespaceSelector = &metav1.LabelSelector{}
		},
		"rules": func(v *admv1.ValidatingWebhookConfiguration) {
			v.Webhooks[1].Rules[0].Operations = []admv1.OperationType{admv1.Create}
		},
		"failurePolicy": func(v *admv1.ValidatingWebhookConfiguration) {
			ignore := admv1.Ignore
			v.Webhooks[0].FailurePolicy = &ignore
		},
		"clientConfig.service": func(v *admv1.ValidatingWebhookConfiguration) { v.Webhooks[0].ClientConfig.Service.Name = "elsewhere" },
		"a webhook removed":    func(v *admv1.ValidatingWebhookConfiguration) { v.Webhooks = v.Webhooks[:1] },
		"labels":               func(v *admv1.ValidatingWebhookConfiguration) { v.Labels["x"] = "y" },
		"caBundle and rules": func(v *admv1.ValidatingWebhookConfiguration) {
			v.Webhooks[0].ClientConfig.CABundle = []byte("other")
			v.Webhooks[0].Rules[0].Operations = []admv1.OperationType{admv1.Create}
		},
	} {
		v, err := adm.ValidatingWebhookConfigurations().Get(ctx, "multinet-webhook", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		change(v)
		_, err = adm.ValidatingWebhookConfigurations().Update(ctx, v, metav1.UpdateOptions{})
		if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || err == nil || !strings.Contains(err.Error(), policyMessage) {
			t.Errorf("change of %s as the webhook: %v, want the policy's refusal %q", name, err, policyMessage)
		}
	}
	// Only caBundle: allowed (and what PatchCABundle did above).
	v, err := adm.ValidatingWebhookConfigurations().Get(ctx, "multinet-webhook", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range v.Webhooks {
		v.Webhooks[i].ClientConfig.CABundle = append([]byte(nil), m.CABundle()...)
		v.Webhooks[i].ClientConfig.CABundle = append(v.Webhooks[i].ClientConfig.CABundle, m.CABundle()...)
	}
	if _, err := adm.ValidatingWebhookConfigurations().Update(ctx, v, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("caBundle-only change as the webhook: %v", err)
	}
	// An administrator is not held by the policy.
	v.Webhooks[0].NamespaceSelector = &metav1.LabelSelector{}
	if _, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, v, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("namespaceSelector change as an administrator: %v", err)
	}

	// No Secret create, of any name; no configuration create.
	_, err = sa.CoreV1().Secrets("multinet-system").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("Secret create as the webhook: %v, want Forbidden", err)
	}
	_, err = adm.MutatingWebhookConfigurations().Create(ctx, &admv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "multinet-webhook-2"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("configuration create as the webhook: %v, want Forbidden", err)
	}
}

// waitPolicyEnforced waits until a dry-run change of a rule by the webhook's
// ServiceAccount is refused with the policy's message.
func waitPolicyEnforced(ctx context.Context, t *testing.T, sa kubernetes.Interface) {
	t.Helper()
	var last error
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		m, err := sa.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "multinet-webhook", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		m.Webhooks[0].Rules[0].Operations = []admv1.OperationType{admv1.Create, admv1.Update}
		_, last = sa.AdmissionregistrationV1().MutatingWebhookConfigurations().Update(ctx, m, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return last != nil && strings.Contains(last.Error(), policyMessage), nil
	})
	if err != nil {
		t.Fatalf("policy not enforced on the webhook's ServiceAccount (last answer: %v): %v", last, err)
	}
}

// manifestDocs reads deploy/base files (from the module root) as YAML
// documents.
func manifestDocs(t *testing.T, files ...string) []string {
	t.Helper()
	var docs []string
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "base", f))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range strings.Split(string(b), "\n---\n") {
			if strings.TrimSpace(d) != "" {
				docs = append(docs, d)
			}
		}
	}
	return docs
}

// createManifest creates doc's object (Secrets in multinet-system; RBAC is
// ServiceAccountConfig's, and ServiceAccounts are not needed: impersonation).
func createManifest(ctx context.Context, t *testing.T, kc kubernetes.Interface, doc string) {
	t.Helper()
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
		t.Fatal(err)
	}
	var err error
	adm := kc.AdmissionregistrationV1()
	switch tm.Kind {
	case "Secret":
		var o corev1.Secret
		mustDecode(t, doc, &o)
		_ = kc.CoreV1().Secrets("multinet-system").Delete(ctx, o.Name, metav1.DeleteOptions{})
		_, err = kc.CoreV1().Secrets("multinet-system").Create(ctx, &o, metav1.CreateOptions{})
	case "MutatingWebhookConfiguration":
		var o admv1.MutatingWebhookConfiguration
		mustDecode(t, doc, &o)
		_ = adm.MutatingWebhookConfigurations().Delete(ctx, o.Name, metav1.DeleteOptions{})
		_, err = adm.MutatingWebhookConfigurations().Create(ctx, &o, metav1.CreateOptions{})
	case "ValidatingWebhookConfiguration":
		var o admv1.ValidatingWebhookConfiguration
		mustDecode(t, doc, &o)
		_ = adm.ValidatingWebhookConfigurations().Delete(ctx, o.Name, metav1.DeleteOptions{})
		_, err = adm.ValidatingWebhookConfigurations().Create(ctx, &o, metav1.CreateOptions{})
	case "ValidatingAdmissionPolicy":
		var o admv1.ValidatingAdmissionPolicy
		mustDecode(t, doc, &o)
		_ = adm.ValidatingAdmissionPolicies().Delete(ctx, o.Name, metav1.DeleteOptions{})
		_, err = adm.ValidatingAdmissionPolicies().Create(ctx, &o, metav1.CreateOptions{})
	case "ValidatingAdmissionPolicyBinding":
		var o admv1.ValidatingAdmissionPolicyBinding
		mustDecode(t, doc, &o)
		_ = adm.ValidatingAdmissionPolicyBindings().Delete(ctx, o.Name, metav1.DeleteOptions{})
		_, err = adm.ValidatingAdmissionPolicyBindings().Create(ctx, &o, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatalf("create %s: %v", tm.Kind, err)
	}
}

func mustDecode(t *testing.T, doc string, into any) {
	t.Helper()
	if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
		t.Fatal(err)
	}
}
