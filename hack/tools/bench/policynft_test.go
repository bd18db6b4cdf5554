package main

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/multinet/multinet/internal/node/nftpolicy"
	"github.com/multinet/multinet/internal/testing/cnitest"
	"github.com/multinet/multinet/pkg/spec/policy"
)

// ingressFrom is an interface net1 isolated for ingress, allowing peers.
func ingressFrom(peers ...string) []policy.Interface {
	rule := policy.Rule{AllPorts: true}
	for _, p := range peers {
		rule.Peers = append(rule.Peers, netip.MustParsePrefix(p))
	}
	return []policy.Interface{{Name: "net1", Ingress: policy.Direction{Isolated: true, Rules: []policy.Rule{rule}}}}
}

// TestReadTable: readTable, on multinetd's real rendering in a throw-away
// network namespace, sees no table before Apply, a table with rules and
// set elements after it, a new fingerprint when a peer is added (what the
// bench waits for after a label change), the same one when Apply rewrites
// nothing, and no table after Remove. Needs root.
func TestReadTable(t *testing.T) {
	cnitest.RequireRoot(t)
	n := cnitest.NewNS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	read := func(stage string) tableState {
		t.Helper()
		st, err := readTable(n.Path())
		if err != nil {
			t.Fatalf("%s: %v", stage, err)
		}
		return st
	}
	if st := read("before Apply"); st.present || st.fingerprint != "" {
		t.Fatalf("before Apply: %+v, want no table", st)
	}
	if _, err := nftpolicy.Apply(ctx, n.Path(), ingressFrom("10.0.0.1/32")); err != nil {
		t.Fatal(err)
	}
	one := read("one peer")
	if !one.present || one.rules == 0 || one.elements == 0 || one.fingerprint == "" {
		t.Fatalf("one peer: %+v, want a table with rules and set elements", one)
	}
	if _, err := nftpolicy.Apply(ctx, n.Path(), ingressFrom("10.0.0.1/32", "10.0.0.2/32")); err != nil {
		t.Fatal(err)
	}
	two := read("two peers")
	if two.fingerprint == one.fingerprint {
		t.Errorf("a peer added, the fingerprint stayed %s", one.fingerprint)
	}
	if _, err := nftpolicy.Apply(ctx, n.Path(), ingressFrom("10.0.0.1/32", "10.0.0.2/32")); err != nil {
		t.Fatal(err)
	}
	if again := read("same rules"); again.fingerprint != two.fingerprint {
		t.Errorf("the same rules applied again changed the fingerprint")
	}
	if err := nftpolicy.Remove(ctx, n.Path()); err != nil {
		t.Fatal(err)
	}
	if st := read("after Remove"); st.present {
		t.Errorf("after Remove: %+v, want no table", st)
	}
}
