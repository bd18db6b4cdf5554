//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/pkg/spec/status"
)

// hostLocalDefaultDir is host-local's state directory when a NAD gives no
// dataDir: the node's, since multinetd runs delegates in the node's view.
const hostLocalDefaultDir = "/var/lib/cni/networks"

// pluginCase is one NAD as users write it: a main plugin of the reference
// CNI plugins (v1.9.1), its IPAM, and meta plugins chained after it.
type pluginCase struct {
	name string
	// kernel is the link kind the main or a meta plugin makes ("dummy",
	// "ipvlan", "vlan", "vrf"). When this kernel cannot make it, the case asserts the
	// failure path instead: the pod does not start, the NetworkAttachFailed
	// event names the network and the plugin's error, and nothing is left
	// once the pod is deleted.
	kernel string
	// ipam is "host-local" (dataDir of the test), "host-local-default" (no
	// dataDir: the node's /var/lib/cni/networks), "static" or "dhcp".
	ipam string
	// plugins prepares the host and returns the NAD's plugin list, main
	// plugin first (its "ipam" is added from ipam).
	plugins func(t *testing.T, e *pluginEnv) []map[string]any
	// selection is the pod's networks annotation (nil: the NAD's name).
	selection func(e *pluginEnv) string
	// running checks the plugin's effects while the pod runs, deleted
	// after the pod is gone.
	running, deleted func(t *testing.T, e *pluginEnv)
}

// pluginEnv is what one case knows about its network and pod.
type pluginEnv struct {
	ns, nad string
	netName string // the config's "name" (host-local's directory)
	n       int    // subnet 10.213.n.0/24
	ip, gw  string // the pod's address on net1, the range's gateway
	dataDir string // host-local dataDir ("" when the NAD gives none)
	rec     *state.Record
	vars    map[string]string // per-case state (links, MACs, ...)
}

func (e *pluginEnv) subnet() string { return fmt.Sprintf("10.213.%d.0/24", e.n) }

// allocation is where this process finds host-local's file for the pod's
// address on the target node.
func (e *pluginEnv) allocation() string {
	dir := e.dataDir
	if dir == "" {
		dir = hostLocalDefaultDir
	}
	return target.path(filepath.Join(dir, e.netName, e.ip))
}

func (e *pluginEnv) ipamConf(t *testing.T, kind string) map[string]any {
	rng := map[string]string{"subnet": e.subnet(), "rangeStart": e.ip, "rangeEnd": e.ip, "gateway": e.gw}
	switch kind {
	case "host-local":
		e.dataDir = filepath.Join(testCluster.mustEnv(t, "CNI_IPAM_DIR"), "e2e", e.ns+"-"+e.nad)
		dir := target.path(e.dataDir)
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		return map[string]any{"type": "host-local", "dataDir": e.dataDir, "ranges": [][]map[string]string{{rng}}}
	case "host-local-default":
		dir := target.path(filepath.Join(hostLocalDefaultDir, e.netName))
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		return map[string]any{"type": "host-local", "ranges": [][]map[string]string{{rng}}}
	case "static":
		return map[string]any{"type": "static", "addresses": []map[string]string{{"address": e.ip + "/24", "gateway": e.gw}}}
	case "dhcp":
		return map[string]any{"type": "dhcp"}
	}
	t.Fatalf("unknown ipam %q", kind)
	return nil
}

