// Package registration renders multinet's MutatingWebhookConfiguration and
// ValidatingWebhookConfiguration (admissionregistration.k8s.io/v1), creates
// or updates them, and patches their caBundle.
//
// The settings, and why (docs/webhook.md, docs/decisions/webhook.md):
//   - failurePolicy Fail on all three webhooks: a pod admitted without its
//     device requests, or with a selection that breaks the rules, fails later
//     at CNI ADD with a worse message; matchConditions keep the pods without
//     a selection annotation away from the webhook, so an outage only blocks
//     pods that use multinet (and NAD writes);
//   - namespaceSelector: kubernetes.io/metadata.name NotIn (kube-system and
//     the webhook's own namespace), so the webhook never blocks itself or the
//     control plane; the IPAMClaim status webhook matches every namespace
//     but only multinetd's requests (Options.NodeAgentUser), which nothing
//     in the webhook's own start-up needs;
//   - sideEffects None, admissionReviewVersions [v1], timeoutSeconds 5,
//     matchPolicy Equivalent, an empty objectSelector, reinvocationPolicy
//     Never (the "add" existing-requests policy is not idempotent).
package registration

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	claimv1alpha1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1alpha1"
	"github.com/multinet/multinet/internal/webhook"
	"github.com/multinet/multinet/pkg/spec/selection"
)

// Webhook names inside the configurations (fully qualified, as the API
// requires).
const (
	PodResourcesWebhook = "pod-resources.webhook.multinet.io"
	PodNetworksWebhook  = "pod-networks.webhook.multinet.io"
	NADConfigWebhook    = "nad-config.webhook.multinet.io"
	// IPAMClaimStatusWebhook holds a node's multinetd to the IPAMClaims of
	// its node's pods (webhook.ValidateIPAMClaimStatus).
	IPAMClaimStatusWebhook = "ipamclaim-status.webhook.multinet.io"
)

// DefaultTimeoutSeconds is the timeoutSeconds of every webhook: the handlers
// answer from memory in well under a millisecond; 5 s leaves room for a slow
// TLS handshake without letting a hung webhook hold pod creation for the
// API's 10 s default.
const DefaultTimeoutSeconds = 5

// NamespaceNameLabel is the label the API server puts on every namespace
// with the namespace's name (Kubernetes ≥ 1.21).
const NamespaceNameLabel = "kubernetes.io/metadata.name"

// PodMatchCondition is the CEL expression that sends only pods with a
// selection annotation to the pod webhooks.
var PodMatchCondition = fmt.Sprintf("has(object.metadata.annotations) && (%q in object.metadata.annotations || %q in object.metadata.annotations)",
	selection.NetworksAnnotation, selection.DefaultNetworkAnnotation)

// Options say how the API server reaches the webhook and which namespaces it
// skips.
type Options struct {
	// MutatingName and ValidatingName are the names of the two configuration
	// objects. Required.
	MutatingName, ValidatingName string
	// URL is the base URL of the webhook server, "https://host:port" without
	// path, query or user info (for a webhook running outside the cluster,
	// e.g. https://127.0.0.1:9443 on a local cluster). When empty, Service is
	// used.
	URL string
	// Service names the Service in front of the webhook: namespace, name and
	// port (default 443).
	ServiceNamespace, ServiceName string
	ServicePort                   int32
	// ExcludeNamespaces are the namespaces whose objects never go to the
	// webhooks (usually kube-system and the webhook's own namespace).
	ExcludeNamespaces []string
	// TimeoutSeconds of every webhook, 1-30; 0 means DefaultTimeoutSeconds.
	TimeoutSeconds int32
	// NoMatchConditions leaves matchConditions out, for API servers older
	// than 1.28 (matchConditions beta); every pod then reaches the webhook.
	NoMatchConditions bool
	// NodeAgentUser is the user of multinetd's node credentials: only its
	// IPAMClaim status writes go to IPAMClaimStatusWebhook. Empty means
	// webhook.DefaultNodeAgentUser.
	NodeAgentUser string
}

