//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/multinet/multinet/internal/testing/testskip"
	corev1 "k8s.io/api/core/v1"
)

// TestMultiNodeIPAMBench (MULTINET_E2E_BENCH=1; make bench-multinode) is a
// benchmark, not a test: it asserts nothing about speed and writes a table
// to _output/bench/multinode-ipam.md. One IPAM ADD per pod of 100 (spread
// over the nodes), each run as the node's CNI runtime runs it (the plugin
// binary from the node's CNI bin dir, in the node's namespaces, with the
// pod's CNI_ARGS), for host-local and multinet-ipam on the same range:
// sequentially on node 1 only, sequentially on every node, and all 100 at
// once across the nodes. Latency is per plugin run (process start
// included, the same for both); for multinet-ipam also the conflicts
// (multinet_ipam_conflicts_total), the API requests on ipallocations per
// allocation (the API server's apiserver_request_total), and where the
// time goes: the mean time multinetd spent on an ADD
// (multinet_ipam_operation_duration_seconds: what is not process start and
// socket) and the API server's mean time per create and per list of
// ipallocations (apiserver_request_duration_seconds).
func TestMultiNodeIPAMBench(t *testing.T) {
	if os.Getenv("MULTINET_E2E_BENCH") != "1" {
		testskip.Skip(t, "a benchmark: set MULTINET_E2E_BENCH=1 (make bench-multinode)")
	}
	nodes := clusterNodes(t)
	ns := newNamespace(t)
	const total = 100
	var pods []string
	var byPod = map[string]clusterNode{}
	var specs = podsRoundRobin(ns, nodes, total, byPod, &pods)
	createPods(t, specs)
	running := waitPodsRunning(t, ns, total, 5*time.Minute)
	uids := map[string]string{}
	for name, p := range running {
		uids[name] = string(p.UID)
	}
	confs := map[string]string{
		"host-local":    fmt.Sprintf(`{"cniVersion":"1.1.0","name":"bench-%s","ipam":{"type":"host-local","dataDir":"/var/lib/cni/bench-%s","ranges":[[{"subnet":"10.254.0.0/16"}]]}}`, ns, ns),
		"multinet-ipam": fmt.Sprintf(`{"cniVersion":"1.1.0","name":"bench-%s","ipam":{"type":"multinet-ipam","pool":"bench-%s","ranges":[[{"subnet":"10.254.0.0/16"}]]}}`, ns, ns),
	}
	// host-local's allocations on each node, removed at the end.
	t.Cleanup(func() {
		ctx := context.Background()
		for _, n := range nodes {
			_ = n.command(ctx, "rm", "-rf", "/var/lib/cni/bench-"+ns).Run()
		}
	})
	onHost := slices.DeleteFunc(slices.Clone(pods), func(p string) bool { return byPod[p].Holder != 0 })
	type scenario struct {
		name       string
		pods       []string
		concurrent bool
	}
	scenarios := []scenario{
		{fmt.Sprintf("1 node, %d one at a time", len(onHost)), onHost, false},
		{fmt.Sprintf("%d nodes, %d one at a time", len(nodes), total), pods, false},
		{fmt.Sprintf("%d nodes, %d at once", len(nodes), total), pods, true},
	}
	var rows []string
	for _, sc := range scenarios {
		for _, plugin := range []string{"host-local", "multinet-ipam"} {
			node0, api0 := ipamNodeMetrics(t, nodes), ipallocationMetrics(t)
			start := time.Now()
			lat, errs := runIPAM(t, "ADD", plugin, confs[plugin], sc.pods, byPod, ns, uids, sc.concurrent)
			wall := time.Since(start)
			node, api := ipamNodeMetrics(t, nodes).minus(node0), ipallocationMetrics(t).minus(api0)
			_, delErrs := runIPAM(t, "DEL", plugin, confs[plugin], sc.pods, byPod, ns, uids, true)
			extra := "- | - | - | -"
			if plugin == "multinet-ipam" {
				extra = fmt.Sprintf("%.0f | %.2f | %s | %s / %s", node.conflicts, api.requests/float64(len(sc.pods)),
					meanMS(node.addSeconds, node.adds), meanMS(api.createSeconds, api.creates), meanMS(api.listSeconds, api.lists))
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %d | %d | %s |", sc.name, plugin,
				pct(lat, 50), pct(lat, 99), wall.Round(time.Millisecond), len(errs), len(delErrs), extra))
			// Figures of failed runs mean nothing.
			for _, e := range append(errs, delErrs...) {
				t.Errorf("%s %s: %s", sc.name, plugin, e)
			}
		}
	}
	table := "| allocations | plugin | p50 | p99 | wall | failed ADDs | failed DELs | conflicts | API requests per allocation | in multinetd (mean) | API server create / list (mean) |\n" +
		"| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n" + strings.Join(rows, "\n") + "\n"
	t.Logf("\n%s", table)
	out := filepath.Join("..", "..", "_output", "bench", "multinode-ipam.md")
	_ = os.MkdirAll(filepath.Dir(out), 0o755)
	if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
		t.Errorf("write %s: %v", out, err)
	}
}

