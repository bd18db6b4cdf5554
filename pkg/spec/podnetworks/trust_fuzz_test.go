package podnetworks

import (
	"context"
	"testing"
)

// FuzzParseNADTrustPolicy: any input either parses into a policy whose
// check of any config does not panic, or is refused with an error; the
// corpus is testdata/fuzz/FuzzParseNADTrustPolicy.
func FuzzParseNADTrustPolicy(f *testing.F) {
	f.Add([]byte(DefaultNADTrustPolicyYAML), `{"cniVersion":"1.0.0","type":"host-device","device":"eth0"}`)
	f.Add([]byte("apiVersion: multinet.io/v1alpha1\nkind: NADTrustPolicy\nrules:\n- name: a\n  namespaceSelector: {matchLabels: {team: b}}\n  plugins: [macvlan]\n  allowedKeys: [{key: master, values: ['eth*']}]\n"), `{"plugins":[{"type":"macvlan","master":"eth1","ipam":{"type":"host-local","dataDir":"/x"}}]}`)
	f.Fuzz(func(t *testing.T, data []byte, config string) {
		p, err := ParseNADTrustPolicy(data)
		if err != nil {
			if p != nil {
				t.Fatal("a policy and an error")
			}
			return
		}
		pol := Policy{NADTrust: NADTrust{Policy: p, Namespaces: defaultLabels}}
		for _, ns := range []string{"team-a", "team-b", "trusted", "kube-system"} {
			vs, err := CheckNADTrust(context.Background(), nad(ns, "n", config, nil), pol)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range vs {
				if v.Key == "" || v.Error() == "" {
					t.Fatalf("violation without key: %+v", v)
				}
			}
		}
	})
}
