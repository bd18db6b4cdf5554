//go:build e2e

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/pkg/spec/status"
)

// testNet is a bridge network a test creates: a NAD, a Linux bridge (made by
// the bridge plugin on first use, removed by the test) and a host-local data
// dir the test inspects for leaked addresses.
type testNet struct {
	Namespace, Name string
	Bridge          string
	Subnet          string // "10.210.N.0/24"
	DataDir         string
}

// netSeq hands out subnets 10.210.N.0/24 to the networks of a test run.
var netSeq = make(chan int, 1)

func init() { netSeq <- 1 }

func nextSubnet() int {
	n := <-netSeq
	netSeq <- n + 1
	return n % 250
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// bridgeNet creates a NAD ns/name for a fresh bridge + host-local network in
// cniVersion version. extraPlugins are appended to the plugin list (e.g.
// tuning); caps are the bridge plugin's capabilities.
func bridgeNet(t *testing.T, ns, name, version string, caps map[string]bool, extraPlugins ...map[string]any) *testNet {
	t.Helper()
	tn, conf := bridgeNetConf(t, ns, name, version, caps, extraPlugins...)
	createNAD(t, ns, name, conf, nil)
	return tn
}

// bridgeNetConf is bridgeNet without creating the NAD: it returns the
// network and the NAD's spec.config (to be marshalled), for a test that
// creates the NAD its own way.
func bridgeNetConf(t *testing.T, ns, name, version string, caps map[string]bool, extraPlugins ...map[string]any) (*testNet, map[string]any) {
	t.Helper()
	n := nextSubnet()
	tn := &testNet{
		Namespace: ns, Name: name,
		Bridge:  "mne" + randHex(4),
		Subnet:  fmt.Sprintf("10.210.%d.0/24", n),
		DataDir: filepath.Join(testCluster.mustEnv(t, "CNI_IPAM_DIR"), "e2e", ns+"-"+name),
	}
	ipam := map[string]any{"type": "host-local", "dataDir": tn.DataDir,
		"ranges": [][]map[string]string{{{"subnet": tn.Subnet, "gateway": fmt.Sprintf("10.210.%d.1", n)}}}}
	bridge := map[string]any{"type": "bridge", "bridge": tn.Bridge, "ipam": ipam}
	if caps != nil {
		bridge["capabilities"] = caps
	}
	plugins := append([]map[string]any{bridge}, extraPlugins...)
	conf := map[string]any{"cniVersion": version, "name": name, "plugins": plugins}
	t.Cleanup(func() {
		target.try("ip", "link", "del", tn.Bridge)
		_ = os.RemoveAll(target.path(tn.DataDir))
	})
	return tn, conf
}

// createNAD creates NetworkAttachmentDefinition ns/name with spec.config conf
// (marshalled when not a string).
func createNAD(t *testing.T, ns, name string, conf any, annotations map[string]string) {
	t.Helper()
	var cfg string
	switch c := conf.(type) {
	case string:
		cfg = c
	default:
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("NAD %s/%s: %v", ns, name, err)
		}
		cfg = string(b)
	}
	ctx := testContext(t, 30*time.Second)
	_, err := testCluster.multi.K8sCniCncfIoV1().NetworkAttachmentDefinitions(ns).Create(ctx, &nadv1.NetworkAttachmentDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations},
		Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: cfg},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create NAD %s/%s: %v", ns, name, err)
	}
}

// allocations lists the addresses host-local holds in the network's data dir
// on the target node ("ip → containerID").
func (n *testNet) allocations(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	dir := target.path(filepath.Join(n.DataDir, n.Name))
	entries, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return out
		}
		t.Fatalf("read host-local dir of %s: %v", n.Name, err)
	}
	for _, e := range entries {
		if e.Name() == "lock" || strings.HasPrefix(e.Name(), "last_reserved_ip") {
			continue
		}
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		out[e.Name()] = strings.SplitN(string(b), "\n", 2)[0]
	}
	return out
}

// ports lists the interfaces enslaved to the network's bridge on the target
// node (the pods' veths).
func (n *testNet) ports(t *testing.T) []string {
	t.Helper()
	out, err := target.command(testContext(t, 30*time.Second), "ip", "-o", "link", "show", "master", n.Bridge).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "does not exist") {
			return nil
		}
		t.Fatalf("ip link show master %s: %v: %s", n.Bridge, err, out)
	}
	var ports []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			ports = append(ports, strings.TrimSuffix(f[1], ":"))
		}
	}
	return ports
}

// assertReleased fails unless the networks hold no address and no bridge
// port (after every pod using them is gone).
func assertReleased(t *testing.T, nets ...*testNet) {
	t.Helper()
	for _, n := range nets {
		if a := n.allocations(t); len(a) != 0 {
			t.Errorf("network %s: host-local still holds %v", n.Name, a)
		}
		if p := n.ports(t); len(p) != 0 {
			t.Errorf("network %s: bridge %s still has ports %v", n.Name, n.Bridge, p)
		}
	}
}

