//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	ipamv1alpha1 "github.com/multinet/multinet/api/ipam.multinet.io/v1alpha1"
	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/internal/testing/testskip"
	"github.com/multinet/multinet/pkg/spec/status"
)

// clusterNode is one node of the local cluster, as hack/lib/nodes.sh lists
// it in NODES_FILE: the host (Holder 0) or an extra node whose network,
// mount and UTS namespaces are those of the holder process.
type clusterNode struct {
	Name, IP, PodCIDR string
	Holder            int
}

// clusterNodes returns the cluster's nodes, the host first. A cluster of
// one node (NODES=1) has no NODES_FILE.
func clusterNodes(t *testing.T) []clusterNode {
	t.Helper()
	nodes, err := readNodes(testCluster.env)
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

// readNodes reads the cluster's nodes from the env file's NODES_FILE.
func readNodes(env map[string]string) ([]clusterNode, error) {
	one := []clusterNode{{Name: env["NODE_NAME"], IP: env["NODE_IP"], PodCIDR: env["POD_CIDR"]}}
	file := env["NODES_FILE"]
	if file == "" {
		return one, nil
	}
	data, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return one, nil
	}
	if err != nil {
		return nil, fmt.Errorf("nodes file: %w", err)
	}
	var nodes []clusterNode
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.Fields(l)
		if len(f) != 5 {
			return nil, fmt.Errorf("nodes file %s: line %q: want name ip pod-cidr holder-pid netns-inode", file, l)
		}
		n := clusterNode{Name: f[0], IP: f[1], PodCIDR: f[2]}
		if f[3] != "-" {
			if n.Holder, err = strconv.Atoi(f[3]); err != nil {
				return nil, fmt.Errorf("nodes file %s: line %q: %w", file, l, err)
			}
		}
		nodes = append(nodes, n)
	}
	return nodes, nil
}

// requireNodes skips the test, saying why, on a cluster of fewer than n
// nodes, and fails it when a node is not Ready.
func requireNodes(t *testing.T, n int) []clusterNode {
	t.Helper()
	nodes := clusterNodes(t)
	if len(nodes) < n {
		testskip.Skip(t, "needs a cluster of at least %d nodes, this one has %d: run make test-multinode (NODES=3 make cluster-up, then go test -tags e2e -run TestMultiNode ./test/e2e/)", n, len(nodes))
	}
	ctx := testContext(t, 30*time.Second)
	for _, node := range nodes {
		got, err := testCluster.kube.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("node %s: %v", node.Name, err)
		}
		if !isNodeReady(got) {
			t.Fatalf("node %s is not Ready", node.Name)
		}
	}
	return nodes
}

func isNodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// command runs args on the node: on the host as they are, on an extra node
// in its holder's namespaces (nsenter).
func (n clusterNode) command(ctx context.Context, args ...string) *exec.Cmd {
	if n.Holder == 0 {
		return exec.CommandContext(ctx, args[0], args[1:]...)
	}
	return exec.CommandContext(ctx, "nsenter", append([]string{"-t", strconv.Itoa(n.Holder), "-n", "-m", "-u", "--"}, args...)...)
}

// clusterDir is where the host sees the node's copy of the cluster's
// per-node directories (multinet/, containerd/, ...).
func (n clusterNode) clusterDir(t *testing.T) string {
	dir := testCluster.mustEnv(t, "MULTINET_CLUSTER_DIR")
	if n.Holder == 0 {
		return dir
	}
	return filepath.Join(dir, "nodes", n.Name)
}

// records lists multinetd's attachment record files of pod ns/name
// ("" name: every pod of ns) on the node.
func (n clusterNode) records(t *testing.T, ns, name string) []string {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(n.clusterDir(t), "multinet", "state", "records", "*"))
	var out []string
	for _, m := range matches {
		data, err := os.ReadFile(m)
		if err != nil {
			continue
		}
		var r struct {
			PodNamespace string `json:"podNamespace"`
			PodName      string `json:"podName"`
		}
		if json.Unmarshal(data, &r) == nil && r.PodNamespace == ns && (name == "" || r.PodName == name) {
			out = append(out, m)
		}
	}
	return out
}

// onNode pins the pod to the node (the node's kubernetes.io/hostname label,
// so that the scheduler still checks its resources).
func onNode(p *corev1.Pod, node string) *corev1.Pod {
	p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
	return p
}

