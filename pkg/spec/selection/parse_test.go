package selection

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// problem is what the tests check of a *ValidationError.
type problem struct {
	Index   int
	Field   string
	Section string
}

func problemsOf(t *testing.T, err error) []problem {
	t.Helper()
	var ae *AnnotationError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T) is not an *AnnotationError", err, err)
	}
	out := make([]problem, len(ae.Problems))
	for i, p := range ae.Problems {
		out[i] = problem{p.Index, p.Field, p.Section}
	}
	return out
}

func mustParse(t *testing.T, annotation, podNS string) []Element {
	t.Helper()
	got, err := Parse(annotation, podNS)
	if err != nil {
		t.Fatalf("Parse(%q): %v", annotation, err)
	}
	return got
}

func num(s string) json.Number { return json.Number(s) }

// TestSpecExamples parses every selection annotation example of spec §3.3.1,
// §4.1.1, §4.1.2.1.x and §4.2.2. Where the text of the spec lost the JSON
// sample (§4.1.2.1.3.1, .4.1, .6.1, .7.1, .8.1, .9.1, .10.1, .11.1) the
// example is rebuilt from the surrounding text (the element "net-b" and the
// runtimeConfig snippet the text shows) and the upstream spec's samples.
func TestSpecExamples(t *testing.T) {
	tests := []struct {
		section    string
		annotation string
		podNS      string
		want       []Element
	}{
		{"3.3.1", "example-namespace/attachment-name", "my-namespace",
			[]Element{{Name: "attachment-name", Namespace: "example-namespace"}}},
		{"3.3.1", "attachment-name", "my-namespace",
			[]Element{{Name: "attachment-name", Namespace: "my-namespace"}}},
		{"4.1.1", "net-a,net-b,other-ns/net-c", "my-namespace", []Element{
			{Name: "net-a", Namespace: "my-namespace"},
			{Name: "net-b", Namespace: "my-namespace"},
			{Name: "net-c", Namespace: "other-ns"},
		}},
		{"4.1.2.1.3.1", `[
  { "name": "net-a" },
  { "name": "net-b", "ips": [ "10.2.2.42/24", "2001:db8::5/64" ] },
  { "name": "net-c", "namespace": "other-ns" }
]`, "my-namespace", []Element{
			{Name: "net-a", Namespace: "my-namespace"},
			{Name: "net-b", Namespace: "my-namespace", IPRequest: []string{"10.2.2.42/24", "2001:db8::5/64"}},
			{Name: "net-c", Namespace: "other-ns"},
		}},
		{"4.1.2.1.4.1", `[{"name":"net-a"},{"name":"net-b","mac":"02:23:45:67:89:01"}]`, "my-namespace", []Element{
			{Name: "net-a", Namespace: "my-namespace"},
			{Name: "net-b", Namespace: "my-namespace", MacRequest: "02:23:45:67:89:01"},
		}},
		{"4.1.2.1.5", `[{"name":"net-b","interface":"eth1"}]`, "my-namespace", []Element{
			{Name: "net-b", Namespace: "my-namespace", InterfaceRequest: "eth1"},
		}},
		{"4.1.2.1.6.1", `[{"name":"net-b","cni-args":{"foo":"bar","vlan":100,"nested":{"a":[1,true,null]}}}]`, "my-namespace", []Element{
			{Name: "net-b", Namespace: "my-namespace", CNIArgs: map[string]any{
				"foo": "bar", "vlan": num("100"), "nested": map[string]any{"a": []any{num("1"), true, nil}},
			}},
		}},
		{"4.1.2.1.7.1", `[{"name":"net-b","portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"},{"hostPort":8000,"containerPort":8001,"protocol":"UDP"},{"hostPort":9000,"containerPort":9000}]}]`, "my-namespace", []Element{
			{Name: "net-b", Namespace: "my-namespace", PortMappingsRequest: []PortMapping{
				{HostPort: 8080, ContainerPort: 80, Protocol: "tcp"},
				{HostPort: 8000, ContainerPort: 8001, Protocol: "udp"},
				{HostPort: 9000, ContainerPort: 9000, Protocol: "tcp"},
			}},
		}},
		{"4.1.2.1.8.1", `[{"name":"net-b","bandwidth":{"ingressRate":2048,"ingressBurst":1600,"egressRate":4096,"egressBurst":1600}}]`, "my-namespace", []Element{
			{Name: "net-b", Namespace: "my-namespace", BandwidthRequest: &Bandwidth{IngressRate: 2048, IngressBurst: 1600, EgressRate: 4096, EgressBurst: 1600}},
		}},
		{"4.1.2.1.9.1", `[{"name":"net-a"},{"name":"net-b","default-route":["192.168.2.1"]}]`, "my-namespace", []Element{
			{Name: "net-a", Namespace: "my-namespace"},
			{Name: "net-b", Namespace: "my-namespace", GatewayRequest: []string{"192.168.2.1"}},
		}},
		{"4.1.2.1.10.1", `[{"name":"net-a"},{"name":"net-b","infiniband-guid":"24:8a:07:03:00:8d:ae:2f"}]`, "my-namespace", []Element{
			{Name: "net-a", Namespace: "my-namespace"},
			{Name: "net-b", Namespace: "my-namespace", InfinibandGUIDRequest: "24:8a:07:03:00:8d:ae:2f"},
		}},
		{"4.1.2.1.11.1", `[{"name":"net-a"},{"name":"net-b","interface":"eth1","ipam-claim-reference":"vm-a.tenantred.pod16367aacb67"}]`, "my-namespace", []Element{
			{Name: "net-a", Namespace: "my-namespace"},
			{Name: "net-b", Namespace: "my-namespace", InterfaceRequest: "eth1", IPAMClaimReference: "vm-a.tenantred.pod16367aacb67"},
		}},
		{"4.2.2", "net-a,net-a", "my-namespace", []Element{
			{Name: "net-a", Namespace: "my-namespace"},
			{Name: "net-a", Namespace: "my-namespace"},
		}},
		{"4.2.2", `[{"name":"net-a"},{"name":"net-a"}]`, "my-namespace", []Element{
			{Name: "net-a", Namespace: "my-namespace"},
			{Name: "net-a", Namespace: "my-namespace"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.section, func(t *testing.T) {
			got := mustParse(t, tc.annotation, tc.podNS)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Parse(%q)\n got  %#v\n want %#v", tc.annotation, got, tc.want)
			}
			assertRoundTrip(t, got, tc.podNS)
		})
	}
}

// TestSpecRuntimeConfigExamples checks that the values the spec's
// runtimeConfig snippets show for "net-b" come out of Parse unchanged
// (§4.1.2.1.3.2, §4.1.2.1.10.2).
func TestSpecRuntimeConfigExamples(t *testing.T) {
	got := mustParse(t, `[{"name":"net-b","ips":["10.2.2.42/24","2001:db8::5/64"],"infiniband-guid":"24:8a:07:03:00:8d:ae:2f"}]`, "ns")
	if want := []string{"10.2.2.42/24", "2001:db8::5/64"}; !reflect.DeepEqual(got[0].IPRequest, want) {
		t.Errorf("ips = %q, want %q (spec §4.1.2.1.3.2)", got[0].IPRequest, want)
	}
	if want := "24:8a:07:03:00:8d:ae:2f"; got[0].InfinibandGUIDRequest != want {
		t.Errorf("infiniband-guid = %q, want %q (spec §4.1.2.1.10.2)", got[0].InfinibandGUIDRequest, want)
	}
}

func TestParseFormats(t *testing.T) {
	tests := []struct {
		name       string
		annotation string
		want       []Element
	}{
		// §4.1: a blank annotation selects nothing.
		{"empty", "", nil},
		{"blank", " \t\n ", nil},
		{"empty JSON list", "[]", nil},
		{"blank JSON list", "  [ \n ]  ", nil},
		// §4.1.1, white space around items is ignored.
		{"comma spaces", " net-a , other/net-b\t,\nnet-c ", []Element{
			{Name: "net-a", Namespace: "pod-ns"},
			{Name: "net-b", Namespace: "other"},
			{Name: "net-c", Namespace: "pod-ns"},
		}},
		// §4.1.1 + the ecosystem's "@ifname".
		{"comma ifname", "net-a@eth1,other/net-b@net2", []Element{
			{Name: "net-a", Namespace: "pod-ns", InterfaceRequest: "eth1"},
			{Name: "net-b", Namespace: "other", InterfaceRequest: "net2"},
		}},
		// §3.3: names are dot-separated labels.
		{"comma dotted name", "ns/a.b-c.d", []Element{{Name: "a.b-c.d", Namespace: "ns"}}},
		// §4.1.2: leading white space before '[' still selects JSON.
		{"JSON after white space", "\n  [{\"name\":\"net-a\"}]\n", []Element{{Name: "net-a", Namespace: "pod-ns"}}},
		// §4.1.2.1.1: an empty "namespace" means the pod's namespace.
		{"JSON empty namespace", `[{"name":"net-a","namespace":""}]`, []Element{{Name: "net-a", Namespace: "pod-ns"}}},
		// §4.1.2.1.3, .4, .9, .10: canonical forms.
		{"canonical addresses", `[{"name":"n","ips":["2001:DB8:0:0::5/64","10.0.0.1"],"mac":"02-AB-CD-EF-00-01","default-route":["2001:DB8::1","10.0.0.254"],"infiniband-guid":"248A.0703.008D.AE2F"}]`, []Element{{
			Name: "n", Namespace: "pod-ns", IPRequest: []string{"2001:db8::5/64", "10.0.0.1"}, MacRequest: "02:ab:cd:ef:00:01",
			GatewayRequest: []string{"2001:db8::1", "10.0.0.254"}, InfinibandGUIDRequest: "24:8a:07:03:00:8d:ae:2f",
		}}},
		// §4.1.2.1.9: "This list may be empty."
		{"empty default-route", `[{"name":"n","default-route":[]}]`, []Element{{Name: "n", Namespace: "pod-ns", GatewayRequest: []string{}}}},
		// §4.1.2.1.6: an empty cni-args object is kept.
		{"empty cni-args", `[{"name":"n","cni-args":{}}]`, []Element{{Name: "n", Namespace: "pod-ns", CNIArgs: map[string]any{}}}},
		// §4.1.2.1.7: protocol case-insensitive, default tcp; hostIP of CONVENTIONS.md.
		{"port mappings", `[{"name":"n","portMappings":[{"hostPort":1,"containerPort":65535,"protocol":"SCTP","hostIP":"::FFFF:10.0.0.1"}]}]`, []Element{{
			Name: "n", Namespace: "pod-ns", PortMappingsRequest: []PortMapping{{HostPort: 1, ContainerPort: 65535, Protocol: "sctp", HostIP: "::ffff:10.0.0.1"}},
		}}},
		// §4.1.2.1.8: any one key is enough.
		{"bandwidth egress only", `[{"name":"n","bandwidth":{"egressRate":1000000}}]`, []Element{{
			Name: "n", Namespace: "pod-ns", BandwidthRequest: &Bandwidth{EgressRate: 1000000},
		}}},
		// §4.1.2.1: reverse-domain keys are kept, compacted.
		{"extensions", `[{"name":"n","org.example.color":{ "a" : [1, 2] },"io.x":null}]`, []Element{{
			Name: "n", Namespace: "pod-ns", Extensions: map[string]json.RawMessage{
				"org.example.color": json.RawMessage(`{"a":[1,2]}`), "io.x": json.RawMessage(`null`),
			},
		}}},
		// JSON escapes in strings are decoded.
		{"escaped name", `[{"name":"net\u002da"}]`, []Element{{Name: "net-a", Namespace: "pod-ns"}}},
		// §4.1.2.1.5: the kernel allows '@' and '.' in names; the comma form splits at the first '@'.
		{"ifname with at", "net-a@a@b", []Element{{Name: "net-a", Namespace: "pod-ns", InterfaceRequest: "a@b"}}},
		{"ifname 15 bytes", `[{"name":"n","interface":"abcdefghijklmno"}]`, []Element{{Name: "n", Namespace: "pod-ns", InterfaceRequest: "abcdefghijklmno"}}},
		// §4.1.2.1.11 with §8.3 names.
		{"claim names", `[{"name":"n","ipam-claim-reference":"myappstatefulset.safenetwork.eth1"}]`, []Element{{
			Name: "n", Namespace: "pod-ns", IPAMClaimReference: "myappstatefulset.safenetwork.eth1",
		}}},
		// §4.2: the same network twice with different interfaces.
		{"same network twice", "net-a@x1,net-a@x2", []Element{
			{Name: "net-a", Namespace: "pod-ns", InterfaceRequest: "x1"},
			{Name: "net-a", Namespace: "pod-ns", InterfaceRequest: "x2"},
		}},
		// §3.3: 253-character names, 63-character namespaces.
		{"long names", strings.Repeat("a", 63) + "/" + strings.Repeat("b.", 126) + "c", []Element{
			{Name: strings.Repeat("b.", 126) + "c", Namespace: strings.Repeat("a", 63)},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := mustParse(t, tc.annotation, "pod-ns")
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Parse(%q)\n got  %#v\n want %#v", tc.annotation, got, tc.want)
			}
			assertRoundTrip(t, got, "pod-ns")
		})
	}
}

