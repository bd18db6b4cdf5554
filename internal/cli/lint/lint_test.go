package lint

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// want is the expected Result of one object. errors and notes are substrings
// of the Result's messages, one per message, in order.
type want struct {
	kind, ns, name string
	skipped        bool
	errors, notes  []string
	warnings       []string
	// networks is the compact JSON of Result.Networks; "" means "[]".
	networks string
}

func lintYAML(t *testing.T, in string, opts Options) []Result {
	t.Helper()
	objs, err := Decode([]byte(in), "in.yaml")
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	results, err := Lint(objs, opts)
	if err != nil {
		t.Fatalf("Lint: %v", err)
	}
	return results
}

func checkResults(t *testing.T, got []Result, wants []want) {
	t.Helper()
	if len(got) != len(wants) {
		t.Fatalf("got %d results, want %d:\n%s", len(got), len(wants), dump(got))
	}
	for i, w := range wants {
		r := got[i]
		id := fmt.Sprintf("result %d (%s %s/%s)", i, r.Kind, r.Namespace, r.Name)
		if r.Kind != w.kind || r.Namespace != w.ns || r.Name != w.name {
			t.Errorf("%s: want %s %s/%s", id, w.kind, w.ns, w.name)
		}
		if r.Skipped != w.skipped {
			t.Errorf("%s: Skipped = %v, want %v", id, r.Skipped, w.skipped)
		}
		if r.Valid != (len(w.errors) == 0) {
			t.Errorf("%s: Valid = %v with errors %q", id, r.Valid, r.Errors)
		}
		matchAll(t, id+" errors", r.Errors, w.errors)
		matchAll(t, id+" warnings", r.Warnings, w.warnings)
		matchAll(t, id+" notes", r.Notes, w.notes)
		nets, err := json.Marshal(r.Networks)
		if err != nil {
			t.Fatal(err)
		}
		wantNets := w.networks
		if wantNets == "" {
			wantNets = "[]"
		}
		if string(nets) != wantNets {
			t.Errorf("%s: networks\n got %s\nwant %s", id, nets, wantNets)
		}
	}
}

func matchAll(t *testing.T, what string, got, want []string) {
	t.Helper()
	if got == nil {
		t.Errorf("%s: nil, want a non-nil slice", what)
	}
	if len(got) != len(want) {
		t.Errorf("%s: got %d %q, want %d matching %q", what, len(got), got, len(want), want)
		return
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("%s[%d]:\n got %q\nwant it to contain %q", what, i, got[i], want[i])
		}
	}
}

func dump(rs []Result) string {
	b, _ := json.MarshalIndent(rs, "", "  ")
	return string(b)
}

// nad returns a NetworkAttachmentDefinition document; config "" leaves out spec.
func nad(ns, name, config string) string {
	qn, _ := json.Marshal(name) // a bare n or no would be a YAML boolean
	s := "apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: " + string(qn) + "\n"
	if ns != "" {
		s += "  namespace: " + ns + "\n"
	}
	if config != "" {
		q, _ := json.Marshal(config)
		s += "spec:\n  config: " + string(q) + "\n"
	}
	return s + "---\n"
}

// pod returns a Pod document with the networks annotation value networks.
func pod(ns, name, networks string) string {
	s := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: " + name + "\n"
	if ns != "" {
		s += "  namespace: " + ns + "\n"
	}
	q, _ := json.Marshal(networks)
	return s + "  annotations:\n    k8s.v1.cni.cncf.io/networks: " + string(q) + "\nspec:\n  containers: [{name: c, image: i}]\n---\n"
}

const (
	bridgeConf   = `{"cniVersion":"0.3.0","name":"a-bridge-network","type":"bridge","bridge":"br0","isGateway":true,"ipam":{"type":"host-local","subnet":"192.168.5.0/24","dataDir":"/mnt/cluster-ipam"}}`
	capsConf     = `{"cniVersion":"1.0.0","plugins":[{"type":"macvlan","capabilities":{"ips":true,"mac":true}},{"type":"tuning"}]}`
	noCapsConf   = `{"cniVersion":"1.0.0","type":"bridge"}`
	badArgsConf  = `{"cniVersion":"1.0.0","type":"bridge","args":"not an object"}`
	badTypeConf  = `{"cniVersion":"0.3.1","plugins":[{"type":"bridge"},{"type":"../bin/sh"}]}`
	networksAnno = `metadata.annotations["k8s.v1.cni.cncf.io/networks"]: `
)