// TestReferencePluginsAsDelegates: every reference plugin this node's kernel
// can run, used as a delegate in a NAD as users write it, attaches the pod
// (interface, address, network-status, the plugin's own effects) and is
// removed cleanly (no record, address released, host links and rules gone).
func TestReferencePluginsAsDelegates(t *testing.T) {
	if testCluster.env["CNI_MODE"] != "multinet" {
		t.Fatal("needs multinetd as the cluster's CNI (CNI_MODE=multinet)")
	}
	bridgeOf := func(t *testing.T, e *pluginEnv) map[string]any {
		br := "mnd-" + randHex(4)
		e.vars["bridge"] = br
		t.Cleanup(func() { target.try("ip", "link", "del", br) })
		return map[string]any{"type": "bridge", "bridge": br}
	}
	cases := []pluginCase{{
		name: "bridge", ipam: "host-local",
		plugins: func(t *testing.T, e *pluginEnv) []map[string]any {
			b := bridgeOf(t, e)
			b["isGateway"] = true
			return []map[string]any{b}
		},
		running: func(t *testing.T, e *pluginEnv) {
			if ports := bridgePorts(t, e.vars["bridge"]); len(ports) != 1 {
				t.Errorf("bridge %s has ports %v, want the pod's veth", e.vars["bridge"], ports)
			}
			if out := hostRun(t, "ip", "-o", "-4", "addr", "show", "dev", e.vars["bridge"]); !strings.Contains(out, e.gw+"/24") {
				t.Errorf("isGateway: bridge %s has no %s/24: %s", e.vars["bridge"], e.gw, out)
			}
			if out := podNetns(t, e, "ip", "-d", "-o", "link", "show", "net1"); !strings.Contains(out, "veth") {
				t.Errorf("net1 is not a veth: %s", out)
			}
		},
		deleted: func(t *testing.T, e *pluginEnv) {
			if ports := bridgePorts(t, e.vars["bridge"]); len(ports) != 0 {
				t.Errorf("bridge %s still has ports %v", e.vars["bridge"], ports)
			}
		},
	}, {
		name: "ptp", ipam: "host-local-default",
		plugins: func(t *testing.T, e *pluginEnv) []map[string]any {
			return []map[string]any{{"type": "ptp"}}
		},
		running: func(t *testing.T, e *pluginEnv) {
			veth := hostPeer(t, e)
			e.vars["veth"] = veth
			if out := hostRun(t, "ip", "-o", "route", "show", e.ip); !strings.Contains(out, "dev "+veth) {
				t.Errorf("no host route to %s through the pod's veth %s: %q", e.ip, veth, out)
			}
		},
		deleted: func(t *testing.T, e *pluginEnv) {
			if out := hostRun(t, "ip", "-o", "route", "show", e.ip); strings.TrimSpace(out) != "" {
				t.Errorf("host route to %s still there: %s", e.ip, out)
			}
			assertNoHostLink(t, e.vars["veth"])
		},
	}, {
		name: "macvlan", ipam: "host-local",
		plugins: func(t *testing.T, e *pluginEnv) []map[string]any {
			e.vars["master"] = vethPair(t)
			return []map[string]any{{"type": "macvlan", "master": e.vars["master"], "mode": "bridge"}}
		},
		running: func(t *testing.T, e *pluginEnv) {
			out := podNetns(t, e, "ip", "-d", "-o", "link", "show", "net1")
			if !strings.Contains(out, "macvlan mode bridge") {
				t.Errorf("net1 is not a macvlan in bridge mode: %s", out)
			}
			if want := fmt.Sprintf("@if%d:", hostIndex(t, e.vars["master"])); !strings.Contains(out, want) {
				t.Errorf("net1's parent is not the master %s (%s): %s", e.vars["master"], want, out)
			}
		},
	}, {
		name: "dummy", kernel: "dummy", ipam: "host-local",
		plugins: func(t *testing.T, e *pluginEnv) []map[string]any {
			return []map[string]any{{"type": "dummy"}}
		},
		running: func(t *testing.T, e *pluginEnv) {
			if out := podNetns(t, e, "ip", "-d", "-o", "link", "show", "net1"); !strings.Contains(out, " dummy ") {
				t.Errorf("net1 is not a dummy link: %s", out)
			}
		},
	}, {
		name: "ipvlan", kernel: "ipvlan", ipam: "static",
		plugins: func(t *testing.T, e *pluginEnv) []map[string]any {
			e.vars["master"] = vethPair(t)
			return []map[string]any{{"type": "ipvlan", "master": e.vars["master"], "mode": "l2"}}
		},
		running: func(t *testing.T, e *pluginEnv) {
			if out := podNetns(t, e, "ip", "-d", "-o", "link", "show", "net1"); !strings.Contains(out, "ipvlan") {
				t.Errorf("net1 is not an ipvlan: %s", out)
			}
		},
	}, {
		name: "host-device", ipam: "static",
		plugins: func(t *testing.T, e *pluginEnv) []map[string]any {
			dev := vethPair(t)
			e.vars["dev"] = dev
			e.vars["mac"] = hostLinkState(t, dev).MAC
			return []map[string]any{{"type": "host-device", "device": dev}}
		},
		running: func(t *testing.T, e *pluginEnv) {
			if hostLinkState(t, e.vars["dev"]) != nil {
				t.Errorf("%s is still in the host network namespace", e.vars["dev"])
			}
			if i := podInterfaces(t, e.ns, "p")["net1"]; i == nil || i.MAC != e.vars["mac"] {
				t.Errorf("net1 in the pod is not the host's %s (MAC %s): %+v", e.vars["dev"], e.vars["mac"], i)
			}
		},
		deleted: func(t *testing.T, e *pluginEnv) {
			l := hostLinkState(t, e.vars["dev"])
			if l == nil {
				t.Fatalf("%s did not come back to the host network namespace", e.vars["dev"])
			}
			if l.MAC != e.vars["mac"] {
				t.Errorf("%s came back with MAC %s, want %s", e.vars["dev"], l.MAC, e.vars["mac"])
			}
		},
	}, {
		name: "vlan", kernel: "vlan", ipam: "host-local",
		plugins: func(t *testing.T, e *pluginEnv) []map[string]any {
			e.vars["master"] = vethPair(t)
			return []map[string]any{{"type": "vlan", "master": e.vars["master"], "vlanId": 213}}
		},
		running: func(t *testing.T, e *pluginEnv) {
			if out := podNetns(t, e, "ip", "-d", "-o", "link", "show", "net1"); !strings.Contains(out, "vlan protocol 802.1Q id 213") {
				t.Errorf("net1 is not VLAN 213: %s", out)
			}
		},
	}, {
		name: "tap", ipam: "host-local",
		plugins: func(t *testing.T, e *pluginEnv) []map[string]any {
			e.vars["mac"] = fmt.Sprintf("02:13:00:00:%02x:0a", e.n)
			return []map[string]any{{"type": "tap", "mac": e.vars["mac"], "mtu": 1400}}
		},
		running: func(t *testing.T, e *pluginEnv) {
			out := podNetns(t, e, "ip", "-d", "-o", "link", "show", "net1")
			if !strings.Contains(out, "tun type tap") || !strings.Contains(out, "mtu 1400") || !strings.Contains(out, "link/ether "+e.vars["mac"]) {
				t.Errorf("net1 is not a tap with mtu 1400 and MAC %s: %s", e.vars["mac"], out)
			}
		},
	}, {
		name: "dhcp", ipam: "dhcp",
		plugins: func(t *testing.T, e *pluginEnv) []map[string]any {
			e.ip = fmt.Sprintf("10.213.%d.50", e.n)
			master := vethPair(t)
			e.vars["master"] = master
			startDHCPServer(t, e, master+"p")
			e.vars["clientID"] = "/" + e.netName + "/net1"
			return []map[string]any{{"type": "macvlan", "master": master, "mode": "bridge"}}
		},
		running: func(t *testing.T, e *pluginEnv) {
			id := e.rec.ContainerID + e.vars["clientID"]
			if log := dhcpLog.String(); !strings.Contains(log, id+": lease acquired") {
				t.Errorf("the dhcp daemon did not acquire a lease for %s:\n%s", id, log)
			}
		},
		deleted: func(t *testing.T, e *pluginEnv) {
			id := e.rec.ContainerID + e.vars["clientID"]
			if log := dhcpLog.String(); !strings.Contains(log, id+": releasing lease") {
				t.Errorf("the dhcp daemon did not release the lease of %s:\n%s", id, log)
			}
		},
	}, {
		name: "tuning", ipam: "host-local",
		plugins: func(t *testing.T, e *pluginEnv) []map[string]any {
			return []map[string]any{bridgeOf(t, e), {"type": "tuning", "mtu": 1400, "promisc": true,
				"sysctl": map[string]string{"net.ipv4.conf.IFNAME.arp_ignore": "1"}}}
		},
		running: func(t *testing.T, e *pluginEnv) {
			out := podNetns(t, e, "ip", "-o", "link", "show", "net1")
			if !strings.Contains(out, "mtu 1400") || !strings.Contains(out, "PROMISC") {
				t.Errorf("tuning: net1 has not mtu 1400 and PROMISC: %s", out)
			}
			if v := strings.TrimSpace(podNetns(t, e, "cat", "/proc/sys/net/ipv4/conf/net1/arp_ignore")); v != "1" {
				t.Errorf("tuning: net.ipv4.conf.net1.arp_ignore = %q, want 1", v)
			}
			e.vars["backup"] = target.path(filepath.Join("/run/cni/tuning", e.rec.ContainerID+"_net1.json"))
			if _, err := os.Stat(e.vars["backup"]); err != nil {
				t.Errorf("tuning's backup of net1 is not in the node's /run/cni/tuning: %v", err)
			}
		},
		deleted: func(t *testing.T, e *pluginEnv) {
			if _, err := os.Stat(e.vars["backup"]); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("tuning's backup %s is still there: %v", e.vars["backup"], err)
			}
		},
	}, {
		name: "portmap", ipam: "host-local",
		plugins: func(t *testing.T, e *pluginEnv) []map[string]any {
			e.vars["hostPort"] = fmt.Sprint(freePort(t))
			return []map[string]any{bridgeOf(t, e), {"type": "portmap", "capabilities": map[string]bool{"portMappings": true}}}
		},
		selection: func(e *pluginEnv) string {
			return fmt.Sprintf(`[{"name":%q,"portMappings":[{"hostPort":%s,"containerPort":8080,"protocol":"tcp"}]}]`, e.nad, e.vars["hostPort"])
		},
		running: func(t *testing.T, e *pluginEnv) {
			rules := natRules(t)
			if !regexp.MustCompile(`--dport ` + e.vars["hostPort"] + ` .*-j DNAT --to-destination ` + regexp.QuoteMeta(e.ip) + `:8080`).MatchString(rules) {
				t.Errorf("no DNAT rule hostPort %s → %s:8080:\n%s", e.vars["hostPort"], e.ip, rules)
			}
		},
		deleted: func(t *testing.T, e *pluginEnv) {
			if rules := natRules(t); strings.Contains(rules, e.ip+":8080") || strings.Contains(rules, "--dport "+e.vars["hostPort"]+" ") {
				t.Errorf("portmap rules of the deleted pod are still there:\n%s", rules)
			}
		},
	}, {
		name: "bandwidth", ipam: "host-local",
		plugins: func(t *testing.T, e *pluginEnv) []map[string]any {
			return []map[string]any{{"type": "ptp"}, {"type": "bandwidth",
				"ingressRate": 100_000_000, "ingressBurst": 1_000_000, "egressRate": 100_000_000, "egressBurst": 1_000_000}}
		},
		running: func(t *testing.T, e *pluginEnv) {
			veth := hostPeer(t, e)
			e.vars["veth"] = veth
			if q := hostRun(t, "tc", "qdisc", "show", "dev", veth); !strings.Contains(q, "qdisc tbf") || !strings.Contains(q, "qdisc ingress") {
				t.Errorf("bandwidth: host veth %s has no tbf (ingress shaping) and ingress qdisc:\n%s", veth, q)
			}
			f := hostRun(t, "tc", "filter", "show", "dev", veth, "parent", "ffff:")
			m := regexp.MustCompile(`Redirect to device (bwp[0-9a-f]+)`).FindStringSubmatch(f)
			if m == nil {
				t.Fatalf("bandwidth: no egress redirect to an ifb on %s:\n%s", veth, f)
			}
			e.vars["ifb"] = m[1]
			if q := hostRun(t, "tc", "qdisc", "show", "dev", m[1]); !strings.Contains(q, "qdisc tbf") {
				t.Errorf("bandwidth: ifb %s has no tbf (egress shaping):\n%s", m[1], q)
			}
		},
		deleted: func(t *testing.T, e *pluginEnv) {
			assertNoHostLink(t, e.vars["veth"])
			assertNoHostLink(t, e.vars["ifb"])
		},
	}, {
		name: "firewall", ipam: "host-local",
		plugins: func(t *testing.T, e *pluginEnv) []map[string]any {
			return []map[string]any{bridgeOf(t, e), {"type": "firewall", "backend": "iptables"}}
		},
		running: func(t *testing.T, e *pluginEnv) {
			rules := forwardRules(t)
			for _, want := range []string{"-A CNI-FORWARD -s " + e.ip + "/32 -j ACCEPT", "-A CNI-FORWARD -d " + e.ip + "/32 -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT"} {
				if !strings.Contains(rules, want) {
					t.Errorf("firewall: no rule %q:\n%s", want, rules)
				}
			}
		},
		deleted: func(t *testing.T, e *pluginEnv) {
			if rules := forwardRules(t); strings.Contains(rules, e.ip+"/32") {
				t.Errorf("firewall rules of the deleted pod %s are still there:\n%s", e.ip, rules)
			}
		},
	}, {
		name: "sbr", ipam: "host-local",
		plugins: func(t *testing.T, e *pluginEnv) []map[string]any {
			return []map[string]any{bridgeOf(t, e), {"type": "sbr"}}
		},
		running: func(t *testing.T, e *pluginEnv) {
			rules := podNetns(t, e, "ip", "rule", "show")
			m := regexp.MustCompile(`from ` + regexp.QuoteMeta(e.ip) + ` lookup (\d+)`).FindStringSubmatch(rules)
			if m == nil {
				t.Fatalf("sbr: no rule from %s in the pod:\n%s", e.ip, rules)
			}
			routes := podNetns(t, e, "ip", "route", "show", "table", m[1])
			if !strings.Contains(routes, "default via "+e.gw+" dev net1") || !strings.Contains(routes, e.subnet()+" dev net1") {
				t.Errorf("sbr: table %s lacks the default route via %s and %s on net1:\n%s", m[1], e.gw, e.subnet(), routes)
			}
			if main := podNetns(t, e, "ip", "route", "show", "table", "main"); strings.Contains(main, "dev net1") {
				t.Errorf("sbr: net1's routes are still in the main table:\n%s", main)
			}
		},
	}, {
		name: "vrf", kernel: "vrf", ipam: "host-local",
		plugins: func(t *testing.T, e *pluginEnv) []map[string]any {
			return []map[string]any{bridgeOf(t, e), {"type": "vrf", "vrfname": "mndvrf"}}
		},
		running: func(t *testing.T, e *pluginEnv) {
			if out := podNetns(t, e, "ip", "-d", "-o", "link", "show", "mndvrf"); !strings.Contains(out, "vrf table") {
				t.Errorf("no vrf device mndvrf in the pod: %s", out)
			}
			if out := podNetns(t, e, "ip", "-o", "link", "show", "net1"); !strings.Contains(out, "master mndvrf") {
				t.Errorf("net1 is not enslaved to mndvrf: %s", out)
			}
		},
	}}

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runPluginCase(t, c)
		})
	}
}

