//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/pkg/spec/selection"
	"github.com/multinet/multinet/pkg/spec/status"
)

// Hot-plug. Changing the k8s.v1.cni.cncf.io/networks annotation
// of a running pod makes multinetd attach exactly the added network
// selection elements and detach exactly the removed ones, in the running
// pod (docs/hotplug.md).

// setNetworks merge-patches pod ns/name's networks annotation ("": removes
// it) and returns the API server's answer (an admission denial, say).
func setNetworks(ctx context.Context, ns, name, networks string) error {
	var v any = networks
	if networks == "" {
		v = nil
	}
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{selection.NetworksAnnotation: v}}})
	if err != nil {
		return err
	}
	_, err = testCluster.kube.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
	return err
}

// hotPlug sets the pod's networks annotation and waits until its
// network-status lists exactly the interfaces want, in order, and the pod
// has exactly those interfaces; it checks that network-status matches them
// (IPs, MACs) and returns the pod and how long the change took to show in
// network-status.
func hotPlug(t *testing.T, ns, name, networks string, want ...string) (*corev1.Pod, time.Duration) {
	t.Helper()
	ctx := testContext(t, 90*time.Second)
	start := time.Now()
	if err := setNetworks(ctx, ns, name, networks); err != nil {
		t.Fatalf("set networks of %s/%s to %q: %v", ns, name, networks, err)
	}
	var p *corev1.Pod
	var took time.Duration
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		if p, err = testCluster.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, nil
		}
		list, err := status.Decode(p.Annotations[status.Annotation])
		if err != nil {
			return false, nil
		}
		var got []string
		for _, s := range list {
			got = append(got, s.Interface)
		}
		if !slices.Equal(got, want) {
			return false, nil
		}
		took = time.Since(start)
		return true, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s: network-status does not list %q after setting networks to %q: %v\n%s\nevents:\n%s",
			ns, name, want, networks, err, p.Annotations[status.Annotation], podEvents(ns, name))
	}
	checkStatusMatchesPod(t, p, want)
	t.Logf("networks %q: network-status lists %q %v after the PATCH", networks, want, took.Round(time.Millisecond))
	return p, took
}

// sameIface fails unless interface ifName has the same MAC and IPs in
// before and now.
func sameIface(t *testing.T, before, now map[string]*podIface, ifName string) {
	t.Helper()
	b, n := before[ifName], now[ifName]
	if b == nil || n == nil {
		t.Errorf("interface %s: before %v, now %v", ifName, b, n)
		return
	}
	if b.MAC != n.MAC || !slices.Equal(b.IPs, n.IPs) {
		t.Errorf("interface %s changed: %s %v, was %s %v", ifName, n.MAC, n.IPs, b.MAC, b.IPs)
	}
}

// hotPlugMetric returns the target node's multinetd's
// multinet_hotplug_operations_total for result: 0 while no hot-plug of that
// result happened (the counter has no sample yet). It fails the test when
// the metrics cannot be read or the sample cannot be parsed.
func hotPlugMetric(t *testing.T, result string) float64 {
	t.Helper()
	m := target.daemonMetrics(t)
	prefix := `multinet_hotplug_operations_total{result="` + result + `"} `
	for _, l := range strings.Split(m, "\n") {
		if v, ok := strings.CutPrefix(l, prefix); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("multinetd's metric %q: %v", l, err)
			}
			return f
		}
	}
	return 0
}

