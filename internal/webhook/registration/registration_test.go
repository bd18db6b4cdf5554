package registration

import (
	"context"
	"strings"
	"testing"

	admv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/multinet/multinet/internal/webhook"
)

var svcOpts = Options{
	MutatingName: "multinet-webhook", ValidatingName: "multinet-webhook",
	ServiceNamespace: "multinet-system", ServiceName: "multinet-webhook",
	ExcludeNamespaces: []string{"kube-system", "multinet-system"},
}

func TestRenderService(t *testing.T) {
	mwc, vwc, err := Render(svcOpts, []byte("CA"))
	if err != nil {
		t.Fatal(err)
	}
	if len(mwc.Webhooks) != 1 || len(vwc.Webhooks) != 3 {
		t.Fatalf("%d mutating, %d validating webhooks", len(mwc.Webhooks), len(vwc.Webhooks))
	}
	m := mwc.Webhooks[0]
	if m.Name != PodResourcesWebhook || *m.ReinvocationPolicy != admv1.NeverReinvocationPolicy {
		t.Errorf("mutating webhook %s reinvocation %v", m.Name, *m.ReinvocationPolicy)
	}
	if s := m.ClientConfig.Service; s == nil || s.Namespace != "multinet-system" || s.Name != "multinet-webhook" ||
		*s.Path != webhook.MutatePodsPath || *s.Port != 443 || m.ClientConfig.URL != nil || string(m.ClientConfig.CABundle) != "CA" {
		t.Errorf("mutating client config %+v", m.ClientConfig)
	}
	if ops := m.Rules[0].Operations; len(ops) != 1 || ops[0] != admv1.Create || m.Rules[0].Resources[0] != "pods" {
		t.Errorf("mutating rules %+v", m.Rules)
	}
	type common struct {
		name           string
		fp             *admv1.FailurePolicyType
		mp             *admv1.MatchPolicyType
		se             *admv1.SideEffectClass
		to             *int32
		ns, obj        *metav1.LabelSelector
		versions       []string
		conds          []admv1.MatchCondition
		path           string
		wantConditions bool
	}
	all := []common{
		{m.Name, m.FailurePolicy, m.MatchPolicy, m.SideEffects, m.TimeoutSeconds, m.NamespaceSelector, m.ObjectSelector, m.AdmissionReviewVersions, m.MatchConditions, *m.ClientConfig.Service.Path, true},
	}
	for _, v := range vwc.Webhooks[:2] {
		all = append(all, common{v.Name, v.FailurePolicy, v.MatchPolicy, v.SideEffects, v.TimeoutSeconds, v.NamespaceSelector, v.ObjectSelector, v.AdmissionReviewVersions, v.MatchConditions, *v.ClientConfig.Service.Path, v.Name == PodNetworksWebhook})
	}
	wantPaths := map[string]string{PodResourcesWebhook: webhook.MutatePodsPath, PodNetworksWebhook: webhook.ValidatePodsPath, NADConfigWebhook: webhook.ValidateNADsPath}
	for _, c := range all {
		if *c.fp != admv1.Fail || *c.mp != admv1.Equivalent || *c.se != admv1.SideEffectClassNone || *c.to != 5 {
			t.Errorf("%s: failurePolicy %s matchPolicy %s sideEffects %s timeout %d", c.name, *c.fp, *c.mp, *c.se, *c.to)
		}
		if len(c.versions) != 1 || c.versions[0] != "v1" {
			t.Errorf("%s: admissionReviewVersions %v", c.name, c.versions)
		}
		if c.obj == nil || len(c.obj.MatchLabels)+len(c.obj.MatchExpressions) != 0 {
			t.Errorf("%s: objectSelector %v", c.name, c.obj)
		}
		if len(c.ns.MatchExpressions) != 1 || c.ns.MatchExpressions[0].Key != NamespaceNameLabel ||
			c.ns.MatchExpressions[0].Operator != metav1.LabelSelectorOpNotIn ||
			strings.Join(c.ns.MatchExpressions[0].Values, ",") != "kube-system,multinet-system" {
			t.Errorf("%s: namespaceSelector %+v", c.name, c.ns)
		}
		if (len(c.conds) == 1) != c.wantConditions || (c.wantConditions && c.conds[0].Expression != PodMatchCondition) {
			t.Errorf("%s: matchConditions %+v", c.name, c.conds)
		}
		if c.path != wantPaths[c.name] {
			t.Errorf("%s: path %s", c.name, c.path)
		}
	}
	checkIPAMClaimStatusWebhook(t, vwc.Webhooks[2], webhook.DefaultNodeAgentUser)
	nadRule := vwc.Webhooks[1].Rules[0]
	if nadRule.APIGroups[0] != "k8s.cni.cncf.io" || nadRule.Resources[0] != "network-attachment-definitions" ||
		len(nadRule.Operations) != 2 || *nadRule.Scope != admv1.NamespacedScope {
		t.Errorf("NAD rule %+v", nadRule)
	}
	if !strings.Contains(PodMatchCondition, `"k8s.v1.cni.cncf.io/networks" in object.metadata.annotations`) {
		t.Errorf("match condition %s", PodMatchCondition)
	}
}