// assertNoRecords fails when multinetd still has an attachment record of a
// pod of namespace ns.
func assertNoRecords(t *testing.T, ns string) {
	t.Helper()
	if r := podRecords(t, ns, ""); len(r) != 0 {
		t.Errorf("attachment records of pods of %s are still there: %v", ns, r)
	}
}

// podSpec is a busybox pod that sleeps, with the networks annotation,
// pinned to the target node.
func podSpec(ns, name, networks string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{
				Name: "c", Image: testCluster.env["TEST_IMAGE"], ImagePullPolicy: corev1.PullNever,
				Command: []string{"sleep", "3600"},
			}},
		},
	}
	if networks != "" {
		p.Annotations[nadv1.NetworksAnnotation] = networks
	}
	return target.pin(p)
}

// runPod creates the pod and waits until it runs with its network-status,
// then checks that it attached at once (checkFirstAttach): a pod whose first
// sandboxes failed and that only runs thanks to the kubelet's retries fails
// the test, unless each of its failures is named by an expectFailedAdd
// option. It returns the pod as the API has it then.
func runPod(t *testing.T, p *corev1.Pod, opts ...attachOpt) *corev1.Pod {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	if _, err := testCluster.kube.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s/%s: %v", p.Namespace, p.Name, err)
	}
	return waitRunning(t, p.Namespace, p.Name, 80*time.Second, opts...)
}

// waitRunning waits until an existing pod runs with network-status, then
// checks that it attached at once, as runPod does (for a pod created some
// other way: kubectl apply, a pod that waited for scheduling).
func waitRunning(t *testing.T, ns, name string, within time.Duration, opts ...attachOpt) *corev1.Pod {
	t.Helper()
	got := waitPodRunning(t, ns, name, within)
	for _, problem := range firstAttachProblems(t, got, opts...) {
		t.Errorf("pod %s/%s: %s", ns, name, problem)
	}
	return got
}

// waitPodRunning waits until pod ns/name runs with network-status, without
// checking how it got there (firstAttachProblems does).
func waitPodRunning(t *testing.T, ns, name string, within time.Duration) *corev1.Pod {
	t.Helper()
	ctx := testContext(t, within+10*time.Second)
	var got *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, within, true, func(ctx context.Context) (bool, error) {
		var err error
		got, err = testCluster.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return got.Status.Phase == corev1.PodRunning && got.Annotations[status.Annotation] != "", nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s not running with network-status within %v: %v\n%s", ns, name, within, err, podEvents(ns, name))
	}
	return got
}

// attachOpt is an option of runPod, waitRunning and firstAttachProblems.
type attachOpt func(*attachOpts)

type attachOpts struct {
	expected []string // message substrings of failures the test provokes
}

// expectFailedAdd names a failed ADD the test provokes on purpose: failure
// Events of the pod whose message contains substr are allowed, and at least
// one must be there (a provoked failure that did not happen proves nothing
// either). Failures of any other message still fail the test.
func expectFailedAdd(substr string) attachOpt {
	return func(o *attachOpts) { o.expected = append(o.expected, substr) }
}

// addFailureReasons are the Event reasons that show that a sandbox of a pod
// did not come up at the first try:
//   - FailedCreatePodSandBox: the kubelet's RunPodSandbox failed (a failed
//     CNI ADD, through multinetd or not);
//   - NetworkAttachFailed: multinetd failed an ADD of the pod (its own
//     Event, with the network and the delegate's error);
//   - SandboxChanged: the kubelet killed the pod's sandbox to make a new one
//     (the first one died or lost its network).
var addFailureReasons = []string{"FailedCreatePodSandBox", "NetworkAttachFailed", "SandboxChanged"}