func TestLintNetworkAttachmentDefinitions(t *testing.T) {
	long := strings.Repeat("a", 64)
	for _, tc := range []struct {
		name  string
		in    string
		wants []want
	}{
		{"§3.2.1 CNI config in the object", nad("", "a-bridge-network", bridgeConf),
			[]want{{kind: "NetworkAttachmentDefinition", ns: "default", name: "a-bridge-network"}}},
		{"§3.2.2 configlist in the object", nad("", "another-bridge-network", `{"cniVersion":"0.3.0","name":"another-bridge-network","plugins":[{"type":"bridge","bridge":"br0","ipam":{"type":"host-local","subnet":"192.168.5.0/24"}},{"type":"port-forwarding"},{"type":"tuning","sysctl":{"net.ipv4.conf.all.log_martians":"1"}}]}`),
			[]want{{kind: "NetworkAttachmentDefinition", ns: "default", name: "another-bridge-network"}}},
		{"§3.2.3, §3.4.2 thick plugin config without name: the name is injected", nad("ns1", "a-bridge-network", `{"cniVersion":"0.3.0","type":"awesome-plugin"}`),
			[]want{{kind: "NetworkAttachmentDefinition", ns: "ns1", name: "a-bridge-network"}}},
		{"§3.2.4 no spec: valid, config from the node", nad("", "a-bridge-network", ""),
			[]want{{kind: "NetworkAttachmentDefinition", ns: "default", name: "a-bridge-network", notes: []string{`spec.config: not set: the node's CNI config whose "name" is "a-bridge-network" is used`}}}},
		{"§3.4.3 config name differs from the object name: a note", nad("", "net-a", `{"cniVersion":"1.0.0","name":"other","type":"bridge"}`),
			[]want{{kind: "NetworkAttachmentDefinition", ns: "default", name: "net-a", notes: []string{`spec.config: field name: "other" differs from metadata.name "net-a"`}}}},
		{"§3.3 name not DNS-1123", nad("", "Bad_Name", ""),
			[]want{{kind: "NetworkAttachmentDefinition", ns: "default", name: "Bad_Name", errors: []string{`metadata.name: "Bad_Name": a lowercase RFC 1123 subdomain`}, notes: []string{"spec.config: not set"}}}},
		{"§3.3 units of DNS-1123 labels: dotted names are valid", nad("", "net.a.b", noCapsConf),
			[]want{{kind: "NetworkAttachmentDefinition", ns: "default", name: "net.a.b"}}},
		{"§3.3 a unit longer than 63 characters: recommended against, a note", nad("", long+".b", noCapsConf),
			[]want{{kind: "NetworkAttachmentDefinition", ns: "default", name: long + ".b", notes: []string{"longer than 63 characters, which spec §3.3 recommends against"}}}},
		{"§3.3 name longer than 253 characters", nad("", strings.Repeat(long+".", 4)[:254], noCapsConf),
			[]want{{kind: "NetworkAttachmentDefinition", ns: "default", name: strings.Repeat(long+".", 4)[:254], errors: []string{"must be no more than 253 characters"}, notes: []string{"longer than 63", "longer than 63", "longer than 63"}}}},
		{"invalid namespace", nad("Bad", "n", noCapsConf),
			[]want{{kind: "NetworkAttachmentDefinition", ns: "Bad", name: "n", errors: []string{`metadata.namespace: "Bad": a lowercase RFC 1123 label`}}}},
		{"§3.4 a plugin type with a path separator, errors name the field", nad("", "n", badTypeConf),
			[]want{{kind: "NetworkAttachmentDefinition", ns: "default", name: "n", errors: []string{`spec.config: field plugins[1].type: "../bin/sh" contains a path separator`}}}},
		{"§3.4 a config without type", nad("", "n", `{"cniVersion":"1.0.0"}`),
			[]want{{kind: "NetworkAttachmentDefinition", ns: "default", name: "n", errors: []string{"spec.config: field type: "}}}},
		{"§7.1 unsupported cniVersion", nad("", "n", `{"cniVersion":"9.9.9","type":"bridge"}`),
			[]want{{kind: "NetworkAttachmentDefinition", ns: "default", name: "n", errors: []string{`spec.config: field cniVersion: "9.9.9" is not a CNI version`}}}},
		{"a config without cniVersion runs as CNI 0.1.0 (libcni): valid, a warning", nad("", "n", `{"type":"bridge"}`),
			[]want{{kind: "NetworkAttachmentDefinition", ns: "default", name: "n", warnings: []string{`spec.config: field cniVersion: missing: the plugins run it as CNI 0.1.0, as libcni does`}}}},
		{"a configlist without cniVersion: valid, a warning", nad("", "n", `{"plugins":[{"type":"macvlan","capabilities":{"mac":true}}]}`) + pod("", "p", `[{"name":"n","mac":"02:00:00:00:00:01"}]`),
			[]want{{kind: "NetworkAttachmentDefinition", ns: "default", name: "n", warnings: []string{`spec.config: field cniVersion: missing`}},
				{kind: "Pod", ns: "default", name: "p", networks: `[{"name":"n","namespace":"default","mac":"02:00:00:00:00:01","interface":"net1"}]`}}},
		{"§3.4.1 rule 1: a blank spec.config is present and invalid", nad("", "n", "  "),
			[]want{{kind: "NetworkAttachmentDefinition", ns: "default", name: "n", errors: []string{"spec.config: "}}}},
		{"spec.config that is not JSON", nad("", "n", "{bridge}"),
			[]want{{kind: "NetworkAttachmentDefinition", ns: "default", name: "n", errors: []string{"spec.config: "}}}},
		{"the shim as a delegate", nad("", "n", `{"cniVersion":"1.0.0","type":"multinet-shim"}`),
			[]want{{kind: "NetworkAttachmentDefinition", ns: "default", name: "n", errors: []string{"spec.config: field type: "}}}},
		{"spec 001/002 resourceName annotations",
			"apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: ok\n  annotations:\n    k8s.v1.cni.cncf.io/resourceName: example.com/sriov_net\nspec: {config: '" + noCapsConf + "'}\n---\n" +
				"apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: nodomain\n  annotations:\n    k8s.v1.cni.cncf.io/resourceName: sriov\nspec: {config: '" + noCapsConf + "'}\n---\n" +
				"apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: native\n  annotations:\n    k8s.v1.cni.cncf.io/resourceName: kubernetes.io/net\nspec: {config: '" + noCapsConf + "'}\n---\n" +
				"apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: badname\n  annotations:\n    k8s.v1.cni.cncf.io/resourceName: example.com/-x-\nspec: {config: '" + noCapsConf + "'}\n---\n" +
				"apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata:\n  name: legacy\n  annotations:\n    kubernetes.v1.cni.cncf.io/resourceName: abc-plugin.io/ctr-net\nspec: {config: '" + noCapsConf + "'}\n",
			[]want{
				{kind: "NetworkAttachmentDefinition", ns: "default", name: "ok"},
				{kind: "NetworkAttachmentDefinition", ns: "default", name: "nodomain", errors: []string{`metadata.annotations["k8s.v1.cni.cncf.io/resourceName"]: resourceName "sriov": must be vendor-domain/type`}},
				{kind: "NetworkAttachmentDefinition", ns: "default", name: "native", errors: []string{"the kubernetes.io domain is reserved"}},
				{kind: "NetworkAttachmentDefinition", ns: "default", name: "badname", errors: []string{`metadata.annotations["k8s.v1.cni.cncf.io/resourceName"]: resourceName "example.com/-x-": name part must consist of`}},
				{kind: "NetworkAttachmentDefinition", ns: "default", name: "legacy", notes: []string{`metadata.annotations["kubernetes.v1.cni.cncf.io/resourceName"]: the spelling of the cni-dp proposal (spec 001)`}},
			}},
		{"pods select a NetworkAttachmentDefinition by name: generateName alone is not enough",
			"apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata: {generateName: net-}\n",
			[]want{{kind: "NetworkAttachmentDefinition", ns: "default", errors: []string{"metadata.name: required"}, notes: []string{"spec.config: not set"}}}},
		{"a version the CRD does not serve (§3.1)",
			"apiVersion: k8s.cni.cncf.io/v1beta1\nkind: NetworkAttachmentDefinition\nmetadata: {name: nn}\n",
			[]want{{kind: "NetworkAttachmentDefinition", ns: "default", name: "nn", errors: []string{`apiVersion: "k8s.cni.cncf.io/v1beta1" is not a served version of NetworkAttachmentDefinition: use "k8s.cni.cncf.io/v1"`}}}},
		{"unknown fields are errors (strict decoding, as kubectl apply)",
			"apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata: {name: nn}\nspec: {conf: x}\n",
			[]want{{kind: "NetworkAttachmentDefinition", ns: "default", name: "nn", errors: []string{"spec.conf: unknown field"}, notes: []string{"spec.config: not set"}}}},
		{"spec.config of the wrong type",
			"apiVersion: k8s.cni.cncf.io/v1\nkind: NetworkAttachmentDefinition\nmetadata: {name: nn}\nspec: {config: {cniVersion: 1.0.0}}\n",
			[]want{{kind: "NetworkAttachmentDefinition", ns: "default", name: "nn", errors: []string{"cannot decode NetworkAttachmentDefinition: "}}}},
		{"the same object twice",
			nad("", "n", noCapsConf) + nad("default", "n", noCapsConf),
			[]want{
				{kind: "NetworkAttachmentDefinition", ns: "default", name: "n"},
				{kind: "NetworkAttachmentDefinition", ns: "default", name: "n", errors: []string{"metadata.name: NetworkAttachmentDefinition default/n is also defined at in.yaml:1"}},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkResults(t, lintYAML(t, tc.in, Options{}), tc.wants)
		})
	}
}