// Check returns an error naming the first bad option.
func (o Options) Check() error {
	if o.MutatingName == "" || o.ValidatingName == "" {
		return errors.New("webhook configuration names are required")
	}
	if o.URL != "" {
		u, err := url.Parse(o.URL)
		if err != nil {
			return fmt.Errorf("webhook URL %q: %w", o.URL, err)
		}
		if u.Scheme != "https" || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || strings.Trim(u.Path, "/") != "" {
			return fmt.Errorf("webhook URL %q: must be https://host[:port] without user, path, query or fragment", o.URL)
		}
	} else if o.ServiceNamespace == "" || o.ServiceName == "" {
		return errors.New("webhook client config: either URL or ServiceNamespace and ServiceName are required")
	}
	if o.ServicePort < 0 || o.ServicePort > 65535 {
		return fmt.Errorf("webhook service port %d: must be 1-65535", o.ServicePort)
	}
	if o.TimeoutSeconds < 0 || o.TimeoutSeconds > 30 {
		return fmt.Errorf("webhook timeoutSeconds %d: must be 1-30", o.TimeoutSeconds)
	}
	return nil
}

// clientConfig returns the client config of the handler at path.
func (o Options) clientConfig(path string, caBundle []byte) admv1.WebhookClientConfig {
	cc := admv1.WebhookClientConfig{CABundle: caBundle}
	if o.URL != "" {
		u := strings.TrimRight(o.URL, "/") + path
		cc.URL = &u
		return cc
	}
	port := o.ServicePort
	if port == 0 {
		port = 443
	}
	cc.Service = &admv1.ServiceReference{Namespace: o.ServiceNamespace, Name: o.ServiceName, Path: &path, Port: &port}
	return cc
}

// common holds the settings every webhook shares.
type common struct {
	failurePolicy   admv1.FailurePolicyType
	matchPolicy     admv1.MatchPolicyType
	sideEffects     admv1.SideEffectClass
	timeout         int32
	nsSelector      *metav1.LabelSelector
	objSelector     *metav1.LabelSelector
	reviewVersions  []string
	podMatchConds   []admv1.MatchCondition
	namespacedScope admv1.ScopeType
}

func (o Options) common() common {
	c := common{
		failurePolicy:   admv1.Fail,
		matchPolicy:     admv1.Equivalent,
		sideEffects:     admv1.SideEffectClassNone,
		timeout:         o.TimeoutSeconds,
		objSelector:     &metav1.LabelSelector{},
		reviewVersions:  []string{"v1"},
		namespacedScope: admv1.NamespacedScope,
		nsSelector:      &metav1.LabelSelector{},
	}
	if c.timeout == 0 {
		c.timeout = DefaultTimeoutSeconds
	}
	if len(o.ExcludeNamespaces) > 0 {
		c.nsSelector.MatchExpressions = []metav1.LabelSelectorRequirement{{
			Key: NamespaceNameLabel, Operator: metav1.LabelSelectorOpNotIn, Values: o.ExcludeNamespaces,
		}}
	}
	if !o.NoMatchConditions {
		c.podMatchConds = []admv1.MatchCondition{{Name: "selects-networks", Expression: PodMatchCondition}}
	}
	return c
}

func (c common) rule(group, version, resource string, ops ...admv1.OperationType) []admv1.RuleWithOperations {
	scope := c.namespacedScope
	return []admv1.RuleWithOperations{{
		Operations: ops,
		Rule:       admv1.Rule{APIGroups: []string{group}, APIVersions: []string{version}, Resources: []string{resource}, Scope: &scope},
	}}
}

// webhook returns one webhook with the shared settings.
func (c common) webhook(name string, cc admv1.WebhookClientConfig, rules []admv1.RuleWithOperations, conds []admv1.MatchCondition) admv1.ValidatingWebhook {
	return admv1.ValidatingWebhook{
		Name:                    name,
		ClientConfig:            cc,
		Rules:                   rules,
		FailurePolicy:           &c.failurePolicy,
		MatchPolicy:             &c.matchPolicy,
		NamespaceSelector:       c.nsSelector,
		ObjectSelector:          c.objSelector,
		SideEffects:             &c.sideEffects,
		TimeoutSeconds:          &c.timeout,
		AdmissionReviewVersions: c.reviewVersions,
		MatchConditions:         conds,
	}
}

