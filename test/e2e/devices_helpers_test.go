//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"sigs.k8s.io/yaml"

	"github.com/multinet/multinet/internal/testing/clusterenv"
	"github.com/multinet/multinet/internal/testing/testskip"
	"github.com/multinet/multinet/pkg/spec/status"
)

// The device half of the local cluster comes from hack/cluster-devices.sh:
// multinet-deviceplugin with a netdev pool over veths mnv0.. and a vhost-user
// pool, and multinet-webhook behind a url clientConfig. It describes itself in
// _output/cluster/multinet/devices.env.

// resourceNameAnnotation is the NAD annotation naming a device resource.
const resourceNameAnnotation = "k8s.v1.cni.cncf.io/resourceName"

// devicesEnv reads devices.env, failing the test when the cluster runs
// without hack/cluster-devices.sh.
func devicesEnv(t *testing.T) map[string]string {
	t.Helper()
	path := filepath.Join(testCluster.mustEnv(t, "MULTINET_CLUSTER_DIR"), "multinet", "devices.env")
	env, err := clusterenv.Read(path)
	if err != nil {
		t.Fatalf("device setup of the cluster: %v (run hack/cluster-devices.sh up, or make cluster-down cluster-up)", err)
	}
	return env
}

// netdevPool returns the netdev pool's resource name and the devices of the
// target node: the configured names (netdevNames) the node has, in its
// network namespace or in a pod's (the veth's peer, mnvNp, stays in the
// node). The host has all four; an extra node has fewer
// (hack/lib/nodes.sh EXTRA_NODE_NETDEVS).
func netdevPool(t *testing.T) (string, []string) {
	t.Helper()
	resourceName, names := netdevNames(t)
	h := target.netlink(t)
	var devs []string
	for _, n := range names {
		if _, err := h.LinkByName(n); err == nil {
			devs = append(devs, n)
		} else if _, err := h.LinkByName(n + "p"); err == nil {
			devs = append(devs, n)
		}
	}
	if len(devs) == 0 {
		t.Fatalf("node %s has none of the netdev pool's devices %v", target.Name, names)
	}
	return resourceName, devs
}

// requireNetdevs skips the test, saying why, when the target node's netdev
// pool (devs) has fewer than n devices: an extra node's pool is smaller than
// the host's on purpose (multinet-node3 has one), and a pod needing n
// devices can never run there. The host and multinet-node2 have enough for
// every test.
func requireNetdevs(t *testing.T, devs []string, n int) {
	t.Helper()
	if len(devs) < n {
		testskip.Skip(t, "node %s has %d netdev pool devices (%v), this test needs %d in one pod: run it on a node with %d or more (E2E_NODE; the host has 4, multinet-node2 2)", target.Name, len(devs), devs, n, n)
	}
}

// netdevNames returns the netdev pool's resource name and the device names
// the device plugin's configuration lists (every node's: a node's capacity;
// the names it lacks are unhealthy, not allocatable).
func netdevNames(t *testing.T) (string, []string) {
	t.Helper()
	env := devicesEnv(t)
	return env["NETDEV_RESOURCE"], strings.Split(env["NETDEV_DEVICES"], ",")
}

// envVarOf is the variable multinet-deviceplugin's Allocate sets for a
// resource (docs/deviceplugin.md): MULTINET_ + the name upper-cased, every
// character other than A-Z0-9 replaced by "_".
func envVarOf(resourceName string) string {
	b := []byte(strings.ToUpper(resourceName))
	for i, c := range b {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	return "MULTINET_" + string(b)
}

// nodeResource returns the target node's allocatable and capacity of a
// resource (0 when absent).
func nodeResource(t *testing.T, name corev1.ResourceName) (allocatable, capacity int64) {
	t.Helper()
	ctx := testContext(t, 20*time.Second)
	node, err := testCluster.kube.CoreV1().Nodes().Get(ctx, target.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get node: %v", err)
	}
	a, c := node.Status.Allocatable[name], node.Status.Capacity[name]
	return a.Value(), c.Value()
}

// waitAllocatable waits until the node's allocatable of the resource is want
// and returns how long that took.
func waitAllocatable(t *testing.T, name string, want int64, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	ctx := testContext(t, within+10*time.Second)
	var got int64
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, within, true, func(context.Context) (bool, error) {
		got, _ = nodeResource(t, corev1.ResourceName(name))
		return got == want, nil
	})
	if err != nil {
		t.Fatalf("node allocatable %s = %d, want %d within %v", name, got, want, within)
	}
	return time.Since(start)
}