func TestLintPods(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    string
		opts  Options
		wants []want
	}{
		{"§4.1.1 comma-delimited, no NetworkAttachmentDefinition in the input: notes; names generated from net1 (§4.1.2.1.5)",
			pod("my-namespace", "my-pod", "net-a,net-b,other-ns/net-c"), Options{},
			[]want{{kind: "Pod", ns: "my-namespace", name: "my-pod",
				notes:    []string{"NetworkAttachmentDefinition my-namespace/net-a is not in the input", "my-namespace/net-b is not in the input", "other-ns/net-c is not in the input"},
				networks: `[{"name":"net-a","namespace":"my-namespace","interface":"net1"},{"name":"net-b","namespace":"my-namespace","interface":"net2"},{"name":"net-c","namespace":"other-ns","interface":"net3"}]`}}},
		{"§4.1.2.1.2 namespace defaults to Options.Namespace for an object without one",
			pod("", "p", "net-a"), Options{Namespace: "team"},
			[]want{{kind: "Pod", ns: "team", name: "p", notes: []string{"team/net-a is not in the input"}, networks: `[{"name":"net-a","namespace":"team","interface":"net1"}]`}}},
		{"§4.1.2.1.3.2, §4.1.2.1.4.2 capabilities declared: valid, elements normalized",
			nad("", "static", capsConf) + pod("", "p", `[{"name":"static","ips":["10.1.1.5/24"],"mac":"02-00-00-00-00-01"}]`), Options{},
			[]want{
				{kind: "NetworkAttachmentDefinition", ns: "default", name: "static"},
				{kind: "Pod", ns: "default", name: "p", networks: `[{"name":"static","namespace":"default","ips":["10.1.1.5/24"],"mac":"02:00:00:00:00:01","interface":"net1"}]`},
			}},
		{"§4.1.2.1.4.2 mac without the capability fails the attachment",
			nad("", "plain", noCapsConf) + pod("", "p", `[{"name":"plain"},{"name":"plain","mac":"02:00:00:00:00:01"}]`), Options{},
			[]want{
				{kind: "NetworkAttachmentDefinition", ns: "default", name: "plain", warnings: []string{`no plugin declares "capabilities": {"mac": true}, which Pod default/p asks for (spec §4.1.2.1.4.2): runs only with undeclaredCapabilities: multus`}},
				{kind: "Pod", ns: "default", name: "p", errors: []string{networksAnno + `networks[1] "plain": field "mac": needs runtimeConfig "mac", but no plugin of CNI config "plain" declares "capabilities": {"mac": true} (spec §4.1.2.1.4.2)`},
					networks: `[{"name":"plain","namespace":"default","interface":"net1"},{"name":"plain","namespace":"default","mac":"02:00:00:00:00:01","interface":"net2"}]`},
			}},
		{"§4.1.2.1.x.2 each network's missing capabilities are reported, with the network after it (a NAD later in the input)",
			pod("", "p", `[{"name":"plain","ips":["10.0.0.1"]},{"name":"static","mac":"02:00:00:00:00:01"},{"name":"plain","portMappings":[{"hostPort":1,"containerPort":2}]}]`) + nad("", "plain", noCapsConf) + nad("", "static", capsConf), Options{},
			[]want{
				{kind: "Pod", ns: "default", name: "p", errors: []string{
					networksAnno + `networks[0] "plain": field "ips": needs runtimeConfig "ips"`,
					networksAnno + `networks[2] "plain": field "portMappings": needs runtimeConfig "portMappings"`},
					networks: `[{"name":"plain","namespace":"default","ips":["10.0.0.1"],"interface":"net1"},{"name":"static","namespace":"default","mac":"02:00:00:00:00:01","interface":"net2"},{"name":"plain","namespace":"default","interface":"net3","portMappings":[{"hostPort":1,"containerPort":2,"protocol":"tcp"}]}]`},
				{kind: "NetworkAttachmentDefinition", ns: "default", name: "plain", warnings: []string{`{"ips": true}, which Pod default/p asks for (spec §4.1.2.1.3.2)`, `{"portMappings": true}, which Pod default/p asks for (spec §4.1.2.1.7.2)`}},
				{kind: "NetworkAttachmentDefinition", ns: "default", name: "static"},
			}},
		{"§4.1.2.1.5 requested names are kept and generated names skip them; §4.2 the same network twice",
			pod("", "p", `[{"name":"a"},{"name":"a","interface":"net1"},{"name":"a"}]`), Options{},
			[]want{{kind: "Pod", ns: "default", name: "p", notes: []string{"not in the input", "not in the input", "not in the input"},
				networks: `[{"name":"a","namespace":"default","interface":"net2"},{"name":"a","namespace":"default","interface":"net1"},{"name":"a","namespace":"default","interface":"net3"}]`}}},
		{"§4.1.2.1.5 the default network's eth0 cannot be requested",
			nad("", "plain", noCapsConf) + pod("", "p", "plain@eth0"), Options{},
			[]want{
				{kind: "NetworkAttachmentDefinition", ns: "default", name: "plain"},
				{kind: "Pod", ns: "default", name: "p", errors: []string{networksAnno + `networks[0] "plain": field "interface": "eth0" is used by the default network (spec §4.1.2.1.5)`},
					networks: `[{"name":"plain","namespace":"default","interface":"eth0"}]`},
			}},
		{"§4.1.2.1.5, §4.1.2.1.4.2 a request for eth0 does not hide a missing capability of another element",
			nad("", "plain", noCapsConf) + pod("", "p", `[{"name":"plain","interface":"eth0"},{"name":"plain","mac":"02:00:00:00:00:01"}]`), Options{},
			[]want{
				{kind: "NetworkAttachmentDefinition", ns: "default", name: "plain", warnings: []string{`no plugin declares "capabilities": {"mac": true}, which Pod default/p asks for (spec §4.1.2.1.4.2): runs only with undeclaredCapabilities: multus`}},
				{kind: "Pod", ns: "default", name: "p", errors: []string{
					networksAnno + `networks[0] "plain": field "interface": "eth0" is used by the default network (spec §4.1.2.1.5)`,
					networksAnno + `networks[1] "plain": field "mac": needs runtimeConfig "mac"`},
					networks: `[{"name":"plain","namespace":"default","interface":"eth0"},{"name":"plain","namespace":"default","mac":"02:00:00:00:00:01","interface":"net1"}]`},
			}},
		{"§4.1.2.1.4 a bad value: the error names the element and the field; no networks",
			pod("", "p", `[{"name":"a"},{"name":"b","mac":"zz"}]`), Options{},
			[]want{{kind: "Pod", ns: "default", name: "p", errors: []string{networksAnno + `networks[1] "b": field "mac": "zz" is not a 6-byte MAC address (spec §4.1.2.1.4)`}}}},
		{"§4.1.2 several problems are all reported",
			pod("", "p", `[{"name":"a","ip":["10.0.0.1"]},{"name":"B"}]`), Options{},
			[]want{{kind: "Pod", ns: "default", name: "p", errors: []string{`networks[0] "a": field "ip"`, `networks[1] "B": field "name"`}}}},
		{"§4.1 an empty annotation selects nothing",
			pod("", "p", ""), Options{},
			[]want{{kind: "Pod", ns: "default", name: "p"}}},
		{"§3.4.1 missing NetworkAttachmentDefinition: an error where the input defines others in the namespace, a note elsewhere",
			nad("blue", "net-a", noCapsConf) + pod("blue", "p", "net-b,red/net-c"), Options{},
			[]want{
				{kind: "NetworkAttachmentDefinition", ns: "blue", name: "net-a"},
				{kind: "Pod", ns: "blue", name: "p",
					errors: []string{networksAnno + `networks[0] "net-b": NetworkAttachmentDefinition blue/net-b not found (spec §3.4.1)`},
					notes: []string{networksAnno + `networks[1] "net-c": NetworkAttachmentDefinition red/net-c is not in the input; its config and capabilities are not checked`,
						"NetworkAttachmentDefinition blue/net-b is not in the input and is taken as missing (the input defines other NetworkAttachmentDefinitions in namespace blue)"},
					networks: `[{"name":"net-b","namespace":"blue","interface":"net1"},{"name":"net-c","namespace":"red","interface":"net2"}]`},
			}},
		{"--require-nads: every missing NetworkAttachmentDefinition is an error",
			pod("", "p", "net-a"), Options{RequireNADs: true},
			[]want{{kind: "Pod", ns: "default", name: "p", errors: []string{"NetworkAttachmentDefinition default/net-a not found"}, notes: []string{"NetworkAttachmentDefinition default/net-a is not in the input and is taken as missing (--require-nads)"},
				networks: `[{"name":"net-a","namespace":"default","interface":"net1"}]`}}},
		{"a selected NetworkAttachmentDefinition without spec.config: capabilities not checked",
			nad("", "disk", "") + pod("", "p", `[{"name":"disk","mac":"02:00:00:00:00:01"}]`), Options{},
			[]want{
				{kind: "NetworkAttachmentDefinition", ns: "default", name: "disk", notes: []string{"spec.config: not set"}},
				{kind: "Pod", ns: "default", name: "p", notes: []string{networksAnno + `networks[0] "disk": NetworkAttachmentDefinition default/disk has no spec.config: multinetd uses the CNI config named "disk" in the node's CNI conf dir`},
					networks: `[{"name":"disk","namespace":"default","mac":"02:00:00:00:00:01","interface":"net1"}]`},
			}},
		{"a selected NetworkAttachmentDefinition with an unusable spec.config fails the attachment",
			nad("", "broken", badTypeConf) + pod("", "p", "broken"), Options{},
			[]want{
				{kind: "NetworkAttachmentDefinition", ns: "default", name: "broken", errors: []string{"spec.config: field plugins[1].type"}},
				{kind: "Pod", ns: "default", name: "p", errors: []string{networksAnno + `networks[0] "broken": NetworkAttachmentDefinition default/broken: spec.config: field plugins[1].type: "../bin/sh" contains a path separator`},
					networks: `[{"name":"broken","namespace":"default","interface":"net1"}]`},
			}},
		{"§4.1.2.1.6.2 cni-args cannot be merged into a config whose args is not an object",
			strings.Replace(nad("", "n", badArgsConf), "metadata:\n", "metadata:\n  annotations: {multinet.io/accept-cni-args: \"true\"}\n", 1) + pod("", "p", `[{"name":"n","cni-args":{"k":"v"}}]`), Options{},
			[]want{
				{kind: "NetworkAttachmentDefinition", ns: "default", name: "n"},
				{kind: "Pod", ns: "default", name: "p", errors: []string{networksAnno + `networks[0] "n": field "cni-args": cannot be merged into CNI config "n" plugins[0].args: not a JSON object: "not an object" (spec §4.1.2.1.6.2)`},
					networks: `[{"name":"n","namespace":"default","interface":"net1","cni-args":{"k":"v"}}]`},
			}},
		{"default-network annotation: interface refused; its NetworkAttachmentDefinition checked like the others",
			nad("", "plain", noCapsConf) +
				"apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  annotations:\n    v1.multus-cni.io/default-network: '{\"name\":\"plain\",\"interface\":\"e0\"}'\n---\n" +
				"apiVersion: v1\nkind: Pod\nmetadata:\n  name: b\n  annotations:\n    v1.multus-cni.io/default-network: gone\n---\n" +
				"apiVersion: v1\nkind: Pod\nmetadata:\n  name: c\n  annotations:\n    v1.multus-cni.io/default-network: plain\n",
			Options{},
			[]want{
				{kind: "NetworkAttachmentDefinition", ns: "default", name: "plain"},
				{kind: "Pod", ns: "default", name: "a", errors: []string{`metadata.annotations["v1.multus-cni.io/default-network"]: default-network[0] "plain": field "interface"`}},
				{kind: "Pod", ns: "default", name: "b", errors: []string{`metadata.annotations["v1.multus-cni.io/default-network"]: default-network[0] "gone": NetworkAttachmentDefinition default/gone not found (spec §3.4.1)`},
					notes: []string{"NetworkAttachmentDefinition default/gone is not in the input and is taken as missing (the input defines other NetworkAttachmentDefinitions in namespace default)"}},
				{kind: "Pod", ns: "default", name: "c"},
			}},
		{"hostNetwork pods never run CNI, so their selection is never honoured",
			"apiVersion: v1\nkind: Pod\nmetadata:\n  name: h\n  annotations: {k8s.v1.cni.cncf.io/networks: net-a}\nspec:\n  hostNetwork: true\n  containers: [{name: c, image: i}]\n",
			Options{},
			[]want{{kind: "Pod", ns: "default", name: "h", errors: []string{"spec.hostNetwork: true: the pod shares the node's network namespace"}, notes: []string{"not in the input"},
				networks: `[{"name":"net-a","namespace":"default","interface":"net1"}]`}}},
		{"a misspelt networks annotation selects nothing: an error; other keys of the domain: notes",
			"apiVersion: v1\nkind: Pod\nmetadata:\n  name: t\n  annotations:\n    k8s.v1.cni.cncf.io/network: net-a\n    K8s.v1.cni.cncf.io/Networks: net-a\n    k8s.v1.cni.cncf.io/network-status: '[]'\n    k8s.v1.cni.cncf.io/other: x\n    example.com/networks: x\n",
			Options{},
			[]want{{kind: "Pod", ns: "default", name: "t",
				errors: []string{`metadata.annotations["K8s.v1.cni.cncf.io/Networks"]: unknown annotation, so no network is selected: did you mean k8s.v1.cni.cncf.io/networks?`, `metadata.annotations["k8s.v1.cni.cncf.io/network"]: unknown annotation`},
				notes:  []string{`metadata.annotations["k8s.v1.cni.cncf.io/network-status"]: written by the implementation`, `metadata.annotations["k8s.v1.cni.cncf.io/other"]: not a pod annotation of the spec`}}}},
		{"unknown fields and bad field types",
			"apiVersion: v1\nkind: Pod\nmetadata:\n  name: u\n  anotations: {k8s.v1.cni.cncf.io/networks: net-a}\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: v\nspec: {containers: x}\n",
			Options{},
			[]want{
				{kind: "Pod", ns: "default", name: "u", errors: []string{"metadata.anotations: unknown field"}},
				{kind: "Pod", ns: "default", name: "v", errors: []string{"cannot decode Pod: json: cannot unmarshal string"}},
			}},
		{"a YAML key given twice is an error",
			"apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  annotations: {k8s.v1.cni.cncf.io/networks: net-a}\n  annotations: {}\n",
			Options{},
			[]want{{kind: "Pod", ns: "default", name: "a", errors: []string{`YAML line 6: key "annotations" already set in map (a repeated key: only its last value is used)`}}}},
		{"objects without kind, without apiVersion, or with a malformed apiVersion are invalid; a generateName pod is fine",
			"metadata: {name: a}\n---\nkind: Pod\nmetadata: {name: b}\n---\napiVersion: a/b/c\nkind: Pod\nmetadata: {name: c}\n---\napiVersion: v1\nkind: Pod\nmetadata: {generateName: d-}\n---\napiVersion: v1\nkind: Pod\nmetadata: {}\n",
			Options{},
			[]want{
				{ns: "default", name: "a", errors: []string{"kind: required"}},
				{kind: "Pod", ns: "default", name: "b", errors: []string{"apiVersion: required"}},
				{kind: "Pod", ns: "default", name: "c", errors: []string{`apiVersion: "a/b/c": `}},
				{kind: "Pod", ns: "default"},
				{kind: "Pod", ns: "default", errors: []string{"metadata.name: required"}},
			}},
		{"other kinds, and listed kinds of other groups, are skipped",
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n---\napiVersion: example.com/v1\nkind: Deployment\nmetadata: {name: d}\n---\napiVersion: example.com/v1\nkind: NetworkAttachmentDefinition\nmetadata: {name: Bad_Name}\n",
			Options{},
			[]want{
				{kind: "ConfigMap", ns: "default", name: "c", skipped: true},
				{kind: "Deployment", ns: "default", name: "d", skipped: true},
				{kind: "NetworkAttachmentDefinition", ns: "default", name: "Bad_Name", skipped: true},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkResults(t, lintYAML(t, tc.in, tc.opts), tc.wants)
		})
	}
}

