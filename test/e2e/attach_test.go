//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/multinet/multinet/internal/node/state"
)

// TestExtraNetworkCounts: pods with 0, 1, 3 and 8 extra networks come up
// with exactly those interfaces and a network-status that matches them
// (multi-net spec §4, §5); deleting them releases every address, veth and
// record.
func TestExtraNetworkCounts(t *testing.T) {
	ns := newNamespace(t)
	nets := []*testNet{
		bridgeNet(t, ns, "net-a", "1.0.0", nil),
		bridgeNet(t, ns, "net-b", "1.0.0", nil),
	}
	for _, n := range []int{0, 1, 3, 8} {
		t.Run(fmt.Sprintf("%d", n), func(t *testing.T) {
			var sel []string
			want := []string{"eth0"}
			for i := 0; i < n; i++ {
				sel = append(sel, nets[i%2].Name)
				want = append(want, fmt.Sprintf("net%d", i+1))
			}
			name := fmt.Sprintf("extra-%d", n)
			p := runPod(t, podSpec(ns, name, strings.Join(sel, ",")))
			list := checkStatusMatchesPod(t, p, want)
			for i := 1; i < len(list); i++ {
				if wantName := ns + "/" + nets[(i-1)%2].Name; list[i].Name != wantName {
					t.Errorf("network-status[%d].name = %q, want %q", i, list[i].Name, wantName)
				}
			}
			deletePod(t, ns, name)
		})
	}
	assertReleased(t, nets...)
	assertNoRecords(t, ns)
}

// TestSelectionForms: JSON form with ips/mac/interface, a cross-namespace
// reference in both forms, the same network twice (§4.2.2) and generated
// names skipping a name taken explicitly (§4.1.2.1.5). The other namespace
// is "default", a global namespace of the namespace isolation deploy/ ships
// (§7.4; a NAD of any other namespace is refused: isolation_test.go).
func TestSelectionForms(t *testing.T) {
	ns := newNamespace(t)
	other := "default"
	netX := "mne2e-x-" + randHex(3)
	a := bridgeNet(t, ns, "net-a", "1.0.0", nil)
	static := bridgeNetStatic(t, ns, "net-static")
	x := bridgeNet(t, other, netX, "1.0.0", nil)
	t.Cleanup(func() { deleteNAD(t, other, netX) })

	t.Run("json", func(t *testing.T) {
		sel := fmt.Sprintf(`[{"name":"net-static","ips":["10.211.%d.7/24"],"mac":"02:aa:bb:cc:dd:01","interface":"data0"},{"name":%q,"namespace":"%s"},{"name":"net-a"}]`, static.n, netX, other)
		p := runPod(t, podSpec(ns, "json", sel))
		list := checkStatusMatchesPod(t, p, []string{"eth0", "data0", "net1", "net2"})
		if got := list[1]; got.Mac != "02:aa:bb:cc:dd:01" || strings.Join(got.IPs, ",") != fmt.Sprintf("10.211.%d.7", static.n) {
			t.Errorf("data0: mac %s ips %v, want the requested 02:aa:bb:cc:dd:01 and 10.211.%d.7", got.Mac, got.IPs, static.n)
		}
		if list[2].Name != other+"/"+netX {
			t.Errorf("cross-namespace attachment named %q, want %s/%s", list[2].Name, other, netX)
		}
		deletePod(t, ns, "json")
	})
	t.Run("comma-same-network-twice-skip-taken", func(t *testing.T) {
		// net1 is taken explicitly by the second element: the generated
		// names are net2 and net3.
		sel := fmt.Sprintf("net-a, net-a@net1 ,%s/%s", other, netX)
		p := runPod(t, podSpec(ns, "comma", sel))
		list := checkStatusMatchesPod(t, p, []string{"eth0", "net2", "net1", "net3"})
		if list[1].Name != list[2].Name || list[1].IPs[0] == list[2].IPs[0] {
			t.Errorf("the same network twice must be two attachments with two addresses: %+v %+v", list[1], list[2])
		}
		deletePod(t, ns, "comma")
	})
	assertReleased(t, a, static.testNet, x)
	assertNoRecords(t, ns)
}

// staticNet is a bridge network whose addresses come from the static IPAM
// plugin through the "ips" capability, and MACs through "mac" (tuning).
type staticNet struct {
	*testNet
	n int
}