// firstAttachProblems returns why running pod p did not attach at the first
// try (nothing when it did): each failure Event of the pod (addFailureReasons)
// that no expectFailedAdd names, and each expectFailedAdd no Event matches.
//
// Why Events, and why they are complete without a sleep. The API has no count
// of a pod's sandbox attempts: status.containerStatuses[].restartCount counts
// restarts of a container within a sandbox, and a failed sandbox never had
// one; the CRI's sandbox attempt number is not in the API, and containerd
// removes a sandbox whose network setup failed, so the kubelet's next attempt
// is attempt 0 again. What does record a failed ADD is the kubelet's
// FailedCreatePodSandBox Warning, recorded in the same sync that failed,
// before the retry that succeeds. Being Running is not enough to have seen it:
// the kubelet's event recorder posts Events from a queue, so an Event can
// reach the API after the status that says Running. But that queue is FIFO,
// written by one goroutine, and the kubelet records "Started" for each
// container only after the sandbox that runs it came up, so once the
// kubelet's Started Events of every container of p are in the API, every
// FailedCreatePodSandBox (and SandboxChanged) it recorded before them is too.
// firstAttachProblems waits for those Started Events (an ordering, not a
// timeout: it waits as long as they take, up to 60 s). multinetd's
// NetworkAttachFailed is checked as well, though its own queue is not ordered
// with the kubelet's: the kubelet's Event is the complete one. Events are
// matched to p by UID, so a former pod of the same name does not count.
func firstAttachProblems(t *testing.T, p *corev1.Pod, opts ...attachOpt) []string {
	t.Helper()
	var o attachOpts
	for _, opt := range opts {
		opt(&o)
	}
	ctx := testContext(t, 70*time.Second)
	var events []corev1.Event
	var missing []string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := testCluster.kube.CoreV1().Events(p.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + p.Name})
		if err != nil {
			return false, nil
		}
		events = events[:0]
		started := map[string]bool{}
		for _, e := range list.Items {
			if e.InvolvedObject.UID != "" && e.InvolvedObject.UID != p.UID {
				continue
			}
			events = append(events, e)
			if e.Reason == "Started" && (e.Source.Component == "kubelet" || e.ReportingController == "kubelet") {
				started[e.InvolvedObject.FieldPath] = true
			}
		}
		missing = missing[:0]
		for _, c := range p.Spec.Containers {
			if !started["spec.containers{"+c.Name+"}"] {
				missing = append(missing, c.Name)
			}
		}
		return len(missing) == 0, nil
	})
	if err != nil {
		return []string{fmt.Sprintf("the kubelet's Started Events of containers %v are not in the API 60 s after the pod ran (so its earlier Events may not be either): %v\nevents:\n%s", missing, err, podEvents(p.Namespace, p.Name))}
	}
	var problems []string
	seen := make([]bool, len(o.expected))
	for _, e := range events {
		if !slices.Contains(addFailureReasons, e.Reason) {
			continue
		}
		named := false
		for i, want := range o.expected {
			if strings.Contains(e.Message, want) {
				seen[i], named = true, true
			}
		}
		if !named {
			problems = append(problems, fmt.Sprintf("its sandbox failed before it ran (the kubelet's retries hid it): %s %s (%dx, %s): %s",
				e.Type, e.Reason, max(e.Count, 1), e.Source.Component, e.Message))
		}
	}
	for i, want := range o.expected {
		if !seen[i] {
			problems = append(problems, fmt.Sprintf("the failed ADD the test provokes (an Event with %q) did not happen; events:\n%s", want, podEvents(p.Namespace, p.Name)))
		}
	}
	return problems
}

// podEvents returns the pod's events, one per line, for failure messages.
func podEvents(ns, name string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := testCluster.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return "events: " + err.Error()
	}
	var b strings.Builder
	for _, e := range list.Items {
		fmt.Fprintf(&b, "  %s %s: %s\n", e.Type, e.Reason, e.Message)
	}
	return b.String()
}

// waitEvent waits for an event of the pod with reason whose message contains
// every part, and returns its message.
func waitEvent(t *testing.T, ns, name, reason string, parts ...string) string {
	t.Helper()
	ctx := testContext(t, 60*time.Second)
	var msg string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 50*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := testCluster.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return false, nil
		}
	next:
		for _, e := range list.Items {
			if e.Reason != reason {
				continue
			}
			for _, p := range parts {
				if !strings.Contains(e.Message, p) {
					continue next
				}
			}
			msg = e.Message
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no %s event on pod %s/%s containing %q: %v\nevents:\n%s", reason, ns, name, parts, err, podEvents(ns, name))
	}
	return msg
}

// deletePod deletes the pod and waits until it is gone (its CNI DEL done).
func deletePod(t *testing.T, ns, name string) {
	t.Helper()
	ctx := testContext(t, 90*time.Second)
	if err := testCluster.kube.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete pod %s/%s: %v", ns, name, err)
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 80*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := testCluster.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s still exists: %v", ns, name, err)
	}
	// kubelet tears the sandbox down (CNI DEL) after the API object is
	// gone: wait until multinetd has dropped the pod's record.
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		return len(podRecords(t, ns, name)) == 0, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s: multinetd still has its attachment records %v 60s after deletion", ns, name, podRecords(t, ns, name))
	}
}

// podRecords returns the files of the target node's multinetd's attachment
// records of pod ns/name ("" name: every pod of ns).
func podRecords(t *testing.T, ns, name string) []string {
	t.Helper()
	dir := recordsDir(t)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("records dir: %v", err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		var r state.Record
		if json.Unmarshal(b, &r) == nil && r.PodNamespace == ns && (name == "" || r.PodName == name) {
			out = append(out, e.Name())
		}
	}
	return out
}

