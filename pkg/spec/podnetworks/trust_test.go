package podnetworks

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// labelsOf is a NamespaceLabels over a map; err, when set, is every answer.
type labelsOf struct {
	m   map[string]map[string]string
	err error
}

func (l labelsOf) NamespaceLabels(_ context.Context, name string) (map[string]string, error) {
	return l.m[name], l.err
}

// trusted labels namespace "trusted" as the shipped policy's admin label.
var defaultLabels = labelsOf{m: map[string]map[string]string{
	"trusted": {NADTrustLabel: NADTrustUnrestricted},
	"team-b":  {"team": "b"},
}}

func defaultTrust() Policy {
	return Policy{NADTrust: NADTrust{Policy: DefaultNADTrustPolicy(), Namespaces: defaultLabels}}
}

func violations(t *testing.T, p Policy, ns, config string) []TrustViolation {
	t.Helper()
	vs, err := CheckNADTrust(context.Background(), nad(ns, "n", config, nil), p)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// TestNADTrustDefaultRefuses: under the shipped policy a tenant namespace's
// NAD is refused each host-reaching key and plugin, naming key, plugin and
// rule; the admin-owned and admin-labelled namespaces may carry them.
func TestNADTrustDefaultRefuses(t *testing.T) {
	cases := []struct {
		name, config, key, plugin string
	}{
		{"host-device device", `{"cniVersion":"1.0.0","type":"host-device","device":"eth0"}`, "device", "host-device"},
		{"host-device pciBusID", `{"cniVersion":"1.0.0","type":"host-device","pciBusID":"0000:00:1f.6"}`, "pciBusID", "host-device"},
		{"host-device hwaddr", `{"cniVersion":"1.0.0","type":"host-device","hwaddr":"aa:bb:cc:dd:ee:ff"}`, "hwaddr", "host-device"},
		{"host-device kernelpath", `{"cniVersion":"1.0.0","type":"host-device","kernelpath":"/sys/devices/x"}`, "kernelpath", "host-device"},
		{"multinet-netdev deviceID", `{"cniVersion":"1.0.0","type":"multinet-netdev","deviceID":"eth0"}`, "deviceID", "multinet-netdev"},
		{"macvlan master", `{"cniVersion":"1.0.0","type":"macvlan","master":"eth0"}`, "master", "macvlan"},
		{"macvlan implicit master", `{"cniVersion":"1.0.0","type":"macvlan"}`, "master", "macvlan"},
		{"ipvlan master", `{"cniVersion":"1.0.0","type":"ipvlan","master":"eth0"}`, "master", "ipvlan"},
		{"vlan master", `{"cniVersion":"1.0.0","type":"vlan","master":"eth0","vlanId":5}`, "master", "vlan"},
		{"bridge name", `{"cniVersion":"1.0.0","type":"bridge","bridge":"br-ex"}`, "bridge", "bridge"},
		{"bridge implicit cni0", `{"cniVersion":"1.0.0","type":"bridge"}`, "bridge", "bridge"},
		{"ptp ipMasq", `{"cniVersion":"1.0.0","type":"ptp","ipMasq":true}`, "ipMasq", "ptp"},
		{"portmap conditions", `{"cniVersion":"1.0.0","plugins":[{"type":"ptp"},{"type":"portmap","conditionsV4":["-j","ACCEPT"]}]}`, "plugins[1].conditionsV4", "portmap"},
		{"host-local dataDir", `{"cniVersion":"1.0.0","type":"ptp","ipam":{"type":"host-local","dataDir":"/etc","subnet":"10.1.0.0/24"}}`, "ipam.dataDir", "host-local"},
		{"dhcp socket", `{"cniVersion":"1.0.0","type":"ptp","ipam":{"type":"dhcp","daemonSocketPath":"/run/multinet/multinet.sock"}}`, "ipam.daemonSocketPath", "dhcp"},
		{"multinet-ipam socketPath", `{"cniVersion":"1.0.0","type":"ptp","ipam":{"type":"multinet-ipam","socketPath":"/run/multinet/multinet.sock"}}`, "ipam.socketPath", "multinet-ipam"},
		{"runtimeConfig literal", `{"cniVersion":"1.0.0","type":"ptp","runtimeConfig":{"CNIDeviceInfoFile":"/etc/passwd"}}`, "runtimeConfig", "ptp"},
		{"ipam runtimeConfig", `{"cniVersion":"1.0.0","type":"ptp","ipam":{"type":"static","runtimeConfig":{"ips":["10.0.0.1/24"]}}}`, "ipam.runtimeConfig", "static"},
		{"nested kubeconfig", `{"cniVersion":"1.0.0","type":"ptp","ipam":{"type":"static","kubernetes":{"kubeconfig":"/etc/kubernetes/admin.conf"}}}`, "ipam.kubernetes.kubeconfig", "static"},
		{"bin dir", `{"cniVersion":"1.0.0","type":"ptp","binDir":"/tmp"}`, "binDir", "ptp"},
		{"non-reference plugin", `{"cniVersion":"1.0.0","type":"sriov"}`, "type", "sriov"},
		{"non-reference ipam", `{"cniVersion":"1.0.0","type":"ptp","ipam":{"type":"whereabouts"}}`, "ipam.type", "whereabouts"},
		{"conflist second plugin", `{"cniVersion":"1.0.0","plugins":[{"type":"ptp"},{"type":"host-device","device":"eth1"}]}`, "plugins[1].device", "host-device"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vs := violations(t, defaultTrust(), "team-a", c.config)
			if len(vs) != 1 {
				t.Fatalf("violations %v, want one about %s", vs, c.key)
			}
			v := vs[0]
			if v.Key != c.key || v.Plugin != c.plugin || v.Rule != "tenants" || v.Namespace != "team-a" {
				t.Errorf("violation %+v, want key %q plugin %q rule tenants", v, c.key, c.plugin)
			}
			msg := v.Error()
			for _, want := range []string{`"` + c.key + `"`, `plugin "` + c.plugin + `"`, `NAD trust rule "tenants"`, `namespace "team-a"`} {
				if !strings.Contains(msg, want) {
					t.Errorf("message %q lacks %s", msg, want)
				}
			}
			for _, ns := range []string{"kube-system", "multinet-system", "trusted"} {
				if vs := violations(t, defaultTrust(), ns, c.config); len(vs) != 0 {
					t.Errorf("namespace %s: %v, want none (admin-owned)", ns, vs)
				}
			}
		})
	}
}

