//go:build e2e

package e2e

import "testing"

// multi-networkpolicy-iptables's simple scenarios (e2e/tests/simple-v4-ingress,
// simple-v4-egress, simple-v4-ingress-list, simple-v4-egress-list,
// simple-v6-ingress, simple-v6-ingress-list: .bats and .yml), ported as
// policy_helpers_test.go says.

// Upstream NADs (test data; %q is the macvlan master, added here).
const (
	// macvlan1-simple of simple-v4-*.yml, port-range.yml,
	// protocol-only-ports.yml and ingress-ns-selector-no-pods.yml.
	mnpMacvlanSimpleV4 = `{
            "cniVersion": "0.3.1",
            "name": "macvlan1-simple",
            "plugins": [
                {
                    "type": "macvlan",
                    "master": %q,
                    "mode": "bridge",
                    "ipam":{
                      "type":"host-local",
                      "subnet":"2.2.6.0/24",
                      "rangeStart":"2.2.6.8",
                      "rangeEnd":"2.2.6.67"
                    }
                }]
        }`
	// macvlan1-simple of simple-v6-*.yml.
	mnpMacvlanSimpleV6 = `{
            "cniVersion": "0.3.1",
            "name": "macvlan1-simple",
            "plugins": [
                {
                    "type": "macvlan",
                    "master": %q,
                    "mode": "bridge",
                    "ipam":{
                      "type":"host-local",
                      "subnet": "2001::/64",
                      "rangeStart": "2001::8",
                      "rangeEnd": "2001::67"
                    }
                }]
        }`
)

// Upstream policy specs (test-multinetwork-policy-simple-1 of each file).
const (
	mnpIngressFromA = `
podSelector:
  matchLabels:
    name: pod-server
ingress:
- from:
  - podSelector:
      matchLabels:
        name: pod-client-a`
	mnpIngressFromAPolicyTypes = `
podSelector:
  matchLabels:
    name: pod-server
policyTypes:
- Ingress
ingress:
- from:
  - podSelector:
      matchLabels:
        name: pod-client-a`
	mnpEgressToA = `
podSelector:
  matchLabels:
    name: pod-server
egress:
- to:
  - podSelector:
      matchLabels:
        name: pod-client-a`
	mnpIngressListAC = `
podSelector:
  matchLabels:
    name: pod-server
policyTypes:
- Ingress
ingress:
- from:
  - podSelector:
      matchLabels:
        name: pod-client-a
- from:
  - podSelector:
      matchLabels:
        name: pod-client-c`
	mnpEgressListAC = `
podSelector:
  matchLabels:
    name: pod-server
policyTypes:
- Egress
egress:
- to:
  - podSelector:
      matchLabels:
        name: pod-client-a
- to:
  - podSelector:
      matchLabels:
        name: pod-client-c`
)

// mnpSimplePods are pod-server and the clients named.
func mnpSimplePods(clients ...string) []mnpPod {
	pods := []mnpPod{{name: "pod-server"}}
	for _, c := range clients {
		pods = append(pods, mnpPod{name: "pod-client-" + c})
	}
	return pods
}

// mnpToAndFromServer are the checks client -> server and server -> client
// on TCP 5555 for each client, allowed or not.
func mnpToAndFromServer(toServer, fromServer map[string]bool) []mnpCheck {
	var checks []mnpCheck
	for _, c := range []string{"a", "b", "c"} {
		client := "pod-client-" + c
		if allowed, ok := toServer[c]; ok {
			checks = append(checks, mnpCheck{from: client, to: "pod-server", port: tcp5555, allowed: allowed})
		}
		if allowed, ok := fromServer[c]; ok {
			checks = append(checks, mnpCheck{from: "pod-server", to: client, port: tcp5555, allowed: allowed})
		}
	}
	return checks
}