func TestParseInvalid(t *testing.T) {
	tests := []struct {
		name       string
		annotation string
		want       []problem
		reason     string // substring of the first problem's message
	}{
		// §4.1.1
		{"empty item", "net-a,,net-b", []problem{{1, "", "4.1.1"}}, "is empty"},
		{"trailing comma", "net-a,", []problem{{1, "", "4.1.1"}}, "is empty"},
		{"blank item", "net-a, ,net-b", []problem{{1, "", "4.1.1"}}, "is empty"},
		{"two slashes", "a/b/c", []problem{{0, "name", "4.1.1"}}, "must not contain '/'"},
		{"empty namespace", "/net-a", []problem{{0, "namespace", "4.1.1"}}, "empty before '/'"},
		{"empty name", "ns/", []problem{{0, "name", "4.1.2.1.1"}}, "is required"},
		{"empty ifname", "net-a@", []problem{{0, "interface", "4.1.1"}}, "empty after '@'"},
		{"only ifname", "@eth1", []problem{{0, "name", "4.1.2.1.1"}}, "is required"},
		{"space inside item", "net a", []problem{{0, "name", "3.3"}}, "DNS-1123"},
		{"upper case", "Net-A", []problem{{0, "name", "3.3"}}, "lower case"},
		{"bad namespace", "my_ns/net", []problem{{0, "namespace", "4.1.2.1.2"}}, "DNS-1123 label"},
		{"dotted namespace", "a.b/net", []problem{{0, "namespace", "4.1.2.1.2"}}, "DNS-1123 label"},
		{"long namespace", strings.Repeat("a", 64) + "/net", []problem{{0, "namespace", "4.1.2.1.2"}}, "longer than 63"},
		{"long name", strings.Repeat("a", 254), []problem{{0, "name", "3.3"}}, "longer than 253"},
		{"leading dash", "-net", []problem{{0, "name", "3.3"}}, "start and end"},
		{"trailing dash label", "a-.b", []problem{{0, "name", "3.3"}}, "start and end"},
		{"empty label", "a..b", []problem{{0, "name", "3.3"}}, "empty label"},
		{"bad ifname comma", "net@a:b", []problem{{0, "interface", "4.1.2.1.5"}}, "must not contain ':'"},
		// §4.1.1: quote characters are not part of the comma format (the
		// kernel would take "eth0" with its quotes as an interface name).
		{"quoted ifname comma", `net1@"eth0"`, []problem{{0, "interface", "4.1.1"}}, `"\"eth0\"" contains the quote character '"': the comma-delimited format takes bare names (write eth0)`},
		{"single-quoted ifname comma", `net1@'eth0'`, []problem{{0, "interface", "4.1.1"}}, `contains the quote character '\''`},
		{"backquoted ifname comma", "net1@`eth0`", []problem{{0, "interface", "4.1.1"}}, "contains the quote character '`'"},
		{"typographic quotes ifname comma", "net1@\u201ceth0\u201d", []problem{{0, "interface", "4.1.1"}}, "contains the quote character '\u201c'"},
		{"quote in the middle of an ifname", `net1@et"h0`, []problem{{0, "interface", "4.1.1"}}, "(write eth0)"},
		{"only a quote as ifname", `net1@"`, []problem{{0, "interface", "4.1.1"}}, `contains the quote character '"': the comma-delimited format takes bare names, or use the JSON list format`},
		{"quoted name comma", `"net1"`, []problem{{0, "name", "4.1.1"}}, "(write net1)"},
		{"quoted namespace comma", `'ns'/net1@eth1`, []problem{{0, "namespace", "4.1.1"}}, "(write ns)"},
		{"quoted item comma", `net-a, "ns/net-b@eth1"`, []problem{{1, "namespace", "4.1.1"}, {1, "interface", "4.1.1"}}, "(write ns)"},
		// §4.1.2
		{"single object", `{"name":"net-a"}`, []problem{{-1, "", "4.1.2"}}, "wrap it in [ ]"},
		{"bad JSON", `[{"name":"net-a"}`, []problem{{-1, "", "4.1.2"}}, "not a valid JSON list"},
		{"trailing garbage", `[{"name":"net-a"}] x`, []problem{{-1, "", "4.1.2"}}, "not a valid JSON list"},
		{"not objects", `["net-a", null, 1]`, []problem{{0, "", "4.1.2.1"}, {1, "", "4.1.2.1"}, {2, "", "4.1.2.1"}}, "must be a JSON object, not a string"},
		// §4.1.2.1 reserved keys
		{"typo ip", `[{"name":"n","ip":"10.0.0.1"}]`, []problem{{0, "ip", "4.1.2.1"}}, `did you mean "ips"?`},
		{"typo ifname", `[{"name":"n","ifname":"eth1"}]`, []problem{{0, "ifname", "4.1.2.1"}}, `did you mean "interface"?`},
		{"typo case", `[{"name":"n","portmappings":[]}]`, []problem{{0, "portmappings", "4.1.2.1"}}, `did you mean "portMappings"?`},
		{"unknown key", `[{"name":"n","color":"red"}]`, []problem{{0, "color", "4.1.2.1"}}, "reverse domain notation"},
		{"repeated key", `[{"name":"a","name":"b"}]`, []problem{{0, "name", "4.1.2.1"}}, "appears more than once"},
		{"repeated key escaped", `[{"name":"a","n\u0061me":"b"}]`, []problem{{0, "name", "4.1.2.1"}}, "appears more than once"},
		{"repeated key among many", `[{"name":"a"` + manyExtensions(40) + `,"org.k0":1}]`, []problem{{0, "org.k0", "4.1.2.1"}}, "appears more than once"},
		{"repeated port key", `[{"name":"n","portMappings":[{"hostPort":80,"containerPort":80,"hostPort":81}]}]`, []problem{{0, "portMappings[0].hostPort", "4.1.2.1.7"}}, "appears more than once"},
		{"repeated bandwidth key", `[{"name":"n","bandwidth":{"egressRate":1,"egressRate":2}}]`, []problem{{0, "bandwidth.egressRate", "4.1.2.1.8"}}, "appears more than once"},
		{"bandwidth overflow", `[{"name":"n","bandwidth":{"egressRate":99999999999999999999}}]`, []problem{{0, "bandwidth.egressRate", "4.1.2.1.8"}}, "out of range"},
		// §4.1.2.1.1
		{"no name", `[{"namespace":"ns"}]`, []problem{{0, "name", "4.1.2.1.1"}}, "is required"},
		{"empty name JSON", `[{"name":""}]`, []problem{{0, "name", "4.1.2.1.1"}}, "is required"},
		{"name not string", `[{"name":5}]`, []problem{{0, "name", "4.1.2.1.1"}}, "must be a string, not a number"},
		{"name null", `[{"name":null}]`, []problem{{0, "name", "4.1.2.1.1"}}, "must be a string, not null"},
		// §4.1.2.1.2
		{"namespace not string", `[{"name":"n","namespace":["a"]}]`, []problem{{0, "namespace", "4.1.2.1.2"}}, "not an array"},
		// §4.1.2.1.3
		{"ips empty", `[{"name":"n","ips":[]}]`, []problem{{0, "ips", "4.1.2.1.3"}}, "at least one"},
		{"ips string", `[{"name":"n","ips":"10.0.0.1"}]`, []problem{{0, "ips", "4.1.2.1.3"}}, "JSON array of strings"},
		{"ips bad", `[{"name":"n","ips":["10.0.0.1","10.0.0.256/24","fe80::1%eth0","10.0.0.1/33","01.2.3.4",""]}]`,
			[]problem{{0, "ips[1]", "4.1.2.1.3"}, {0, "ips[2]", "4.1.2.1.3"}, {0, "ips[3]", "4.1.2.1.3"}, {0, "ips[4]", "4.1.2.1.3"}, {0, "ips[5]", "4.1.2.1.3"}}, "not an IPv4 or IPv6"},
		{"ips item number", `[{"name":"n","ips":[1]}]`, []problem{{0, "ips[0]", "4.1.2.1.3"}}, "must be a string"},
		// §4.1.2.1.4
		{"mac bad", `[{"name":"n","mac":"zz"}]`, []problem{{0, "mac", "4.1.2.1.4"}}, `"zz" is not a 6-byte MAC address`},
		{"mac 8 bytes", `[{"name":"n","mac":"02:00:00:00:00:00:00:01"}]`, []problem{{0, "mac", "4.1.2.1.4"}}, "6-byte"},
		{"mac multicast", `[{"name":"n","mac":"01:00:5e:00:00:01"}]`, []problem{{0, "mac", "4.1.2.1.4"}}, "multicast"},
		{"mac zero", `[{"name":"n","mac":"00:00:00:00:00:00"}]`, []problem{{0, "mac", "4.1.2.1.4"}}, "all-zero"},
		{"mac empty", `[{"name":"n","mac":""}]`, []problem{{0, "mac", "4.1.2.1.4"}}, "must not be empty"},
		// §4.1.2.1.5
		{"ifname long", `[{"name":"n","interface":"abcdefghijklmnop"}]`, []problem{{0, "interface", "4.1.2.1.5"}}, "15 bytes"},
		{"ifname dot", `[{"name":"n","interface":"."}]`, []problem{{0, "interface", "4.1.2.1.5"}}, "not a valid"},
		{"ifname dotdot", `[{"name":"n","interface":".."}]`, []problem{{0, "interface", "4.1.2.1.5"}}, "not a valid"},
		{"ifname slash", `[{"name":"n","interface":"a/b"}]`, []problem{{0, "interface", "4.1.2.1.5"}}, "'/'"},
		{"ifname percent", `[{"name":"n","interface":"net%d"}]`, []problem{{0, "interface", "4.1.2.1.5"}}, "'%'"},
		{"ifname space", `[{"name":"n","interface":"a b"}]`, []problem{{0, "interface", "4.1.2.1.5"}}, "white space"},
		{"ifname tab", `[{"name":"n","interface":"a\tb"}]`, []problem{{0, "interface", "4.1.2.1.5"}}, "white space"},
		{"ifname non-ASCII", `[{"name":"n","interface":"eth\u00e9"}]`, []problem{{0, "interface", "4.1.2.1.5"}}, "ASCII"},
		{"ifname empty", `[{"name":"n","interface":""}]`, []problem{{0, "interface", "4.1.2.1.5"}}, "must not be empty"},
		{"duplicate ifname", `[{"name":"a","interface":"eth1"},{"name":"b"},{"name":"c","interface":"eth1"}]`, []problem{{2, "interface", "4.1.2.1.5"}}, `already requested by networks[0] "a"`},
		{"duplicate ifname comma", "a@eth1,b@eth1", []problem{{1, "interface", "4.1.2.1.5"}}, "already requested"},
		// §4.1.2.1.6
		{"cni-args list", `[{"name":"n","cni-args":["a"]}]`, []problem{{0, "cni-args", "4.1.2.1.6"}}, "must be a JSON object"},
		{"cni-args null", `[{"name":"n","cni-args":null}]`, []problem{{0, "cni-args", "4.1.2.1.6"}}, "not null"},
		// §4.1.2.1.7
		{"portMappings empty", `[{"name":"n","portMappings":[]}]`, []problem{{0, "portMappings", "4.1.2.1.7"}}, "at least one"},
		{"portMappings object", `[{"name":"n","portMappings":{"hostPort":1}}]`, []problem{{0, "portMappings", "4.1.2.1.7"}}, "JSON array"},
		{"ports out of range", `[{"name":"n","portMappings":[{"hostPort":0,"containerPort":65536},{"hostPort":-1,"containerPort":99999999999}]}]`,
			[]problem{{0, "portMappings[0].hostPort", "4.1.2.1.7"}, {0, "portMappings[0].containerPort", "4.1.2.1.7"}, {0, "portMappings[1].hostPort", "4.1.2.1.7"}, {0, "portMappings[1].containerPort", "4.1.2.1.7"}}, "1-65535"},
		{"port missing", `[{"name":"n","portMappings":[{"hostPort":80}]}]`, []problem{{0, "portMappings[0].containerPort", "4.1.2.1.7"}}, "is required"},
		{"port float", `[{"name":"n","portMappings":[{"hostPort":80.5,"containerPort":"80"}]}]`, []problem{{0, "portMappings[0].hostPort", "4.1.2.1.7"}, {0, "portMappings[0].containerPort", "4.1.2.1.7"}}, "must be an integer"},
		{"port protocol", `[{"name":"n","portMappings":[{"hostPort":80,"containerPort":80,"protocol":"icmp"}]}]`, []problem{{0, "portMappings[0].protocol", "4.1.2.1.7"}}, `"icmp" is not one of`},
		{"port unknown key", `[{"name":"n","portMappings":[{"hostPort":80,"containerPort":80,"hostport":81}]}]`, []problem{{0, "portMappings[0].hostport", "4.1.2.1.7"}}, "not a port mapping key"},
		{"port hostIP", `[{"name":"n","portMappings":[{"hostPort":80,"containerPort":80,"hostIP":"10.0.0.0/8"}]}]`, []problem{{0, "portMappings[0].hostIP", "4.1.2.1.7"}}, "not an IPv4"},
		{"port not object", `[{"name":"n","portMappings":[80]}]`, []problem{{0, "portMappings[0]", "4.1.2.1.7"}}, "must be a JSON object"},
		// §4.1.2.1.8
		{"bandwidth empty", `[{"name":"n","bandwidth":{}}]`, []problem{{0, "bandwidth", "4.1.2.1.8"}}, "at least one"},
		{"bandwidth zero", `[{"name":"n","bandwidth":{"ingressRate":0}}]`, []problem{{0, "bandwidth.ingressRate", "4.1.2.1.8"}}, "non-zero"},
		{"bandwidth negative", `[{"name":"n","bandwidth":{"egressRate":-5}}]`, []problem{{0, "bandwidth.egressRate", "4.1.2.1.8"}}, "positive"},
		{"bandwidth burst alone", `[{"name":"n","bandwidth":{"ingressBurst":100,"egressBurst":100}}]`, []problem{{0, "bandwidth.ingressBurst", "4.1.2.1.8"}, {0, "bandwidth.egressBurst", "4.1.2.1.8"}}, `needs "ingressRate"`},
		{"bandwidth string", `[{"name":"n","bandwidth":{"ingressRate":"1M"}}]`, []problem{{0, "bandwidth.ingressRate", "4.1.2.1.8"}}, "must be an integer"},
		{"bandwidth unknown", `[{"name":"n","bandwidth":{"ingressRate":1,"rate":2}}]`, []problem{{0, "bandwidth.rate", "4.1.2.1.8"}}, "not a bandwidth key"},
		{"bandwidth list", `[{"name":"n","bandwidth":[]}]`, []problem{{0, "bandwidth", "4.1.2.1.8"}}, "must be a JSON object"},
		// §4.1.2.1.9
		{"default-route twice", `[{"name":"a","default-route":["10.0.0.1"]},{"name":"b","default-route":[]}]`, []problem{{1, "default-route", "4.1.2.1.9"}}, "only one element"},
		{"default-route prefix", `[{"name":"a","default-route":["10.0.0.1/24"]}]`, []problem{{0, "default-route[0]", "4.1.2.1.9"}}, "not an IPv4"},
		{"default-route repeat", `[{"name":"a","default-route":["10.0.0.1","10.0.0.1"]}]`, []problem{{0, "default-route[1]", "4.1.2.1.9"}}, "repeats"},
		{"default-route string", `[{"name":"a","default-route":"10.0.0.1"}]`, []problem{{0, "default-route", "4.1.2.1.9"}}, "JSON array"},
		// §4.1.2.1.10
		{"guid 6 bytes", `[{"name":"n","infiniband-guid":"02:00:00:00:00:01"}]`, []problem{{0, "infiniband-guid", "4.1.2.1.10"}}, "8-byte"},
		{"guid garbage", `[{"name":"n","infiniband-guid":"x"}]`, []problem{{0, "infiniband-guid", "4.1.2.1.10"}}, "8-byte"},
		// §4.1.2.1.11, §8.3
		{"claim bad name", `[{"name":"n","ipam-claim-reference":"My_Claim"}]`, []problem{{0, "ipam-claim-reference", "8.3"}}, "DNS-1123 subdomain"},
		{"claim with ips", `[{"name":"n","ips":["10.0.0.1"],"ipam-claim-reference":"c"}]`, []problem{{0, "ipam-claim-reference", "4.1.2.1.11"}}, `cannot be combined with "ips"`},
		{"claim number", `[{"name":"n","ipam-claim-reference":1}]`, []problem{{0, "ipam-claim-reference", "4.1.2.1.11"}}, "must be a string"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.annotation, "pod-ns")
			if err == nil {
				t.Fatalf("Parse(%q) = %#v, want error", tc.annotation, got)
			}
			if got != nil {
				t.Errorf("Parse(%q) returned elements %#v with an error", tc.annotation, got)
			}
			if p := problemsOf(t, err); !reflect.DeepEqual(p, tc.want) {
				t.Errorf("Parse(%q) problems\n got  %+v\n want %+v\n err: %v", tc.annotation, p, tc.want, err)
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("errors.As(*ValidationError) failed for %v", err)
			}
			if !strings.Contains(ve.Error(), tc.reason) {
				t.Errorf("first problem %q does not contain %q", ve.Error(), tc.reason)
			}
		})
	}
}