// TestNADTrustDefaultAllows: the reference plugins without a key naming a
// node object pass in a tenant namespace; so does an empty spec.config.
func TestNADTrustDefaultAllows(t *testing.T) {
	for _, config := range []string{
		``,
		`{"cniVersion":"1.0.0","type":"ptp","ipam":{"type":"host-local","subnet":"10.1.0.0/24"}}`,
		`{"cniVersion":"1.0.0","type":"dummy","ipam":{"type":"static","addresses":[{"address":"10.1.0.2/24"}]}}`,
		`{"cniVersion":"1.0.0","plugins":[{"type":"ptp","ipam":{"type":"host-local","ranges":[[{"subnet":"10.1.0.0/24"}]],"routes":[{"dst":"0.0.0.0/0"}]}},{"type":"tuning","capabilities":{"mac":true},"sysctl":{"net.core.somaxconn":"500"}},{"type":"portmap","capabilities":{"portMappings":true}},{"type":"bandwidth","capabilities":{"bandwidth":true}}]}`,
		`{"cniVersion":"1.0.0","type":"tap","ipam":{}}`,
		`{"cniVersion":"1.0.0","type":"loopback"}`,
		`{"cniVersion":"1.0.0","type":"vrf","vrfname":"blue"}`,
		`{"cniVersion":"1.0.0","type":"multinet-netdev","capabilities":{"deviceID":true,"CNIDeviceInfoFile":true}}`,
		`{"cniVersion":"1.0.0","type":"ptp","ipam":{"type":"dhcp"}}`,
		`not json: CheckNAD reports it`,
	} {
		if vs := violations(t, defaultTrust(), "team-a", config); len(vs) != 0 {
			t.Errorf("%s: %v, want none", config, vs)
		}
	}
	// No policy: nothing enforced.
	if vs := violations(t, Policy{}, "team-a", `{"cniVersion":"1.0.0","type":"host-device","device":"eth0"}`); len(vs) != 0 {
		t.Errorf("no policy: %v", vs)
	}
}

// TestNADTrustRules: globalNamespaces, selectors, first match, allowed keys
// with plugins and values, "*", and no rule at all.
func TestNADTrustRules(t *testing.T) {
	p, err := ParseNADTrustPolicy([]byte(`apiVersion: multinet.io/v1alpha1
kind: NADTrustPolicy
rules:
- name: globals
  globalNamespaces: true
  unrestricted: true
- name: team-b
  namespaceSelector: {matchLabels: {team: b}}
  plugins: [macvlan, host-local, sriov]
  allowedKeys:
  - key: master
    plugins: [macvlan]
    values: ["eth1", "vlan*"]
  - key: dataDir
    values: ["/var/lib/cni/team-b/*"]
- name: devices
  namespaces: [team-c]
  plugins: ["*"]
  allowedKeys:
  - key: "*"
    plugins: [host-device]
`))
	if err != nil {
		t.Fatal(err)
	}
	pol := Policy{NADTrust: NADTrust{Policy: p, Namespaces: defaultLabels}}
	pol.Isolation.GlobalNamespaces = []string{"nets"}
	cases := []struct {
		ns, config string
		want       []string // "rule key plugin"
	}{
		{"nets", `{"type":"host-device","device":"eth0"}`, nil},
		{"team-b", `{"type":"macvlan","master":"eth1","ipam":{"type":"host-local","dataDir":"/var/lib/cni/team-b/x"}}`, nil},
		{"team-b", `{"type":"macvlan","master":"vlan7"}`, nil},
		{"team-b", `{"type":"macvlan","master":"eth0"}`, []string{"team-b master macvlan"}},
		{"team-b", `{"type":"macvlan","master":"eth1","ipam":{"type":"host-local","dataDir":"/etc"}}`, []string{"team-b ipam.dataDir host-local"}},
		{"team-b", `{"type":"ipvlan","master":"eth1"}`, []string{"team-b type ipvlan", "team-b master ipvlan"}},
		{"team-b", `{"type":"sriov","deviceID":"x"}`, nil},
		{"team-c", `{"type":"host-device","device":"eth0","ipam":{"type":"host-local","dataDir":"/etc"}}`, []string{"devices ipam.dataDir host-local"}},
		{"team-c", `{"type":"anything"}`, nil},
		{"team-d", `{"type":"ptp"}`, []string{" type ptp"}},
	}
	for _, c := range cases {
		var got []string
		for _, v := range violations(t, pol, c.ns, c.config) {
			got = append(got, v.Rule+" "+v.Key+" "+v.Plugin)
		}
		if strings.Join(got, ",") != strings.Join(c.want, ",") {
			t.Errorf("%s %s: %q, want %q", c.ns, c.config, got, c.want)
		}
	}
	vs := violations(t, pol, "team-d", `{"type":"ptp"}`)
	if msg := vs[0].Error(); !strings.Contains(msg, `no NAD trust rule selects namespace "team-d"`) {
		t.Errorf("message %q", msg)
	}
}