// freeDevices is the node's allocatable of the resource minus what the
// node's non-terminated pods request (what the scheduler sees as free).
func freeDevices(t *testing.T, name string) int64 {
	t.Helper()
	alloc, _ := nodeResource(t, corev1.ResourceName(name))
	ctx := testContext(t, 20*time.Second)
	pods, err := testCluster.kube.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + target.Name})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, c := range p.Spec.Containers {
			q := c.Resources.Requests[corev1.ResourceName(name)]
			alloc -= q.Value()
		}
	}
	return alloc
}

// containerResources returns what the pod's first container requests and
// is limited to of the resource.
func containerResources(p *corev1.Pod, name string) (requests, limits resource.Quantity) {
	c := p.Spec.Containers[0].Resources
	return c.Requests[corev1.ResourceName(name)], c.Limits[corev1.ResourceName(name)]
}

// podEnv returns the value of an environment variable inside the pod's
// container (as the runtime set it, e.g. from the device plugin's Allocate).
func podEnv(t *testing.T, ns, name, key string) string {
	t.Helper()
	out, err := kubectl(testContext(t, 30*time.Second), "-n", ns, "exec", name, "--", "env")
	if err != nil {
		t.Fatalf("env in %s/%s: %v: %s", ns, name, err, out)
	}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok && k == key {
			return v
		}
	}
	return ""
}

// hostLink is a host interface's state.
type hostLink struct {
	MAC string
	Up  bool
}

// hostLinkState returns the MAC and admin state of the target node's
// interface, or nil when the node (its network namespace) has no interface
// of that name.
func hostLinkState(t *testing.T, name string) *hostLink {
	t.Helper()
	l, err := target.netlink(t).LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		t.Fatalf("node %s: link %s: %v", target.Name, name, err)
	}
	return &hostLink{MAC: l.Attrs().HardwareAddr.String(), Up: l.Attrs().Flags&net.FlagUp != 0}
}

// setLink runs `ip link set NAME up|down` on the target node.
func setLink(t *testing.T, name, state string) {
	t.Helper()
	target.run(t, "ip", "link", "set", name, state)
}

// netdevNet creates NAD ns/name for the netdev pool: multinet-netdev with the
// deviceID capability and host-local IPAM on a fresh subnet 10.212.N.0/24.
func netdevNet(t *testing.T, ns, name, resourceName string) *testNet {
	t.Helper()
	n := nextSubnet()
	tn := &testNet{
		Namespace: ns, Name: name,
		Subnet:  fmt.Sprintf("10.212.%d.0/24", n),
		DataDir: filepath.Join(testCluster.mustEnv(t, "CNI_IPAM_DIR"), "e2e", ns+"-"+name),
	}
	createNAD(t, ns, name, map[string]any{
		"cniVersion": "1.1.0", "name": name, "type": "multinet-netdev",
		"capabilities": map[string]bool{"deviceID": true, "CNIDeviceInfoFile": true},
		"ipam": map[string]any{"type": "host-local", "dataDir": tn.DataDir,
			"ranges": [][]map[string]string{{{"subnet": tn.Subnet}}}},
	}, map[string]string{resourceNameAnnotation: resourceName})
	t.Cleanup(func() { _ = os.RemoveAll(target.path(tn.DataDir)) })
	return tn
}

// vhostNet creates NAD ns/name annotated with the vhost-user resource: a
// bridge network whose plugin declares the deviceID and CNIDeviceInfoFile
// capabilities (the bridge plugin ignores them; multinetd still gives the
// attachment the device's device-info, device-info spec §4.2, §5.3.8).
func vhostNet(t *testing.T, ns, name, resourceName string) *testNet {
	t.Helper()
	return vhostNetCaps(t, ns, name, resourceName, map[string]bool{"deviceID": true, "CNIDeviceInfoFile": true})
}