func runPluginCase(t *testing.T, c pluginCase) {
	ns := newNamespace(t)
	n := nextSubnet()
	e := &pluginEnv{ns: ns, nad: c.name, netName: ns + "-" + c.name, n: n,
		ip: fmt.Sprintf("10.213.%d.10", n), gw: fmt.Sprintf("10.213.%d.1", n), vars: map[string]string{}}
	supported := c.kernel == "" || kernelHas(t, c.kernel)
	plugins := c.plugins(t, e)
	plugins[0]["ipam"] = e.ipamConf(t, c.ipam)
	createNAD(t, ns, e.nad, map[string]any{"cniVersion": "1.1.0", "name": e.netName, "plugins": plugins}, nil)
	sel := e.nad
	if c.selection != nil {
		sel = c.selection(e)
	}
	hostLocal := strings.HasPrefix(c.ipam, "host-local")
	// Cleanups run last-in first-out: when the case fails half-way, the pod
	// goes (its CNI DEL done) before the prerequisites its delegates need on
	// DEL (the dhcp daemon, a host-device's link).
	t.Cleanup(func() { deletePod(t, ns, "p") })

	if !supported {
		// The kernel lacks the link kind: the delegate must fail, multinet
		// must say so and roll the attachment back.
		t.Logf("this kernel cannot make %s links: checking the failure path", c.kernel)
		ctx := testContext(t, 30*time.Second)
		if _, err := testCluster.kube.CoreV1().Pods(ns).Create(ctx, podSpec(ns, "p", sel), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod: %v", err)
		}
		msg := waitEvent(t, ns, "p", "NetworkAttachFailed", ns+"/"+e.nad, c.kernel)
		t.Logf("event: %s", msg)
		if !strings.Contains(msg, "not supported") {
			t.Errorf("NetworkAttachFailed does not give the plugin's error (operation not supported): %s", msg)
		}
		p, err := testCluster.kube.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Status.Phase == corev1.PodRunning || p.Annotations[status.Annotation] != "" {
			t.Errorf("pod is %s with network-status %q although %s failed", p.Status.Phase, p.Annotations[status.Annotation], c.kernel)
		}
		deletePod(t, ns, "p")
		assertNoRecords(t, ns)
		if hostLocal {
			if _, err := os.Stat(e.allocation()); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("host-local still holds %s after the failed attachment: %v", e.ip, err)
			}
		}
		if br := e.vars["bridge"]; br != "" {
			if ports := bridgePorts(t, br); len(ports) != 0 {
				t.Errorf("bridge %s still has ports %v after the rollback", br, ports)
			}
		}
		return
	}

	p := runPod(t, podSpec(ns, "p", sel))
	files := podRecords(t, ns, "p")
	if len(files) != 1 {
		t.Fatalf("multinetd records of the pod: %v, want one", files)
	}
	e.rec = readRecord(t, files[0])

	// The interface, its address and network-status.
	ifaces := podInterfaces(t, ns, "p")
	net1 := ifaces["net1"]
	if net1 == nil {
		t.Fatalf("no net1 in the pod: %v", podNetns(t, e, "ip", "-o", "addr"))
	}
	if strings.Join(net1.IPs, ",") != e.ip {
		t.Errorf("net1 has addresses %v, want %s", net1.IPs, e.ip)
	}
	var st *status.NetworkStatus
	for _, s := range networkStatus(t, p) {
		if s.Interface == "net1" {
			st = &s
		}
	}
	if st == nil {
		t.Fatalf("network-status lists no net1: %s", p.Annotations[status.Annotation])
	}
	if st.Name != ns+"/"+e.nad || strings.Join(st.IPs, ",") != e.ip || st.Mac != net1.MAC || st.Default {
		t.Errorf("network-status of net1 = %+v, want name %s/%s, ips [%s], mac %s, not default", *st, ns, e.nad, e.ip, net1.MAC)
	}
	if hostLocal {
		b, err := os.ReadFile(e.allocation())
		if err != nil {
			t.Errorf("host-local's allocation of %s: %v", e.ip, err)
		} else if owner := strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]); owner != e.rec.ContainerID {
			t.Errorf("host-local holds %s for %q, want the pod's sandbox %s", e.ip, owner, e.rec.ContainerID)
		}
	}
	if c.running != nil {
		c.running(t, e)
	}

	deletePod(t, ns, "p")
	assertNoRecords(t, ns)
	if hostLocal {
		if _, err := os.Stat(e.allocation()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("host-local did not release %s (%s): %v", e.ip, e.allocation(), err)
		}
	}
	if c.deleted != nil {
		c.deleted(t, e)
	}
}

