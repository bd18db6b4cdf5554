//go:build e2e

package e2e

import (
	"fmt"
	"testing"
)

// multi-networkpolicy-iptables's ipBlock scenarios (e2e/tests/ipblock,
// ipblock-list, ipblock-stacked: .bats and .yml), ported as
// policy_helpers_test.go says.

// mnpMacvlanStatic is upstream's macvlan1-ipblock (ipblock.yml,
// ipblock-list.yml) and macvlan1-ipblock-stacked (ipblock-stacked.yml),
// the same config but for its name (%q: the network name; %%q becomes the
// %q of the macvlan master, added here).
const mnpMacvlanStatic = `{
            "cniVersion": "0.3.1",
            "name": %q,
            "plugins": [
                {
                    "type": "macvlan",
                    "master": %%q,
                    "mode": "bridge",
                    "capabilities": {"ips": true },
                    "ipam":{
                      "type":"static"
                    }
                }]
        }`

// Upstream policy specs.
const (
	// ipblock.yml testnetwork-policy-ipblock-1: one rule, two ipBlocks.
	mnpIPBlockOneRule = `
podSelector:
  matchLabels:
    name: pod-server
policyTypes:
- Ingress
ingress:
- from:
  - ipBlock:
      cidr: 2.2.5.11/32
  - ipBlock:
      cidr: 2.2.5.12/32`
	// ipblock-list.yml testnetwork-policy-ipblock-1: two rules.
	mnpIPBlockTwoRules = `
podSelector:
  matchLabels:
    name: pod-server
policyTypes:
- Ingress
ingress:
- from:
  - ipBlock:
      cidr: 2.2.5.11/32
- from:
  - ipBlock:
      cidr: 2.2.5.12/32`
	// ipblock-stacked.yml testnetwork-policy-ipblock-stacked-1 and -2
	// (%s: the address).
	mnpIPBlockStacked = `
podSelector:
  matchLabels:
    name: pod-server
policyTypes:
- Ingress
ingress:
- from:
  - ipBlock:
      cidr: %s/32`
)

// mnpIPBlockPods are upstream's pods with their static addresses.
var mnpIPBlockPods = []mnpPod{
	{name: "pod-server", ip: "2.2.5.1/24"},
	{name: "pod-client-a", ip: "2.2.5.11/24"},
	{name: "pod-client-b", ip: "2.2.5.12/24"},
	{name: "pod-client-c", ip: "2.2.5.13/24"},
}

// TestMultiNetworkPolicyIPBlock: the three ipBlock scenarios, at once. In
// each, clients a and b (2.2.5.11, .12) reach pod-server on TCP 5555 and
// client c (.13) does not.
func TestMultiNetworkPolicyIPBlock(t *testing.T) {
	checks := mnpToAndFromServer(map[string]bool{"a": true, "b": true, "c": false}, nil)
	scenarios := []mnpScenario{{
		name: "ipblock", nadName: "macvlan1-ipblock",
		policies: []mnpPolicy{{"testnetwork-policy-ipblock-1", "v1beta1", mnpIPBlockOneRule}},
	}, {
		name: "ipblock-list", nadName: "macvlan1-ipblock",
		policies: []mnpPolicy{{"testnetwork-policy-ipblock-1", "v1beta1", mnpIPBlockTwoRules}},
	}, {
		name: "ipblock-stacked", nadName: "macvlan1-ipblock-stacked",
		policies: []mnpPolicy{
			{"testnetwork-policy-ipblock-stacked-1", "v1beta1", fmt.Sprintf(mnpIPBlockStacked, "2.2.5.11")},
			{"testnetwork-policy-ipblock-stacked-2", "v1beta1", fmt.Sprintf(mnpIPBlockStacked, "2.2.5.12")},
		},
	}}
	for _, sc := range scenarios {
		sc.nad = fmt.Sprintf(mnpMacvlanStatic, sc.nadName)
		sc.pods, sc.listen, sc.selected, sc.checks = mnpIPBlockPods, []mnpPort{tcp5555}, []string{"pod-server"}, checks
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			runMNPScenario(t, sc)
		})
	}
}
