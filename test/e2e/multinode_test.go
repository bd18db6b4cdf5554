//go:build e2e

package e2e

// The multi-node tests: they need a cluster of several nodes
// (make test-multinode: NODES=3 make cluster-up; hack/lib/nodes.sh) and skip,
// saying so, on the single-node cluster of make test-e2e.

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	ipamclaimv1alpha1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1alpha1"
)

// TestMultiNodeCluster: every node is Ready and runs multinetd and the
// device plugin (the DaemonSets); a pod pinned to each node gets an address
// on the default network, reaches the API server through the kubernetes
// Service and reaches the pods of the other nodes.
func TestMultiNodeCluster(t *testing.T) {
	nodes := requireNodes(t, 2)
	ctx := testContext(t, 5*time.Minute)
	for _, label := range []string{"multinetd", "multinet-deviceplugin"} {
		pods, err := testCluster.kube.CoreV1().Pods("multinet-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + label})
		if err != nil {
			t.Fatal(err)
		}
		on := map[string]bool{}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && podCondition(&p, corev1.PodReady) {
				on[p.Spec.NodeName] = true
			}
		}
		for _, n := range nodes {
			if !on[n.Name] {
				t.Errorf("%s: no Ready pod on node %s", label, n.Name)
			}
		}
	}
	ns := newNamespace(t)
	ips := map[string]string{}
	for i, n := range nodes {
		p := runPod(t, onNode(podSpec(ns, "p"+strconv.Itoa(i), ""), n.Name))
		if p.Spec.NodeName != n.Name {
			t.Fatalf("pod %s runs on %s, want %s", p.Name, p.Spec.NodeName, n.Name)
		}
		if !netip.MustParsePrefix(n.PodCIDR).Contains(netip.MustParseAddr(p.Status.PodIP)) {
			t.Errorf("pod %s on %s has %s, outside the node's pod subnet %s", p.Name, n.Name, p.Status.PodIP, n.PodCIDR)
		}
		ips[p.Name] = p.Status.PodIP
	}
	for i := range nodes {
		name := "p" + strconv.Itoa(i)
		// A TLS server answers a plain HTTP request with 400: the API
		// server, reached through the kubernetes Service.
		out, err := kubectl(ctx, "-n", ns, "exec", name, "--", "sh", "-c",
			`printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 5 `+testCluster.env["FIRST_SERVICE_IP"]+` 443`)
		if err != nil || !strings.Contains(out, "Client sent an HTTP request to an HTTPS server") {
			t.Errorf("pod %s on %s: the API server through the kubernetes Service: %v: %q", name, nodes[i].Name, err, out)
		}
		for j := range nodes {
			if j != i {
				podPing(t, ns, name, ips["p"+strconv.Itoa(j)])
			}
		}
	}
}

// TestMultiNodeSpanningNetwork: pods on different nodes on the spanning
// network of examples/multinode (macvlan on every node's underlay link,
// multinet-ipam) get distinct addresses, one IPAllocation each naming the
// pod and its node, and ping each other over it; only the cluster-wide
// default network is default: true in their network-status.
func TestMultiNodeSpanningNetwork(t *testing.T) {
	nodes := requireNodes(t, 2)
	ns := newNamespace(t)
	pool := spanningNAD(t, ns)
	addrs := map[string]netip.Addr{}
	seen := map[netip.Addr]string{}
	for i, n := range nodes {
		name := "span-" + strconv.Itoa(i)
		p := runPod(t, onNode(podSpec(ns, name, `[{"name":"spanning","interface":"net1"}]`), n.Name))
		a := attachmentIP(t, p, "net1")
		if !netip.MustParsePrefix("10.250.64.0/22").Contains(a) {
			t.Errorf("pod %s: net1 %s is outside the network's range 10.250.64.0/22", name, a)
		}
		if other, dup := seen[a]; dup {
			t.Errorf("pods %s and %s (nodes %s) both have %s", other, name, n.Name, a)
		}
		seen[a] = name
		addrs[name] = a
		got := podInterfaces(t, ns, name)["net1"]
		if got == nil || len(got.IPs) != 1 || got.IPs[0] != a.String() {
			t.Errorf("pod %s: net1 inside the pod is %+v, network-status says %s", name, got, a)
		}
	}
	allocs := poolAllocations(t, pool)
	if len(allocs) != len(nodes) {
		t.Errorf("pool %s: %d IPAllocations, want %d (one per pod)", pool, len(allocs), len(nodes))
	}
	for _, al := range allocs {
		name := ""
		if al.Spec.Owner.Pod != nil {
			name = al.Spec.Owner.Pod.Name
		}
		i, _ := strconv.Atoi(strings.TrimPrefix(name, "span-"))
		if a, ok := addrs[name]; !ok || !strings.HasPrefix(al.Spec.Address, a.String()+"/") || al.Spec.Owner.Node != nodes[i].Name {
			t.Errorf("IPAllocation %s: %s for pod %q on %s; the pods have %v on nodes %v", al.Name, al.Spec.Address, name, al.Spec.Owner.Node, addrs, nodes)
		}
	}
	for from := range addrs {
		for to, a := range addrs {
			if from != to {
				podPing(t, ns, from, a.String())
			}
		}
	}
	for i, n := range nodes {
		deletePodOn(t, n, ns, "span-"+strconv.Itoa(i))
	}
	waitPoolAllocations(t, pool, 0, 30*time.Second)
}