// TestHotPlugAddRemove: add one and then two networks to a running pod
// (the interfaces appear with the requested names, IPs and MAC; network-
// status matches; the interfaces it had keep their names and addresses),
// then remove one without and one with an explicit interface (the
// interface goes, its address is released, network-status matches, the
// generated names of the others stay), then delete the pod: nothing is
// left (no address, no bridge port, no record).
func TestHotPlugAddRemove(t *testing.T) {
	ns := newNamespace(t)
	a := bridgeNet(t, ns, "net-a", "1.0.0", nil)
	b := bridgeNet(t, ns, "net-b", "0.4.0", nil)
	c := bridgeNet(t, ns, "net-c", "1.0.0", nil)
	s := bridgeNetStatic(t, ns, "net-s")
	okBefore := hotPlugMetric(t, "succeeded")
	p := runPod(t, podSpec(ns, "vm", "net-a"))
	before := podInterfaces(t, ns, p.Name)
	var took []time.Duration

	// One network.
	_, d := hotPlug(t, ns, p.Name, "net-a,net-b", "eth0", "net1", "net2")
	took = append(took, d)
	now := podInterfaces(t, ns, p.Name)
	sameIface(t, before, now, "eth0")
	sameIface(t, before, now, "net1")
	waitEvent(t, ns, p.Name, "AddedInterface", "net2", ns+"/net-b")

	// Two more: one with a requested interface, IP and MAC.
	ip := fmt.Sprintf("10.211.%d.7", s.n)
	two := fmt.Sprintf(`[{"name":"net-a"},{"name":"net-b"},{"name":"net-s","ips":["%s/24"],"mac":"02:aa:bb:cc:dd:07","interface":"data0"},{"name":"net-c"}]`, ip)
	hp, d := hotPlug(t, ns, p.Name, two, "eth0", "net1", "net2", "data0", "net3")
	took = append(took, d)
	if e := attachmentStatus(t, hp, "data0"); e.Mac != "02:aa:bb:cc:dd:07" || !slices.Equal(e.IPs, []string{ip}) || e.Name != ns+"/net-s" {
		t.Errorf("data0: %s mac %s ips %v, want %s/net-s with the requested 02:aa:bb:cc:dd:07 and %s", e.Name, e.Mac, e.IPs, ns, ip)
	}
	if e := attachmentStatus(t, hp, "net3"); e.Name != ns+"/net-c" || len(c.allocations(t)) != 1 {
		t.Errorf("net3: %s, net-c holds %v; want one address of net-c", e.Name, c.allocations(t))
	}
	now2 := podInterfaces(t, ns, p.Name)
	for _, i := range []string{"eth0", "net1", "net2"} {
		sameIface(t, now, now2, i)
	}

	// Remove net-a (generated name net1): net2 and net3 keep their names.
	rest := fmt.Sprintf(`[{"name":"net-b"},{"name":"net-s","ips":["%s/24"],"mac":"02:aa:bb:cc:dd:07","interface":"data0"},{"name":"net-c"}]`, ip)
	_, d = hotPlug(t, ns, p.Name, rest, "eth0", "net2", "data0", "net3")
	took = append(took, d)
	assertReleased(t, a)
	waitEvent(t, ns, p.Name, "RemovedInterface", "net1", ns+"/net-a")

	// Remove net-s (requested name data0).
	_, d = hotPlug(t, ns, p.Name, "net-b,net-c", "eth0", "net2", "net3")
	took = append(took, d)
	if ports := s.ports(t); len(ports) != 0 {
		t.Errorf("bridge of net-s still has ports %v", ports)
	}
	now3 := podInterfaces(t, ns, p.Name)
	for _, i := range []string{"eth0", "net2", "net3"} {
		sameIface(t, now2, now3, i)
	}
	if got := hotPlugMetric(t, "succeeded"); got < okBefore+4 {
		t.Errorf("multinet_hotplug_operations_total{result=succeeded} = %v, want at least %v", got, okBefore+4)
	}
	t.Logf("hot-plug latencies (PATCH → network-status): %v", took)

	deletePod(t, ns, p.Name)
	assertReleased(t, a, b, c)
	if ports := s.ports(t); len(ports) != 0 {
		t.Errorf("bridge of net-s still has ports %v", ports)
	}
	assertNoRecords(t, ns)
}

// killDaemon SIGKILLs the deployed multinetd's running container, one
// other than the container last, and returns the killed container's ID.
func killDaemon(t *testing.T, last string) string {
	t.Helper()
	id, pid := runningDaemon(t, last)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill multinetd pid %d: %v", pid, err)
	}
	return id
}

