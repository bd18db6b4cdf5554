//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/multinet/multinet/pkg/spec/selection"
)

// Hot-plug and validation on configurations multinet did not write: the NADs
// below are the ones peer projects use in their own docs and e2e suites,
// changed only where this machine requires it (each change is named where
// it is made).

// Peer NAD configs (test data; %s / %q are what this machine fills in).
const (
	// multus-dynamic-networks-controller, e2e/e2e_test.go
	// macvlanNetworkWithoutIPAM (github.com/k8snetworkplumbingwg/
	// multus-dynamic-networks-controller): no "name" key, no IPAM. The
	// master is a veth of this test (the peer uses the node's eth0 or
	// $LOWER_DEVICE; this kernel has no dummy/ipvlan/vlan link types).
	dncMacvlanNoIPAM = `{
        "cniVersion": "0.3.0",
        "disableCheck": true,
        "plugins": [
            {
                "type": "macvlan",
                "master": %q,
                "mode": "bridge"
            }
        ]
    }`
	// multus-dynamic-networks-controller, e2e/e2e_test.go
	// macvlanNetworkWitStaticIPAM: macvlan with the "ips" capability and
	// static IPAM, then tuning (without capabilities). Master as above.
	dncMacvlanStaticIPAM = `{
        "cniVersion": "0.3.0",
        "disableCheck": true,
        "name": %q,
        "plugins": [
            {
                "type": "macvlan",
                "capabilities": { "ips": true },
                "master": %q,
                "mode": "bridge",
                "ipam": { "type": "static" }
            }, {
                "type": "tuning"
            }
        ]
    }`
	// multus-cni, e2e/templates/default-route1.yml.j2 (NAD
	// default-route-config): macvlan, static IPAM, and no "ips"
	// capability. {{ CNI_VERSION }} filled in with 0.4.0; master as above.
	multusDefaultRoute1 = `{
            "cniVersion": "0.4.0",
            "plugins": [
                {
                    "type": "macvlan",
                    "master": %q,
                    "mode": "bridge",
                    "ipam": { "type": "static" }
                } ]
        }`
	// containerd's example 10-containerd-net.conflist (containerd
	// script/setup/install-cni; the same conflist in the Kubernetes docs
	// "Troubleshooting CNI plugin-related errors"), as cluster-up's
	// default_network_conflist ships it for the default network. Changed:
	// the network name and bridge are unique to the test (the cluster's
	// default network is containerd-net on its own bridge), the IPv4
	// subnet is a free 10.210.N.0/24 instead of 10.88.0.0/16, and the IPv6
	// range and the "routes" (0.0.0.0/0, ::/0) are left out: the pod's
	// default route belongs to its default network (docs/hotplug.md), and
	// this cluster is IPv4 only.
	containerdExample = `{
  "cniVersion": "1.0.0",
  "name": %q,
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "ipMasq": true,
      "promiscMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [
          [{
            "subnet": %q
          }]
        ]
      }
    },
    {
      "type": "portmap",
      "capabilities": {"portMappings": true}
    }
  ]
}`
)