// TestMultiNetworkPolicySimple: the six simple scenarios, at once.
//
// One deliberate difference, in simple-v4-egress: its policy has egress
// rules and no policyTypes. Upstream defaults policyTypes from the rules
// present (Egress only), so the clients still reach pod-server; multinet
// defaults them as NetworkPolicy does (Ingress always, Egress when there
// are egress rules; docs/network-policy.md), so pod-server is
// isolated for ingress too and no client reaches it.
func TestMultiNetworkPolicySimple(t *testing.T) {
	all := map[string]bool{"a": true, "b": true}
	allList := map[string]bool{"a": true, "b": true, "c": true}
	scenarios := []mnpScenario{{
		name: "simple-v4-ingress", nadName: "macvlan1-simple", nad: mnpMacvlanSimpleV4,
		pods:     mnpSimplePods("a", "b"),
		policies: []mnpPolicy{{"test-multinetwork-policy-simple-1", "v1beta1", mnpIngressFromA}},
		listen:   []mnpPort{tcp5555}, selected: []string{"pod-server"},
		checks:      mnpToAndFromServer(map[string]bool{"a": true, "b": false}, all),
		afterDelete: mnpToAndFromServer(all, nil),
	}, {
		name: "simple-v4-egress", nadName: "macvlan1-simple", nad: mnpMacvlanSimpleV4,
		pods:     mnpSimplePods("a", "b"),
		policies: []mnpPolicy{{"test-multinetwork-policy-simple-1", "v1beta1", mnpEgressToA}},
		listen:   []mnpPort{tcp5555}, selected: []string{"pod-server"},
		// Upstream: both clients reach pod-server (see above).
		checks:      mnpToAndFromServer(map[string]bool{"a": false, "b": false}, map[string]bool{"a": true, "b": false}),
		afterDelete: mnpToAndFromServer(all, all),
	}, {
		name: "simple-v4-ingress-list", nadName: "macvlan1-simple", nad: mnpMacvlanSimpleV4,
		pods:     mnpSimplePods("a", "b", "c"),
		policies: []mnpPolicy{{"test-multinetwork-policy-simple-1", "v1beta1", mnpIngressListAC}},
		listen:   []mnpPort{tcp5555}, selected: []string{"pod-server"},
		checks: mnpToAndFromServer(map[string]bool{"a": true, "b": false, "c": true}, allList),
	}, {
		name: "simple-v4-egress-list", nadName: "macvlan1-simple", nad: mnpMacvlanSimpleV4,
		pods:     mnpSimplePods("a", "b", "c"),
		policies: []mnpPolicy{{"test-multinetwork-policy-simple-1", "v1beta1", mnpEgressListAC}},
		listen:   []mnpPort{tcp5555}, selected: []string{"pod-server"},
		checks: mnpToAndFromServer(allList, map[string]bool{"a": true, "b": false, "c": true}),
	}, {
		name: "simple-v6-ingress", nadName: "macvlan1-simple", nad: mnpMacvlanSimpleV6,
		pods:     mnpSimplePods("a", "b"),
		policies: []mnpPolicy{{"test-multinetwork-policy-simple-1", "v1beta1", mnpIngressFromAPolicyTypes}},
		listen:   []mnpPort{tcp5555}, selected: []string{"pod-server"},
		checks:      mnpToAndFromServer(map[string]bool{"a": true, "b": false}, all),
		afterDelete: mnpToAndFromServer(all, nil),
	}, {
		name: "simple-v6-ingress-list", nadName: "macvlan1-simple", nad: mnpMacvlanSimpleV6,
		pods:     mnpSimplePods("a", "b", "c"),
		policies: []mnpPolicy{{"test-multinetwork-policy-simple-1", "v1beta1", mnpIngressListAC}},
		listen:   []mnpPort{tcp5555}, selected: []string{"pod-server"},
		checks: mnpToAndFromServer(map[string]bool{"a": true, "b": false, "c": true}, allList),
	}}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			runMNPScenario(t, sc)
		})
	}
}