// asMutating turns v into a MutatingWebhook (the API types share every field
// and JSON name but reinvocationPolicy) with reinvocationPolicy Never.
func asMutating(v admv1.ValidatingWebhook) (admv1.MutatingWebhook, error) {
	var m admv1.MutatingWebhook
	b, err := json.Marshal(v)
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		return m, fmt.Errorf("rendering mutating webhook %s: %w", v.Name, err)
	}
	never := admv1.NeverReinvocationPolicy
	m.ReinvocationPolicy = &never
	return m, nil
}

// Render returns the desired configurations, their webhooks' caBundle set
// to caBundle (PEM; may be nil when the API server trusts the serving
// certificate otherwise):
//
//   - Mutating o.MutatingName: PodResourcesWebhook, pods CREATE → webhook.MutatePodsPath;
//   - Validating o.ValidatingName: PodNetworksWebhook, pods CREATE/UPDATE →
//     webhook.ValidatePodsPath, and NADConfigWebhook,
//     network-attachment-definitions CREATE/UPDATE → webhook.ValidateNADsPath,
//     and IPAMClaimStatusWebhook, ipamclaims/status UPDATE by
//     o.NodeAgentUser → webhook.ValidateIPAMClaimsPath.
//
// Errors: o fails Check.
func Render(o Options, caBundle []byte) (*admv1.MutatingWebhookConfiguration, *admv1.ValidatingWebhookConfiguration, error) {
	if err := o.Check(); err != nil {
		return nil, nil, err
	}
	c := o.common()
	labels := map[string]string{"app.kubernetes.io/managed-by": "multinet-webhook"}
	podResources, err := asMutating(c.webhook(PodResourcesWebhook, o.clientConfig(webhook.MutatePodsPath, caBundle),
		c.rule("", "v1", "pods", admv1.Create), c.podMatchConds))
	if err != nil {
		return nil, nil, err
	}
	mwc := &admv1.MutatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: admv1.SchemeGroupVersion.String(), Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: o.MutatingName, Labels: labels},
		Webhooks:   []admv1.MutatingWebhook{podResources},
	}
	vwc := &admv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: admv1.SchemeGroupVersion.String(), Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: o.ValidatingName, Labels: labels},
		Webhooks: []admv1.ValidatingWebhook{
			c.webhook(PodNetworksWebhook, o.clientConfig(webhook.ValidatePodsPath, caBundle),
				c.rule("", "v1", "pods", admv1.Create, admv1.Update), c.podMatchConds),
			c.webhook(NADConfigWebhook, o.clientConfig(webhook.ValidateNADsPath, caBundle),
				c.rule(nadv1.GroupName, nadv1.Version, nadv1.NetworkAttachmentDefinitionResource, admv1.Create, admv1.Update), nil),
			o.ipamClaimStatusWebhook(c, caBundle),
		},
	}
	return mwc, vwc, nil
}

// ipamClaimStatusWebhook is IPAMClaimStatusWebhook: ipamclaims/status
// UPDATE of every namespace, sent only when the requester is the node
// agent (with NoMatchConditions every requester's; the handler allows the
// others).
func (o Options) ipamClaimStatusWebhook(c common, caBundle []byte) admv1.ValidatingWebhook {
	user := o.NodeAgentUser
	if user == "" {
		user = webhook.DefaultNodeAgentUser
	}
	var conds []admv1.MatchCondition
	if !o.NoMatchConditions {
		conds = []admv1.MatchCondition{{Name: "node-agent", Expression: fmt.Sprintf("request.userInfo.username == %q", user)}}
	}
	c.nsSelector = &metav1.LabelSelector{}
	return c.webhook(IPAMClaimStatusWebhook, o.clientConfig(webhook.ValidateIPAMClaimsPath, caBundle),
		c.rule(claimv1alpha1.SchemeGroupVersion.Group, claimv1alpha1.SchemeGroupVersion.Version, "ipamclaims/status", admv1.Update), conds)
}