// recordsDir is where this process finds the target node's multinetd's
// attachment records.
func recordsDir(t *testing.T) string {
	t.Helper()
	return target.path(filepath.Join(testCluster.mustEnv(t, "MULTINET_CLUSTER_DIR"), "multinet", "state", "records"))
}

// networkStatus decodes the pod's network-status annotation (spec §5).
func networkStatus(t *testing.T, p *corev1.Pod) []status.NetworkStatus {
	t.Helper()
	list, err := status.Decode(p.Annotations[status.Annotation])
	if err != nil {
		t.Fatalf("pod %s/%s: network-status: %v\n%s", p.Namespace, p.Name, err, p.Annotations[status.Annotation])
	}
	return list
}

// podIface is one interface inside a pod, as `ip` shows it.
type podIface struct {
	MAC string
	IPs []string // "a.b.c.d" without prefix
}

// podInterfaces lists the pod's interfaces other than lo, from `ip -o link`
// and `ip -o addr` run inside it.
func podInterfaces(t *testing.T, ns, name string) map[string]*podIface {
	t.Helper()
	out, err := readPodInterfaces(testContext(t, 30*time.Second), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// readPodInterfaces is podInterfaces returning its error.
func readPodInterfaces(ctx context.Context, ns, name string) (map[string]*podIface, error) {
	links, err := kubectl(ctx, "-n", ns, "exec", name, "--", "ip", "-o", "link")
	if err != nil {
		return nil, fmt.Errorf("ip link in %s/%s: %w: %s", ns, name, err, links)
	}
	out := map[string]*podIface{}
	for _, l := range strings.Split(links, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		ifname := strings.SplitN(strings.TrimSuffix(f[1], ":"), "@", 2)[0]
		if ifname == "lo" {
			continue
		}
		i := &podIface{}
		for k := range f {
			if f[k] == "link/ether" && k+1 < len(f) {
				i.MAC = f[k+1]
			}
		}
		out[ifname] = i
	}
	addrs, err := kubectl(ctx, "-n", ns, "exec", name, "--", "ip", "-o", "addr")
	if err != nil {
		return nil, fmt.Errorf("ip addr in %s/%s: %w: %s", ns, name, err, addrs)
	}
	for _, l := range strings.Split(addrs, "\n") {
		f := strings.Fields(l)
		if len(f) < 4 || (f[2] != "inet" && f[2] != "inet6") {
			continue
		}
		i, ok := out[f[1]]
		if !ok || strings.HasPrefix(f[3], "fe80:") {
			continue
		}
		i.IPs = append(i.IPs, strings.SplitN(f[3], "/", 2)[0])
	}
	return out, nil
}

// podRoutes returns `ip route` (IPv4) inside the pod.
func podRoutes(t *testing.T, ns, name string) string {
	t.Helper()
	out, err := kubectl(testContext(t, 30*time.Second), "-n", ns, "exec", name, "--", "ip", "route")
	if err != nil {
		t.Fatalf("ip route in %s/%s: %v: %s", ns, name, err, out)
	}
	return out
}

// checkStatusMatchesPod asserts that network-status lists exactly the pod's
// interfaces with their IPs and MACs, default network first and the only
// one with default: true (spec §5.2, §5.3).
func checkStatusMatchesPod(t *testing.T, p *corev1.Pod, want []string) []status.NetworkStatus {
	t.Helper()
	list := networkStatus(t, p)
	ifaces := podInterfaces(t, p.Namespace, p.Name)
	var names []string
	for n := range ifaces {
		names = append(names, n)
	}
	sort.Strings(names)
	wantSorted := append([]string(nil), want...)
	sort.Strings(wantSorted)
	if strings.Join(names, ",") != strings.Join(wantSorted, ",") {
		t.Errorf("pod %s interfaces = %v, want %v", p.Name, names, wantSorted)
	}
	if len(list) != len(want) {
		t.Fatalf("network-status has %d entries, want %d: %s", len(list), len(want), p.Annotations[status.Annotation])
	}
	for i, s := range list {
		if s.Default != (i == 0) {
			t.Errorf("network-status[%d] %s: default = %v, want %v", i, s.Name, s.Default, i == 0)
		}
		if s.Interface != want[i] {
			t.Errorf("network-status[%d] %s: interface %q, want %q", i, s.Name, s.Interface, want[i])
		}
		got, ok := ifaces[s.Interface]
		if !ok {
			continue
		}
		if s.Mac != got.MAC {
			t.Errorf("network-status[%d] %s: mac %s, interface %s has %s", i, s.Name, s.Mac, s.Interface, got.MAC)
		}
		if strings.Join(s.IPs, ",") != strings.Join(got.IPs, ",") {
			t.Errorf("network-status[%d] %s: ips %v, interface %s has %v", i, s.Name, s.IPs, s.Interface, got.IPs)
		}
	}
	return list
}