// runningDaemon waits (up to 2 min) for a running multinetd container on the
// target node other than container last and returns its ID and the host PID
// of its process.
// The local cluster's kubelet restarts a killed container within 10 s
// (crashLoopBackOff.maxContainerRestartPeriod in hack/cluster-up.sh).
func runningDaemon(t *testing.T, last string) (id string, pid int) {
	t.Helper()
	if !testCluster.deployed {
		t.Fatal("killing multinetd needs the deployed DaemonSet (cluster-up's default)")
	}
	ctx := testContext(t, 120*time.Second)
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := targetPods(ctx, systemNamespace, "app.kubernetes.io/name=multinetd")
		if err != nil {
			return false, nil
		}
		for _, p := range list.Items {
			for _, cs := range p.Status.ContainerStatuses {
				_, cid, _ := strings.Cut(cs.ContainerID, "://")
				if cs.Name != "multinetd" || cs.State.Running == nil || cid == "" || cid == last {
					continue
				}
				b, err := os.ReadFile(taskPIDFile(t, target, cid))
				if err != nil {
					continue
				}
				if pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err == nil && syscall.Kill(pid, 0) == nil {
					id = cid
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no running multinetd container other than %s: %v", last, err)
	}
	return id, pid
}

// TestHotPlugSurvivesDaemonKills: 50 random changes of a running pod's
// networks (networks added and removed, with and without explicit
// interfaces, the same network twice, changes faster than they are
// applied), with multinetd SIGKILLed right after 3 of them (in the middle
// of a hot-plug, or while changes pile up before it is back): the pod
// converges to the last annotation (its interfaces, network-status and
// record list exactly its elements), each network holds exactly as many
// addresses and bridge ports as the annotation selects it, and deleting
// the pod leaves nothing.
//
// The changes, their order and the delays between them come from a random
// generator whose seed the test logs ("seed N"); MULTINET_E2E_SEED=N runs
// the same sequence again (the kills' timing within multinetd still
// varies).
func TestHotPlugSurvivesDaemonKills(t *testing.T) {
	ns := newNamespace(t)
	var nets []*testNet
	for i := range 4 {
		nets = append(nets, bridgeNet(t, ns, fmt.Sprintf("n%d", i), "1.0.0", nil))
	}
	pool := []string{"n0", "n1", "n2", "n3", "n0@x0", "n1@x1", "n2"}
	p := runPod(t, podSpec(ns, "vm", "n0"))
	seed := e2eSeed(t)
	rng := rand.New(rand.NewPCG(seed, 12))
	ctx := testContext(t, 10*time.Minute)
	var networks, lastKilled string
	kills := map[int]bool{12: true, 25: true, 38: true}
	for op := range 50 {
		var sel []string
		for _, e := range pool {
			if rng.IntN(2) == 0 { // n2 twice: the same network twice
				sel = append(sel, e)
			}
		}
		if op == 49 && len(sel) == 0 {
			sel = []string{"n2", "n0@x0", "n2"} // converge to something
		}
		networks = strings.Join(sel, ",")
		if err := setNetworks(ctx, ns, p.Name, networks); err != nil {
			t.Fatalf("op %d: set networks %q: %v", op, networks, err)
		}
		if kills[op] {
			time.Sleep(time.Duration(rng.IntN(60)) * time.Millisecond)
			lastKilled = killDaemon(t, lastKilled)
			rec := hotPlugRecordPending(t, ns, p.Name)
			t.Logf("op %d %q: multinetd container %s killed (the record had a hot-plug in progress: %v)", op, networks, lastKilled[:12], rec)
			continue
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
	}

	// Converged once multinetd is back: network-status lists exactly the
	// final elements and agrees with the pod's interfaces. Names alone do
	// not tell: the network-status of a state before a kill can name the
	// same networks (seed 1795957100643656699: the one written at op 24,
	// "n2,n0@x0,n1@x1", and the last value "n1,n2,n0@x0"), and it stays
	// until the restarted multinetd has converged the pod and written its
	// own, which may be after runningDaemon returns.
	runningDaemon(t, lastKilled)
	want := map[string]int{}
	explicit := map[string]string{}
	for _, e := range strings.Split(networks, ",") {
		if e == "" {
			continue
		}
		n, ifName, _ := strings.Cut(e, "@")
		want[ns+"/"+n]++
		if ifName != "" {
			explicit[ifName] = ns + "/" + n
		}
	}
	var list []status.NetworkStatus
	var now *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		if now, err = testCluster.kube.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{}); err != nil {
			return false, nil
		}
		if list, err = status.Decode(now.Annotations[status.Annotation]); err != nil {
			return false, nil
		}
		got := map[string]int{}
		for _, s := range list[1:] {
			got[s.Name]++
		}
		if !maps.Equal(got, want) {
			return false, nil
		}
		ifaces, err := readPodInterfaces(ctx, ns, p.Name)
		if err != nil {
			return false, nil
		}
		return statusAgreesWithPod(list, ifaces), nil
	})
	if err != nil {
		t.Fatalf("network-status does not list the final selection %q or does not agree with the pod's interfaces: %s\nevents:\n%s\nrecords:\n%s\nmultinetd's lines about the pod:\n%s",
			networks, now.Annotations[status.Annotation], podEvents(ns, p.Name), recordsText(t, ns, p.Name), daemonLogLines(t, ns+"/"+p.Name))
	}
	var ifNames []string
	for _, s := range list {
		ifNames = append(ifNames, s.Interface)
		if n, ok := explicit[s.Interface]; ok && n != s.Name {
			t.Errorf("interface %s is %s, want %s", s.Interface, s.Name, n)
		}
	}
	checkStatusMatchesPod(t, now, ifNames)
	for _, n := range nets {
		if a, ports := n.allocations(t), n.ports(t); len(a) != want[ns+"/"+n.Name] || len(ports) != want[ns+"/"+n.Name] {
			t.Errorf("network %s: %d addresses %v and %d bridge ports, want %d of each", n.Name, len(a), a, len(ports), want[ns+"/"+n.Name])
		}
	}
	if r := podRecords(t, ns, p.Name); len(r) != 1 {
		t.Errorf("records of the pod: %v, want 1", r)
	}
	t.Logf("converged to %q: %v", networks, ifNames)
	deletePod(t, ns, p.Name)
	assertReleased(t, nets...)
	assertNoRecords(t, ns)
}

