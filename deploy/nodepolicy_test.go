package deploy_test

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/yaml"
)

// The node-scoped authority policies (deploy/base/multinetd-node-policy.yaml)
// are evaluated here by the API server's own ValidatingAdmissionPolicy code
// (k8s.io/apiserver: the compiler, match conditions, validations and message
// expressions of plugin/policy/validating), on the requests multinetd makes
// and on the ones a node must not. TestMultiNodeTenantNodeToken runs them
// in a cluster.

const (
	multinetdUser     = "system:serviceaccount:multinet-system:multinetd"
	nodeClaim         = "authentication.kubernetes.io/node-name"
	networkStatusKey  = "k8s.v1.cni.cncf.io/network-status"
	nodePolicyPods    = "multinet-multinetd-pods"
	nodePolicyAllocs  = "multinet-multinetd-ipallocations"
	nodePolicyClaims  = "multinet-multinetd-ipamclaims"
	nodePolicyPodsRes = "pods/status"
)

// compiledPolicy is a policy as the API server's plugin compiles it
// (validating.compilePolicy, which is unexported: the same calls).
type compiledPolicy struct {
	policy    *admissionregistrationv1.ValidatingAdmissionPolicy
	validator validating.Validator
}

func compileNodePolicy(t *testing.T, p *admissionregistrationv1.ValidatingAdmissionPolicy) compiledPolicy {
	t.Helper()
	env := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
	fc, err := plugincel.NewCompositedCompiler(env)
	if err != nil {
		t.Fatal(err)
	}
	opts := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil, HasAuthorizer: true}
	msgOpts := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil}
	var vars []plugincel.NamedExpressionAccessor
	for _, v := range p.Spec.Variables {
		vars = append(vars, &validating.Variable{Name: v.Name, Expression: v.Expression})
	}
	fc.CompileAndStoreVariables(vars, opts, environment.StoredExpressions)
	var conds []plugincel.ExpressionAccessor
	for _, mc := range p.Spec.MatchConditions {
		conds = append(conds, (*matchconditions.MatchCondition)(&mc))
	}
	validations := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	messages := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	for i, v := range p.Spec.Validations {
		validations[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		if v.MessageExpression == "" {
			t.Errorf("%s: validation %q has no messageExpression (the refusal names the node and the object)", p.Name, v.Expression)
			continue
		}
		messages[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
	}
	// The API server refuses a policy whose expressions do not compile; the
	// evaluator would only fall back to a generic message.
	match := fc.CompileCondition(conds, opts, environment.StoredExpressions)
	valid := fc.CompileCondition(validations, opts, environment.StoredExpressions)
	msgs := fc.CompileCondition(messages, msgOpts, environment.StoredExpressions)
	for _, e := range [][]error{match.CompilationErrors(), valid.CompilationErrors(), msgs.CompilationErrors()} {
		for _, err := range e {
			t.Errorf("%s: %v", p.Name, err)
		}
	}
	matcher := matchconditions.NewMatcher(match, p.Spec.FailurePolicy, "policy", "validate", p.Name)
	return compiledPolicy{policy: p, validator: validating.NewValidator(valid, matcher,
		fc.CompileCondition(nil, opts, environment.StoredExpressions), msgs, p.Spec.FailurePolicy, nil)}
}

// request is one API request as admission sees it.
type request struct {
	op          admission.Operation
	gvr         schema.GroupVersionResource
	gvk         schema.GroupVersionKind
	subresource string
	namespace   string
	name        string
	obj, old    runtime.Object
	user        user.Info
}

// decide runs the policy on r: "" when allowed, else the refusal (or
// evaluation error) message.
func (c compiledPolicy) decide(t *testing.T, r request) string {
	t.Helper()
	attrs := admission.NewAttributesRecord(r.obj, r.old, r.gvk, r.namespace, r.name, r.gvr, r.subresource, r.op, nil, false, r.user)
	va := &admission.VersionedAttributes{Attributes: attrs, VersionedKind: r.gvk, VersionedObject: admission.NewLazyObject(r.obj), VersionedOldObject: admission.NewLazyObject(r.old)}
	res := c.validator.Validate(context.Background(), r.gvr, va, nil, nil, celconfig.RuntimeCELCostBudget, nil)
	var msgs []string
	for _, d := range res.Decisions {
		if d.Evaluation == validating.EvalError {
			t.Fatalf("%s: evaluation error: %s", c.policy.Name, d.Message)
		}
		if d.Action == validating.ActionDeny {
			msgs = append(msgs, d.Message)
		}
	}
	return strings.Join(msgs, "; ")
}

// nodePolicies renders overlays/default and compiles its policies; it
// checks each is bound, with Deny, to nothing narrower than the policy.
func nodePolicies(t *testing.T) map[string]compiledPolicy {
	t.Helper()
	o := render(t, "overlays/default")
	out := map[string]compiledPolicy{}
	for _, name := range []string{nodePolicyPods, nodePolicyAllocs, nodePolicyClaims} {
		var p admissionregistrationv1.ValidatingAdmissionPolicy
		o.get(t, "ValidatingAdmissionPolicy/"+name, &p)
		// (kustomize, which does not know the kind, stamps the base's
		// namespace on it; kubectl and the API server drop it: the policy
		// is cluster-scoped.)
		if p.Spec.FailurePolicy == nil || *p.Spec.FailurePolicy != admissionregistrationv1.Fail {
			t.Errorf("%s: failurePolicy %v, want Fail", name, p.Spec.FailurePolicy)
		}
		var b admissionregistrationv1.ValidatingAdmissionPolicyBinding
		o.get(t, "ValidatingAdmissionPolicyBinding/"+name, &b)
		if b.Spec.PolicyName != name || len(b.Spec.ValidationActions) != 1 || b.Spec.ValidationActions[0] != admissionregistrationv1.Deny || b.Spec.MatchResources != nil || b.Spec.ParamRef != nil {
			t.Errorf("binding %s: %+v, want policy %s with [Deny] and no narrowing", name, b.Spec, name)
		}
		out[name] = compileNodePolicy(t, &p)
	}
	return out
}

func nodeToken(node string) user.Info {
	u := &user.DefaultInfo{Name: multinetdUser, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:multinet-system", "system:authenticated"},
		Extra: map[string][]string{"authentication.kubernetes.io/pod-name": {"multinetd-x"}}}
	if node != "" {
		u.Extra[nodeClaim] = []string{node}
	}
	return u
}

func workloadPod(node string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "web", UID: "u1", Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{"k8s.v1.cni.cncf.io/networks": "net1", networkStatusKey: `[]`}},
		Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "i"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.5"},
	}
}

