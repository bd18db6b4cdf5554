package podnetworks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
)

// NAD trust policy (docs/nad-trust.md, docs/decisions/nad-trust.md): which
// plugin types a namespace's NetworkAttachmentDefinitions may use and which
// host-reaching keys they may carry. The webhook refuses a NAD that breaks
// it at CREATE/UPDATE, multinetd refuses an ADD to one (a NAD stored before
// the policy), and kubectl multinet lint --cluster lists them.

// Identity of the policy file.
const (
	NADTrustAPIVersion = "multinet.io/v1alpha1"
	NADTrustKind       = "NADTrustPolicy"
)

// NADTrustLabel is the namespace label the shipped policy honours: a
// namespace labelled NADTrustLabel=NADTrustUnrestricted by a cluster admin
// is unrestricted (rule "admin-labelled"). Namespace admins normally cannot
// label their own namespace; where they can, drop the rule.
const (
	NADTrustLabel        = "multinet.io/nad-trust"
	NADTrustUnrestricted = "unrestricted"
)

// ReferencePlugins are the plugin types (IPAM types included) a rule allows
// when it lists no plugins: the reference CNI plugins
// (containernetworking/plugins) and multinet's own.
var ReferencePlugins = []string{
	"bandwidth", "bridge", "dhcp", "dummy", "firewall", "host-device", "host-local",
	"ipvlan", "loopback", "macvlan", "portmap", "ptp", "sbr", "static", "tap",
	"tuning", "vlan", "vrf", "multinet-ipam", "multinet-netdev",
}

// nodeKey is a key of one plugin type that names a node object.
type nodeKey struct {
	key string
	// what the value names, for the message.
	what string
	// implicit, when set, is what the plugin uses when the key is absent:
	// the absent key names that node object too (bridge's "cni0").
	implicit string
}

// NodeKeys are, per plugin type, the keys of its config object that name a
// node object (docs/decisions/nad-trust.md lists why each). Besides them,
// every plugin and IPAM object's "runtimeConfig" (a literal one) and every
// key whose name ends in path, dir, dirs, file or socket, or is
// "kubeconfig", at any depth outside "capabilities", names a node object
// (isPathKey).
var nodeKeys = map[string][]nodeKey{
	"bridge": {
		{key: "bridge", what: "the node bridge it creates or joins", implicit: "cni0"},
		{key: "ipMasq", what: "node iptables/nftables masquerading"},
		{key: "ipMasqBackend", what: "node iptables/nftables masquerading"},
		{key: "isGateway", what: "an address and routes on the node bridge"},
		{key: "isDefaultGateway", what: "an address and routes on the node bridge"},
		{key: "forceAddress", what: "the node bridge's addresses"},
	},
	"macvlan":         {{key: "master", what: "a node network interface", implicit: "the node's default-route interface"}},
	"ipvlan":          {{key: "master", what: "a node network interface", implicit: "the node's default-route interface"}},
	"vlan":            {{key: "master", what: "a node network interface"}},
	"tap":             {{key: "bridge", what: "a node bridge"}},
	"ptp":             {{key: "ipMasq", what: "node iptables/nftables masquerading"}, {key: "ipMasqBackend", what: "node iptables/nftables masquerading"}},
	"host-device":     {{key: "device", what: "a node network interface"}, {key: "hwaddr", what: "a node network interface"}, {key: "kernelpath", what: "a node device"}, {key: "pciBusID", what: "a node PCI device"}},
	"multinet-netdev": {{key: "deviceID", what: "a node network interface or PCI device"}, {key: "device", what: "a node network interface"}, {key: "pciBusID", what: "a node PCI device"}},
	"portmap":         {{key: "conditionsV4", what: "node iptables rules"}, {key: "conditionsV6", what: "node iptables rules"}, {key: "externalSetMarkChain", what: "a node iptables chain"}, {key: "markMasqBit", what: "node iptables marks"}, {key: "masqAll", what: "node iptables masquerading"}},
	"firewall":        {{key: "iptablesAdminChainName", what: "a node iptables chain"}},
}

// isPathKey reports whether key, by its name, holds a node path: a file,
// directory or socket of the node (host-local "dataDir", dhcp
// "daemonSocketPath", multinet-ipam "socketPath", bin dirs, kubeconfig).
func isPathKey(key string) bool {
	k := strings.ToLower(key)
	if k == "kubeconfig" {
		return true
	}
	for _, suffix := range []string{"path", "dir", "dirs", "file", "socket"} {
		if strings.HasSuffix(k, suffix) {
			return true
		}
	}
	return false
}