// statusAgreesWithPod reports whether network-status list names exactly
// the interfaces ifaces, with their MACs and IPs, the default network's
// first: what checkStatusMatchesPod asserts.
func statusAgreesWithPod(list []status.NetworkStatus, ifaces map[string]*podIface) bool {
	seen := map[string]bool{}
	for i, s := range list {
		got, ok := ifaces[s.Interface]
		if !ok || seen[s.Interface] || s.Default != (i == 0) || s.Mac != got.MAC || strings.Join(s.IPs, ",") != strings.Join(got.IPs, ",") {
			return false
		}
		seen[s.Interface] = true
	}
	return len(seen) == len(ifaces)
}

// seedEnv names the variable that replays a random e2e test with the seed
// it logged.
const seedEnv = "MULTINET_E2E_SEED"

// e2eSeed returns the seed of a random test: $MULTINET_E2E_SEED when set
// (it fails the test when that is no unsigned integer), else one from the
// clock. It logs the seed and how to run the test with it again.
func e2eSeed(t *testing.T) uint64 {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(seedEnv); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", seedEnv, v, err)
		}
		seed = s
	}
	t.Logf("seed %d (run again with %s=%d E2E_FLAGS='-run ^%s$' hack/e2e.sh)", seed, seedEnv, seed, t.Name())
	return seed
}

// recordsText returns the attachment records of pod ns/name, for a
// failure's message.
func recordsText(t *testing.T, ns, name string) string {
	t.Helper()
	dir := recordsDir(t)
	var b strings.Builder
	for _, f := range podRecords(t, ns, name) {
		data, err := os.ReadFile(filepath.Join(dir, f))
		fmt.Fprintf(&b, "%s: %s %v\n", f, data, err)
	}
	return b.String()
}

// daemonLogLines returns the lines of every multinetd container's log that
// the target node's kubelet still has (the killed ones included) that
// contain substr, for a failure's message.
func daemonLogLines(t *testing.T, substr string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(target.podLogsDir(t), systemNamespace+"_multinetd-*", "multinetd", "*.log"))
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", f, err)
			continue
		}
		fmt.Fprintf(&b, "== %s\n", f)
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, substr) {
				b.WriteString(line + "\n")
			}
		}
	}
	return b.String()
}

// hotPlugRecordPending reports whether the record of pod ns/name has a
// hot-plug in progress.
func hotPlugRecordPending(t *testing.T, ns, name string) bool {
	t.Helper()
	dir := recordsDir(t)
	for _, f := range podRecords(t, ns, name) {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			continue
		}
		var r state.Record
		if json.Unmarshal(b, &r) == nil && r.HotPlug != nil {
			return true
		}
	}
	return false
}

