//go:build e2e

package e2e

import (
	"fmt"
	"testing"
)

// multi-networkpolicy-iptables's selector scenarios (e2e/tests/
// ingress-ns-selector-no-pods and stacked: .bats and .yml), ported as
// policy_helpers_test.go says.

// mnpMacvlanStacked is upstream's macvlan1-stacked (stacked.yml; %q: the
// macvlan master, added here).
const mnpMacvlanStacked = `{
            "cniVersion": "0.3.1",
            "name": "macvlan1-stacked",
            "plugins": [
                {
                    "type": "macvlan",
                    "master": %q,
                    "mode": "bridge",
                    "ipam":{
                      "type":"host-local",
                      "subnet":"2.2.5.0/24",
                      "rangeStart":"2.2.5.8",
                      "rangeEnd":"2.2.5.67"
                    }
                }]
        }`

// Upstream policy specs.
const (
	// ingress-ns-selector-no-pods.yml policy-test-ingress-ns-selector-no-pods:
	// ingress from the namespaces labelled foo=bar, of which there is none.
	mnpNSSelectorNoPods = `
podSelector:
  matchLabels:
    name: pod-server
ingress:
- from:
  - namespaceSelector:
      matchLabels:
        foo: bar
policyTypes:
- Ingress`
	// stacked.yml testnetwork-policy-stacked-1 and -2 (%s: the client).
	mnpStacked = `
podSelector:
  matchLabels:
    name: pod-server
policyTypes:
- Ingress
ingress:
- from:
  - podSelector:
      matchLabels:
        name: %s`
)

// TestMultiNetworkPolicySelectors: ingress-ns-selector-no-pods (pod-client-b
// in a second namespace, upstream's test-ingress-ns-selector-no-pods-blue)
// and stacked, at once.
func TestMultiNetworkPolicySelectors(t *testing.T) {
	scenarios := []mnpScenario{{
		name: "ingress-ns-selector-no-pods", nadName: "macvlan1-simple", nad: mnpMacvlanSimpleV4,
		pods:     []mnpPod{{name: "pod-server"}, {name: "pod-client-a"}, {name: "pod-client-b", ns: "blue"}},
		policies: []mnpPolicy{{"policy-test-ingress-ns-selector-no-pods", "v1beta1", mnpNSSelectorNoPods}},
		listen:   []mnpPort{tcp5555}, selected: []string{"pod-server"},
		checks: mnpToAndFromServer(map[string]bool{"a": false, "b": false}, map[string]bool{"a": true, "b": true}),
	}, {
		name: "stacked", nadName: "macvlan1-stacked", nad: mnpMacvlanStacked,
		pods: mnpSimplePods("a", "b", "c"),
		policies: []mnpPolicy{
			{"testnetwork-policy-stacked-1", "v1beta1", fmt.Sprintf(mnpStacked, "pod-client-a")},
			{"testnetwork-policy-stacked-2", "v1beta1", fmt.Sprintf(mnpStacked, "pod-client-b")},
		},
		listen: []mnpPort{tcp5555}, selected: []string{"pod-server"},
		checks: mnpToAndFromServer(map[string]bool{"a": true, "b": true, "c": false}, nil),
	}}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			runMNPScenario(t, sc)
		})
	}
}