// NADTrustPolicy is the parsed policy file: rules, first match wins.
//
//	apiVersion: multinet.io/v1alpha1
//	kind: NADTrustPolicy
//	rules:
//	- name: tenants
//	  namespaceSelector: {}
//	  allowedKeys:
//	  - key: master
//	    plugins: [macvlan]
//	    values: ["eth1"]
type NADTrustPolicy struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Rules      []NADTrustRule `json:"rules"`
}

// NADTrustRule says what the NADs of the namespaces it selects may carry.
// It selects a namespace named in Namespaces, one of multinetd's
// globalNamespaces when GlobalNamespaces is set, or one whose labels
// NamespaceSelector matches ({} matches every namespace).
type NADTrustRule struct {
	// Name names the rule in refusals. Required, unique.
	Name              string                `json:"name"`
	Namespaces        []string              `json:"namespaces,omitempty"`
	GlobalNamespaces  bool                  `json:"globalNamespaces,omitempty"`
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// Unrestricted: any plugin type, any key.
	Unrestricted bool `json:"unrestricted,omitempty"`
	// Plugins are the plugin and IPAM types allowed; "*" is any. Absent:
	// ReferencePlugins.
	Plugins []string `json:"plugins,omitempty"`
	// AllowedKeys are the host-reaching keys allowed; none by default.
	AllowedKeys []NADTrustKey `json:"allowedKeys,omitempty"`

	selector labels.Selector
}

// NADTrustKey allows one host-reaching key.
type NADTrustKey struct {
	// Key is the key's name ("master", "dataDir", "runtimeConfig"); "*" is
	// every host-reaching key.
	Key string `json:"key"`
	// Plugins restricts it to these plugin (or IPAM) types; absent: any.
	Plugins []string `json:"plugins,omitempty"`
	// Values restricts it to these values, each a path.Match pattern
	// ("eth1", "vlan*", "/var/lib/cni/team-a/*"); absent: any. A value
	// that is not a JSON string is matched as its JSON text ("true"); an
	// absent key with an implicit node object (bridge's "cni0") as that
	// object's name.
	Values []string `json:"values,omitempty"`
}

// ParseNADTrustPolicy parses a policy file (YAML or JSON), strictly:
// unknown fields are errors. Errors name the rule and the field.
func ParseNADTrustPolicy(data []byte) (*NADTrustPolicy, error) {
	p := &NADTrustPolicy{}
	if err := yaml.UnmarshalStrict(data, p); err != nil {
		return nil, fmt.Errorf("NAD trust policy: %w", err)
	}
	if err := p.complete(); err != nil {
		return nil, fmt.Errorf("NAD trust policy: %w", err)
	}
	return p, nil
}

// complete checks p and builds the selectors.
func (p *NADTrustPolicy) complete() error {
	if p.APIVersion != NADTrustAPIVersion || p.Kind != NADTrustKind {
		return fmt.Errorf("apiVersion %q, kind %q: must be %q, %q", p.APIVersion, p.Kind, NADTrustAPIVersion, NADTrustKind)
	}
	if len(p.Rules) == 0 {
		return errors.New("rules: at least one rule is required (a namespace no rule selects may create no NAD)")
	}
	names := map[string]bool{}
	for i := range p.Rules {
		r := &p.Rules[i]
		field := fmt.Sprintf("rules[%d]", i)
		if r.Name == "" {
			return fmt.Errorf("%s.name: required", field)
		}
		if names[r.Name] {
			return fmt.Errorf("%s.name: %q: another rule has that name", field, r.Name)
		}
		names[r.Name] = true
		field = fmt.Sprintf("rules[%d] %q", i, r.Name)
		if len(r.Namespaces) == 0 && !r.GlobalNamespaces && r.NamespaceSelector == nil {
			return fmt.Errorf("%s: selects no namespace: set namespaces, globalNamespaces or namespaceSelector ({} selects every namespace)", field)
		}
		for _, ns := range r.Namespaces {
			if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
				return fmt.Errorf("%s.namespaces: %q: %s", field, ns, strings.Join(msgs, "; "))
			}
		}
		if r.NamespaceSelector != nil {
			sel, err := metav1.LabelSelectorAsSelector(r.NamespaceSelector)
			if err != nil {
				return fmt.Errorf("%s.namespaceSelector: %w", field, err)
			}
			r.selector = sel
		}
		if r.Unrestricted && (r.Plugins != nil || r.AllowedKeys != nil) {
			return fmt.Errorf("%s: unrestricted allows every plugin and key: leave out plugins and allowedKeys", field)
		}
		for _, t := range r.Plugins {
			if strings.TrimSpace(t) == "" {
				return fmt.Errorf("%s.plugins: empty plugin type", field)
			}
		}
		for j, k := range r.AllowedKeys {
			kf := fmt.Sprintf("%s.allowedKeys[%d]", field, j)
			if strings.TrimSpace(k.Key) == "" {
				return fmt.Errorf("%s.key: required", kf)
			}
			for _, v := range k.Values {
				if _, err := path.Match(v, ""); err != nil {
					return fmt.Errorf("%s.values: %q: %w", kf, v, err)
				}
			}
		}
	}
	return nil
}