// spanningNAD creates, in ns, the NetworkAttachmentDefinition of
// examples/multinode/10-spanning-network.yaml (a macvlan on every node's
// underlay link, multinet-ipam) with multinet-ipam's pool named after ns,
// so that tests never share addresses, and this cluster's socket path. It
// returns the pool's key: a pool a NAD of a tenant namespace names is that
// namespace's, "<ns>/<pool>" (docs/multinet-ipam.md "Pools and
// namespaces").
func spanningNAD(t *testing.T, ns string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "multinode", "10-spanning-network.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var nad nadv1.NetworkAttachmentDefinition
	if err := yaml.Unmarshal(data, &nad); err != nil {
		t.Fatalf("examples/multinode/10-spanning-network.yaml: %v", err)
	}
	var conf map[string]any
	if err := json.Unmarshal([]byte(nad.Spec.Config), &conf); err != nil {
		t.Fatalf("examples/multinode/10-spanning-network.yaml: spec.config: %v", err)
	}
	ipam := conf["ipam"].(map[string]any)
	pool := "e2e-" + ns
	ipam["pool"] = pool
	if conf["master"] != testCluster.env["UNDERLAY_IF"] {
		t.Fatalf("the example's master %v is not the cluster's underlay link %s", conf["master"], testCluster.env["UNDERLAY_IF"])
	}
	createNAD(t, ns, nad.Name, conf, nil)
	return ns + "/" + pool
}

// poolAllocations lists multinet-ipam's IPAllocations of pool.
func poolAllocations(t *testing.T, pool string) []ipamv1alpha1.IPAllocation {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	list, err := testCluster.multi.IPAMV1alpha1().IPAllocations().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list IPAllocations: %v", err)
	}
	var out []ipamv1alpha1.IPAllocation
	for _, a := range list.Items {
		if a.Spec.Pool == pool {
			out = append(out, a)
		}
	}
	return out
}

// waitPoolAllocations waits until pool holds exactly want allocations.
func waitPoolAllocations(t *testing.T, pool string, want int, within time.Duration) {
	t.Helper()
	ctx := testContext(t, within+10*time.Second)
	var got []ipamv1alpha1.IPAllocation
	err := wait.PollUntilContextTimeout(ctx, time.Second, within, true, func(ctx context.Context) (bool, error) {
		got = poolAllocations(t, pool)
		return len(got) == want, nil
	})
	if err != nil {
		var b strings.Builder
		for _, a := range got {
			fmt.Fprintf(&b, "\n  %s %s owner %+v", a.Name, a.Spec.Address, a.Spec.Owner)
		}
		t.Fatalf("pool %s: %d allocations after %s, want %d:%s", pool, len(got), within, want, b.String())
	}
}

// attachmentIP returns the single address of the pod's attachment on
// interface ifname (network-status), checking that only the cluster-wide
// default network is default: true (§5.3.6).
func attachmentIP(t *testing.T, p *corev1.Pod, ifname string) netip.Addr {
	t.Helper()
	var found *status.NetworkStatus
	defaults := 0
	list := networkStatus(t, p)
	for i, s := range list {
		if s.Default {
			defaults++
			if s.Name != testCluster.env["DEFAULT_NETWORK_NAME"] {
				t.Errorf("pod %s/%s: network-status entry %s is default: true; only the cluster-wide default network %s may be", p.Namespace, p.Name, s.Name, testCluster.env["DEFAULT_NETWORK_NAME"])
			}
		}
		if s.Interface == ifname {
			found = &list[i]
		}
	}
	if defaults != 1 {
		t.Errorf("pod %s/%s: %d network-status entries with default: true, want 1", p.Namespace, p.Name, defaults)
	}
	if found == nil || len(found.IPs) != 1 {
		t.Fatalf("pod %s/%s: network-status has no single-address entry for %s: %+v", p.Namespace, p.Name, ifname, list)
	}
	if found.Default {
		t.Errorf("pod %s/%s: the secondary attachment %s is default: true", p.Namespace, p.Name, ifname)
	}
	a, err := netip.ParseAddr(strings.SplitN(found.IPs[0], "/", 2)[0])
	if err != nil {
		t.Fatalf("pod %s/%s: %s: %v", p.Namespace, p.Name, ifname, err)
	}
	return a
}

// podPing pings addr from the pod (busybox ping) until a reply comes back,
// for at most 30 s; it fails the test with ping's output otherwise.
func podPing(t *testing.T, ns, pod, addr string) {
	t.Helper()
	ctx := testContext(t, 60*time.Second)
	var out string
	var err error
	poll := wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		out, err = kubectl(ctx, "-n", ns, "exec", pod, "--", "ping", "-c", "1", "-W", "2", addr)
		return err == nil, nil
	})
	if poll != nil {
		t.Errorf("pod %s/%s cannot ping %s: %v: %s", ns, pod, addr, err, out)
	}
}