func bridgeNetStatic(t *testing.T, ns, name string) *staticNet {
	t.Helper()
	n := nextSubnet()
	bridge := "mns" + randHex(4)
	conf := map[string]any{"cniVersion": "1.0.0", "name": name, "plugins": []map[string]any{
		{"type": "bridge", "bridge": bridge, "ipam": map[string]any{"type": "static"}, "capabilities": map[string]bool{"ips": true}},
		{"type": "tuning", "capabilities": map[string]bool{"mac": true}},
	}}
	createNAD(t, ns, name, conf, nil)
	t.Cleanup(func() { target.try("ip", "link", "del", bridge) })
	return &staticNet{testNet: &testNet{Namespace: ns, Name: name, Bridge: bridge, Subnet: fmt.Sprintf("10.211.%d.0/24", n)}, n: n}
}

// TestDelegateFailureRollsBack: the third attachment's IPAM range is
// exhausted, so ADD fails; the default network and the first two
// attachments made before it are torn down (no address, no veth left) and
// the Event says which network failed and why (§7.2).
func TestDelegateFailureRollsBack(t *testing.T) {
	ns := newNamespace(t)
	a := bridgeNet(t, ns, "ok-a", "1.0.0", nil)
	b := bridgeNet(t, ns, "ok-b", "0.4.0", nil)
	n := nextSubnet()
	full := &testNet{Namespace: ns, Name: "full", Bridge: "mnf" + randHex(4), DataDir: b.DataDir + "-full"}
	createNAD(t, ns, "full", map[string]any{"cniVersion": "1.0.0", "name": "full", "plugins": []map[string]any{{
		"type": "bridge", "bridge": full.Bridge,
		"ipam": map[string]any{"type": "host-local", "dataDir": full.DataDir, "ranges": [][]map[string]string{{{
			"subnet": fmt.Sprintf("10.210.%d.0/24", n), "rangeStart": fmt.Sprintf("10.210.%d.10", n), "rangeEnd": fmt.Sprintf("10.210.%d.10", n)}}}},
	}}}, nil)
	t.Cleanup(func() { target.try("ip", "link", "del", full.Bridge) })

	// The one address of "full" goes to a first pod.
	runPod(t, podSpec(ns, "holder", "full"))

	ctx := testContext(t, 30*time.Second)
	if _, err := testCluster.kube.CoreV1().Pods(ns).Create(ctx, podSpec(ns, "victim", "ok-a,ok-b,full"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	msg := waitEvent(t, ns, "victim", "NetworkAttachFailed", ns+"/full", "bridge")
	t.Logf("event: %s", msg)
	if !strings.Contains(msg, "no IP addresses available") && !strings.Contains(msg, "range") {
		t.Errorf("event does not say why: %s", msg)
	}
	// The kubelet retries the sandbox (each try a new sandbox ID), and each
	// try must be rolled back: no address of ok-a or ok-b (only the victim
	// uses them) may outlive the failed ADD that took it. Wait until
	// multinetd has answered a failed ADD more (its
	// multinet_cni_operations_total; only the victim's ADDs fail here), then
	// look at the addresses at a quiet moment: multinetd's metrics read
	// before and after show no CNI operation in flight and none answered in
	// between, so no ADD was holding an address on its way and no DEL was
	// releasing one. Whatever is held then was left by a finished, failed
	// sandbox. (The kubelet waits about 10 s between retries: quiet moments
	// come.)
	base := target.daemonCNIOps(t, "ADD").failed
	var held map[string]string
	quiet := 0
	err := wait.PollUntilContextTimeout(testContext(t, 100*time.Second), 200*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		before := target.daemonActivity(t)
		if before.failedADDs < base+1 || before.inFlight != 0 {
			return false, nil
		}
		held = map[string]string{}
		for _, tn := range []*testNet{a, b} {
			for ip, owner := range tn.allocations(t) {
				held[tn.Name+" "+ip] = owner
			}
		}
		if after := target.daemonActivity(t); after != before {
			return false, nil // an operation ran meanwhile: look again
		}
		quiet++
		return quiet == 3, nil // three quiet looks, after 1, 2, 3... failed ADDs
	})
	if err != nil {
		t.Fatalf("no quiet moment after a failed ADD of the victim within 90 s (failed ADDs %v, were %v): %v\n%s",
			target.daemonCNIOps(t, "ADD").failed, base, err, podEvents(ns, "victim"))
	}
	if len(held) != 0 {
		t.Errorf("with no CNI operation in flight after the victim's failed ADDs, ok-a and ok-b still hold %v: a failed ADD left them attached", held)
	}
	t.Logf("failed ADDs answered: %v (were %v); held at a quiet moment: %v", target.daemonCNIOps(t, "ADD").failed, base, held)
	deletePod(t, ns, "victim")
	assertReleased(t, a, b)
	deletePod(t, ns, "holder")
	assertReleased(t, full)
	assertNoRecords(t, ns)
}

// TestDelWithoutNAD: deleting the NAD after the pod started does not stop
// its DEL (records, not the API, drive DEL).
func TestDelWithoutNAD(t *testing.T) {
	ns := newNamespace(t)
	a := bridgeNet(t, ns, "gone", "1.0.0", nil)
	runPod(t, podSpec(ns, "p", "gone,gone"))
	if len(a.allocations(t)) != 2 {
		t.Fatalf("want 2 addresses held, got %v", a.allocations(t))
	}
	ctx := testContext(t, 30*time.Second)
	if err := testCluster.multi.K8sCniCncfIoV1().NetworkAttachmentDefinitions(ns).Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deletePod(t, ns, "p")
	assertReleased(t, a)
	assertNoRecords(t, ns)
}

// TestDefaultRouteMoved: default-route on a secondary attachment gives it
// the pod's default route and takes it from eth0 (§4.1.2.1.9), and
// network-status reports it on that attachment only (§5.3.7.4).
func TestDefaultRouteMoved(t *testing.T) {
	ns := newNamespace(t)
	a := bridgeNet(t, ns, "gw", "1.0.0", nil)
	gw := strings.TrimSuffix(a.Subnet, "0/24") + "1"
	p := runPod(t, podSpec(ns, "p", fmt.Sprintf(`[{"name":"gw","interface":"gw0","default-route":["%s"]}]`, gw)))
	routes := podRoutes(t, ns, "p")
	var defaults []string
	for _, l := range strings.Split(routes, "\n") {
		if strings.HasPrefix(l, "default ") {
			defaults = append(defaults, strings.TrimSpace(l))
		}
	}
	if len(defaults) != 1 || !strings.Contains(defaults[0], "via "+gw) || !strings.Contains(defaults[0], "dev gw0") {
		t.Errorf("default routes = %q, want exactly one via %s dev gw0\n%s", defaults, gw, routes)
	}
	list := networkStatus(t, p)
	if len(list[0].DefaultRoute) != 0 {
		t.Errorf("eth0 entry still reports default-route %v", list[0].DefaultRoute)
	}
	if strings.Join(list[1].DefaultRoute, ",") != gw {
		t.Errorf("gw0 entry default-route = %v, want [%s]", list[1].DefaultRoute, gw)
	}
	deletePod(t, ns, "p")
	assertReleased(t, a)
}

// TestDelegateCNIVersions: delegate configs in cniVersion 0.3.1, 0.4.0,
// 1.0.0 and 1.1.0 all attach, report network-status and release on DEL.
func TestDelegateCNIVersions(t *testing.T) {
	ns := newNamespace(t)
	var nets []*testNet
	var sel []string
	for _, v := range []string{"0.3.1", "0.4.0", "1.0.0", "1.1.0"} {
		name := "v" + strings.ReplaceAll(v, ".", "")
		nets = append(nets, bridgeNet(t, ns, name, v, nil))
		sel = append(sel, name)
	}
	p := runPod(t, podSpec(ns, "versions", strings.Join(sel, ",")))
	checkStatusMatchesPod(t, p, []string{"eth0", "net1", "net2", "net3", "net4"})
	deletePod(t, ns, "versions")
	assertReleased(t, nets...)
	assertNoRecords(t, ns)
}

// TestDaemonRestart: multinetd restarted while pods exist: new pods attach,
// and the pods from before the restart delete cleanly from their records.
func TestDaemonRestart(t *testing.T) {
	acrossDaemonChange(t, func() { restartDaemon(t) })
}

// acrossDaemonChange attaches a pod to a network twice, runs change (a
// restart, an upgrade of multinetd), then checks that a new pod attaches
// and that both pods delete cleanly: no address, bridge port or record
// left.
func acrossDaemonChange(t *testing.T, change func()) {
	t.Helper()
	ns := newNamespace(t)
	a := bridgeNet(t, ns, "r", "1.0.0", nil)
	runPod(t, podSpec(ns, "before", "r,r"))
	change()
	p := runPod(t, podSpec(ns, "after", "r"))
	checkStatusMatchesPod(t, p, []string{"eth0", "net1"})
	deletePod(t, ns, "before")
	deletePod(t, ns, "after")
	assertReleased(t, a)
	assertNoRecords(t, ns)
}

// TestConcurrentPods: a burst of pods with two extra networks each all come
// up at the first try (per-container serialization, §7.3, and the daemon's
// concurrency bound must not deadlock or fail them: not one failed ADD,
// neither in the pods' Events nor in multinetd's
// multinet_cni_operations_total) and all tear down.
func TestConcurrentPods(t *testing.T) {
	ns := newNamespace(t)
	a := bridgeNet(t, ns, "burst-a", "1.0.0", nil)
	b := bridgeNet(t, ns, "burst-b", "1.0.0", nil)
	const n = 8
	before := target.daemonCNIOps(t, "ADD")
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := testCluster.kube.CoreV1().Pods(ns).Create(ctx, podSpec(ns, fmt.Sprintf("burst-%d", i), "burst-a,burst-b"), metav1.CreateOptions{}); err != nil {
				t.Errorf("create pod %d: %v", i, err)
			}
		}(i)
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// Every pod runs, and attached at the first try (waitRunning checks the
	// pod's Events: no FailedCreatePodSandBox, NetworkAttachFailed or
	// SandboxChanged).
	for i := 0; i < n; i++ {
		waitRunning(t, ns, fmt.Sprintf("burst-%d", i), 140*time.Second)
	}
	after := target.daemonCNIOps(t, "ADD")
	t.Logf("multinetd's ADDs during the burst: %v answered with code 0, %v failed", after.ok-before.ok, after.failed-before.failed)
	if after.failed != before.failed {
		t.Errorf("multinet_cni_operations_total{command=ADD,code!=0} went from %v to %v: %v ADDs failed during the burst",
			before.failed, after.failed, after.failed-before.failed)
	}
	if after.ok < before.ok+n {
		t.Errorf("multinet_cni_operations_total{command=ADD,code=0} went from %v to %v, want at least %d more (one ADD per pod)", before.ok, after.ok, n)
	}
	if got := len(a.allocations(t)) + len(b.allocations(t)); got != 2*n {
		t.Errorf("addresses held = %d, want %d", got, 2*n)
	}
	for i := 0; i < n; i++ {
		deletePod(t, ns, fmt.Sprintf("burst-%d", i))
	}
	assertReleased(t, a, b)
	assertNoRecords(t, ns)
}