// DefaultNADTrustPolicyYAML is the shipped policy (deploy/base's ConfigMap
// multinet-nad-trust holds the same), used when no file is configured.
const DefaultNADTrustPolicyYAML = `apiVersion: multinet.io/v1alpha1
kind: NADTrustPolicy
rules:
# Admin-owned namespaces: multinetd's globalNamespaces, kube-system and
# multinet-system. Their NADs may use any plugin and any key.
- name: admin-owned
  namespaces: [kube-system, multinet-system]
  globalNamespaces: true
  unrestricted: true
# Namespaces a cluster admin labelled multinet.io/nad-trust=unrestricted.
- name: admin-labelled
  namespaceSelector:
    matchLabels:
      multinet.io/nad-trust: unrestricted
  unrestricted: true
# Every other namespace: the reference plugins, no key that names a node
# object (docs/nad-trust.md lists them).
- name: tenants
  namespaceSelector: {}
`

// ReadNADTrustPolicy reads and parses the policy file at path (the
// ConfigMap multinet-nad-trust mounted by multinetd and the webhook); ""
// gives DefaultNADTrustPolicy. The one I/O of this package. Errors: the file
// cannot be read, or ParseNADTrustPolicy's, naming the file.
func ReadNADTrustPolicy(path string) (*NADTrustPolicy, error) {
	if path == "" {
		return DefaultNADTrustPolicy(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	p, err := ParseNADTrustPolicy(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}

// DefaultNADTrustPolicy returns the shipped policy
// (DefaultNADTrustPolicyYAML).
func DefaultNADTrustPolicy() *NADTrustPolicy {
	p, err := ParseNADTrustPolicy([]byte(DefaultNADTrustPolicyYAML))
	if err != nil {
		panic("podnetworks: the default NAD trust policy does not parse: " + err.Error())
	}
	return p
}

// NamespaceLabels reads a namespace's labels: nil and no error when the
// namespace does not exist; an error when the lookup failed.
type NamespaceLabels interface {
	NamespaceLabels(ctx context.Context, name string) (map[string]string, error)
}

// NamespaceLabelsFunc adapts a function to NamespaceLabels.
type NamespaceLabelsFunc func(ctx context.Context, name string) (map[string]string, error)

// NamespaceLabels calls f.
func (f NamespaceLabelsFunc) NamespaceLabels(ctx context.Context, name string) (map[string]string, error) {
	return f(ctx, name)
}

// NADTrust is the NAD trust policy in force and how to read the namespaces'
// labels its selectors match.
type NADTrust struct {
	// Policy is the rules; nil enforces none (every NAD is trusted).
	Policy *NADTrustPolicy
	// Namespaces reads namespace labels; nil: no namespace has labels.
	Namespaces NamespaceLabels
}

// rule returns the first rule selecting namespace ns with labels, nil
// when none does.
func (p *NADTrustPolicy) rule(ns string, nsLabels map[string]string, global []string) *NADTrustRule {
	for i := range p.Rules {
		r := &p.Rules[i]
		if slices.Contains(r.Namespaces, ns) ||
			(r.GlobalNamespaces && slices.Contains(global, ns)) ||
			(r.selector != nil && r.selector.Matches(labels.Set(nsLabels))) {
			return r
		}
	}
	return nil
}

// TrustViolation is one thing of a NAD's spec.config its namespace's trust
// rule does not allow.
type TrustViolation struct {
	// Rule is the rule's name; "" when no rule selects the namespace.
	Rule      string
	Namespace string
	// Plugin is the type of the plugin (or IPAM) object holding Key.
	Plugin string
	// Key is the field path in spec.config ("plugins[0].device",
	// "ipam.dataDir", "type"); Value its value as matched.
	Key, Value string
	// What the key names on the node; "" for a plugin type not allowed.
	What string
}

// Error reads like: spec.config: key "plugins[0].device" ("eth0") of plugin
// "host-device" names a node object (a node network interface): NAD trust
// rule "tenants" of namespace "team-a" does not allow it.
func (v TrustViolation) Error() string {
	rule := fmt.Sprintf("NAD trust rule %q of namespace %q does not allow it", v.Rule, v.Namespace)
	if v.Rule == "" {
		rule = fmt.Sprintf("no NAD trust rule selects namespace %q", v.Namespace)
	}
	if v.What == "" {
		return fmt.Sprintf("key %q: plugin %q: %s (docs/nad-trust.md)", v.Key, v.Plugin, rule)
	}
	return fmt.Sprintf("key %q (%q) of plugin %q names a node object (%s): %s (docs/nad-trust.md)", v.Key, v.Value, v.Plugin, v.What, rule)
}

// CheckNADTrust checks nad's spec.config against p.NADTrust: each plugin
// and IPAM type its namespace's rule allows, each host-reaching key
// allowed; rules with globalNamespaces select p.Isolation.GlobalNamespaces.
// No violation when p.NADTrust.Policy is nil or spec.config is empty (the
// node's config is the admin's). A spec.config that is not JSON is
// CheckNAD's to report: no violation here. Errors: reading the namespace's
// labels failed.
func CheckNADTrust(ctx context.Context, nad *nadv1.NetworkAttachmentDefinition, p Policy) ([]TrustViolation, error) {
	t := p.NADTrust
	if t.Policy == nil || nad.Spec.Config == "" {
		return nil, nil
	}
	var nsLabels map[string]string
	if t.Namespaces != nil {
		var err error
		if nsLabels, err = t.Namespaces.NamespaceLabels(ctx, nad.Namespace); err != nil {
			return nil, fmt.Errorf("reading the labels of namespace %q (NAD trust policy): %w", nad.Namespace, err)
		}
	}
	r := t.Policy.rule(nad.Namespace, nsLabels, p.Isolation.GlobalNamespaces)
	if r != nil && r.Unrestricted {
		return nil, nil
	}
	var conf map[string]any
	if err := json.Unmarshal([]byte(nad.Spec.Config), &conf); err != nil {
		return nil, nil
	}
	c := &trustCheck{rule: r, ns: nad.Namespace}
	if plugins, ok := conf["plugins"].([]any); ok {
		for i, p := range plugins {
			if obj, ok := p.(map[string]any); ok {
				c.plugin(fmt.Sprintf("plugins[%d].", i), obj)
			}
		}
	} else {
		c.plugin("", conf)
	}
	return c.out, nil
}

// trustCheck holds one CheckNADTrust walk.
type trustCheck struct {
	rule *NADTrustRule
	ns   string
	out  []TrustViolation
}

// plugin checks one plugin object (prefix is its field path) and its ipam.
func (c *trustCheck) plugin(prefix string, obj map[string]any) {
	typ, _ := obj["type"].(string)
	c.object(prefix, typ, obj)
	if ipam, ok := obj["ipam"].(map[string]any); ok {
		ipamType, _ := ipam["type"].(string)
		c.object(prefix+"ipam.", ipamType, ipam)
	}
}

// object checks the type and keys of one plugin or IPAM object.
func (c *trustCheck) object(prefix, typ string, obj map[string]any) {
	if typ != "" && !c.pluginAllowed(typ) {
		c.add(TrustViolation{Plugin: typ, Key: prefix + "type", Value: strconv.Quote(typ)})
	}
	for _, nk := range nodeKeys[typ] {
		v, present := obj[nk.key]
		switch {
		case present:
			c.key(prefix+nk.key, nk.key, typ, valueText(v), nk.what)
		case nk.implicit != "":
			c.key(prefix+nk.key, nk.key, typ, nk.implicit, nk.what+", absent: "+nk.implicit)
		}
	}
	if v, ok := obj["runtimeConfig"]; ok {
		c.key(prefix+"runtimeConfig", "runtimeConfig", typ, valueText(v), "a literal runtimeConfig: the runtime's values, such as device-info file paths")
	}
	c.paths(prefix, typ, obj, true)
}

// paths checks the path-named keys of obj at any depth, except
// "capabilities", "runtimeConfig" (checked whole) and "ipam" (its own
// object).
func (c *trustCheck) paths(prefix, typ string, obj map[string]any, top bool) {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if top && (k == "capabilities" || k == "runtimeConfig" || k == "ipam" || isNodeKey(typ, k)) {
			continue
		}
		v := obj[k]
		if isPathKey(k) {
			c.key(prefix+k, k, typ, valueText(v), "a node file, directory or socket")
			continue
		}
		switch x := v.(type) {
		case map[string]any:
			c.paths(prefix+k+".", typ, x, false)
		case []any:
			for i, e := range x {
				if m, ok := e.(map[string]any); ok {
					c.paths(fmt.Sprintf("%s%s[%d].", prefix, k, i), typ, m, false)
				}
			}
		}
	}
}

// isNodeKey reports whether key is one of nodeKeys[typ].
func isNodeKey(typ, key string) bool {
	return slices.ContainsFunc(nodeKeys[typ], func(nk nodeKey) bool { return nk.key == key })
}

// pluginAllowed reports whether the rule allows plugin type typ.
func (c *trustCheck) pluginAllowed(typ string) bool {
	if c.rule == nil {
		return false
	}
	allowed := c.rule.Plugins
	if allowed == nil {
		allowed = ReferencePlugins
	}
	return slices.Contains(allowed, "*") || slices.Contains(allowed, typ)
}

// key records host-reaching key name (at field path) of plugin typ with
// value unless the rule allows it.
func (c *trustCheck) key(field, name, typ, value, what string) {
	if c.rule != nil {
		for _, k := range c.rule.AllowedKeys {
			if (k.Key == "*" || k.Key == name) && (k.Plugins == nil || slices.Contains(k.Plugins, typ)) && valueAllowed(k.Values, value) {
				return
			}
		}
	}
	c.add(TrustViolation{Plugin: typ, Key: field, Value: value, What: what})
}

func (c *trustCheck) add(v TrustViolation) {
	v.Namespace = c.ns
	if c.rule != nil {
		v.Rule = c.rule.Name
	}
	c.out = append(c.out, v)
}

// valueAllowed reports whether value matches one of patterns (none: any).
func valueAllowed(patterns []string, value string) bool {
	if patterns == nil {
		return true
	}
	for _, p := range patterns {
		if ok, _ := path.Match(p, value); ok {
			return true
		}
	}
	return false
}

// valueText is a JSON value as matched and shown: a string as it is,
// anything else as compact JSON.
func valueText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// trustFindings are the violations as CheckNAD findings on spec.config.
func trustFindings(vs []TrustViolation) []Finding {
	out := make([]Finding, len(vs))
	for i, v := range vs {
		out[i] = Finding{Field: "spec.config", Message: v.Error()}
	}
	return out
}

// CheckNADTrustFindings is CheckNADTrust's violations as CheckNAD
// findings (errors on "spec.config"), for the webhook and lint.
func CheckNADTrustFindings(ctx context.Context, nad *nadv1.NetworkAttachmentDefinition, p Policy) ([]Finding, error) {
	vs, err := CheckNADTrust(ctx, nad, p)
	if err != nil {
		return nil, err
	}
	return trustFindings(vs), nil
}

// checkTrust refuses, at ADD, a NAD of spec.config that breaks the trust
// policy (a NAD stored before the policy, or past a webhook that did not
// enforce it): the attachment fails with the violations. Errors: reading the
// namespace's labels failed (*LookupError).
func (c *checker) checkTrust(r *nadResult, namespace, name string) error {
	if r.nad == nil || r.problem != "" || r.source != ConfigSpec {
		return nil
	}
	vs, err := CheckNADTrust(c.ctx, r.nad, c.opts.Policy)
	if err != nil {
		return &LookupError{NAD: namespace + "/" + name, Err: err}
	}
	if len(vs) == 0 {
		return nil
	}
	msgs := make([]string, len(vs))
	for i, v := range vs {
		msgs[i] = v.Error()
	}
	r.problem = fmt.Sprintf("NetworkAttachmentDefinition %s/%s: spec.config: %s", namespace, name, strings.Join(msgs, "; "))
	return nil
}