// TestNADTrustLabelsError: a namespace lookup that fails is an error, not
// a verdict.
func TestNADTrustLabelsError(t *testing.T) {
	p := defaultTrust()
	p.NADTrust.Namespaces = labelsOf{err: errors.New("api down")}
	if _, err := CheckNADTrust(context.Background(), nad("team-a", "n", plainConf, nil), p); err == nil || !strings.Contains(err.Error(), "api down") {
		t.Errorf("err %v", err)
	}
}

// TestParseNADTrustPolicyErrors: each malformed policy is refused naming
// the rule and field.
func TestParseNADTrustPolicyErrors(t *testing.T) {
	head := "apiVersion: multinet.io/v1alpha1\nkind: NADTrustPolicy\n"
	cases := map[string]string{
		"kind: Other\napiVersion: multinet.io/v1alpha1\nrules: [{name: a, namespaces: [x]}]": "must be",
		head + "rules: []":                                                       "at least one rule",
		head + "rules: [{namespaces: [x]}]":                                      "rules[0].name: required",
		head + "rules: [{name: a}]":                                              "selects no namespace",
		head + "rules: [{name: a, namespaces: [X_]}]":                            `rules[0] "a".namespaces`,
		head + "rules: [{name: a, namespaces: [x]}, {name: a, namespaces: [y]}]": "another rule",
		head + "rules: [{name: a, namespaceSelector: {matchExpressions: [{key: k, operator: Bad}]}}]": "namespaceSelector",
		head + "rules: [{name: a, namespaces: [x], unrestricted: true, plugins: [ptp]}]":              "unrestricted",
		head + "rules: [{name: a, namespaces: [x], allowedKeys: [{values: [x]}]}]":                    "allowedKeys[0].key: required",
		head + "rules: [{name: a, namespaces: [x], allowedKeys: [{key: k, values: ['[']}]}]":          "values",
		head + "rules: [{name: a, namespaces: [x], typo: 1}]":                                         "unknown field",
	}
	for in, want := range cases {
		if _, err := ParseNADTrustPolicy([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: err %v, want %q", in, err, want)
		}
	}
}

// TestCheckRefusesUntrustedNAD: Check (multinetd's ADD, the webhook's pod
// check) refuses an attachment to a NAD that breaks the policy, naming the
// NAD, the key, the plugin and the rule; a namespace lookup failure is a
// LookupError.
func TestCheckRefusesUntrustedNAD(t *testing.T) {
	s := source(nad("team-a", "uplink", `{"cniVersion":"1.0.0","type":"host-device","device":"eth0"}`, nil),
		nad("team-a", "ok", `{"cniVersion":"1.0.0","type":"ptp","ipam":{"type":"host-local","subnet":"10.9.0.0/24"}}`, nil))
	opts := Options{Policy: defaultTrust(), NADs: s}
	v, err := Check(context.Background(), Pod{Namespace: "team-a", Annotations: networks("ok,uplink")}, opts)
	if err != nil {
		t.Fatal(err)
	}
	got := problems(v)
	if len(got) != 1 {
		t.Fatalf("problems %q, want one", got)
	}
	for _, want := range []string{`networks[1] "uplink"`, "NetworkAttachmentDefinition team-a/uplink", `key "device"`, `plugin "host-device"`, `NAD trust rule "tenants"`} {
		if !strings.Contains(got[0], want) {
			t.Errorf("problem %q lacks %s", got[0], want)
		}
	}
	opts.NADTrust.Namespaces = labelsOf{err: errors.New("api down")}
	_, err = Check(context.Background(), Pod{Namespace: "team-a", Annotations: networks("uplink")}, opts)
	var le *LookupError
	if !errors.As(err, &le) {
		t.Errorf("err %v, want a LookupError", err)
	}
}