// TestParseCollectsAllProblems: linting needs every problem at once, sorted
// by element and by the spec's order of keys.
func TestParseCollectsAllProblems(t *testing.T) {
	ann := `[{"name":"net-b","ip":"1.2.3.4","mac":"zz","ips":[],"bandwidth":{"ingressBurst":5}},
	         {"name":"A","interface":"a/b","default-route":["10.0.0.1"]},
	         {"name":"c","default-route":[]},
	         5]`
	_, err := Parse(ann, "ns")
	want := []problem{
		{0, "ips", "4.1.2.1.3"},
		{0, "mac", "4.1.2.1.4"},
		{0, "bandwidth.ingressBurst", "4.1.2.1.8"},
		{0, "ip", "4.1.2.1"},
		{1, "name", "3.3"},
		{1, "interface", "4.1.2.1.5"},
		{2, "default-route", "4.1.2.1.9"},
		{3, "", "4.1.2.1"},
	}
	if got := problemsOf(t, err); !reflect.DeepEqual(got, want) {
		t.Errorf("problems\n got  %+v\n want %+v", got, want)
	}
	if !strings.HasPrefix(err.Error(), "networks annotation has 8 problems: ") {
		t.Errorf("message %q lacks the count", err)
	}
}

func TestErrorMessages(t *testing.T) {
	tests := []struct {
		annotation string
		want       string
	}{
		{`[{"name":"net-a"},{"name":"net-b","mac":"zz"}]`,
			`networks[1] "net-b": field "mac": "zz" is not a 6-byte MAC address (spec §4.1.2.1.4)`},
		{`[{"namespace":"x"}]`,
			`networks[0]: field "name": is required (spec §4.1.2.1.1)`},
		{`{"name":"a"}`,
			`networks: is a single JSON object; the JSON format is a list of objects: wrap it in [ ] (spec §4.1.2)`},
		{"net-a,,net-b",
			`networks[1]: is empty: items of the comma-delimited format are separated by single commas (spec §4.1.1)`},
		{`net-a, net1@"eth0"`,
			`networks[1] "net1": field "interface": "\"eth0\"" contains the quote character '"': the comma-delimited format takes bare names (write eth0), or use the JSON list format (spec §4.1.1)`},
		{`[{"name":"n","ips":["` + strings.Repeat("1", 100) + `"]}]`,
			`networks[0] "n": field "ips[0]": "` + strings.Repeat("1", 64) + `..." is not an IPv4 or IPv6 address (spec §4.1.2.1.3)`},
	}
	for _, tc := range tests {
		_, err := Parse(tc.annotation, "ns")
		if err == nil || err.Error() != tc.want {
			t.Errorf("Parse(%q) error\n got  %v\n want %s", tc.annotation, err, tc.want)
		}
	}
}