// hostRun runs a command on the target node (the host of the pods) and
// returns its output.
func hostRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	return target.run(t, append([]string{name}, args...)...)
}

// podNetns runs a node command in the pod's network namespace (the node's
// iproute2 shows link details busybox's ip does not).
func podNetns(t *testing.T, e *pluginEnv, args ...string) string {
	t.Helper()
	return hostRun(t, "nsenter", append([]string{"--net=" + e.rec.Netns, "--"}, args...)...)
}

// vethPair makes a veth pair mnd-XXXXXX / mnd-XXXXXXp on the target node,
// both up, and returns the first name. (This kernel has no dummy links.)
func vethPair(t *testing.T) string {
	t.Helper()
	name := "mnd-" + randHex(3)
	hostRun(t, "ip", "link", "add", name, "type", "veth", "peer", "name", name+"p")
	t.Cleanup(func() { target.try("ip", "link", "del", name) })
	hostRun(t, "ip", "link", "set", name, "up")
	hostRun(t, "ip", "link", "set", name+"p", "up")
	return name
}

// kernelHas reports whether the kernel can make links of kind in the target
// node's network namespace (it has no
// loadable modules here: CONFIG_DUMMY, CONFIG_IPVLAN, CONFIG_VLAN_8021Q,
// CONFIG_NET_VRF are built in or missing).
func kernelHas(t *testing.T, kind string) bool {
	t.Helper()
	parent := vethPair(t)
	name := "mnd-k" + randHex(3)
	var args []string
	switch kind {
	case "ipvlan":
		args = []string{"link", "add", "link", parent, "name", name, "type", "ipvlan", "mode", "l2"}
	case "vlan":
		args = []string{"link", "add", "link", parent, "name", name, "type", "vlan", "id", "2"}
	case "vrf":
		args = []string{"link", "add", name, "type", "vrf", "table", "4213"}
	case "dummy":
		args = []string{"link", "add", name, "type", "dummy"}
	default:
		t.Fatalf("kernelHas: unknown kind %s", kind)
	}
	out, err := target.command(testContext(t, 30*time.Second), append([]string{"ip"}, args...)...).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "Unknown device type") || strings.Contains(string(out), "not supported") {
			return false
		}
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	target.try("ip", "link", "del", name)
	return true
}