// TestHotPlugForeign: a running pod created with the dynamic networks
// controller's macvlan NAD (as its net1) gets, by hot-plug, the same
// network again as ens58, the controller's static-IPAM macvlan NAD as
// ens202 with the requested address, and containerd's example conflist as
// a NAD: the interfaces appear, network-status matches them. The
// controller's own request (ips, interface and mac on a NAD whose plugins
// declare no "mac" capability) and Multus's default-route1 NAD asked for
// "ips" without the "ips" capability are refused on UPDATE with
// podnetworks' message and change nothing. Removing the hot-plugged
// elements removes the interfaces and releases their addresses (host-local
// allocation, bridge port, the example's ipMasq rules).
func TestHotPlugForeign(t *testing.T) {
	ns := newNamespace(t)
	master := vethPair(t)
	createNAD(t, ns, "tenant-network", fmt.Sprintf(dncMacvlanNoIPAM, master), nil)
	createNAD(t, ns, "tenant-network-ipam", fmt.Sprintf(dncMacvlanStaticIPAM, "tenant-network-ipam", master), nil)
	createNAD(t, ns, "default-route-config", fmt.Sprintf(multusDefaultRoute1, master), nil)
	cd := &testNet{Namespace: ns, Name: "containerd-net-" + randHex(3), Bridge: "mne" + randHex(4),
		Subnet: fmt.Sprintf("10.210.%d.0/24", nextSubnet()), DataDir: "/var/lib/cni/networks"}
	t.Cleanup(func() {
		target.try("ip", "link", "del", cd.Bridge)
		_ = os.RemoveAll(target.path(filepath.Join(cd.DataDir, cd.Name)))
	})
	createNAD(t, ns, "containerd-net", fmt.Sprintf(containerdExample, cd.Name, cd.Bridge, cd.Subnet), nil)

	// As the peer provisions it: one element, interface net1.
	initial := fmt.Sprintf(`[{"name":"tenant-network","namespace":%q,"interface":"net1"}]`, ns)
	p := runPod(t, podSpec(ns, "tiny-winy-pod", initial))
	before := podInterfaces(t, ns, p.Name)
	var took []time.Duration

	// The peer's "manages to add a new interface to a running pod".
	withEns58 := fmt.Sprintf(`[{"name":"tenant-network","namespace":%q,"interface":"net1"},{"name":"tenant-network","namespace":%[1]q,"interface":"ens58"}]`, ns)
	hp, d := hotPlug(t, ns, p.Name, withEns58, "eth0", "net1", "ens58")
	took = append(took, d)
	if e := attachmentStatus(t, hp, "ens58"); e.Name != ns+"/tenant-network" || len(e.IPs) != 0 {
		t.Errorf("ens58: %s with ips %v, want %s/tenant-network without IPs (no IPAM)", e.Name, e.IPs, ns)
	}
	now := podInterfaces(t, ns, p.Name)
	sameIface(t, before, now, "eth0")
	sameIface(t, before, now, "net1")

	// The peer's IPAM case as it asks for it: ips, interface and mac. No
	// plugin of the NAD declares "mac" (§4.1.2.1.4.2): refused.
	ipamElem := fmt.Sprintf(`{"name":"tenant-network-ipam","namespace":%q,"ips":["10.10.10.111/24"],"interface":"ens202"}`, ns)
	withMAC := strings.TrimSuffix(withEns58, "]") + "," + strings.TrimSuffix(ipamElem, "}") + `,"mac":"02:03:04:05:06:07"}]`
	assertRefusedUpdate(t, p, withMAC, `field "mac": needs runtimeConfig "mac"`)

	// Multus's default-route1 NAD with default-route-worker2's element
	// ("ips" only): the NAD declares no "ips" capability (§4.1.2.1.3.2).
	withDR := strings.TrimSuffix(withEns58, "]") + fmt.Sprintf(`,{"name":"default-route-config","namespace":%q,"ips":["10.1.1.22/24"]}]`, ns)
	assertRefusedUpdate(t, p, withDR, `field "ips": needs runtimeConfig "ips"`)

	// The IPAM element without mac, and containerd's example.
	full := strings.TrimSuffix(withEns58, "]") + "," + ipamElem + `,{"name":"containerd-net"}]`
	hp, d = hotPlug(t, ns, p.Name, full, "eth0", "net1", "ens58", "ens202", "net2")
	took = append(took, d)
	if e := attachmentStatus(t, hp, "ens202"); e.Name != ns+"/tenant-network-ipam" || !slices.Equal(e.IPs, []string{"10.10.10.111"}) {
		t.Errorf("ens202: %s with ips %v, want %s/tenant-network-ipam with 10.10.10.111", e.Name, e.IPs, ns)
	}
	e := attachmentStatus(t, hp, "net2")
	alloc := cd.allocations(t)
	if e.Name != ns+"/containerd-net" || len(e.IPs) != 1 || alloc[e.IPs[0]] == "" {
		t.Errorf("net2: %s with ips %v, host-local of %s holds %v; want %s/containerd-net with the one address host-local allocated", e.Name, e.IPs, cd.Name, alloc, ns)
	}
	if ports := cd.ports(t); len(ports) != 1 {
		t.Errorf("bridge %s of containerd's example has ports %v, want the pod's veth", cd.Bridge, ports)
	}
	// The example's "ipMasq": the bridge plugin's nat chain names the network.
	if rules := natRules(t); !strings.Contains(rules, cd.Name) {
		t.Errorf("no ipMasq rule of %s in the nat table:\n%s", cd.Name, rules)
	}
	now2 := podInterfaces(t, ns, p.Name)
	for _, i := range []string{"eth0", "net1", "ens58"} {
		sameIface(t, now, now2, i)
	}

	// The peer's "can be hot unplugged": back to the pod as created.
	_, d = hotPlug(t, ns, p.Name, initial, "eth0", "net1")
	took = append(took, d)
	assertReleased(t, cd)
	if rules := natRules(t); strings.Contains(rules, cd.Name) {
		t.Errorf("the ipMasq rules of %s are still in the nat table after the detach:\n%s", cd.Name, rules)
	}
	now3 := podInterfaces(t, ns, p.Name)
	sameIface(t, before, now3, "net1")
	for name, i := range now3 {
		if slices.Contains(i.IPs, "10.10.10.111") {
			t.Errorf("interface %s still has 10.10.10.111 after ens202 was removed", name)
		}
	}
	waitEvent(t, ns, p.Name, "RemovedInterface", "ens202", ns+"/tenant-network-ipam")
	t.Logf("hot-plug latencies (PATCH → network-status): %v", took)

	deletePod(t, ns, p.Name)
	assertReleased(t, cd)
	assertNoRecords(t, ns)
}

// assertRefusedUpdate sets running pod p's networks to networks and fails
// unless the webhook denies it with podnetworks.Check's message for that
// annotation (which contains part), and the pod keeps its annotation.
func assertRefusedUpdate(t *testing.T, p *corev1.Pod, networks, part string) {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	old, err := testCluster.kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := old.DeepCopy()
	want.Annotations[selection.NetworksAnnotation] = networks
	msg := verdictMessage(t, want, deployedPolicy(t))
	assertDenied(t, setNetworks(ctx, p.Namespace, p.Name, networks), msg, part)
	now, err := testCluster.kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, was := now.Annotations[selection.NetworksAnnotation], old.Annotations[selection.NetworksAnnotation]; got != was {
		t.Errorf("networks %q after the denial, want %q", got, was)
	}
}
