package nftpolicy_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/multinet/multinet/internal/node/nftpolicy"
	"github.com/multinet/multinet/internal/testing/cnitest"
	"github.com/multinet/multinet/pkg/spec/policy"
	"k8s.io/apimachinery/pkg/types"
)

// benchIfaces is the effective policy of one selected pod of make bench's
// policy phase: two interfaces, each isolated both ways, with 5 policies'
// rules naming 12 peers each (22 rules, as the bench reports per pod).
func benchIfaces() []policy.Interface {
	var out []policy.Interface
	for n, name := range []string{"net1", "net2"} {
		in := policy.Interface{Name: name, Network: types.NamespacedName{Namespace: "bench", Name: fmt.Sprint("net-", n)}}
		in.Ingress.Isolated, in.Egress.Isolated = true, true
		for k := range 5 {
			pol := types.NamespacedName{Namespace: "bench", Name: fmt.Sprint("p-", k)}
			var peers []netip.Prefix
			for i := range 12 {
				peers = append(peers, netip.PrefixFrom(netip.AddrFrom4([4]byte{172, 31, byte(248 + 4*n), byte(20*k + i)}), 32))
			}
			in.Ingress.Rules = append(in.Ingress.Rules, policy.Rule{Policy: pol, Peers: peers,
				Ports: []policy.Port{{Protocol: "TCP", Port: 8080}, {Protocol: "UDP", Port: 5000, EndPort: 5100}}})
			in.Egress.Rules = append(in.Egress.Rules, policy.Rule{Policy: pol, Peers: peers[:6], Ports: []policy.Port{{Protocol: "TCP", Port: 443}}})
		}
		out = append(out, in)
	}
	return out
}

// BenchmarkApplyFresh: the table written into a network namespace that
// has none (what ADD of a selected pod adds). Needs root. Run:
// go test -run '^$' -bench ApplyFresh ./internal/node/nftpolicy/
func BenchmarkApplyFresh(b *testing.B) {
	cnitest.RequireRoot(b)
	ifaces := benchIfaces()
	for b.Loop() {
		b.StopTimer()
		n, err := testutils.NewNS()
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := nftpolicy.Apply(context.Background(), n.Path(), ifaces); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		_ = n.Close()
		_ = testutils.UnmountNS(n)
		b.StartTimer()
	}
}

// BenchmarkApplyUnchanged: Apply of the rules the table already holds
// (reads the digest, writes nothing). Needs root.
func BenchmarkApplyUnchanged(b *testing.B) {
	cnitest.RequireRoot(b)
	n := cnitest.NewNS(b)
	ifaces := benchIfaces()
	if _, err := nftpolicy.Apply(context.Background(), n.Path(), ifaces); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := nftpolicy.Apply(context.Background(), n.Path(), ifaces); err != nil {
			b.Fatal(err)
		}
	}
}
