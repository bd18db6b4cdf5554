//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	mnpv1beta1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta1"
	mnpv1beta2 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1beta2"
	"github.com/multinet/multinet/internal/node/nftpolicy"
)

// The scenarios of multi-networkpolicy-iptables's e2e suite
// (github.com/k8snetworkplumbingwg/multi-networkpolicy-iptables, e2e/tests/
// <scenario>.bats and .yml), run against multinetd's enforcement. Each
// scenario keeps upstream's NetworkAttachmentDefinition, pods (names and
// labels), MultiNetworkPolicies and reachability assertions (which pod
// reaches which on which port and protocol). What differs, everywhere:
//   - the macvlan master is a veth pair of the scenario on the target node
//     (upstream: the node's default-route interface; this kernel has no
//     dummy links), so that scenarios running at once share no L2;
//   - the NAD keeps upstream's namespace (default, a global namespace of
//     the shipped isolation policy) and config; its name gets a random
//     suffix so that scenarios and runs do not share it;
//   - upstream's fixed namespaces are fresh namespaces labelled
//     multinet.io/nad-trust=unrestricted (the NAD names a node link), one
//     per upstream namespace;
//   - the policies are created before the pods: a pod selected at creation
//     has its rules before its ADD returns (docs/network-policy.md), which
//     upstream's DaemonSet does not promise and its `sleep 5` waits for;
//   - traffic is made by this process inside the pods' network namespaces
//     (a socket stays in the namespace it was made in): each pod listens on
//     the scenario's ports and echoes, as upstream's `nc -l` servers; a
//     check connects (TCP) or sends a datagram (UDP) and waits up to 1 s
//     for the echo (upstream: `echo x | nc -w 1`). busybox's nc in the test
//     image has no UDP;
//   - upstream's "check generated iptables rules" becomes: multinetd's
//     nftables table is in the selected pods' network namespaces and in no
//     other pod's; its "disable multi-networkpolicy" becomes: the
//     policies are deleted, the table leaves the selected pods and the
//     denied traffic passes.
//
// bond-cni.bats is not ported: this kernel has no bonding driver (`ip link
// add type bond`: Unknown device type). docs/network-policy-e2e.md has the
// table of scenarios and tests.

// mnpCheckTimeout is upstream's `nc -w 1`: how long a check waits for a
// connection or an echo.
const mnpCheckTimeout = time.Second

// mnpAllowedWithin bounds the wait for an allowed check to pass: a peer's
// address reaches the rules of the pods that allow it after that peer's
// ADD published it (network-status), asynchronously.
const mnpAllowedWithin = 30 * time.Second

// mnpPort is a port and protocol ("TCP" or "UDP") a scenario's pods listen on.
type mnpPort struct {
	proto string
	port  int
}

var (
	tcp5555 = mnpPort{"TCP", 5555}
	tcp6666 = mnpPort{"TCP", 6666}
	udp6666 = mnpPort{"UDP", 6666}
)

// mnpPod is a pod of a scenario: upstream's name (also its label name=),
// the namespace key ("" the scenario's, else another of its namespaces, as
// upstream's "-blue"), and its static address (ipblock scenarios).
type mnpPod struct {
	name, ns, ip string
}

// mnpPolicy is a MultiNetworkPolicy of a scenario: upstream's name,
// apiVersion (v1beta1 or v1beta2) and spec (YAML, upstream's).
type mnpPolicy struct {
	name, version, spec string
}

// mnpCheck is one upstream reachability assertion: from reaches to on
// port, or not.
type mnpCheck struct {
	from, to string
	port     mnpPort
	allowed  bool
}

func (c mnpCheck) String() string {
	verdict := "reaches"
	if !c.allowed {
		verdict = "does not reach"
	}
	return fmt.Sprintf("%s %s %s on %s/%d", c.from, verdict, c.to, c.port.proto, c.port.port)
}

// mnpScenario is one upstream scenario.
type mnpScenario struct {
	name string // upstream's scenario (e2e/tests/<name>.bats)
	// nadName and nad: upstream's NAD name and config, with %q for the
	// macvlan master.
	nadName, nad string
	pods         []mnpPod
	policies     []mnpPolicy
	listen       []mnpPort
	selected     []string // the pods upstream expects rules in
	checks       []mnpCheck
	// afterDelete: the checks after the policies are deleted (upstream's
	// "disable multi-networkpolicy and check iptables rules"); none: not
	// part of the scenario upstream.
	afterDelete []mnpCheck
}

// mnpRunning is a running pod of a scenario: its net1 address and where
// this process finds its network namespace.
type mnpRunning struct {
	pod   *corev1.Pod
	addr  netip.Addr
	netns string
}