// hostIndex returns the ifindex of a link of the target node.
func hostIndex(t *testing.T, name string) int {
	t.Helper()
	l, err := target.netlink(t).LinkByName(name)
	if err != nil {
		t.Fatalf("host link %s: %v", name, err)
	}
	return l.Attrs().Index
}

// hostPeer returns the host end of the pod's veth net1.
func hostPeer(t *testing.T, e *pluginEnv) string {
	t.Helper()
	out := podNetns(t, e, "ip", "-o", "link", "show", "net1")
	m := regexp.MustCompile(`net1@if(\d+):`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("net1 has no peer: %s", out)
	}
	idx, _ := strconv.Atoi(m[1])
	l, err := target.netlink(t).LinkByIndex(idx)
	if err != nil {
		t.Fatalf("the host end (ifindex %d) of net1: %v", idx, err)
	}
	if l.Type() != "veth" {
		t.Fatalf("the host end %s of net1 is a %s, not a veth", l.Attrs().Name, l.Type())
	}
	return l.Attrs().Name
}

func assertNoHostLink(t *testing.T, name string) {
	t.Helper()
	if name == "" {
		t.Errorf("no host link name recorded while the pod ran")
		return
	}
	if hostLinkState(t, name) != nil {
		t.Errorf("host link %s is still there", name)
	}
}