func TestErrorMessageCapsList(t *testing.T) {
	ann := strings.Repeat("BAD,", 30) + "BAD"
	_, err := Parse(ann, "ns")
	if got := len(problemsOf(t, err)); got != 31 {
		t.Fatalf("got %d problems, want 31", got)
	}
	if msg := err.Error(); !strings.HasSuffix(msg, "; and 11 more") {
		t.Errorf("message does not end with the rest count: %q", msg[len(msg)-40:])
	}
}

// TestPodNamespace: §4.1.2.1.2 defaults the namespace to the pod's, which
// must then be a valid namespace name.
func TestPodNamespace(t *testing.T) {
	if _, err := Parse("net-a", ""); err == nil {
		t.Error("Parse with an empty pod namespace and no namespace in the element succeeded")
	}
	if _, err := Parse("net-a", "Bad_NS"); err == nil {
		t.Error("Parse with an invalid pod namespace succeeded")
	}
	if got := mustParse(t, "ns/net-a", ""); got[0].Namespace != "ns" {
		t.Errorf("namespace = %q, want ns", got[0].Namespace)
	}
}

func TestKey(t *testing.T) {
	got := mustParse(t, "net-a,other/net-b", "pod-ns")
	if got[0].Key() != "pod-ns/net-a" || got[1].Key() != "other/net-b" {
		t.Errorf("keys = %q, %q", got[0].Key(), got[1].Key())
	}
}