func podStatusPatch(u user.Info, old, updated *corev1.Pod) request {
	return request{op: admission.Update, gvr: corev1.SchemeGroupVersion.WithResource("pods"), gvk: corev1.SchemeGroupVersion.WithKind("Pod"),
		subresource: "status", namespace: old.Namespace, name: old.Name, obj: updated, old: old, user: u}
}

func TestNodePolicyMatches(t *testing.T) {
	ps := nodePolicies(t)
	want := map[string]admissionregistrationv1.RuleWithOperations{
		nodePolicyPods: {Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, Resources: []string{nodePolicyPodsRes}}},
		nodePolicyAllocs: {Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{"ipam.multinet.io"}, Resources: []string{"ipallocations"}}},
		nodePolicyClaims: {Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{"k8s.cni.cncf.io"}, Resources: []string{"ipamclaims/status"}}},
	}
	for name, p := range ps {
		mc := p.policy.Spec.MatchConstraints
		if mc == nil || len(mc.ResourceRules) != 1 {
			t.Fatalf("%s: matchConstraints %+v", name, mc)
		}
		got := mc.ResourceRules[0].RuleWithOperations
		w := want[name]
		if strings.Join(got.APIGroups, ",") != strings.Join(w.APIGroups, ",") || strings.Join(got.Resources, ",") != strings.Join(w.Resources, ",") ||
			len(got.Operations) != len(w.Operations) || (len(got.APIVersions) != 1 || got.APIVersions[0] != "*") {
			t.Errorf("%s: matches %+v, want %+v (every version)", name, got, w)
		}
		for i := range w.Operations {
			if i < len(got.Operations) && got.Operations[i] != w.Operations[i] {
				t.Errorf("%s: operations %v, want %v", name, got.Operations, w.Operations)
			}
		}
	}
}

// The ServiceAccount the policies name is the one multinetd's DaemonSet
// runs as, in the namespace the overlay installs it to.
func TestNodePolicyNamesMultinetdServiceAccount(t *testing.T) {
	eachOverlay(t, func(t *testing.T, dir string, o objects) {
		var ds struct {
			Metadata struct{ Namespace string }
			Spec     struct {
				Template struct {
					Spec corev1.PodSpec
				}
			}
		}
		if err := yaml.Unmarshal(o["DaemonSet/multinetd"], &ds); err != nil {
			t.Fatal(err)
		}
		sa := "system:serviceaccount:" + ds.Metadata.Namespace + ":" + ds.Spec.Template.Spec.ServiceAccountName
		if sa != multinetdUser {
			t.Fatalf("multinetd runs as %s, the policies match %s", sa, multinetdUser)
		}
		for _, name := range []string{nodePolicyPods, nodePolicyAllocs, nodePolicyClaims} {
			var p admissionregistrationv1.ValidatingAdmissionPolicy
			o.get(t, "ValidatingAdmissionPolicy/"+name, &p)
			if len(p.Spec.MatchConditions) != 1 || !strings.Contains(p.Spec.MatchConditions[0].Expression, "'"+multinetdUser+"'") {
				t.Errorf("%s: matchConditions %+v do not select %s", name, p.Spec.MatchConditions, multinetdUser)
			}
		}
	})
}