// TestMultiNodeBurst: 150 pods created at once across the 3 nodes on one
// spanning network: every one runs, no two share an address, no CNI ADD
// failed because of an allocation conflict (FailedCreatePodSandBox events;
// other failures are logged), and their deletion releases every address.
func TestMultiNodeBurst(t *testing.T) {
	nodes := requireNodes(t, 3)
	const total = 150
	ns := newNamespace(t)
	pool := spanningNAD(t, ns)
	var pods []*corev1.Pod
	for i := 0; i < total; i++ {
		p := onNode(podSpec(ns, fmt.Sprintf("burst-%03d", i), `[{"name":"spanning","interface":"net1"}]`), nodes[i%len(nodes)].Name)
		p.Spec.Containers[0].Command = []string{"sleep", "infinity"}
		pods = append(pods, p)
	}
	createPods(t, pods)
	running := waitPodsRunning(t, ns, total, 10*time.Minute)
	seen := map[netip.Addr]string{}
	perNode := map[string]int{}
	for name, p := range running {
		a := attachmentIP(t, p, "net1")
		if other, dup := seen[a]; dup {
			t.Errorf("pods %s and %s both have %s", other, name, a)
		}
		seen[a] = name
		perNode[p.Spec.NodeName]++
	}
	t.Logf("%d pods running with %d distinct addresses; pods per node %v", len(running), len(seen), perNode)
	// A failed ADD because of allocation conflicts: internal/ipam's ErrConflicts,
	// ErrExhausted (the /22 has room for all), ErrTaken, or an attachment
	// holding another address.
	var conflicts, other []string
	for _, f := range sandboxFailures(t, ns) {
		switch {
		case strings.Contains(f, "too many allocation conflicts"), strings.Contains(f, "no free address"),
			strings.Contains(f, "is taken"), strings.Contains(f, "is held by"), strings.Contains(f, "already holds"):
			conflicts = append(conflicts, f)
		default:
			other = append(other, f)
		}
	}
	if len(conflicts) > 0 {
		t.Errorf("%d failed CNI ADDs because of allocation conflicts:\n%s", len(conflicts), strings.Join(conflicts, "\n"))
	}
	if len(other) > 0 {
		// Not what this test is about, but worth seeing: the kubelet retried
		// them (every pod runs, checked above).
		t.Logf("%d failed CNI ADDs for other reasons, retried by the kubelet:\n%s", len(other), strings.Join(other, "\n"))
	}
	if got := poolAllocations(t, pool); len(got) != total {
		t.Errorf("pool %s: %d IPAllocations for %d pods", pool, len(got), total)
	}
	deletePods(t, pods)
	waitPoolAllocations(t, pool, 0, 4*time.Minute)
}