func TestParseDefaultNetwork(t *testing.T) {
	tests := []struct {
		name       string
		annotation string
		want       Element
	}{
		{"comma name", "ovn", Element{Name: "ovn", Namespace: "pod-ns"}},
		{"comma namespace/name", " kube-system/ovn ", Element{Name: "ovn", Namespace: "kube-system"}},
		{"JSON list", `[{"name":"ovn","namespace":"kube-system","mac":"02:00:00:00:00:01"}]`,
			Element{Name: "ovn", Namespace: "kube-system", MacRequest: "02:00:00:00:00:01"}},
		{"JSON object", `{"name":"default","namespace":"ovn-kubernetes","ips":["10.50.0.5"],"ipam-claim-reference":"my-vm-claim"}`,
			Element{Name: "default", Namespace: "ovn-kubernetes", IPRequest: []string{"10.50.0.5"}, IPAMClaimReference: "my-vm-claim"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseDefaultNetwork(tc.annotation, "pod-ns")
			if err != nil {
				t.Fatalf("ParseDefaultNetwork(%q): %v", tc.annotation, err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("got %#v\nwant %#v", *got, tc.want)
			}
		})
	}
	invalid := []struct {
		annotation string
		want       string
	}{
		{"", "default-network: is empty; it must select exactly one network (spec §4.1.2)"},
		{"a,b", "default-network: selects 2 networks; it must select exactly one (spec §4.1.2)"},
		{"[]", "default-network: selects 0 networks; it must select exactly one (spec §4.1.2)"},
		{`[{"name":"a"},{"name":"b"}]`, "default-network: selects 2 networks"},
		{"ovn@eth0", `default-network[0] "ovn": field "interface": "eth0" cannot be set: the default network always uses the runtime's CNI_IFNAME (spec §4.1.2.1.5)`},
		{`{"name":"ovn","mac":"x"}`, `default-network[0] "ovn": field "mac": "x" is not a 6-byte MAC address`},
		{`{"name":"ovn","gateway":"x"}`, `did you mean "default-route"?`},
		{`"ovn"`, `default-network[0] "\"ovn\"": field "name": "\"ovn\"" contains the quote character '"': the comma-delimited format takes bare names (write ovn)`},
		// A quoted interface is still refused for what it is: an interface.
		{`ovn@"eth0"`, `default-network[0] "ovn": field "interface": "\"eth0\"" cannot be set`},
	}
	for _, tc := range invalid {
		got, err := ParseDefaultNetwork(tc.annotation, "pod-ns")
		if err == nil {
			t.Errorf("ParseDefaultNetwork(%q) = %#v, want error", tc.annotation, got)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseDefaultNetwork(%q) error\n got  %v\n want %s", tc.annotation, err, tc.want)
		}
	}
}

func TestMarshal(t *testing.T) {
	in := []Element{
		{Name: "net-a", Namespace: "ns"},
		{
			Name: "net-b", Namespace: "ns", IPRequest: []string{"10.2.2.42/24"}, MacRequest: "02:23:45:67:89:01",
			InterfaceRequest: "eth1", CNIArgs: map[string]any{"b": "<x>", "a": 1},
			PortMappingsRequest: []PortMapping{{HostPort: 8080, ContainerPort: 80, Protocol: "UDP"}, {HostPort: 1, ContainerPort: 2}},
			BandwidthRequest:    &Bandwidth{IngressRate: 10, IngressBurst: 5},
			GatewayRequest:      []string{}, InfinibandGUIDRequest: "24:8A:07:03:00:8D:AE:2F",
			Extensions: map[string]json.RawMessage{"org.z": json.RawMessage(`[1, 2]`), "org.a": json.RawMessage(`"v"`)},
		},
		{Name: "net-c", IPAMClaimReference: "vm-a.net-c"},
	}
	const want = `[{"name":"net-a","namespace":"ns"},` +
		`{"name":"net-b","namespace":"ns","ips":["10.2.2.42/24"],"mac":"02:23:45:67:89:01","interface":"eth1",` +
		`"cni-args":{"a":1,"b":"<x>"},"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"udp"},{"hostPort":1,"containerPort":2,"protocol":"tcp"}],` +
		`"bandwidth":{"ingressRate":10,"ingressBurst":5},"default-route":[],"infiniband-guid":"24:8a:07:03:00:8d:ae:2f",` +
		`"org.a":"v","org.z":[1,2]},` +
		`{"name":"net-c","ipam-claim-reference":"vm-a.net-c"}]`
	got, err := Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("Marshal\n got  %s\n want %s", got, want)
	}
	// Marshal leaves its argument alone.
	if in[1].PortMappingsRequest[0].Protocol != "UDP" || in[1].PortMappingsRequest[1].Protocol != "" {
		t.Errorf("Marshal changed its argument: %+v", in[1].PortMappingsRequest)
	}
	// The output is a valid annotation and parses back (§4.1.2).
	back := mustParse(t, got, "ns")
	if back[2].Namespace != "ns" || back[1].PortMappingsRequest[0].Protocol != "udp" {
		t.Errorf("Parse(Marshal) = %#v", back)
	}

	if s, err := Marshal(nil); err != nil || s != "[]" {
		t.Errorf("Marshal(nil) = %q, %v; want [] ", s, err)
	}
}