// bridgePorts lists the interfaces enslaved to a host bridge.
func bridgePorts(t *testing.T, bridge string) []string {
	return (&testNet{Bridge: bridge}).ports(t)
}

// forwardRules returns the filter table's rules (iptables-save: it lists a
// missing chain without an error).
func forwardRules(t *testing.T) string {
	t.Helper()
	return hostRun(t, "iptables-save", "-t", "filter")
}

// dhcpLog collects the output of the CNI dhcp daemon the dhcp case starts.
var dhcpLog lockedBuffer

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// dhcpSocket is the dhcp plugin's default daemon socket (NADs as users write
// them name none).
const dhcpSocket = "/run/cni/dhcp.sock"

// startDHCPServer serves the case's subnet from busybox udhcpd in a network
// namespace of the test, on serverLink (moved there, address .1), handing
// out e.ip only, and starts the CNI dhcp plugin's daemon on the node; both
// stop when the test ends.
func startDHCPServer(t *testing.T, e *pluginEnv, serverLink string) {
	t.Helper()
	netnsName := "mnd-dhcp-" + randHex(3)
	hostRun(t, "ip", "netns", "add", netnsName)
	t.Cleanup(func() { target.try("ip", "netns", "del", netnsName) })
	hostRun(t, "ip", "link", "set", serverLink, "netns", netnsName)
	hostRun(t, "ip", "-n", netnsName, "addr", "add", e.gw+"/24", "dev", serverLink)
	hostRun(t, "ip", "-n", netnsName, "link", "set", serverLink, "up")
	dir := t.TempDir()
	conf := filepath.Join(dir, "udhcpd.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(
		"start %s\nend %s\ninterface %s\nlease_file %s\npidfile %s\noption subnet 255.255.255.0\noption lease 600\n",
		e.ip, e.ip, serverLink, filepath.Join(dir, "leases"), filepath.Join(dir, "udhcpd.pid"))), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "leases"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var serverOut lockedBuffer
	// (nsenter execs its command: the process started is udhcpd's.)
	srv := target.command(context.Background(), "ip", "netns", "exec", netnsName, "busybox", "udhcpd", "-f", conf)
	srv.Stdout, srv.Stderr = &serverOut, &serverOut
	if err := srv.Start(); err != nil {
		t.Fatalf("udhcpd: %v", err)
	}
	t.Cleanup(func() {
		_ = srv.Process.Kill()
		_ = srv.Wait()
		if t.Failed() {
			t.Logf("udhcpd output:\n%s", serverOut.String())
		}
	})
	// udhcpd listens on UDP port 67 (0043 in /proc/net/udp) once it runs.
	waitFor(t, 10*time.Second, "udhcpd listening on port 67", func() bool {
		out, _ := target.command(testContext(t, 10*time.Second), "ip", "netns", "exec", netnsName, "cat", "/proc/net/udp").Output()
		return strings.Contains(string(out), ":0043 ")
	})

	socket := target.path(dhcpSocket)
	if c, err := net.Dial("unix", socket); err == nil {
		c.Close()
		t.Fatalf("a dhcp daemon already listens on %s on node %s", dhcpSocket, target.Name)
	}
	_ = os.Remove(socket) // stale
	daemon := target.command(context.Background(), filepath.Join(testCluster.mustEnv(t, "CNI_BIN_DIR"), "dhcp"), "daemon", "-socketpath", dhcpSocket)
	daemon.Stdout, daemon.Stderr = &dhcpLog, &dhcpLog
	if err := daemon.Start(); err != nil {
		t.Fatalf("dhcp daemon: %v", err)
	}
	t.Cleanup(func() {
		_ = daemon.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = daemon.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = daemon.Process.Kill()
			<-done
		}
		if _, err := os.Stat(socket); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the dhcp daemon left %s behind: %v", dhcpSocket, err)
		}
		if t.Failed() {
			t.Logf("dhcp daemon output:\n%s", dhcpLog.String())
		}
	})
	waitFor(t, 10*time.Second, "the dhcp daemon listening on "+dhcpSocket, func() bool {
		c, err := net.Dial("unix", socket)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// waitFor polls cond every 100ms until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(testContext(t, d+10*time.Second), 100*time.Millisecond, d, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("timed out after %v waiting for %s: %v", d, what, err)
	}
}