// TestHotPlugRefusedByWebhook: a change of a running pod's networks that
// names a missing NAD, asks for a key no plugin of the network is capable
// of, breaks namespace isolation, adds a device network (resourceName) or
// adds or removes the element carrying the default route is denied at
// admission with a message saying why; the pod keeps its annotation and
// its interfaces.
func TestHotPlugRefusedByWebhook(t *testing.T) {
	ns, other := newNamespace(t), newNamespace(t)
	a := bridgeNet(t, ns, "net-a", "1.0.0", nil)
	bridgeNet(t, ns, "plain", "1.0.0", nil)
	createNAD(t, other, "net", nocapConfig, nil)
	createNAD(t, ns, "dev", nocapConfig, map[string]string{nadv1.ResourceNameAnnotation: "example.com/mne-nic"})
	p := runPod(t, podSpec(ns, "vm", "net-a"))
	before := podInterfaces(t, ns, p.Name)
	gw := runPod(t, podSpec(ns, "gw", `[{"name":"net-a","default-route":[]}]`))

	cases := []struct {
		name, pod, networks string
		parts               []string
	}{
		{"missing NAD", p.Name, "net-a,gone", []string{"NetworkAttachmentDefinition " + ns + "/gone not found"}},
		{"missing capability", p.Name, `[{"name":"net-a"},{"name":"plain","mac":"02:00:00:00:00:01"}]`, []string{`field "mac": needs runtimeConfig "mac"`}},
		{"isolation", p.Name, "net-a," + other + "/net", []string{`is in namespace "` + other + `"`}},
		{"device network", p.Name, "net-a,dev", []string{`networks[1] "dev": cannot be hot-plugged into a pod that exists`, `resource "example.com/mne-nic"`}},
		{"default-route added", p.Name, `[{"name":"net-a"},{"name":"plain","default-route":[]}]`, []string{`field "default-route": cannot be hot-plugged`}},
		{"default-route removed", gw.Name, "plain", []string{`with "default-route" cannot be removed from a pod that exists`}},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			ctx := testContext(t, 30*time.Second)
			old, err := testCluster.kube.CoreV1().Pods(ns).Get(ctx, c.pod, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			assertDenied(t, setNetworks(ctx, ns, c.pod, c.networks), c.parts...)
			now, err := testCluster.kube.CoreV1().Pods(ns).Get(ctx, c.pod, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := now.Annotations[selection.NetworksAnnotation], old.Annotations[selection.NetworksAnnotation]; got != want {
				t.Errorf("networks %q after the denial, want %q", got, want)
			}
		})
	}
	now := podInterfaces(t, ns, p.Name)
	if len(now) != 2 {
		t.Errorf("pod interfaces %v, want eth0 and net1", now)
	}
	sameIface(t, before, now, "net1")
	deletePod(t, ns, p.Name)
	deletePod(t, ns, gw.Name)
	assertReleased(t, a)
	assertNoRecords(t, ns)
}

// TestHotPlugDelegateFailureRolledBack: a change admission lets through
// whose delegate fails (the bridge attaches, then tuning cannot write its
// sysctl) is rolled back: a NetworkHotPlugFailed Warning names the network
// and says so, the pod keeps running with its interfaces and its
// network-status as they were; once the element is removed from the
// annotation nothing of it is left (no address, no bridge port); a valid
// change then works.
func TestHotPlugDelegateFailureRolledBack(t *testing.T) {
	ns := newNamespace(t)
	a := bridgeNet(t, ns, "net-a", "1.0.0", nil)
	bad := bridgeNet(t, ns, "bad", "1.0.0", nil, map[string]any{"type": "tuning", "sysctl": map[string]string{"net.core.mne_no_such_sysctl": "1"}})
	good := bridgeNet(t, ns, "good", "1.0.0", nil)
	failedBefore := hotPlugMetric(t, "failed")
	p := runPod(t, podSpec(ns, "vm", "net-a"))
	statusBefore := p.Annotations[status.Annotation]
	before := podInterfaces(t, ns, p.Name)

	ctx := testContext(t, 120*time.Second)
	if err := setNetworks(ctx, ns, p.Name, "net-a,bad"); err != nil {
		t.Fatalf("set networks: %v", err)
	}
	msg := waitEvent(t, ns, p.Name, "NetworkHotPlugFailed", ns+"/bad", "rolled back")
	t.Logf("Warning: %s", msg)
	if got := hotPlugMetric(t, "failed"); got < failedBefore+1 {
		t.Errorf("multinet_hotplug_operations_total{result=failed} = %v, want at least %v", got, failedBefore+1)
	}

	// Back to what the pod has: no attempt runs any more, nothing of bad is left.
	if err := setNetworks(ctx, ns, p.Name, "net-a"); err != nil {
		t.Fatalf("set networks: %v", err)
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return len(bad.allocations(t)) == 0 && len(bad.ports(t)) == 0, nil
	})
	if err != nil {
		t.Errorf("network bad: host-local holds %v, bridge ports %v, after the failed hot-plug", bad.allocations(t), bad.ports(t))
	}
	now, err := testCluster.kube.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if now.Status.Phase != corev1.PodRunning || now.Annotations[status.Annotation] != statusBefore {
		t.Errorf("pod after the failed hot-plug: phase %s, network-status %s; want Running and %s", now.Status.Phase, now.Annotations[status.Annotation], statusBefore)
	}
	ifaces := podInterfaces(t, ns, p.Name)
	if len(ifaces) != 2 {
		t.Errorf("pod interfaces %v, want eth0 and net1", ifaces)
	}
	sameIface(t, before, ifaces, "eth0")
	sameIface(t, before, ifaces, "net1")

	hotPlug(t, ns, p.Name, "net-a,good", "eth0", "net1", "net2")
	deletePod(t, ns, p.Name)
	assertReleased(t, a, bad, good)
	assertNoRecords(t, ns)
}