func TestMarshalRejectsInvalid(t *testing.T) {
	tests := []struct {
		name string
		in   []Element
		want []problem
	}{
		{"no name", []Element{{}}, []problem{{0, "name", "4.1.2.1.1"}}},
		{"empty ips", []Element{{Name: "a", IPRequest: []string{}}}, []problem{{0, "ips", "4.1.2.1.3"}}},
		{"bad port", []Element{{Name: "a", PortMappingsRequest: []PortMapping{{HostPort: 0, ContainerPort: 80}}}}, []problem{{0, "portMappings[0].hostPort", "4.1.2.1.7"}}},
		{"empty bandwidth", []Element{{Name: "a", BandwidthRequest: &Bandwidth{}}}, []problem{{0, "bandwidth", "4.1.2.1.8"}}},
		{"extension without period", []Element{{Name: "a", Extensions: map[string]json.RawMessage{"color": json.RawMessage(`1`)}}}, []problem{{0, "color", "4.1.2.1"}}},
		{"extension not JSON", []Element{{Name: "a", Extensions: map[string]json.RawMessage{"a.b": json.RawMessage(`{`)}}}, []problem{{0, "a.b", "4.1.2.1"}}},
		{"two default routes", []Element{{Name: "a", GatewayRequest: []string{}}, {Name: "b", GatewayRequest: []string{"10.0.0.1"}}}, []problem{{1, "default-route", "4.1.2.1.9"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Marshal(tc.in)
			if err == nil {
				t.Fatalf("Marshal = %q, want error", s)
			}
			if got := problemsOf(t, err); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("problems %+v, want %+v (%v)", got, tc.want, err)
			}
		})
	}
	// A CNIArgs value encoding/json cannot marshal: an error naming the field.
	_, err := Marshal([]Element{{Name: "a", CNIArgs: map[string]any{"c": make(chan int)}}})
	if err == nil || !strings.Contains(err.Error(), `networks[0] "a": field "cni-args"`) {
		t.Errorf("Marshal with a channel in cni-args: %v", err)
	}
}

