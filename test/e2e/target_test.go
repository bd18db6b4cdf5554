//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// The tests that are not TestMultiNode* run on one node of the cluster, the
// target node: their pods are pinned to it, and every piece of node state
// they look at (files, links, network namespaces, processes, the multinetd,
// device plugin and DRA driver pods, their metrics, the kubelet) is the
// target node's. E2E_NODE names it; without it the target is the host
// (node 1) on a cluster of one node and multinet-node2 on a cluster of
// several (docs/local-cluster.md "Several nodes"), so that `NODES=3 make
// test-e2e` runs the suite on a node in namespaces of its own.
//
// clusterNode's methods here are the one way to reach a node's state: on
// the host they act on the host as it is, on an extra node they enter its
// holder's namespaces (command, netlink, dial) or go through the holder's
// root (path).

// target is the node the single-node tests run on (set by TestMain).
var target clusterNode

// defaultExtraTarget is the target on a cluster of several nodes without
// E2E_NODE: the first extra node (it has the larger extra netdev pool).
const defaultExtraTarget = "multinet-node2"

// chooseTarget returns the node E2E_NODE names (env, then the process
// environment), or the default above.
func chooseTarget(env map[string]string, nodes []clusterNode) (clusterNode, error) {
	want := os.Getenv("E2E_NODE")
	if want == "" {
		want = env["E2E_NODE"]
	}
	if want == "" {
		if len(nodes) == 1 {
			return nodes[0], nil
		}
		want = defaultExtraTarget
	}
	var names []string
	for _, n := range nodes {
		if n.Name == want {
			return n, nil
		}
		names = append(names, n.Name)
	}
	return clusterNode{}, fmt.Errorf("E2E_NODE=%s is not a node of this cluster (%s)", want, strings.Join(names, ", "))
}

// isHost reports whether the node is node 1, the host itself.
func (n clusterNode) isHost() bool { return n.Holder == 0 }

// path returns where this process finds path p (absolute, as the node's
// processes see it): p itself on the host, p under the holder's root
// (/proc/<holder>/root, which resolves p in the node's mount namespace)
// on an extra node. /var/run is spelled /run: its absolute symlink would
// resolve in this process's root.
func (n clusterNode) path(p string) string {
	if n.isHost() {
		return p
	}
	if rest, ok := strings.CutPrefix(p, "/var/run/"); ok {
		p = "/run/" + rest
	}
	return filepath.Join(fmt.Sprintf("/proc/%d/root", n.Holder), p)
}