// TestDelWithAPIServerStopped: CNI DEL driven as the runtime drives it (the
// shim exec'd with the CNI environment) succeeds and releases every address
// while the API server does not answer (SIGSTOP): DEL needs only the
// attachment record.
func TestDelWithAPIServerStopped(t *testing.T) {
	ns := newNamespace(t)
	a := bridgeNet(t, ns, "noapi", "1.0.0", nil)
	runPod(t, podSpec(ns, "p", "noapi,noapi"))
	recs := podRecords(t, ns, "p")
	if len(recs) != 1 {
		t.Fatalf("want one record of the pod, got %v", recs)
	}
	rec := readRecord(t, recs[0])

	pid := componentPID(t, "kube-apiserver")
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatalf("SIGSTOP kube-apiserver: %v", err)
	}
	stopped := true
	resume := func() {
		if stopped {
			stopped = false
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				t.Errorf("SIGCONT kube-apiserver: %v", err)
			}
		}
	}
	t.Cleanup(resume)

	out, err := runShim(t, "DEL", rec.ContainerID, rec.Netns, rec.CNIArgs)
	resume()
	if err != nil {
		t.Fatalf("shim DEL with the API server stopped: %v\n%s", err, out)
	}
	if got := a.allocations(t); len(got) != 0 {
		t.Errorf("addresses still held after DEL: %v", got)
	}
	if r := podRecords(t, ns, "p"); len(r) != 0 {
		t.Errorf("record still there after DEL: %v", r)
	}
	// The runtime's own DEL later finds no record and must still succeed.
	deletePod(t, ns, "p")
	assertReleased(t, a)
}