// runMNPScenario runs sc: namespaces, NAD, policies, pods (at once), the
// rules check, the listeners, the checks (at once), and afterDelete.
func runMNPScenario(t *testing.T, sc mnpScenario) {
	t.Helper()
	nss := map[string]string{"": newNamespace(t)}
	for _, p := range sc.pods {
		if _, ok := nss[p.ns]; !ok {
			nss[p.ns] = newNamespace(t)
		}
	}
	master := vethPair(t)
	nad := sc.nadName + "-" + randHex(3)
	createNAD(t, "default", nad, fmt.Sprintf(sc.nad, master), nil)
	t.Cleanup(func() { deleteNAD(t, "default", nad) })
	for _, p := range sc.policies {
		createMNP(t, nss[""], "default/"+nad, p)
	}
	pods := startMNPPods(t, nss, "default/"+nad, sc.pods)
	waitPolicyTables(t, pods, sc.selected)
	for _, p := range pods {
		listenMNP(t, p, sc.listen)
	}
	runMNPChecks(t, pods, sc.checks)
	if sc.afterDelete == nil {
		return
	}
	for _, p := range sc.policies {
		deleteMNP(t, nss[""], p.name)
	}
	waitPolicyTables(t, pods, nil)
	runMNPChecks(t, pods, sc.afterDelete)
}

// createMNP creates policy p in ns for network (policy-for), in p's version.
func createMNP(t *testing.T, ns, network string, p mnpPolicy) {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	meta := metav1.ObjectMeta{Name: p.name, Namespace: ns, Annotations: map[string]string{mnpv1beta2.PolicyForAnnotation: network}}
	var err error
	switch p.version {
	case "v1beta1":
		obj := &mnpv1beta1.MultiNetworkPolicy{ObjectMeta: meta}
		if err = yaml.UnmarshalStrict([]byte(p.spec), &obj.Spec); err == nil {
			_, err = testCluster.multi.K8sCniCncfIoV1beta1().MultiNetworkPolicies(ns).Create(ctx, obj, metav1.CreateOptions{})
		}
	case "v1beta2":
		obj := &mnpv1beta2.MultiNetworkPolicy{ObjectMeta: meta}
		if err = yaml.UnmarshalStrict([]byte(p.spec), &obj.Spec); err == nil {
			_, err = testCluster.multi.K8sCniCncfIoV1beta2().MultiNetworkPolicies(ns).Create(ctx, obj, metav1.CreateOptions{})
		}
	default:
		err = fmt.Errorf("unknown version %q", p.version)
	}
	if err != nil {
		t.Fatalf("create MultiNetworkPolicy %s/%s: %v", ns, p.name, err)
	}
}

// deleteMNP deletes policy ns/name.
func deleteMNP(t *testing.T, ns, name string) {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	if err := testCluster.multi.K8sCniCncfIoV1beta2().MultiNetworkPolicies(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete MultiNetworkPolicy %s/%s: %v", ns, name, err)
	}
}

// startMNPPods creates the scenario's pods at once (labels app=<namespace
// key's scenario>, name=<pod>; network selected as upstream does), waits
// until each runs with network-status, and returns them by name. A cleanup
// deletes them and waits until multinetd holds no record of them, before
// the NAD and the master go.
func startMNPPods(t *testing.T, nss map[string]string, network string, spec []mnpPod) map[string]*mnpRunning {
	t.Helper()
	var pods []*corev1.Pod
	for _, s := range spec {
		networks := network
		if s.ip != "" {
			nsName, name, _ := strings.Cut(network, "/")
			networks = fmt.Sprintf(`[{"name":%q,"namespace":%q,"ips":[%q]}]`, name, nsName, s.ip)
		}
		p := podSpec(nss[s.ns], s.name, networks)
		p.Labels = map[string]string{"app": "mnp-e2e", "name": s.name}
		pods = append(pods, p)
	}
	createPods(t, pods)
	t.Cleanup(func() {
		deletePods(t, pods)
		for _, ns := range nss {
			waitNoRecords(t, ns)
		}
	})
	out := map[string]*mnpRunning{}
	for _, p := range pods {
		got := waitRunning(t, p.Namespace, p.Name, 90*time.Second)
		files := podRecords(t, p.Namespace, p.Name)
		if len(files) != 1 {
			t.Fatalf("pod %s/%s: %d attachment records, want 1", p.Namespace, p.Name, len(files))
		}
		out[p.Name] = &mnpRunning{pod: got, addr: attachmentIP(t, got, "net1"), netns: target.path(readRecord(t, files[0]).Netns)}
	}
	return out
}

// waitNoRecords waits until multinetd holds no attachment record of a pod
// of ns (the sandboxes' DEL follows the pods' removal from the API).
func waitNoRecords(t *testing.T, ns string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(testContext(t, 100*time.Second), 500*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		return len(podRecords(t, ns, "")) == 0, nil
	})
	if err != nil {
		t.Errorf("namespace %s: attachment records %v left 90 s after its pods were deleted", ns, podRecords(t, ns, ""))
	}
}

// inPod runs f on a thread in the pod's network namespace.
func (p *mnpRunning) inPod(f func() error) error {
	return withNetns(func() (netns.NsHandle, error) { return netns.GetFromPath(p.netns) }, "pod "+p.pod.Name, f)
}