// TestMultiNodeIPAMClaimFollowsPod: a pod with an IPAMClaim (§8) keeps its
// address when it is deleted and comes back on another node, the claim's
// status holds it, and deleting the claim releases it.
func TestMultiNodeIPAMClaimFollowsPod(t *testing.T) {
	nodes := requireNodes(t, 2)
	ns := newNamespace(t)
	pool := spanningNAD(t, ns)
	ctx := testContext(t, 5*time.Minute)
	claim := &ipamclaimv1alpha1.IPAMClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "db-0.spanning.net1", Namespace: ns},
		Spec:       ipamclaimv1alpha1.IPAMClaimSpec{Network: "spanning", Interface: "net1"},
	}
	if _, err := testCluster.multi.K8sCniCncfIoV1alpha1().IPAMClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create IPAMClaim: %v", err)
	}
	sel := `[{"name":"spanning","interface":"net1","ipam-claim-reference":"db-0.spanning.net1"}]`
	// A neighbour without a claim on the last node, so that the claimed
	// address is reached from another node each time.
	last := nodes[len(nodes)-1]
	peer := attachmentIP(t, runPod(t, onNode(podSpec(ns, "peer", `[{"name":"spanning","interface":"net1"}]`), last.Name)), "net1")
	var first netip.Addr
	for round, n := range nodes[:len(nodes)-1] {
		p := runPod(t, onNode(podSpec(ns, "db-0", sel), n.Name))
		a := attachmentIP(t, p, "net1")
		if round == 0 {
			first = a
		} else if a != first {
			t.Errorf("db-0 on %s has %s; on %s it had %s: the claim's address must follow the pod", n.Name, a, nodes[0].Name, first)
		}
		got, err := testCluster.multi.K8sCniCncfIoV1alpha1().IPAMClaims(ns).Get(ctx, claim.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Status.IPs) != 1 || !strings.HasPrefix(got.Status.IPs[0], first.String()+"/") && got.Status.IPs[0] != first.String() {
			t.Errorf("IPAMClaim status.ips %v, want [%s]", got.Status.IPs, first)
		}
		podPing(t, ns, "peer", a.String())
		podPing(t, ns, "db-0", peer.String())
		deletePodOn(t, n, ns, "db-0")
		// The pod is gone, its claimed address is not.
		if allocs := poolAllocations(t, pool); len(allocs) != 2 {
			t.Errorf("after deleting db-0 on %s: pool has %d allocations, want 2 (the claim's, the peer's)", n.Name, len(allocs))
		}
	}
	if len(nodes) < 3 {
		// With two nodes the second round above did not run: bring db-0
		// back on the peer's node.
		p := runPod(t, onNode(podSpec(ns, "db-0", sel), last.Name))
		if a := attachmentIP(t, p, "net1"); a != first {
			t.Errorf("db-0 on %s has %s; on %s it had %s", last.Name, a, nodes[0].Name, first)
		}
		deletePodOn(t, last, ns, "db-0")
	}
	if err := testCluster.multi.K8sCniCncfIoV1alpha1().IPAMClaims(ns).Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete IPAMClaim: %v", err)
	}
	// Only the peer's address is left once the claim is gone.
	waitPoolAllocations(t, pool, 1, 90*time.Second)
	if allocs := poolAllocations(t, pool); len(allocs) == 1 && strings.HasPrefix(allocs[0].Spec.Address, first.String()+"/") {
		t.Errorf("the claim's address %s is still allocated after the claim's deletion", first)
	}
	deletePodOn(t, last, ns, "peer")
	waitPoolAllocations(t, pool, 0, 30*time.Second)
}

// TestMultiNodeNodeKilled: a node dies (its kubelet, containerd and every
// container SIGKILLed) and its pods are force-deleted: multinet-ipam-cleanup
// (the one component that may release another node's allocations)
// releases their addresses, and none is leaked. The node is started again at the end.
func TestMultiNodeNodeKilled(t *testing.T) {
	nodes := requireNodes(t, 3)
	victim := nodes[len(nodes)-1]
	ns := newNamespace(t)
	pool := spanningNAD(t, ns)
	const n = 4
	var pods []*corev1.Pod
	for i := 0; i < n; i++ {
		pods = append(pods, onNode(podSpec(ns, "doomed-"+strconv.Itoa(i), `[{"name":"spanning","interface":"net1"}]`), victim.Name))
	}
	survivor := onNode(podSpec(ns, "survivor", `[{"name":"spanning","interface":"net1"}]`), nodes[0].Name)
	createPods(t, append(pods, survivor))
	waitPodsRunning(t, ns, n+1, 3*time.Minute)
	waitPoolAllocations(t, pool, n+1, 30*time.Second)

	runHack(t, time.Minute, "cluster-node.sh", "kill", victim.Name)
	restarted := false
	restart := func() {
		if !restarted {
			restarted = true
			runHack(t, 4*time.Minute, "cluster-node.sh", "start", victim.Name)
		}
	}
	t.Cleanup(restart)
	ctx := testContext(t, 6*time.Minute)
	zero := int64(0)
	for _, p := range pods {
		if err := testCluster.kube.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatalf("force-delete %s: %v", p.Name, err)
		}
	}
	// Nothing on the dead node can run a CNI DEL, and no other node's
	// multinetd may release its allocations: multinet-ipam-cleanup
	// (--interval=30s ±50% on the local cluster) releases the dead pods'
	// addresses; the survivor's stays.
	waitPoolAllocations(t, pool, 1, 3*time.Minute)
	if allocs := poolAllocations(t, pool); len(allocs) != 1 || allocs[0].Spec.Owner.Pod == nil || allocs[0].Spec.Owner.Pod.Name != "survivor" {
		t.Errorf("after the reconcile: %+v, want the survivor's allocation only", allocs)
	}
	restart()
	for _, ds := range []string{"multinetd", "multinet-deviceplugin"} {
		if out, err := kubectlTimeout(ctx, 4*time.Minute, "-n", "multinet-system", "rollout", "status", "daemonset/"+ds, "--timeout=180s"); err != nil {
			t.Fatalf("after the restart of %s: %s: %v: %s", victim.Name, ds, err, out)
		}
	}
	// The restarted node tears the dead pods' sandboxes down (CNI DEL of
	// addresses already released): still only the survivor's.
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, p := range pods {
			if len(victim.records(t, ns, p.Name)) > 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("node %s still has attachment records of the dead pods: %v", victim.Name, err)
	}
	if allocs := poolAllocations(t, pool); len(allocs) != 1 {
		t.Errorf("after the node's restart: pool has %d allocations, want 1", len(allocs))
	}
	deletePodOn(t, nodes[0], ns, "survivor")
	waitPoolAllocations(t, pool, 0, 30*time.Second)
}