// createPods creates the pods at once (a goroutine each) and fails the test
// on any error.
func createPods(t *testing.T, pods []*corev1.Pod) {
	t.Helper()
	eachPodAtOnce(t, "create", pods, func(ctx context.Context, p *corev1.Pod) error {
		_, err := testCluster.kube.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		return err
	})
}

// deletePods deletes the pods at once (a goroutine each; one DeleteCollection
// of 150 pods outlasts the client's timeout) and fails the test on any error.
func deletePods(t *testing.T, pods []*corev1.Pod) {
	t.Helper()
	eachPodAtOnce(t, "delete", pods, func(ctx context.Context, p *corev1.Pod) error {
		err := testCluster.kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	})
}

// eachPodAtOnce runs op on every pod, a goroutine each, within 2 min, and
// fails the test with every error (verb names the operation).
func eachPodAtOnce(t *testing.T, verb string, pods []*corev1.Pod, op func(context.Context, *corev1.Pod) error) {
	t.Helper()
	ctx := testContext(t, 2*time.Minute)
	var mu sync.Mutex
	var errs []string
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Go(func() {
			if err := op(ctx, p); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("%s: %v", p.Name, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%s %d pods: %d failed: %s", verb, len(pods), len(errs), strings.Join(errs, "; "))
	}
}

// waitPodsRunning waits until every pod of ns is Running with its
// network-status, checks that each attached at the first try
// (firstAttachProblems) and returns them by name.
func waitPodsRunning(t *testing.T, ns string, want int, within time.Duration) map[string]*corev1.Pod {
	t.Helper()
	ctx := testContext(t, within+10*time.Second)
	var running map[string]*corev1.Pod
	var last string
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, within, true, func(ctx context.Context) (bool, error) {
		list, err := testCluster.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		running = map[string]*corev1.Pod{}
		phases := map[corev1.PodPhase]int{}
		for i := range list.Items {
			p := &list.Items[i]
			phases[p.Status.Phase]++
			if p.Status.Phase == corev1.PodRunning && p.Annotations[status.Annotation] != "" {
				running[p.Name] = p
			}
		}
		last = fmt.Sprint(phases)
		return len(running) == want, nil
	})
	if err != nil {
		t.Fatalf("namespace %s: %d of %d pods running with network-status after %s (phases %s)", ns, len(running), want, within, last)
	}
	// Each attached at the first try, as runPod's pods must.
	for name, p := range running {
		for _, problem := range firstAttachProblems(t, p) {
			t.Errorf("pod %s/%s: %s", ns, name, problem)
		}
	}
	return running
}

// killFailures returns the messages of the FailedKillPodSandbox events (a
// failed CNI DEL) of the namespace's pods.
func killFailures(t *testing.T, ns string) []string {
	t.Helper()
	return eventMessages(t, ns, "FailedKillPodSandbox")
}

// eventMessages returns "pod: message" of the namespace's events with the
// reason, sorted.
func eventMessages(t *testing.T, ns, reason string) []string {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	list, err := testCluster.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + reason})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	var out []string
	for _, e := range list.Items {
		out = append(out, e.InvolvedObject.Name+": "+e.Message)
	}
	slices.Sort(out)
	return out
}

// waitPodPhase waits until pod ns/name runs with its network-status.
func waitPodPhase(ctx context.Context, ns, name string, within time.Duration) error {
	var p *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, time.Second, within, true, func(ctx context.Context) (bool, error) {
		var err error
		p, err = testCluster.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning && p.Annotations[status.Annotation] != "", nil
	})
	if err != nil {
		return fmt.Errorf("pod %s/%s not running within %s: %w\n%s", ns, name, within, err, podEvents(ns, name))
	}
	return nil
}

// sandboxFailures returns the messages of the FailedCreatePodSandBox events
// (a failed CNI ADD) of the namespace's pods.
func sandboxFailures(t *testing.T, ns string) []string {
	t.Helper()
	return eventMessages(t, ns, "FailedCreatePodSandBox")
}

// deletePodOn deletes the pod and waits until it is gone and the node's
// multinetd has dropped its records (its CNI DEL done).
func deletePodOn(t *testing.T, node clusterNode, ns, name string) {
	t.Helper()
	ctx := testContext(t, 2*time.Minute)
	if err := testCluster.kube.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete pod %s/%s: %v", ns, name, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := testCluster.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err) && len(node.records(t, ns, name)) == 0, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s on %s: still there or its records are (%v): %v", ns, name, node.Name, node.records(t, ns, name), err)
	}
}
