package lint

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/multinet/multinet/pkg/spec/podnetworks"
)

// The peers' NADs: multus-dynamic-networks-controller's e2e
// macvlanNetworkWithoutIPAM and macvlanNetworkWitStaticIPAM (only "ips"
// declared), Multus's default-route1 template (no capability); a pod as
// the controller's e2e hot-plugs it (ips, interface, mac) and one as
// Multus's default-route1 creates it (ips, default-route).
const peersInput = `apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: tenant-network, namespace: ns1}
spec:
  config: '{"cniVersion":"0.3.0","disableCheck":true,"plugins":[{"type":"macvlan","master":"eth0","mode":"bridge"}]}'
---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: tenant-network-ipam, namespace: ns1}
spec:
  config: '{"cniVersion":"0.3.0","disableCheck":true,"name":"tenant-network-ipam","plugins":[{"type":"macvlan","capabilities":{"ips":true},"master":"eth0","mode":"bridge","ipam":{"type":"static"}},{"type":"tuning"}]}'
---
apiVersion: k8s.cni.cncf.io/v1
kind: NetworkAttachmentDefinition
metadata: {name: default-route-config, namespace: ns1}
spec:
  config: '{"cniVersion":"0.4.0","plugins":[{"type":"macvlan","master":"eth1","mode":"bridge","ipam":{"type":"static"}}]}'
---
` + `apiVersion: v1
kind: Pod
metadata:
  name: tiny-winy-pod
  namespace: ns1
  annotations:
    k8s.v1.cni.cncf.io/networks: '[{"name":"tenant-network","interface":"net1"},{"name":"tenant-network-ipam","ips":["10.10.10.111/24"],"interface":"ens202","mac":"02:03:04:05:06:07"}]'
spec:
  containers: [{name: c, image: i}]
---
apiVersion: v1
kind: Pod
metadata:
  name: default-route-worker1
  namespace: ns1
  annotations:
    k8s.v1.cni.cncf.io/networks: '[{"name":"default-route-config","ips":["10.1.1.21/24"],"default-route":["10.1.1.254"]}]'
spec:
  containers: [{name: c, image: i}]
`

// TestLintUndeclaredCapabilities: lint lists every NAD the input's pods
// rely on through undeclaredCapabilities, in either mode: a warning and
// UndeclaredCapabilities on the NAD's result, the summary line of the text
// output. By default the pods are invalid (spec sections); with "multus"
// they are valid with a warning each.
func TestLintUndeclaredCapabilities(t *testing.T) {
	nadWarn := []string{
		`no plugin declares "capabilities": {"mac": true}, which Pod ns1/tiny-winy-pod asks for (spec §4.1.2.1.4.2): runs only with undeclaredCapabilities: multus`,
		`no plugin declares "capabilities": {"ips": true}, which Pod ns1/default-route-worker1 asks for (spec §4.1.2.1.3.2)`,
	}
	const summary = `NetworkAttachmentDefinitions relying on undeclaredCapabilities: multus: ns1/tenant-network-ipam ("mac"), ns1/default-route-config ("ips")`
	for _, mode := range []podnetworks.UndeclaredCapabilities{"", podnetworks.MultusUndeclared} {
		t.Run(string(mode), func(t *testing.T) {
			rs := lintYAML(t, peersInput, Options{Policy: podnetworks.Policy{UndeclaredCapabilities: mode}})
			wantPods := []want{
				{kind: "Pod", ns: "ns1", name: "tiny-winy-pod", errors: []string{networksAnno + `networks[1] "tenant-network-ipam": field "mac": needs runtimeConfig "mac"`}},
				{kind: "Pod", ns: "ns1", name: "default-route-worker1", errors: []string{networksAnno + `networks[0] "default-route-config": field "ips": needs runtimeConfig "ips"`}},
			}
			if mode == podnetworks.MultusUndeclared {
				wantPods[0].errors, wantPods[0].warnings = nil, []string{networksAnno + `networks[1] "tenant-network-ipam": NetworkAttachmentDefinition ns1/tenant-network-ipam declares no capability "mac" (spec §4.1.2.1.4.2); handed over as Multus does`}
				wantPods[1].errors, wantPods[1].warnings = nil, []string{`NetworkAttachmentDefinition ns1/default-route-config declares no capability "ips" (spec §4.1.2.1.3.2)`}
			}
			wantPods[0].networks = `[{"name":"tenant-network","namespace":"ns1","interface":"net1"},{"name":"tenant-network-ipam","namespace":"ns1","ips":["10.10.10.111/24"],"mac":"02:03:04:05:06:07","interface":"ens202"}]`
			wantPods[1].networks = `[{"name":"default-route-config","namespace":"ns1","ips":["10.1.1.21/24"],"interface":"net1","default-route":["10.1.1.254"]}]`
			checkResults(t, rs, append([]want{
				{kind: "NetworkAttachmentDefinition", ns: "ns1", name: "tenant-network"},
				{kind: "NetworkAttachmentDefinition", ns: "ns1", name: "tenant-network-ipam", warnings: nadWarn[:1]},
				{kind: "NetworkAttachmentDefinition", ns: "ns1", name: "default-route-config", warnings: nadWarn[1:]},
			}, wantPods...))
			if got := RelyingNADs(rs); !slices.Equal(got, []string{`ns1/tenant-network-ipam ("mac")`, `ns1/default-route-config ("ips")`}) {
				t.Errorf("RelyingNADs = %q", got)
			}
			var out bytes.Buffer
			if err := WriteText(&out, rs, false); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), summary+"\n") {
				t.Errorf("text output lacks %q:\n%s", summary, out.String())
			}
		})
	}
}