// TestElementJSON: Element works with encoding/json on its own (e.g. in
// stored attachment records), keeping extensions and rejecting reserved keys.
func TestElementJSON(t *testing.T) {
	var e Element
	if err := json.Unmarshal([]byte(`{"name":"n","org.x":[1, 2],"default-route":[]}`), &e); err != nil {
		t.Fatal(err)
	}
	want := Element{Name: "n", GatewayRequest: []string{}, Extensions: map[string]json.RawMessage{"org.x": json.RawMessage(`[1,2]`)}}
	if !reflect.DeepEqual(e, want) {
		t.Errorf("got %#v\nwant %#v", e, want)
	}
	raw, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	if string(raw) != `{"name":"n","default-route":[],"org.x":[1,2]}` {
		t.Errorf("json.Marshal = %s", raw)
	}
	err = json.Unmarshal([]byte(`{"name":"n","ipz":[]}`), &e)
	if err == nil || !strings.Contains(err.Error(), `network selection element "n": field "ipz": is not a key of the spec; did you mean "ips"?`) {
		t.Errorf("Unmarshal with a reserved key: %v", err)
	}
	// null is a no-op, as encoding/json expects.
	e = Element{Name: "keep"}
	if err := json.Unmarshal([]byte(`null`), &e); err != nil || e.Name != "keep" {
		t.Errorf("Unmarshal(null) = %v, %#v", err, e)
	}
	// A pointer works too.
	var list []*Element
	if err := json.Unmarshal([]byte(`[{"name":"a"}]`), &list); err != nil || list[0].Name != "a" {
		t.Errorf("Unmarshal into []*Element = %v, %#v", err, list)
	}
}