// TestLintWorkloads: the pod template of each workload kind is checked at its
// own field path, in the workload's namespace, and the networks annotation on
// the workload itself is reported as misplaced.
func TestLintWorkloads(t *testing.T) {
	const tmpl = "metadata:\n  annotations:\n    k8s.v1.cni.cncf.io/networks: '[{\"name\":\"a\",\"mac\":\"zz\"}]'\nspec:\n  containers: [{name: c, image: i}]\n"
	indent := func(s, by string) string {
		return by + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n"+by) + "\n"
	}
	for _, tc := range []struct {
		apiVersion, kind, path string
		spec                   string
	}{
		{"v1", "PodTemplate", "template.", "template:\n" + indent(tmpl, "  ")},
		{"v1", "ReplicationController", "spec.template.", "spec:\n  template:\n" + indent(tmpl, "    ")},
		{"apps/v1", "Deployment", "spec.template.", "spec:\n  selector: {matchLabels: {a: b}}\n  template:\n" + indent(tmpl, "    ")},
		{"apps/v1", "StatefulSet", "spec.template.", "spec:\n  serviceName: s\n  selector: {matchLabels: {a: b}}\n  template:\n" + indent(tmpl, "    ")},
		{"apps/v1", "DaemonSet", "spec.template.", "spec:\n  selector: {matchLabels: {a: b}}\n  template:\n" + indent(tmpl, "    ")},
		{"apps/v1", "ReplicaSet", "spec.template.", "spec:\n  selector: {matchLabels: {a: b}}\n  template:\n" + indent(tmpl, "    ")},
		{"batch/v1", "Job", "spec.template.", "spec:\n  template:\n" + indent(tmpl, "    ")},
		{"batch/v1", "CronJob", "spec.jobTemplate.spec.template.", "spec:\n  schedule: '@daily'\n  jobTemplate:\n    spec:\n      template:\n" + indent(tmpl, "        ")},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			in := "apiVersion: " + tc.apiVersion + "\nkind: " + tc.kind + "\nmetadata:\n  name: w\n  namespace: team\n  annotations:\n    k8s.v1.cni.cncf.io/networks: a\n" + tc.spec
			checkResults(t, lintYAML(t, in, Options{}), []want{{kind: tc.kind, ns: "team", name: "w", errors: []string{
				`metadata.annotations["k8s.v1.cni.cncf.io/networks"]: on a ` + tc.kind + " this annotation selects nothing: pods take their annotations from " + tc.path + "metadata.annotations",
				tc.path + `metadata.annotations["k8s.v1.cni.cncf.io/networks"]: networks[0] "a": field "mac"`,
			}}})
		})
	}
	// A valid template: networks are reported with the workload's namespace.
	in := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: team}\nspec:\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata:\n      annotations: {k8s.v1.cni.cncf.io/networks: net-a}\n    spec: {containers: [{name: c, image: i}]}\n"
	checkResults(t, lintYAML(t, in, Options{}), []want{{kind: "Deployment", ns: "team", name: "d", notes: []string{"team/net-a is not in the input"},
		networks: `[{"name":"net-a","namespace":"team","interface":"net1"}]`}})
}

// TestLintResultsAreFreshSlices: callers may append to one Result's slices
// without changing another's.
func TestLintResultsAreFreshSlices(t *testing.T) {
	rs := lintYAML(t, pod("", "a", "x")+pod("", "b", "x"), Options{})
	rs[0].Errors = append(rs[0].Errors, "mutated")
	if len(rs[1].Errors) != 0 {
		t.Fatalf("results share their Errors slices: %q", rs[1].Errors)
	}
}
