package nftpolicy_test

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/nftables"
	v1beta2 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta2"
	"github.com/multinet/multinet/internal/node/nftpolicy"
	"github.com/multinet/multinet/internal/testing/cnitest"
	"github.com/multinet/multinet/pkg/spec/policy"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The pods of the lab as policy sees them: the server pod, and two client
// pods whose net1 addresses are both in the client namespace (a rule tells
// them apart by source address).
var (
	net1 = types.NamespacedName{Namespace: "prod", Name: "net1"}
	net2 = types.NamespacedName{Namespace: "prod", Name: "net2"}

	serverPod = policy.Pod{Namespace: "prod", Name: "server", Labels: map[string]string{"app": "server"},
		Ports: []policy.NamedPort{{Name: "http", Port: 8080}},
		Attachments: []policy.Attachment{
			{Network: net1, Interface: "net1", IPs: addrs("10.1.0.1", "10.1.0.10", "fd00:1::1", "fd00:1::10")},
			{Network: net2, Interface: "net2", IPs: addrs("10.2.0.1")},
		}}
	goodPod = policy.Pod{Namespace: "prod", Name: "good", Labels: map[string]string{"app": "good"},
		Attachments: []policy.Attachment{
			{Network: net1, Interface: "net1", IPs: addrs("10.1.0.2", "fd00:1::2")},
			{Network: net2, Interface: "net2", IPs: addrs("10.2.0.2")},
		}}
	badPod = policy.Pod{Namespace: "prod", Name: "bad", Labels: map[string]string{"app": "bad"},
		Attachments: []policy.Attachment{{Network: net1, Interface: "net1", IPs: addrs("10.1.0.3", "fd00:1::3")}}}
)

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

func mnp(name, policyFor string, selector map[string]string, spec v1beta2.MultiNetworkPolicySpec) *v1beta2.MultiNetworkPolicy {
	spec.PodSelector = metav1.LabelSelector{MatchLabels: selector}
	return &v1beta2.MultiNetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: name, Annotations: map[string]string{v1beta2.PolicyForAnnotation: policyFor}},
		Spec:       spec,
	}
}

func port(proto corev1.Protocol, p intstr.IntOrString, end int32) v1beta2.MultiNetworkPolicyPort {
	out := v1beta2.MultiNetworkPolicyPort{Protocol: &proto, Port: &p}
	if end != 0 {
		out.EndPort = &end
	}
	return out
}

func podPeer(labels map[string]string) v1beta2.MultiNetworkPolicyPeer {
	return v1beta2.MultiNetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: labels}}
}

func blockPeer(cidr string, except ...string) v1beta2.MultiNetworkPolicyPeer {
	return v1beta2.MultiNetworkPolicyPeer{IPBlock: &v1beta2.IPBlock{CIDR: cidr, Except: except}}
}