// podsRoundRobin returns total pod specs pinned to the nodes in turn,
// filling byPod and names.
func podsRoundRobin(ns string, nodes []clusterNode, total int, byPod map[string]clusterNode, names *[]string) []*corev1.Pod {
	var specs []*corev1.Pod
	for i := 0; i < total; i++ {
		n := nodes[i%len(nodes)]
		name := fmt.Sprintf("bench-%03d", i)
		p := onNode(podSpec(ns, name, ""), n.Name)
		p.Spec.Containers[0].Command = []string{"sleep", "infinity"}
		specs = append(specs, p)
		byPod[name] = n
		*names = append(*names, name)
	}
	return specs
}

// runIPAM runs the IPAM plugin's cmd for each pod on its node (one after
// another, or all at once) and returns each run's duration and the errors.
func runIPAM(t *testing.T, cmd, plugin, conf string, pods []string, byPod map[string]clusterNode, ns string, uids map[string]string, concurrent bool) ([]time.Duration, []string) {
	t.Helper()
	ctx := testContext(t, 5*time.Minute)
	var mu sync.Mutex
	var lat []time.Duration
	var errs []string
	one := func(pod string) {
		n := byPod[pod]
		bin := filepath.Join(testCluster.mustEnv(t, "CNI_BIN_DIR"), plugin)
		c := n.command(ctx, "env", "CNI_COMMAND="+cmd, "CNI_CONTAINERID=bench-"+plugin+"-"+pod,
			"CNI_NETNS=/proc/1/ns/net", "CNI_IFNAME=net9", "CNI_PATH="+testCluster.mustEnv(t, "CNI_BIN_DIR"),
			fmt.Sprintf("CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s;K8S_POD_UID=%s", ns, pod, uids[pod]), bin)
		c.Stdin = strings.NewReader(conf)
		var out bytes.Buffer
		c.Stdout, c.Stderr = &out, &out
		start := time.Now()
		err := c.Run()
		d := time.Since(start)
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s %s on %s: %v: %s", cmd, pod, n.Name, err, out.String()))
			return
		}
		lat = append(lat, d)
	}
	if !concurrent {
		for _, p := range pods {
			one(p)
		}
		return lat, errs
	}
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Add(1)
		go func() { defer wg.Done(); one(p) }()
	}
	wg.Wait()
	return lat, errs
}

// pct is the q-th percentile of d, in milliseconds ("-" when empty).
func pct(d []time.Duration, q int) string {
	if len(d) == 0 {
		return "-"
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*q+99)/100 - 1
	return fmt.Sprintf("%.1f ms", float64(s[max(i, 0)].Microseconds())/1000)
}

// ipamNode is the multinet-ipam metrics summed over every node's
// multinetd.
type ipamNode struct{ conflicts, addSeconds, adds float64 }

func (a ipamNode) minus(b ipamNode) ipamNode {
	return ipamNode{a.conflicts - b.conflicts, a.addSeconds - b.addSeconds, a.adds - b.adds}
}

// ipamNodeMetrics reads every node's multinetd metrics (on the node's
// 127.0.0.1:9390).
func ipamNodeMetrics(t *testing.T, nodes []clusterNode) ipamNode {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	var sum ipamNode
	for _, n := range nodes {
		out, err := n.command(ctx, "curl", "-fsS", "http://127.0.0.1:9390/metrics").Output()
		if err != nil {
			t.Logf("metrics of multinetd on %s: %v", n.Name, err)
			continue
		}
		sum.conflicts += metricSum(out, "multinet_ipam_conflicts_total")
		sum.addSeconds += metricSum(out, "multinet_ipam_operation_duration_seconds_sum", `command="ADD"`)
		sum.adds += metricSum(out, "multinet_ipam_operation_duration_seconds_count", `command="ADD"`)
	}
	return sum
}

// ipallocationAPI is the API server's metrics of ipallocations requests.
type ipallocationAPI struct {
	requests               float64
	createSeconds, creates float64
	listSeconds, lists     float64
}

func (a ipallocationAPI) minus(b ipallocationAPI) ipallocationAPI {
	return ipallocationAPI{a.requests - b.requests, a.createSeconds - b.createSeconds, a.creates - b.creates, a.listSeconds - b.listSeconds, a.lists - b.lists}
}

// ipallocationMetrics reads the API server's apiserver_request_total and
// apiserver_request_duration_seconds on ipallocations.
func ipallocationMetrics(t *testing.T) ipallocationAPI {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := testCluster.kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Logf("API server metrics: %v", err)
		return ipallocationAPI{}
	}
	const res = `resource="ipallocations"`
	return ipallocationAPI{
		requests:      metricSum(out, "apiserver_request_total", res),
		createSeconds: metricSum(out, "apiserver_request_duration_seconds_sum", res, `verb="POST"`),
		creates:       metricSum(out, "apiserver_request_duration_seconds_count", res, `verb="POST"`),
		listSeconds:   metricSum(out, "apiserver_request_duration_seconds_sum", res, `verb="LIST"`),
		lists:         metricSum(out, "apiserver_request_duration_seconds_count", res, `verb="LIST"`),
	}
}

// meanMS is seconds/n in milliseconds ("-" when n is 0).
func meanMS(seconds, n float64) string {
	if n <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f ms", seconds/n*1000)
}

// metricSum sums the samples of metric whose labels contain every one of
// labels.
func metricSum(text []byte, metric string, labels ...string) float64 {
	var sum float64
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, metric+"{") && !strings.HasPrefix(l, metric+" ") {
			continue
		}
		if slices.ContainsFunc(labels, func(label string) bool { return !strings.Contains(l, label) }) {
			continue
		}
		f := strings.Fields(l)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}