func TestNodePolicyPodStatus(t *testing.T) {
	p := nodePolicies(t)[nodePolicyPods]
	own, other := workloadPod("node-a"), workloadPod("node-b")
	withStatus := func(old *corev1.Pod, mod func(*corev1.Pod)) *corev1.Pod {
		n := old.DeepCopy()
		n.Annotations[networkStatusKey] = `[{"name":"net1","interface":"net1"}]`
		if mod != nil {
			mod(n)
		}
		return n
	}
	for _, tc := range []struct {
		name    string
		user    user.Info
		old     *corev1.Pod
		mod     func(*corev1.Pod)
		refused []string // substrings of the refusal; nil: allowed
	}{
		{name: "network-status of its own node's pod", user: nodeToken("node-a"), old: own},
		{name: "network-status added where there was none", user: nodeToken("node-a"), old: func() *corev1.Pod { p := own.DeepCopy(); delete(p.Annotations, networkStatusKey); return p }()},
		{name: "another node's pod", user: nodeToken("node-a"), old: other,
			refused: []string{"multinetd of node node-a may write only pods of its own node", "pod tenant/web is bound to node node-b"}},
		{name: "an unscheduled pod", user: nodeToken("node-a"), old: workloadPod(""), refused: []string{"pod tenant/web is not bound to a node"}},
		{name: "another annotation", user: nodeToken("node-a"), old: own, mod: func(p *corev1.Pod) { p.Annotations["k8s.v1.cni.cncf.io/networks"] = "evil" },
			refused: []string{"may change only the annotation k8s.v1.cni.cncf.io/network-status of pod tenant/web, not its annotation k8s.v1.cni.cncf.io/networks"}},
		{name: "an annotation removed", user: nodeToken("node-a"), old: own, mod: func(p *corev1.Pod) { delete(p.Annotations, "k8s.v1.cni.cncf.io/networks") },
			refused: []string{"not its annotation k8s.v1.cni.cncf.io/networks"}},
		{name: "a label", user: nodeToken("node-a"), old: own, mod: func(p *corev1.Pod) { p.Labels["app"] = "db" }, refused: []string{"not its labels"}},
		{name: "a finalizer", user: nodeToken("node-a"), old: own, mod: func(p *corev1.Pod) { p.Finalizers = []string{"x/y"} }, refused: []string{"not its finalizers"}},
		{name: "the status", user: nodeToken("node-a"), old: own, mod: func(p *corev1.Pod) { p.Status.PodIP = "10.9.9.9" }, refused: []string{"not its status"}},
		{name: "a token without node claim", user: nodeToken(""), old: own,
			refused: []string{"multinetd (" + multinetdUser + ") may write only pods of its own node, and this credential carries no node claim", "status of pod tenant/web"}},
		{name: "another user is not matched", user: &user.DefaultInfo{Name: "system:node:node-b"}, old: own, mod: func(p *corev1.Pod) { p.Labels["app"] = "db" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := p.decide(t, podStatusPatch(tc.user, tc.old, withStatus(tc.old, tc.mod)))
			checkDecision(t, got, tc.refused)
		})
	}
}

func checkDecision(t *testing.T, got string, refused []string) {
	t.Helper()
	if refused == nil {
		if got != "" {
			t.Fatalf("refused: %s", got)
		}
		return
	}
	if got == "" {
		t.Fatal("allowed, want refused")
	}
	for _, s := range refused {
		if !strings.Contains(got, s) {
			t.Errorf("refusal %q does not say %q", got, s)
		}
	}
}

func allocation(node string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ipam.multinet.io/v1alpha1", "kind": "IPAllocation",
		"metadata": map[string]any{"name": "pool1.10-1-2-3", "labels": map[string]any{"ipam.multinet.io/pool": "pool1"}},
		"spec": map[string]any{"pool": "pool1", "address": "10.1.2.3/24",
			"owner": map[string]any{"containerID": "abc", "ifName": "net1", "node": node, "pod": map[string]any{"namespace": "tenant", "name": "web"}}},
	}}
}

