package deploy_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	admv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// seccompExempt are the containers ("Kind/name/container") that run without
// RuntimeDefault, with why: multinetd is privileged (a privileged container
// gets no seccomp profile from the runtime whatever the pod asks) and its
// delegates, any CNI plugin, make syscalls a default profile refuses.
var seccompExempt = map[string]string{
	"DaemonSet/multinetd/multinetd": "privileged: delegates need unshare, mount, setns, bpf",
}

// TestSeccompRuntimeDefault: every container of every DaemonSet and
// Deployment of every overlay, init containers too, runs with the
// runtime's default seccomp profile (its own securityContext, else the
// pod's), except multinetd's, which is privileged and says Unconfined.
func TestSeccompRuntimeDefault(t *testing.T) {
	eachOverlay(t, func(t *testing.T, dir string, o objects) {
		n := 0
		for _, key := range o.keys() {
			var spec corev1.PodSpec
			switch {
			case strings.HasPrefix(key, "DaemonSet/"):
				var ds appsv1.DaemonSet
				o.get(t, key, &ds)
				spec = ds.Spec.Template.Spec
			case strings.HasPrefix(key, "Deployment/"):
				var d appsv1.Deployment
				o.get(t, key, &d)
				spec = d.Spec.Template.Spec
			default:
				continue
			}
			for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
				n++
				id := key + "/" + c.Name
				got := effectiveSeccomp(spec, c)
				if why, ok := seccompExempt[id]; ok {
					if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged || got != corev1.SeccompProfileTypeUnconfined {
						t.Errorf("%s: exempt from RuntimeDefault (%s) only as a privileged container that says Unconfined; seccomp %q", id, why, got)
					}
					continue
				}
				if got != corev1.SeccompProfileTypeRuntimeDefault {
					t.Errorf("%s: seccomp profile %q, want RuntimeDefault (pod or container securityContext)", id, got)
				}
			}
		}
		if n < 5 {
			t.Fatalf("only %d containers checked", n)
		}
	})
}

// effectiveSeccomp is the seccomp profile type c runs with: its own, else
// the pod's, else "" (the runtime's choice: Unconfined on most).
func effectiveSeccomp(spec corev1.PodSpec, c corev1.Container) corev1.SeccompProfileType {
	if c.SecurityContext != nil && c.SecurityContext.SeccompProfile != nil {
		return c.SecurityContext.SeccompProfile.Type
	}
	if spec.SecurityContext != nil && spec.SecurityContext.SeccompProfile != nil {
		return spec.SecurityContext.SeccompProfile.Type
	}
	return ""
}

// TestWebhookCertSecretShipped: the install ships the webhook's certificate
// Secret, empty and untyped, in the webhook's namespace, so that the webhook
// needs no Secret create and a re-apply never blanks what it wrote.
func TestWebhookCertSecretShipped(t *testing.T) {
	eachOverlay(t, func(t *testing.T, dir string, o objects) {
		var sec corev1.Secret
		o.get(t, "Secret/multinet-webhook-certs", &sec)
		if sec.Namespace != "multinet-system" {
			t.Errorf("Secret in namespace %q", sec.Namespace)
		}
		if len(sec.Data) != 0 || len(sec.StringData) != 0 || sec.Type != "" {
			t.Errorf("Secret ships data %v / stringData %v / type %q: a re-apply would overwrite the webhook's certificates or fail on an existing kubernetes.io/tls Secret", sec.Data, sec.StringData, sec.Type)
		}
		var d appsv1.Deployment
		o.get(t, "Deployment/multinet-webhook", &d)
		if got := argValue(d.Spec.Template.Spec.Containers[0].Args, "--cert-secret"); got != "" && got != sec.Name {
			t.Errorf("webhook --cert-secret=%s, shipped Secret %s", got, sec.Name)
		}
	})
}

// TestWebhookPolicyShipped: the ValidatingAdmissionPolicy that holds the
// webhook's ServiceAccount to caBundle changes is in every overlay, bound
// with Deny, matches that ServiceAccount's requests on both kinds of
// webhook configuration, and compares every field of a v1 webhook but
// clientConfig.caBundle: a field k8s.io/api adds fails this test until the
// policy compares it too. (internal/webhook/registration
// TestWebhookPolicyAgainstAPIServer runs it on a real API server.)
func TestWebhookPolicyShipped(t *testing.T) {
	eachOverlay(t, func(t *testing.T, dir string, o objects) {
		var p admv1.ValidatingAdmissionPolicy
		o.get(t, "ValidatingAdmissionPolicy/multinet-webhook-cabundle-only", &p)
		var b admv1.ValidatingAdmissionPolicyBinding
		o.get(t, "ValidatingAdmissionPolicyBinding/multinet-webhook-cabundle-only", &b)
		if b.Spec.PolicyName != p.Name || !slices.Equal(b.Spec.ValidationActions, []admv1.ValidationAction{admv1.Deny}) || b.Spec.MatchResources != nil {
			t.Errorf("binding %+v: want policy %s, Deny, every object", b.Spec, p.Name)
		}
		if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admv1.Fail {
			t.Error("policy failurePolicy is not Fail")
		}
		var sa corev1.ServiceAccount
		o.get(t, "ServiceAccount/multinet-webhook", &sa)
		user := "system:serviceaccount:" + sa.Namespace + ":" + sa.Name
		if len(p.Spec.MatchConditions) != 1 || !strings.Contains(p.Spec.MatchConditions[0].Expression, `"`+user+`"`) {
			t.Errorf("policy matchConditions %+v do not name %s", p.Spec.MatchConditions, user)
		}
		rr := p.Spec.MatchConstraints.ResourceRules
		if len(rr) != 1 || !slices.Equal(rr[0].Resources, []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"}) ||
			!slices.Contains(rr[0].Operations, admv1.Update) {
			t.Errorf("policy resourceRules %+v", rr)
		}
		var all strings.Builder
		for _, v := range p.Spec.Variables {
			all.WriteString(v.Expression + "\n")
		}
		exprs := all.String()
		for _, typ := range []reflect.Type{reflect.TypeFor[admv1.ValidatingWebhook](), reflect.TypeFor[admv1.MutatingWebhook]()} {
			for _, f := range jsonFields(typ) {
				if f == "clientConfig" || f == "name" {
					continue
				}
				if !strings.Contains(exprs, "o.?"+f+" == w.?"+f) {
					t.Errorf("policy does not compare %s.%s", typ.Name(), f)
				}
			}
		}
		for _, f := range jsonFields(reflect.TypeFor[admv1.WebhookClientConfig]()) {
			if f == "caBundle" {
				if strings.Contains(exprs, "caBundle") {
					t.Error("policy compares caBundle, the one field the webhook must change")
				}
				continue
			}
			if !strings.Contains(exprs, "o.clientConfig.?"+f+" == w.clientConfig.?"+f) {
				t.Errorf("policy does not compare clientConfig.%s", f)
			}
		}
	})
}

// jsonFields are the JSON names of typ's fields.
func jsonFields(typ reflect.Type) []string {
	var out []string
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}
