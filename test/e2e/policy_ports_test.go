//go:build e2e

package e2e

import "testing"

// multi-networkpolicy-iptables's port scenarios (e2e/tests/port-range and
// protocol-only-ports: .bats and .yml), ported as policy_helpers_test.go
// says. Both use upstream's macvlan1-simple (mnpMacvlanSimpleV4) and pods
// pod-a and pod-b; pod-a is selected.

// Upstream policy specs (test-multinetwork-policy-simple-1 of each file).
const (
	// port-range.yml: egress to ports 5000-5900, ingress on 6000-6900.
	mnpPortRange = `
podSelector:
  matchLabels:
    name: pod-a
policyTypes:
- Egress
- Ingress
egress:
- ports:
  - port: 5000
    endPort: 5900
ingress:
- ports:
  - port: 6000
    endPort: 6900`
	// protocol-only-ports.yml: egress TCP only, ingress UDP only.
	mnpProtocolOnlyPorts = `
podSelector:
  matchLabels:
    name: pod-a
policyTypes:
- Egress
- Ingress
egress:
- ports:
  - protocol: TCP
ingress:
- ports:
  - protocol: UDP`
)

// TestMultiNetworkPolicyPorts: port-range and protocol-only-ports, at once.
//
// One deliberate difference, in port-range: upstream writes its policy as
// v1beta1 with endPort. multinet serves v1beta1 as the NPWG publishes it,
// without endPort, which the API server prunes (docs/decisions/
// multinetworkpolicy.md); the policy is created as v1beta2, which has it.
func TestMultiNetworkPolicyPorts(t *testing.T) {
	pods := []mnpPod{{name: "pod-a"}, {name: "pod-b"}}
	scenarios := []mnpScenario{{
		name: "port-range", nadName: "macvlan1-simple", nad: mnpMacvlanSimpleV4, pods: pods,
		policies: []mnpPolicy{{"test-multinetwork-policy-simple-1", "v1beta2", mnpPortRange}},
		listen:   []mnpPort{tcp5555, tcp6666}, selected: []string{"pod-a"},
		checks: []mnpCheck{
			{from: "pod-a", to: "pod-b", port: tcp5555, allowed: true},
			{from: "pod-a", to: "pod-b", port: tcp6666, allowed: false},
			{from: "pod-b", to: "pod-a", port: tcp5555, allowed: false},
			{from: "pod-b", to: "pod-a", port: tcp6666, allowed: true},
		},
	}, {
		name: "protocol-only-ports", nadName: "macvlan1-simple", nad: mnpMacvlanSimpleV4, pods: pods,
		policies: []mnpPolicy{{"test-multinetwork-policy-simple-1", "v1beta1", mnpProtocolOnlyPorts}},
		listen:   []mnpPort{tcp5555, udp6666}, selected: []string{"pod-a"},
		checks: []mnpCheck{
			{from: "pod-a", to: "pod-b", port: tcp5555, allowed: true},
			{from: "pod-a", to: "pod-b", port: udp6666, allowed: false},
			{from: "pod-b", to: "pod-a", port: tcp5555, allowed: false},
			{from: "pod-b", to: "pod-a", port: udp6666, allowed: true},
		},
	}}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			runMNPScenario(t, sc)
		})
	}
}