// vhostNetCaps is vhostNet whose plugin declares caps.
func vhostNetCaps(t *testing.T, ns, name, resourceName string, caps map[string]bool) *testNet {
	t.Helper()
	tn := bridgeNet(t, ns, name, "1.1.0", caps)
	ctx := testContext(t, 30*time.Second)
	nads := testCluster.multi.K8sCniCncfIoV1().NetworkAttachmentDefinitions(ns)
	nad, err := nads.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get NAD %s/%s: %v", ns, name, err)
	}
	nad.Annotations = map[string]string{resourceNameAnnotation: resourceName}
	if _, err := nads.Update(ctx, nad, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("annotate NAD %s/%s with %s: %v", ns, name, resourceName, err)
	}
	return tn
}

// attachmentStatus returns the network-status entry of the pod's interface.
func attachmentStatus(t *testing.T, p *corev1.Pod, ifname string) status.NetworkStatus {
	t.Helper()
	for _, s := range networkStatus(t, p) {
		if s.Interface == ifname {
			return s
		}
	}
	t.Fatalf("pod %s/%s: network-status has no entry for %s: %s", p.Namespace, p.Name, ifname, p.Annotations[status.Annotation])
	return status.NetworkStatus{}
}

// podSpecResources is podSpec whose container also asks for the given
// extended resources itself.
func podSpecResources(ns, name, networks string, res map[string]int64) *corev1.Pod {
	p := podSpec(ns, name, networks)
	rl := corev1.ResourceList{}
	for k, v := range res {
		rl[corev1.ResourceName(k)] = *resource.NewQuantity(v, resource.DecimalSI)
	}
	p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: rl, Limits: rl.DeepCopy()}
	return p
}

// createPod creates the pod and returns the API server's answer (the
// admission webhooks' rejection included).
func createPod(t *testing.T, p *corev1.Pod) (*corev1.Pod, error) {
	t.Helper()
	return testCluster.kube.CoreV1().Pods(p.Namespace).Create(testContext(t, 30*time.Second), p, metav1.CreateOptions{})
}

// runHack runs a hack/ script of the repository and fails the test when it
// fails.
func runHack(t *testing.T, timeout time.Duration, script string, args ...string) {
	t.Helper()
	ctx := testContext(t, timeout)
	cmd := exec.CommandContext(ctx, filepath.Join("..", "..", "hack", script), args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/%s %s: %v\n%s", script, strings.Join(args, " "), err, out)
	}
}

// freePort returns a TCP port on 127.0.0.1 nobody listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitInjected waits until the webhook's NAD informer has caught up with
// the test's NADs: a server-side dry-run create of the pod comes back with
// want of the resource in its first container (resource injection), so that
// the real create that follows gets it too.
func waitInjected(t *testing.T, p *corev1.Pod, resourceName string, want int64) {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := testCluster.kube.CoreV1().Pods(p.Namespace).Create(ctx, p.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		_, lim := containerResources(got, resourceName)
		last = fmt.Sprintf("limits %v", got.Spec.Containers[0].Resources.Limits)
		return lim.Value() == want, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s: the webhook does not inject %d %s (last: %s): %v", p.Namespace, p.Name, want, resourceName, last, err)
	}
}

// pluginSocket is the socket multinet-deviceplugin serves for the resource
// (docs/deviceplugin.md: <dir>/multinet-<name with / → _>.sock).
func pluginSocket(t *testing.T, resourceName string) string {
	t.Helper()
	return target.path(filepath.Join(testCluster.mustEnv(t, "DEVICE_PLUGINS_DIR"), "multinet-"+strings.ReplaceAll(resourceName, "/", "_")+".sock"))
}

// pluginSocketID identifies the plugin's socket file by inode and ctime
// (an inode number alone is reused at once for a re-created file); "" when
// absent.
func pluginSocketID(t *testing.T, resourceName string) string {
	t.Helper()
	fi, err := os.Stat(pluginSocket(t, resourceName))
	if err != nil {
		return ""
	}
	st := fi.Sys().(*syscall.Stat_t)
	return fmt.Sprintf("%d@%d.%09d", st.Ino, st.Ctim.Sec, st.Ctim.Nsec)
}