// apply computes target's rules under policies and applies them in n.
func apply(t *testing.T, n ns.NetNS, target policy.Pod, policies ...*v1beta2.MultiNetworkPolicy) nftpolicy.Stats {
	t.Helper()
	res := policy.Compute(policy.Cluster{Policies: policies, Pods: []policy.Pod{serverPod, goodPod, badPod}}, target)
	if len(res.Problems) > 0 {
		t.Fatalf("problems: %+v", res.Problems)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := nftpolicy.Apply(ctx, n.Path(), res.Interfaces)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return st
}

// TestIngress: a pod selected for net1 receives on net1 only what the
// union of the policies' ingress rules allows (pod selector with TCP ports,
// an endPort range, UDP; an ipBlock with except and a named port; every
// address but one), over
// IPv4 and IPv6; its eth0 and net2 are untouched. It fails without the
// rules (every refused flow goes through) and with the reference
// implementation's reading of except (a DROP that would refuse the good
// client's 8080, which another rule allows).
func TestIngress(t *testing.T) {
	l := newLab(t)
	flows := []flow{
		{"client", "tcp", "10.1.0.2", "10.1.0.1", 8080, true},
		{"client", "tcp", "fd00:1::2", "fd00:1::1", 8080, true},
		{"client", "tcp", "10.1.0.2", "10.1.0.1", 8081, false},
		{"client", "tcp", "10.1.0.2", "10.1.0.1", 9000, true},
		{"client", "tcp", "fd00:1::2", "fd00:1::1", 9001, true},
		{"client", "tcp", "10.1.0.2", "10.1.0.1", 9002, false},   // except of every address
		{"client", "tcp", "fd00:1::2", "fd00:1::1", 9002, false}, // except of every address
		{"client", "tcp", "10.1.0.3", "10.1.0.1", 9002, true},    // every address but the good client's
		{"client", "tcp", "fd00:1::3", "fd00:1::1", 9002, true},
		{"client", "udp", "10.1.0.2", "10.1.0.1", udpPort, true},
		{"client", "udp", "fd00:1::2", "fd00:1::1", udpPort, true},
		{"client", "udp", "10.1.0.3", "10.1.0.1", udpPort, false},
		{"client", "tcp", "10.1.0.3", "10.1.0.1", 8080, true},    // ipBlock + named port "http"
		{"client", "tcp", "fd00:1::3", "fd00:1::1", 8080, false}, // no IPv6 block
		{"client", "tcp", "10.1.0.3", "10.1.0.1", 9000, false},
		{"client", "tcp", "10.2.0.2", "10.2.0.1", 8081, true},   // net2: not in policy-for
		{"client", "tcp", "10.9.0.2", "10.9.0.1", 8081, true},   // eth0
		{"client", "tcp", "fd00:9::2", "fd00:9::1", 8081, true}, // eth0, IPv6
	}
	l.check(t, "no rules", allAllowed(flows))
	fromGood := mnp("from-good", "net1", map[string]string{"app": "server"}, v1beta2.MultiNetworkPolicySpec{
		Ingress: []v1beta2.MultiNetworkPolicyIngressRule{{
			From: []v1beta2.MultiNetworkPolicyPeer{podPeer(map[string]string{"app": "good"})},
			Ports: []v1beta2.MultiNetworkPolicyPort{port(corev1.ProtocolTCP, intstr.FromInt32(8080), 0),
				port(corev1.ProtocolTCP, intstr.FromInt32(9000), 9001), port(corev1.ProtocolUDP, intstr.FromInt32(int32(udpPort)), 0),
				port(corev1.ProtocolSCTP, intstr.FromInt32(7777), 0)},
		}},
	})
	blockNamed := mnp("block-named", "prod/net1", map[string]string{"app": "server"}, v1beta2.MultiNetworkPolicySpec{
		Ingress: []v1beta2.MultiNetworkPolicyIngressRule{{
			From:  []v1beta2.MultiNetworkPolicyPeer{blockPeer("10.1.0.0/24", "10.1.0.2/32")},
			Ports: []v1beta2.MultiNetworkPolicyPort{port(corev1.ProtocolTCP, intstr.FromString("http"), 0)},
		}},
	})
	// Every address but the good client's, on 9002: the address sets'
	// last range ends at the family's last address.
	allButGood := mnp("all-but-good", "net1", map[string]string{"app": "server"}, v1beta2.MultiNetworkPolicySpec{
		Ingress: []v1beta2.MultiNetworkPolicyIngressRule{{
			From:  []v1beta2.MultiNetworkPolicyPeer{blockPeer("0.0.0.0/0", "10.1.0.2/32"), blockPeer("::/0", "fd00:1::2/128")},
			Ports: []v1beta2.MultiNetworkPolicyPort{port(corev1.ProtocolTCP, intstr.FromInt32(9002), 0)},
		}},
	})
	st := apply(t, l.server, serverPod, fromGood, blockNamed, allButGood)
	if !st.Changed || st.Rules == 0 || st.Sets == 0 {
		t.Errorf("Apply stats %+v: want a change, rules and sets", st)
	}
	l.check(t, "ingress rules", flows)
}

// TestEgress: a pod selected for net1 with egress rules sends on net1 only
// what they allow: an ipBlock with except (every port), a named port of
// the peer pod (resolved on the peer: the server's "http"), an IPv6 block
// with except on UDP; replies to its own connections come back although
// its ingress is isolated too (policyTypes defaulted: Ingress always); eth0
// is untouched.
func TestEgress(t *testing.T) {
	l := newLab(t)
	flows := []flow{
		{"client", "tcp", "10.1.0.2", "10.1.0.10", 8081, true},
		{"client", "tcp", "10.1.0.2", "10.1.0.1", 8081, false}, // except
		{"client", "tcp", "10.1.0.2", "10.1.0.1", 8080, true},  // named port of the server pod
		{"client", "tcp", "fd00:1::2", "fd00:1::1", 8080, true},
		{"client", "tcp", "10.1.0.2", "10.1.0.1", 9000, false},
		{"client", "tcp", "fd00:1::2", "fd00:1::10", 8081, false},
		{"client", "udp", "fd00:1::2", "fd00:1::10", udpPort, true},
		{"client", "udp", "fd00:1::2", "fd00:1::1", udpPort, false}, // except
		{"client", "tcp", "10.9.0.2", "10.9.0.1", 8081, true},       // eth0
	}
	l.check(t, "no rules", allAllowed(flows))
	egress := mnp("egress", "net1", map[string]string{"app": "good"}, v1beta2.MultiNetworkPolicySpec{
		Egress: []v1beta2.MultiNetworkPolicyEgressRule{
			{To: []v1beta2.MultiNetworkPolicyPeer{blockPeer("10.1.0.0/24", "10.1.0.1/32")}},
			{To: []v1beta2.MultiNetworkPolicyPeer{podPeer(map[string]string{"app": "server"})},
				Ports: []v1beta2.MultiNetworkPolicyPort{port(corev1.ProtocolTCP, intstr.FromString("http"), 0)}},
			{To: []v1beta2.MultiNetworkPolicyPeer{blockPeer("fd00:1::/64", "fd00:1::1/128")},
				Ports: []v1beta2.MultiNetworkPolicyPort{port(corev1.ProtocolUDP, intstr.FromInt32(int32(udpPort)), 0)}},
		},
	})
	apply(t, l.client, goodPod, egress)
	l.check(t, "egress rules", flows)
}

// TestReapplyKeepsEstablished: applying the same rules again writes
// nothing; replacing them by rules that refuse the peer keeps its
// established connection working and refuses new ones.
func TestReapplyKeepsEstablished(t *testing.T) {
	l := newLab(t)
	allow := mnp("allow", "net1", map[string]string{"app": "server"}, v1beta2.MultiNetworkPolicySpec{
		Ingress: []v1beta2.MultiNetworkPolicyIngressRule{{From: []v1beta2.MultiNetworkPolicyPeer{podPeer(map[string]string{"app": "good"})}}},
	})
	denyAll := mnp("allow", "net1", map[string]string{"app": "server"}, v1beta2.MultiNetworkPolicySpec{})
	apply(t, l.server, serverPod, allow)
	c, err := dial(l.client, "tcp", "10.1.0.2", "10.1.0.1", 8080)
	if err != nil {
		t.Fatalf("dial under the allowing rules: %v", err)
	}
	defer c.Close()
	if err := c.echo("before"); err != nil {
		t.Fatal(err)
	}
	if st := apply(t, l.server, serverPod, allow); st.Changed {
		t.Errorf("second Apply of the same rules: Changed, want nothing written")
	}
	if st := apply(t, l.server, serverPod, denyAll); !st.Changed {
		t.Errorf("Apply of other rules: not Changed")
	}
	if err := c.echo("after"); err != nil {
		t.Errorf("established connection after the rules changed: %v", err)
	}
	l.check(t, "deny all", []flow{{"client", "tcp", "10.1.0.2", "10.1.0.1", 8080, false}})
}

// TestFewerInterfacesAndRemove: applying rules for fewer interfaces stops
// filtering the others; Remove deletes the table (twice is no error).
func TestFewerInterfacesAndRemove(t *testing.T) {
	l := newLab(t)
	both := mnp("deny", "net1,net2", map[string]string{"app": "server"}, v1beta2.MultiNetworkPolicySpec{})
	one := mnp("deny", "net1", map[string]string{"app": "server"}, v1beta2.MultiNetworkPolicySpec{})
	apply(t, l.server, serverPod, both)
	l.check(t, "net1 and net2", []flow{
		{"client", "tcp", "10.1.0.2", "10.1.0.1", 8081, false},
		{"client", "tcp", "10.2.0.2", "10.2.0.1", 8081, false},
		{"client", "tcp", "10.9.0.2", "10.9.0.1", 8081, true},
	})
	apply(t, l.server, serverPod, one)
	l.check(t, "net1 only", []flow{
		{"client", "tcp", "10.1.0.2", "10.1.0.1", 8081, false},
		{"client", "tcp", "10.2.0.2", "10.2.0.1", 8081, true},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range 2 {
		if err := nftpolicy.Remove(ctx, l.server.Path()); err != nil {
			t.Fatalf("Remove: %v", err)
		}
	}
	l.check(t, "removed", []flow{{"client", "tcp", "10.1.0.2", "10.1.0.1", 8081, true}})
	if err := nftpolicy.Remove(ctx, "/var/run/netns/multinet-no-such-netns"); err != nil {
		t.Errorf("Remove in a netns that is gone: %v", err)
	}
}

// TestApplyRefusesBadInterfaceName: nothing is written for an interface
// name the kernel cannot have.
func TestApplyRefusesBadInterfaceName(t *testing.T) {
	_, err := nftpolicy.Apply(context.Background(), "/nonexistent", []policy.Interface{{Name: "a/b", Ingress: policy.Direction{Isolated: true}}})
	if err == nil {
		t.Fatal("Apply with interface a/b: no error")
	}
}

// TestNotANetns: Apply refuses a path that is no network namespace, or a
// ctx already done; Remove takes such a path as a namespace that is gone.
func TestNotANetns(t *testing.T) {
	file := t.TempDir() + "/netns"
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	ifaces := []policy.Interface{{Name: "net1", Ingress: policy.Direction{Isolated: true}}}
	if _, err := nftpolicy.Apply(context.Background(), file, ifaces); err == nil {
		t.Error("Apply into a regular file: no error")
	}
	if err := nftpolicy.Remove(context.Background(), file); err != nil {
		t.Errorf("Remove from a regular file: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := nftpolicy.Apply(ctx, "/proc/self/ns/net", ifaces); !errors.Is(err, context.Canceled) {
		t.Errorf("Apply with a canceled ctx: %v, want context.Canceled", err)
	}
}

// TestApplyReplacesATableWithoutDigest: a table of our name that records
// no digest (an empty one, or one with a chain of its own, as a crash or
// another writer could leave) is replaced whole: afterwards it holds our
// chains only, and Apply again finds it unchanged.
func TestApplyReplacesATableWithoutDigest(t *testing.T) {
	cnitest.RequireRoot(t)
	ifaces := []policy.Interface{{Name: "net1", Ingress: policy.Direction{Isolated: true}}}
	for _, stale := range []string{"", "stale"} {
		n := cnitest.NewNS(t)
		c, _ := cnitest.NFTables(t, n)
		table := c.AddTable(&nftables.Table{Family: nftables.TableFamilyINet, Name: nftpolicy.TableName})
		if stale != "" {
			c.AddChain(&nftables.Chain{Name: stale, Table: table})
		}
		if err := c.Flush(); err != nil {
			t.Fatal(err)
		}
		st, err := nftpolicy.Apply(context.Background(), n.Path(), ifaces)
		if err != nil || !st.Changed {
			t.Fatalf("Apply over a table without digest (chain %q): %+v, %v; want changed", stale, st, err)
		}
		chains, err := c.ListChainsOfTableFamily(nftables.TableFamilyINet)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, ch := range chains {
			if ch.Table.Name == nftpolicy.TableName {
				names = append(names, ch.Name)
			}
		}
		want := []string{"digest-" + st.Digest, "ingress-net1", "input", "output"}
		slices.Sort(names)
		if !slices.Equal(names, want) {
			t.Errorf("chains after Apply over a table with chain %q: %q, want %q", stale, names, want)
		}
		if again, err := nftpolicy.Apply(context.Background(), n.Path(), ifaces); err != nil || again.Changed {
			t.Errorf("Apply again: %+v, %v; want unchanged", again, err)
		}
	}
}