// run runs args on the node (command) and returns their combined output,
// failing the test when they fail.
func (n clusterNode) run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := n.command(testContext(t, 60*time.Second), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("on node %s: %s: %v\n%s", n.Name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// try runs args on the node, ignoring failures (cleanups: a link that is
// already gone).
func (n clusterNode) try(args ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = n.command(ctx, args...).Run()
}

// inNetns runs f on a thread in the node's network namespace.
func (n clusterNode) inNetns(f func() error) error {
	if n.isHost() {
		return f()
	}
	return withNetns(func() (netns.NsHandle, error) { return netns.GetFromPid(n.Holder) }, "node "+n.Name, f)
}

// withNetns runs f on a thread in the network namespace get returns (what
// names it, for errors), and returns that thread to this process's
// namespace before unlocking it.
func withNetns(get func() (netns.NsHandle, error), what string, f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		return fmt.Errorf("this thread's network namespace: %w", err)
	}
	defer orig.Close()
	ns, err := get()
	if err != nil {
		return fmt.Errorf("%s: its network namespace: %w", what, err)
	}
	defer ns.Close()
	if err := netns.Set(ns); err != nil {
		return fmt.Errorf("%s: enter its network namespace: %w", what, err)
	}
	// Back before the thread is unlocked (a thread left in another
	// namespace would run other goroutines there).
	defer func() {
		if err := netns.Set(orig); err != nil {
			panic(fmt.Sprintf("cannot return to the test's network namespace: %v", err))
		}
	}()
	return f()
}

// netlink returns a netlink handle in the node's network namespace, closed
// when the test ends.
func (n clusterNode) netlink(t *testing.T) *netlink.Handle {
	t.Helper()
	var h *netlink.Handle
	var err error
	if n.isHost() {
		h, err = netlink.NewHandle()
	} else {
		var ns netns.NsHandle
		if ns, err = netns.GetFromPid(n.Holder); err == nil {
			defer ns.Close()
			h, err = netlink.NewHandleAt(ns)
		}
	}
	if err != nil {
		t.Fatalf("node %s: netlink handle: %v", n.Name, err)
	}
	t.Cleanup(h.Close)
	return h
}

// httpClient is an HTTP client whose connections start in the node's
// network namespace (a socket stays in the namespace it was made in), so
// that 127.0.0.1 is the node's loopback.
func (n clusterNode) httpClient() *http.Client {
	if n.isHost() {
		return http.DefaultClient
	}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := n.inNetns(func() error {
			var err error
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
	return &http.Client{Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
}

// httpGet GETs url from the node's network namespace within 2 s; "" when
// it does not answer.
func (n clusterNode) httpGet(ctx context.Context, url string) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := n.httpClient().Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// daemonMetrics returns multinetd's metrics on the node (its
// --metrics-address 127.0.0.1:9390, host network). It fails the test when
// they cannot be read within 10 s: a check against a metric that could not
// be read proves nothing.
func (n clusterNode) daemonMetrics(t *testing.T) string {
	t.Helper()
	return n.loopbackMetrics(t, "multinetd", 9390)
}

// loopbackMetrics returns the /metrics of the host-network component that
// serves them on the node's 127.0.0.1:port (multinetd 9390,
// multinet-deviceplugin 9391, multinet-dra-driver 9392), failing the test
// when they cannot be read, or hold no multinet_ metric, within 10 s.
func (n clusterNode) loopbackMetrics(t *testing.T, component string, port int) string {
	t.Helper()
	url := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	ctx := testContext(t, 15*time.Second)
	var body string
	var last error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
		resp, err := n.httpClient().Do(req)
		if err != nil {
			last = err
			return false, nil
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		switch {
		case err != nil:
			last = err
		case resp.StatusCode != http.StatusOK:
			last = fmt.Errorf("%s: %s", resp.Status, b)
		case !strings.Contains(string(b), "multinet_"):
			last = fmt.Errorf("no multinet_ metric in the answer: %.200q", b)
		default:
			body = string(b)
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("node %s: %s's metrics (%s) cannot be read: %v (last: %v)", n.Name, component, url, err, last)
	}
	return body
}

// daemonActivity is a summary of the node's multinetd's CNI operations: the
// ones in flight, every one answered, and the failed ADDs. Two equal reads
// with inFlight 0 enclose a moment when no CNI operation ran.
type daemonActivity struct{ inFlight, answered, failedADDs float64 }

func (n clusterNode) daemonActivity(t *testing.T) daemonActivity {
	t.Helper()
	m := []byte(n.daemonMetrics(t))
	adds := metricSum(m, "multinet_cni_operations_total", `command="ADD"`)
	return daemonActivity{
		inFlight:   metricSum(m, "multinet_cni_operations_in_flight"),
		answered:   metricSum(m, "multinet_cni_operations_total"),
		failedADDs: adds - metricSum(m, "multinet_cni_operations_total", `command="ADD"`, `code="0"`),
	}
}

// cniOps is multinetd's multinet_cni_operations_total for one command.
type cniOps struct{ ok, failed float64 }

// daemonCNIOps reads the node's multinetd's multinet_cni_operations_total
// for command (ADD, DEL, ...): answered with code 0, and with any other
// code. It fails the test when the metrics cannot be read.
func (n clusterNode) daemonCNIOps(t *testing.T, command string) cniOps {
	t.Helper()
	m := []byte(n.daemonMetrics(t))
	all := metricSum(m, "multinet_cni_operations_total", `command="`+command+`"`)
	ok := metricSum(m, "multinet_cni_operations_total", `command="`+command+`"`, `code="0"`)
	return cniOps{ok: ok, failed: all - ok}
}

// podGateway is the gateway of the node's pod subnet on its default
// network (the subnet's first address, as hack/lib/cluster.sh gives the
// host).
func (n clusterNode) podGateway(t *testing.T) string {
	t.Helper()
	p, err := netip.ParsePrefix(n.PodCIDR)
	if err != nil {
		t.Fatalf("node %s: pod CIDR %q: %v", n.Name, n.PodCIDR, err)
	}
	return p.Masked().Addr().Next().String()
}

// podLogsDir is where the node's kubelet keeps the pods' logs.
func (n clusterNode) podLogsDir(t *testing.T) string {
	dir := filepath.Join(testCluster.mustEnv(t, "LOG_DIR"), "pods")
	if n.isHost() {
		return dir
	}
	return filepath.Join(testCluster.mustEnv(t, "LOG_DIR"), n.Name, "pods")
}

// componentPIDFile is the PID file of the node's own copy of a cluster
// component (kubelet, containerd, kube-proxy): PID_DIR/<name>.pid on the
// host, PID_DIR/<node>-<name>.pid on an extra node (hack/lib/nodes.sh).
func (n clusterNode) componentPIDFile(t *testing.T, name string) string {
	if !n.isHost() {
		name = n.Name + "-" + name
	}
	return filepath.Join(testCluster.mustEnv(t, "PID_DIR"), name+".pid")
}

// restartKubelet restarts the node's kubelet with its command line and
// waits until the node is Ready again (hack/cluster-devices.sh
// restart-kubelet on the host, hack/cluster-node.sh restart-kubelet on an
// extra node).
func (n clusterNode) restartKubelet(t *testing.T) {
	t.Helper()
	if n.isHost() {
		runHack(t, 150*time.Second, "cluster-devices.sh", "restart-kubelet")
		return
	}
	runHack(t, 150*time.Second, "cluster-node.sh", "restart-kubelet", n.Name)
}

// pin makes the scheduler place the pod on the node (its
// kubernetes.io/hostname label: the scheduler still checks resources and
// claims, unlike spec.nodeName).
func (n clusterNode) pin(p *corev1.Pod) *corev1.Pod {
	return onNode(p, n.Name)
}

// anyNode lets the scheduler place the pod on any node (a multi-node test's
// pod built with podSpec, which pins to the target).
func anyNode(p *corev1.Pod) *corev1.Pod {
	delete(p.Spec.NodeSelector, corev1.LabelHostname)
	return p
}

// nodeOf returns the cluster node that runs the pod (spec.nodeName).
func nodeOf(t *testing.T, p *corev1.Pod) clusterNode {
	t.Helper()
	return nodeNamed(t, p.Spec.NodeName)
}

// nodeNamed returns the cluster node called name.
func nodeNamed(t *testing.T, name string) clusterNode {
	t.Helper()
	for _, n := range clusterNodes(t) {
		if n.Name == name {
			return n
		}
	}
	t.Fatalf("%q is not a node of the local cluster", name)
	return clusterNode{}
}

// targetPods lists the pods of ns with the label selector that run on the
// target node (field selector spec.nodeName).
func targetPods(ctx context.Context, ns, selector string) (*corev1.PodList, error) {
	return testCluster.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector, FieldSelector: "spec.nodeName=" + target.Name})
}

// readPIDFile reads a PID file.
func readPIDFile(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return pid
}