func TestNodePolicyIPAllocations(t *testing.T) {
	p := nodePolicies(t)[nodePolicyAllocs]
	gvr := schema.GroupVersionResource{Group: "ipam.multinet.io", Version: "v1alpha1", Resource: "ipallocations"}
	gvk := schema.GroupVersionKind{Group: "ipam.multinet.io", Version: "v1alpha1", Kind: "IPAllocation"}
	create := func(u user.Info, node string) request {
		return request{op: admission.Create, gvr: gvr, gvk: gvk, name: "pool1.10-1-2-3", obj: allocation(node), user: u}
	}
	del := func(u user.Info, node string) request {
		return request{op: admission.Delete, gvr: gvr, gvk: gvk, name: "pool1.10-1-2-3", old: allocation(node), user: u}
	}
	for _, tc := range []struct {
		name    string
		req     request
		refused []string
	}{
		{name: "create for its node", req: create(nodeToken("node-a"), "node-a")},
		{name: "delete of its node", req: del(nodeToken("node-a"), "node-a")},
		{name: "create for another node", req: create(nodeToken("node-a"), "node-b"),
			refused: []string{"multinetd of node node-a may allocate only addresses of its own node: IPAllocation pool1.10-1-2-3 (pool1 10.1.2.3/24) is of node node-b"}},
		{name: "delete of another node", req: del(nodeToken("node-a"), "node-b"),
			refused: []string{"multinetd of node node-a may release only addresses of its own node: IPAllocation pool1.10-1-2-3 (pool1 10.1.2.3/24) is of node node-b", "multinet-ipam-cleanup"}},
		{name: "create without node claim", req: create(nodeToken(""), "node-a"), refused: []string{"carries no node claim", "CREATE of IPAllocation pool1.10-1-2-3"}},
		{name: "delete without node claim", req: del(nodeToken(""), "node-a"), refused: []string{"carries no node claim", "DELETE of IPAllocation pool1.10-1-2-3"}},
		{name: "the cleanup's ServiceAccount is not matched", req: del(&user.DefaultInfo{Name: "system:serviceaccount:multinet-system:multinet-ipam-cleanup"}, "node-b")},
	} {
		t.Run(tc.name, func(t *testing.T) { checkDecision(t, p.decide(t, tc.req), tc.refused) })
	}
}

func ipamClaim(ips ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "k8s.cni.cncf.io/v1alpha1", "kind": "IPAMClaim",
		"metadata": map[string]any{"namespace": "tenant", "name": "vm1.net1.net1"},
		"spec":     map[string]any{"network": "net1", "interface": "net1"},
	}}
	if ips != nil {
		l := []any{}
		for _, ip := range ips {
			l = append(l, ip)
		}
		u.Object["status"] = map[string]any{"ips": l}
	}
	return u
}

func TestNodePolicyIPAMClaimStatus(t *testing.T) {
	p := nodePolicies(t)[nodePolicyClaims]
	gvr := schema.GroupVersionResource{Group: "k8s.cni.cncf.io", Version: "v1alpha1", Resource: "ipamclaims"}
	gvk := schema.GroupVersionKind{Group: "k8s.cni.cncf.io", Version: "v1alpha1", Kind: "IPAMClaim"}
	update := func(u user.Info, old, updated *unstructured.Unstructured) request {
		return request{op: admission.Update, gvr: gvr, gvk: gvk, subresource: "status", namespace: "tenant", name: "vm1.net1.net1", obj: updated, old: old, user: u}
	}
	for _, tc := range []struct {
		name    string
		req     request
		refused []string
	}{
		{name: "first addresses of a claim", req: update(nodeToken("node-a"), ipamClaim(), ipamClaim("10.1.2.3/24"))},
		{name: "an address of a new range set", req: update(nodeToken("node-a"), ipamClaim("10.1.2.3/24"), ipamClaim("10.1.2.3/24", "fd00::3/64"))},
		{name: "an address replaced", req: update(nodeToken("node-a"), ipamClaim("10.1.2.3/24"), ipamClaim("10.1.2.9/24")),
			refused: []string{"multinetd of node node-a may only add addresses to IPAMClaim tenant/vm1.net1.net1, not change or remove 10.1.2.3/24"}},
		{name: "addresses removed", req: update(nodeToken("node-a"), ipamClaim("10.1.2.3/24", "fd00::3/64"), ipamClaim()),
			refused: []string{"not change or remove 10.1.2.3/24, fd00::3/64"}},
		{name: "without node claim", req: update(nodeToken(""), ipamClaim(), ipamClaim("10.1.2.3/24")),
			refused: []string{"carries no node claim", "status of IPAMClaim tenant/vm1.net1.net1"}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkDecision(t, p.decide(t, tc.req), tc.refused) })
	}
}