// listenMNP makes p listen on ports, as upstream's `nc -l` containers:
// each TCP connection and each UDP datagram is echoed. The sockets close
// when the test ends.
func listenMNP(t *testing.T, p *mnpRunning, ports []mnpPort) {
	t.Helper()
	for _, port := range ports {
		addr := ":" + strconv.Itoa(port.port)
		err := p.inPod(func() error {
			if port.proto == "UDP" {
				c, err := net.ListenPacket("udp", addr)
				if err == nil {
					t.Cleanup(func() { c.Close() })
					go echoUDP(c)
				}
				return err
			}
			l, err := net.Listen("tcp", addr)
			if err == nil {
				t.Cleanup(func() { l.Close() })
				go echoTCP(l)
			}
			return err
		})
		if err != nil {
			t.Fatalf("pod %s: listen on %s/%d: %v", p.pod.Name, port.proto, port.port, err)
		}
	}
}

// echoTCP echoes what each connection of l sends, until l is closed.
func echoTCP(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			_, _ = io.Copy(c, c)
		}()
	}
}

// echoUDP echoes each datagram c receives to its sender, until c is closed.
func echoUDP(c net.PacketConn) {
	buf := make([]byte, 1500)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			return
		}
		_, _ = c.WriteTo(buf[:n], from)
	}
}

// reach reports whether from reaches to on port: a TCP connection (or a
// UDP datagram) from from's network namespace to to's net1 address whose
// echo comes back within mnpCheckTimeout.
func reach(from, to *mnpRunning, port mnpPort) error {
	dst := netip.AddrPortFrom(to.addr, uint16(port.port)).String()
	network := strings.ToLower(port.proto)
	var c net.Conn
	err := from.inPod(func() error {
		var err error
		c, err = net.DialTimeout(network, dst, mnpCheckTimeout)
		return err
	})
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(mnpCheckTimeout))
	if _, err := c.Write([]byte("x")); err != nil {
		return err
	}
	buf := make([]byte, 1)
	if _, err := io.ReadFull(c, buf); err != nil {
		return fmt.Errorf("no echo from %s: %w", dst, err)
	}
	return nil
}

// runMNPChecks runs the checks at once. An allowed check is retried until
// it passes (up to mnpAllowedWithin: a peer's address reaches the rules
// asynchronously); a denied one is tried once: the rules that deny it were
// in place before the check (waitPolicyTables), and a later retry would
// prove nothing more.
func runMNPChecks(t *testing.T, pods map[string]*mnpRunning, checks []mnpCheck) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(checks))
	for i, c := range checks {
		from, to := pods[c.from], pods[c.to]
		if from == nil || to == nil {
			t.Fatalf("check %v names a pod the scenario does not have", c)
		}
		wg.Go(func() { errs[i] = runMNPCheck(from, to, c) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("%v: %v", checks[i], err)
		}
	}
}

// runMNPCheck runs one check (runMNPChecks).
func runMNPCheck(from, to *mnpRunning, c mnpCheck) error {
	if !c.allowed {
		if reach(from, to, c.port) == nil {
			return errors.New("it does: the policy should deny it")
		}
		return nil
	}
	deadline := time.Now().Add(mnpAllowedWithin)
	for {
		err := reach(from, to, c.port)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("it does not within %v: %w", mnpAllowedWithin, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// hasPolicyTable reports whether the pod's network namespace holds
// multinetd's table.
func (p *mnpRunning) hasPolicyTable() (bool, error) {
	ns, err := netns.GetFromPath(p.netns)
	if err != nil {
		return false, fmt.Errorf("pod %s: network namespace %s: %w", p.pod.Name, p.netns, err)
	}
	defer ns.Close()
	conn, err := nftables.New(nftables.WithNetNSFd(int(ns)))
	if err != nil {
		return false, fmt.Errorf("pod %s: nftables: %w", p.pod.Name, err)
	}
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		return false, fmt.Errorf("pod %s: list nftables tables: %w", p.pod.Name, err)
	}
	for _, tb := range tables {
		if tb.Name == nftpolicy.TableName {
			return true, nil
		}
	}
	return false, nil
}

// waitPolicyTables waits until the pods named in selected hold multinetd's
// table and no other pod does (upstream's "check generated iptables
// rules", which greps iptables-save in each pod after a `sleep 5`).
func waitPolicyTables(t *testing.T, pods map[string]*mnpRunning, selected []string) {
	t.Helper()
	var wrong []string
	err := wait.PollUntilContextTimeout(testContext(t, 40*time.Second), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		wrong = wrong[:0]
		for name, p := range pods {
			has, err := p.hasPolicyTable()
			if err != nil {
				return false, err
			}
			if want := slices.Contains(selected, name); has != want {
				wrong = append(wrong, fmt.Sprintf("%s has table inet %s: %v, want %v", name, nftpolicy.TableName, has, want))
			}
		}
		return len(wrong) == 0, nil
	})
	if err != nil {
		t.Fatalf("multinetd's rules are not where the policies put them after 30 s: %v: %s", err, strings.Join(wrong, "; "))
	}
}