// TestCNIArgsNumbersExact: §4.1.2.1.6 passes cni-args through, so numbers
// must not be rounded through float64.
func TestCNIArgsNumbersExact(t *testing.T) {
	got := mustParse(t, `[{"name":"n","cni-args":{"big":123456789012345678901234567890,"f":1.5e3}}]`, "ns")
	if got[0].CNIArgs["big"] != num("123456789012345678901234567890") || got[0].CNIArgs["f"] != num("1.5e3") {
		t.Errorf("cni-args = %#v", got[0].CNIArgs)
	}
	s, err := Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s, `"big":123456789012345678901234567890`) {
		t.Errorf("Marshal lost digits: %s", s)
	}
}

// assertRoundTrip checks Parse(Marshal(x)) == x.
func assertRoundTrip(t *testing.T, x []Element, podNS string) {
	t.Helper()
	s, err := Marshal(x)
	if err != nil {
		t.Fatalf("Marshal(%#v): %v", x, err)
	}
	y, err := Parse(s, podNS)
	if err != nil {
		t.Fatalf("Parse(Marshal(x)) = %v; Marshal gave %s", err, s)
	}
	if !reflect.DeepEqual(x, y) {
		t.Errorf("round trip through %s\n got  %#v\n want %#v", s, y, x)
	}
}

// TestHostileInput: huge keys and values are cut in errors; deep nesting
// and many problems do not fail.
func TestHostileInput(t *testing.T) {
	long := strings.Repeat("k", 10000)
	_, err := Parse(`[{"name":"n","`+long+`":1,"":2}]`, "ns")
	if err == nil || len(err.Error()) > 600 {
		t.Fatalf("error not bounded: %d bytes", len(err.Error()))
	}
	if !strings.Contains(err.Error(), "an empty key") {
		t.Errorf("empty key not reported: %v", err)
	}
	deep := `[{"name":"n","cni-args":{"a":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}}]`
	if _, err := Parse(deep, "ns"); err != nil {
		t.Errorf("deep cni-args: %v", err)
	}
	gws := `[{"name":"n","default-route":["10.0.0.1"` + strings.Repeat(`,"10.0.0.2"`, 20) + `]}]`
	_, err = Parse(gws, "ns")
	if got := len(problemsOf(t, err)); got != 19 {
		t.Errorf("got %d problems, want 19 repeated gateways", got)
	}
	many := `[` + strings.Repeat(`{"name":"n","interface":"eth1"},`, 2000) + `{"name":"n"}]`
	_, err = Parse(many, "ns")
	if got := len(problemsOf(t, err)); got != 1999 {
		t.Errorf("got %d problems, want 1999 duplicate interfaces", got)
	}
}

func manyExtensions(n int) string {
	var b strings.Builder
	for i := range n {
		b.WriteString(`,"org.k` + strconv.Itoa(i) + `":1`)
	}
	return b.String()
}

func TestElementUnmarshalInvalidJSON(t *testing.T) {
	var e Element
	err := e.UnmarshalJSON([]byte(`{"name":`))
	if err == nil || !strings.Contains(err.Error(), "network selection element: is not valid JSON") {
		t.Errorf("UnmarshalJSON(invalid) = %v", err)
	}
}

// ParseLimit refuses more elements than the bound, in both formats, before
// decoding any: an invalid element beyond the bound is not reported, the
// error is the count. At the bound, the elements parse as with Parse.
func TestParseLimit(t *testing.T) {
	var js, comma []string
	for i := range 1000 {
		js = append(js, fmt.Sprintf(`{"name":"net-%d","mac":"zz"}`, i)) // every element invalid
		comma = append(comma, fmt.Sprintf("net-%d", i))
	}
	for name, ann := range map[string]string{"json": "[" + strings.Join(js, ",") + "]", "comma": strings.Join(comma, ",")} {
		elems, err := ParseLimit(ann, "ns", 32)
		var tm *TooManyElementsError
		if !errors.As(err, &tm) || tm.Count != 1000 || tm.Max != 32 || elems != nil {
			t.Errorf("%s: %v, %d elements; want a *TooManyElementsError 1000 > 32", name, err, len(elems))
		}
		if err != nil && !strings.Contains(err.Error(), "selects 1000 network selection elements; a pod may have at most 32") {
			t.Errorf("%s: message %q", name, err)
		}
	}
	elems, err := ParseLimit(strings.Join(comma[:32], ","), "ns", 32)
	if err != nil || len(elems) != 32 {
		t.Errorf("at the bound: %d elements, %v", len(elems), err)
	}
	if elems, err := ParseLimit(strings.Join(comma, ","), "ns", 0); err != nil || len(elems) != 1000 {
		t.Errorf("no bound: %d elements, %v", len(elems), err)
	}
}