// pluginClient dials the gRPC socket multinet-deviceplugin serves for the
// resource (docs/deviceplugin.md: <dir>/multinet-<name with / → _>.sock), as
// kubelet does.
func pluginClient(t *testing.T, resourceName string) pluginapi.DevicePluginClient {
	t.Helper()
	sock := pluginSocket(t, resourceName)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial %s: %v", sock, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return pluginapi.NewDevicePluginClient(conn)
}

// watchHealth opens a ListAndWatch stream of the plugin and sends each list
// it gets as device ID → health ("Healthy"/"Unhealthy"), until the test ends.
func watchHealth(t *testing.T, c pluginapi.DevicePluginClient) <-chan map[string]string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := c.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatalf("ListAndWatch: %v", err)
	}
	ch := make(chan map[string]string, 16)
	go func() {
		defer close(ch)
		for {
			r, err := stream.Recv()
			if err != nil {
				return
			}
			m := map[string]string{}
			for _, d := range r.Devices {
				m[d.ID] = d.Health
			}
			select {
			case ch <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

// waitHealth reads lists from ch until device id has the health, and
// returns how long that took.
func waitHealth(t *testing.T, ch <-chan map[string]string, id, health string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	timeout := time.After(within)
	for {
		select {
		case m, ok := <-ch:
			if !ok {
				t.Fatalf("ListAndWatch stream ended before %s became %s", id, health)
			}
			if m[id] == health {
				return time.Since(start)
			}
		case <-timeout:
			t.Fatalf("ListAndWatch: %s not %s within %v", id, health, within)
		}
	}
}

// nodeStatusPeriod is the kubelet's nodeStatusUpdateFrequency (its config
// file; 10s when unset): how often it publishes a changed allocatable.
func nodeStatusPeriod(t *testing.T) time.Duration {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testCluster.mustEnv(t, "MULTINET_CLUSTER_DIR"), "kubelet-config.yaml"))
	if err != nil {
		t.Fatalf("kubelet config: %v", err)
	}
	var cfg struct {
		NodeStatusUpdateFrequency string `json:"nodeStatusUpdateFrequency"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("kubelet config: %v", err)
	}
	if cfg.NodeStatusUpdateFrequency == "" {
		return 10 * time.Second
	}
	d, err := time.ParseDuration(cfg.NodeStatusUpdateFrequency)
	if err != nil {
		t.Fatalf("kubelet config nodeStatusUpdateFrequency: %v", err)
	}
	return d
}

// toggleHealth sets the netdev down and up and checks that the plugin's
// ListAndWatch reports each change within 5 s, and the node's allocatable
// (n with every device up) follows within the kubelet's node status period
// plus 5 s, its capacity staying capacity.
func toggleHealth(t *testing.T, resourceName, dev string, n, capacity int64) {
	t.Helper()
	health := watchHealth(t, pluginClient(t, resourceName))
	waitHealth(t, health, dev, pluginapi.Healthy, 5*time.Second)
	t.Cleanup(func() { target.try("ip", "link", "set", dev, "up") })
	publish := nodeStatusPeriod(t) + 5*time.Second

	setLink(t, dev, "down")
	took := waitHealth(t, health, dev, pluginapi.Unhealthy, 5*time.Second)
	tookNode := waitAllocatable(t, resourceName, n-1, publish)
	t.Logf("%s down: ListAndWatch Unhealthy after %v, node allocatable %d after %v", dev, took.Round(time.Millisecond), n-1, tookNode.Round(time.Millisecond))
	if _, c := nodeResource(t, corev1.ResourceName(resourceName)); c != capacity {
		t.Errorf("capacity %s = %d with %s down, want %d (an unhealthy device stays listed)", resourceName, c, dev, capacity)
	}

	setLink(t, dev, "up")
	took = waitHealth(t, health, dev, pluginapi.Healthy, 5*time.Second)
	tookNode = waitAllocatable(t, resourceName, n, publish)
	t.Logf("%s up: ListAndWatch Healthy after %v, node allocatable %d after %v", dev, took.Round(time.Millisecond), n, tookNode.Round(time.Millisecond))
}