// readRecord reads one of the target node's multinetd's attachment records
// by file name.
func readRecord(t *testing.T, file string) *state.Record {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(recordsDir(t), file))
	if err != nil {
		t.Fatal(err)
	}
	var r state.Record
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// runShim execs the target node's installed multinet-shim as its container
// runtime does (in the node's namespaces): CNI_* environment, and on stdin
// multinet's conflist turned into the single plugin config libcni gives
// each plugin (name and cniVersion injected).
func runShim(t *testing.T, command, containerID, netns, args string) (string, error) {
	t.Helper()
	binDir := testCluster.mustEnv(t, "CNI_BIN_DIR")
	raw, err := os.ReadFile(target.path(filepath.Join(testCluster.mustEnv(t, "CNI_CONF_DIR"), "00-multinet.conflist")))
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		CNIVersion string           `json:"cniVersion"`
		Name       string           `json:"name"`
		Plugins    []map[string]any `json:"plugins"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatal(err)
	}
	conf := list.Plugins[0]
	conf["cniVersion"], conf["name"] = list.CNIVersion, list.Name
	stdin, _ := json.Marshal(conf)
	ctx := testContext(t, 60*time.Second)
	cmd := target.command(ctx, filepath.Join(binDir, "multinet-shim"))
	cmd.Env = []string{"CNI_COMMAND=" + command, "CNI_CONTAINERID=" + containerID, "CNI_NETNS=" + netns,
		"CNI_IFNAME=eth0", "CNI_PATH=" + binDir, "CNI_ARGS=" + args, "PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.Stdin = bytes.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