// netdevIPAMNet creates NAD ns/name for the netdev pool (multinet-netdev,
// the deviceID capability) with multinet-ipam on pool "e2e-dev-<ns>", so
// that device pods on different nodes never share an address.
func netdevIPAMNet(t *testing.T, ns, name, resourceName string) {
	t.Helper()
	createNAD(t, ns, name, map[string]any{
		"cniVersion": "1.1.0", "name": name, "type": "multinet-netdev",
		"capabilities": map[string]bool{"deviceID": true, "CNIDeviceInfoFile": true},
		"ipam": map[string]any{
			"type": "multinet-ipam", "pool": "e2e-dev-" + ns,
			"ranges": [][]map[string]string{{{"subnet": "10.251.0.0/24"}}},
		},
	}, map[string]string{resourceNameAnnotation: resourceName})
}

// TestMultiNodeDevicePools: the netdev pool differs per node (4 devices on
// the host, fewer on the extra nodes); pods that select the device-backed
// network land only on nodes with a free device, one per device; with every
// pool full the next pod stays Pending (FailedScheduling), and it runs on
// the node where a device is freed.
func TestMultiNodeDevicePools(t *testing.T) {
	nodes := requireNodes(t, 2)
	resourceName, _ := netdevPool(t)
	ctx := testContext(t, 8*time.Minute)
	free := map[string]int64{}
	var total int64
	for _, n := range nodes {
		node, err := testCluster.kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		q := node.Status.Allocatable[corev1.ResourceName(resourceName)]
		free[n.Name] = q.Value()
		total += q.Value()
	}
	t.Logf("%s allocatable per node: %v", resourceName, free)
	if len(free) < 2 || total == 0 {
		t.Fatalf("%s allocatable per node %v: want devices on several nodes", resourceName, free)
	}
	ns := newNamespace(t)
	netdevIPAMNet(t, ns, "dev", resourceName)
	var pods []*corev1.Pod
	for i := int64(0); i < total; i++ {
		p := anyNode(podSpec(ns, fmt.Sprintf("dev-%d", i), "dev"))
		waitInjected(t, p, resourceName, 1)
		pods = append(pods, p)
	}
	createPods(t, pods)
	running := waitPodsRunning(t, ns, int(total), 4*time.Minute)
	placed := map[string]int64{}
	for _, p := range running {
		placed[p.Spec.NodeName]++
		if s := attachmentStatus(t, p, "net1"); len(s.IPs) != 1 {
			t.Errorf("pod %s on %s: net1 %+v, want one address", p.Name, p.Spec.NodeName, s)
		}
	}
	for name, n := range free {
		if placed[name] != n {
			t.Errorf("node %s: %d device pods, want %d (its free devices); placement %v", name, placed[name], n, placed)
		}
	}

	waiter := anyNode(podSpec(ns, "waiter", "dev"))
	if _, err := createPod(t, waiter); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	t.Logf("event: %s", waitEvent(t, ns, "waiter", "FailedScheduling", "Insufficient "+resourceName))
	w, err := testCluster.kube.CoreV1().Pods(ns).Get(ctx, "waiter", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if w.Status.Phase != corev1.PodPending || w.Spec.NodeName != "" {
		t.Fatalf("pod waiter: phase %s node %q, want Pending and unscheduled", w.Status.Phase, w.Spec.NodeName)
	}
	// Free a device on the last node: the waiter goes there.
	last := nodes[len(nodes)-1]
	var victim string
	for name, p := range running {
		if p.Spec.NodeName == last.Name {
			victim = name
			break
		}
	}
	if victim == "" {
		t.Fatalf("no device pod on %s", last.Name)
	}
	deletePodOn(t, last, ns, victim)
	w = waitRunning(t, ns, "waiter", 2*time.Minute)
	if w.Spec.NodeName != last.Name {
		t.Errorf("pod waiter runs on %s, want %s (the only node with a free device)", w.Spec.NodeName, last.Name)
	}
	byNode := map[string]clusterNode{}
	for _, n := range nodes {
		byNode[n.Name] = n
	}
	running["waiter"] = w
	delete(running, victim)
	for name, p := range running {
		deletePodOn(t, byNode[p.Spec.NodeName], ns, name)
	}
	waitPoolAllocations(t, ns+"/e2e-dev-"+ns, 0, 30*time.Second) // the namespace's pool
}

// TestMultiNodeRollingUpgrade: the multinetd and device plugin DaemonSets
// are rolled (kubectl rollout restart: every pod replaced, node by node, as
// an upgrade does) while pods on the spanning network are created and
// deleted on every node: no CNI ADD or DEL fails (no FailedCreatePodSandBox
// or FailedKillPodSandbox event) and no address is left allocated.
func TestMultiNodeRollingUpgrade(t *testing.T) {
	nodes := requireNodes(t, 2)
	ns := newNamespace(t)
	pool := spanningNAD(t, ns)
	ctx := testContext(t, 12*time.Minute)
	for _, ds := range []string{"multinetd", "multinet-deviceplugin"} {
		if out, err := kubectl(ctx, "-n", "multinet-system", "rollout", "restart", "daemonset/"+ds); err != nil {
			t.Fatalf("rollout restart %s: %v: %s", ds, err, out)
		}
	}
	rolled := make(chan error, 1)
	go func() {
		for _, ds := range []string{"multinetd", "multinet-deviceplugin"} {
			if out, err := kubectlTimeout(ctx, 8*time.Minute, "-n", "multinet-system", "rollout", "status", "daemonset/"+ds, "--timeout=7m"); err != nil {
				rolled <- fmt.Errorf("rollout status %s: %v: %s", ds, err, out)
				return
			}
		}
		rolled <- nil
	}()
	// One worker per node: create a pod, wait until it runs, delete it,
	// until the rollout is over (and at least 3 rounds each).
	type result struct {
		node   string
		rounds int
		err    error
	}
	done := make(chan struct{})
	results := make(chan result, len(nodes))
	for i, n := range nodes {
		go func() {
			r := result{node: n.Name}
			defer func() { results <- r }()
			for round := 0; ; round++ {
				select {
				case <-done:
					if round >= 3 {
						return
					}
				default:
				}
				name := fmt.Sprintf("roll-%d-%d", i, round)
				p := onNode(podSpec(ns, name, `[{"name":"spanning","interface":"net1"}]`), n.Name)
				if _, err := testCluster.kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					r.err = fmt.Errorf("create %s: %w", name, err)
					return
				}
				if err := waitPodPhase(ctx, ns, name, 3*time.Minute); err != nil {
					r.err = err
					return
				}
				if err := testCluster.kube.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
					r.err = fmt.Errorf("delete %s: %w", name, err)
					return
				}
				r.rounds++
			}
		}()
	}
	if err := <-rolled; err != nil {
		close(done)
		t.Fatal(err)
	}
	close(done)
	for range nodes {
		r := <-results
		if r.err != nil {
			t.Errorf("node %s: %v", r.node, r.err)
		}
		t.Logf("node %s: %d pods created and deleted during the rollout", r.node, r.rounds)
	}
	// Every pod gone and torn down, then: no failed ADD or DEL, nothing left.
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := testCluster.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) > 0 {
			return false, nil
		}
		for _, n := range nodes {
			if len(n.records(t, ns, "")) > 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Errorf("pods or attachment records of %s left 3 min after the last deletion: %v", ns, err)
	}
	if f := sandboxFailures(t, ns); len(f) > 0 {
		t.Errorf("%d failed CNI ADDs during the rollout:\n%s", len(f), strings.Join(f, "\n"))
	}
	if f := killFailures(t, ns); len(f) > 0 {
		t.Errorf("%d failed CNI DELs during the rollout:\n%s", len(f), strings.Join(f, "\n"))
	}
	waitPoolAllocations(t, pool, 0, 60*time.Second)
}