func TestRenderURL(t *testing.T) {
	o := svcOpts
	o.URL = "https://127.0.0.1:9443/"
	o.TimeoutSeconds = 3
	o.NoMatchConditions = true
	mwc, vwc, err := Render(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if u := mwc.Webhooks[0].ClientConfig.URL; u == nil || *u != "https://127.0.0.1:9443/mutate-pods" || mwc.Webhooks[0].ClientConfig.Service != nil {
		t.Errorf("url %v", u)
	}
	if u := vwc.Webhooks[1].ClientConfig.URL; *u != "https://127.0.0.1:9443/validate-nads" {
		t.Errorf("url %s", *u)
	}
	if *vwc.Webhooks[0].TimeoutSeconds != 3 || vwc.Webhooks[0].MatchConditions != nil {
		t.Error("timeout or matchConditions options ignored")
	}
}

func TestOptionsCheck(t *testing.T) {
	for _, edit := range []func(*Options){
		func(o *Options) { o.MutatingName = "" },
		func(o *Options) { o.ServiceName = "" },
		func(o *Options) { o.URL = "http://127.0.0.1:9443" },
		func(o *Options) { o.URL = "https://127.0.0.1:9443/x" },
		func(o *Options) { o.URL = "https://u:p@127.0.0.1:9443" },
		func(o *Options) { o.TimeoutSeconds = 31 },
		func(o *Options) { o.ServicePort = 70000 },
	} {
		o := svcOpts
		edit(&o)
		if err := o.Check(); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

func countVerb(cs *fake.Clientset, verb string) int {
	n := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == verb {
			n++
		}
	}
	return n
}

func TestApply(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset()
	c := cs.AdmissionregistrationV1()
	if err := Apply(ctx, c, svcOpts, []byte("CA1")); err != nil {
		t.Fatal(err)
	}
	if countVerb(cs, "create") != 2 {
		t.Fatalf("%d creates", countVerb(cs, "create"))
	}
	// Idempotent.
	if err := Apply(ctx, c, svcOpts, []byte("CA1")); err != nil {
		t.Fatal(err)
	}
	if n := countVerb(cs, "update"); n != 0 {
		t.Errorf("%d updates of unchanged configurations", n)
	}
	// Drift (someone edited the policy, added a label) is repaired; other labels stay.
	vwc, _ := c.ValidatingWebhookConfigurations().Get(ctx, "multinet-webhook", metav1.GetOptions{})
	ignore := admv1.Ignore
	vwc.Webhooks[0].FailurePolicy = &ignore
	vwc.Labels["team"] = "net"
	if _, err := c.ValidatingWebhookConfigurations().Update(ctx, vwc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := Apply(ctx, c, svcOpts, []byte("CA2")); err != nil {
		t.Fatal(err)
	}
	vwc, _ = c.ValidatingWebhookConfigurations().Get(ctx, "multinet-webhook", metav1.GetOptions{})
	if *vwc.Webhooks[0].FailurePolicy != admv1.Fail || vwc.Labels["team"] != "net" || string(vwc.Webhooks[1].ClientConfig.CABundle) != "CA2" {
		t.Errorf("after Apply: failurePolicy %s labels %v", *vwc.Webhooks[0].FailurePolicy, vwc.Labels)
	}
	mwc, _ := c.MutatingWebhookConfigurations().Get(ctx, "multinet-webhook", metav1.GetOptions{})
	if string(mwc.Webhooks[0].ClientConfig.CABundle) != "CA2" {
		t.Error("mutating caBundle not updated")
	}
}

func TestPatchCABundle(t *testing.T) {
	ctx := context.Background()
	mwc, vwc, err := Render(svcOpts, []byte("old"))
	if err != nil {
		t.Fatal(err)
	}
	// Someone else's manifests: the webhook only touches caBundle.
	vwc.Webhooks[1].TimeoutSeconds = new(int32(9))
	vwc.Annotations = map[string]string{"owner": "kustomize"}
	cs := fake.NewClientset(mwc, vwc)
	c := cs.AdmissionregistrationV1()
	if err := PatchCABundle(ctx, c, "multinet-webhook", "multinet-webhook", []byte("new")); err != nil {
		t.Fatal(err)
	}
	gotM, _ := c.MutatingWebhookConfigurations().Get(ctx, "multinet-webhook", metav1.GetOptions{})
	gotV, _ := c.ValidatingWebhookConfigurations().Get(ctx, "multinet-webhook", metav1.GetOptions{})
	for _, cc := range []admv1.WebhookClientConfig{gotM.Webhooks[0].ClientConfig, gotV.Webhooks[0].ClientConfig, gotV.Webhooks[1].ClientConfig} {
		if string(cc.CABundle) != "new" {
			t.Errorf("caBundle %q", cc.CABundle)
		}
	}
	if *gotV.Webhooks[1].TimeoutSeconds != 9 || gotV.Annotations["owner"] != "kustomize" {
		t.Error("PatchCABundle changed more than caBundle")
	}
	updates := countVerb(cs, "update")
	if err := PatchCABundle(ctx, c, "multinet-webhook", "multinet-webhook", []byte("new")); err != nil {
		t.Fatal(err)
	}
	if countVerb(cs, "update") != updates {
		t.Error("unchanged caBundle written again")
	}

	err = PatchCABundle(ctx, c, "missing", "multinet-webhook", []byte("newer"))
	if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), `MutatingWebhookConfiguration "missing"`) {
		t.Errorf("missing configuration: %v", err)
	}
	gotV, _ = c.ValidatingWebhookConfigurations().Get(ctx, "multinet-webhook", metav1.GetOptions{})
	if string(gotV.Webhooks[0].ClientConfig.CABundle) != "newer" {
		t.Error("the existing configuration was not patched when the other is missing")
	}
}

// checkIPAMClaimStatusWebhook: IPAMClaim status UPDATEs of every namespace
// (no namespaceSelector expression: a node may not write a claim in
// kube-system either), only the node agent's (matchConditions), fail
// closed.
func checkIPAMClaimStatusWebhook(t *testing.T, w admv1.ValidatingWebhook, user string) {
	t.Helper()
	if w.Name != IPAMClaimStatusWebhook || *w.ClientConfig.Service.Path != webhook.ValidateIPAMClaimsPath || *w.FailurePolicy != admv1.Fail {
		t.Errorf("IPAMClaim status webhook %s path %s failurePolicy %s", w.Name, *w.ClientConfig.Service.Path, *w.FailurePolicy)
	}
	if w.NamespaceSelector == nil || len(w.NamespaceSelector.MatchExpressions)+len(w.NamespaceSelector.MatchLabels) != 0 {
		t.Errorf("IPAMClaim status webhook: namespaceSelector %+v, want every namespace", w.NamespaceSelector)
	}
	if len(w.Rules) != 1 || w.Rules[0].APIGroups[0] != "k8s.cni.cncf.io" || w.Rules[0].Resources[0] != "ipamclaims/status" ||
		len(w.Rules[0].Operations) != 1 || w.Rules[0].Operations[0] != admv1.Update {
		t.Errorf("IPAMClaim status webhook rules %+v", w.Rules)
	}
	if len(w.MatchConditions) != 1 || w.MatchConditions[0].Expression != `request.userInfo.username == "`+user+`"` {
		t.Errorf("IPAMClaim status webhook matchConditions %+v, want the node agent %s only", w.MatchConditions, user)
	}
}
