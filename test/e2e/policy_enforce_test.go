//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/multinet/multinet/internal/node/nftpolicy"
	"github.com/multinet/multinet/pkg/spec/policy"
	"github.com/multinet/multinet/pkg/spec/status"
)

// Enforcement's own guarantees (docs/network-policy.md), beyond upstream's
// scenarios (policy_*_test.go): no window at creation, rules that follow
// labels, namespace labels, hot-plug and the policy's deletion, a restart
// that keeps established connections, a DEL that leaves no table, and
// Events for what cannot be enforced.

// mnpServerIn allows ingress to pods name=server from pods name=friend of
// the policy's namespace and from pods name=stranger of namespaces
// labelled mnp-e2e-friends=yes.
const mnpServerIn = `
podSelector:
  matchLabels:
    name: server
policyTypes:
- Ingress
ingress:
- from:
  - podSelector:
      matchLabels:
        name: friend
  - namespaceSelector:
      matchLabels:
        mnp-e2e-friends: "yes"
    podSelector:
      matchLabels:
        name: stranger`

// TestNetworkPolicyNoWindow: a pod created under an existing policy is
// never reachable unprotected (a peer the policy denies tries to connect
// all through its creation; no attempt reaches it, and the rules are there
// when it first runs), and the rules then follow the changes.
func TestNetworkPolicyNoWindow(t *testing.T) {
	ns, other := newNamespace(t), newNamespace(t)
	master := vethPair(t)
	nad := "mnp-nowin-" + randHex(3)
	createNAD(t, "default", nad, fmt.Sprintf(fmt.Sprintf(mnpMacvlanStatic, nad), master), nil)
	t.Cleanup(func() { deleteNAD(t, "default", nad) })
	network := "default/" + nad
	createMNP(t, ns, network, mnpPolicy{name: "server-in", version: "v1beta2", spec: mnpServerIn})
	nss := map[string]string{"": ns, "other": other}
	pods := startMNPPods(t, nss, network, []mnpPod{{name: "friend", ip: "2.2.7.11/24"}, {name: "stranger", ns: "other", ip: "2.2.7.13/24"}})
	friend, stranger := pods["friend"], pods["stranger"]

	server := createUnderPolicy(t, nss, network, stranger, netip.MustParseAddr("2.2.7.1"))
	pods["server"] = server
	listenMNP(t, server, []mnpPort{tcp5555})
	mustReach(t, friend, server, true)
	mustReach(t, stranger, server, false)

	setNamespaceLabel(t, other, "mnp-e2e-friends", "yes")
	mustReach(t, stranger, server, true)
	setNamespaceLabel(t, other, "mnp-e2e-friends", "")
	mustReach(t, stranger, server, false)

	setPodLabel(t, server, "name", "server-x")
	waitPolicyTables(t, map[string]*mnpRunning{"server": server}, nil)
	mustReach(t, stranger, server, true)
	setPodLabel(t, server, "name", "server")
	waitPolicyTables(t, map[string]*mnpRunning{"server": server}, []string{"server"})
	mustReach(t, stranger, server, false)

	keepsEstablished(t, friend, server)
	hotPlugUnderPolicy(t, ns, network)

	deleteMNP(t, ns, "server-in")
	waitPolicyTables(t, map[string]*mnpRunning{"server": server}, nil)
	mustReach(t, stranger, server, true)
}

// createUnderPolicy creates pod "server" (name=server, address addr on
// network) while prober connects to addr:5555 again and again, and returns
// it once it runs. No attempt may be answered: the policy drops the
// prober's SYNs from the first packet the pod could receive; without the
// rules the pod's kernel answers with a reset (nothing listens yet).
func createUnderPolicy(t *testing.T, nss map[string]string, network string, prober *mnpRunning, addr netip.Addr) *mnpRunning {
	t.Helper()
	var (
		mu                 sync.Mutex
		attempts, answered int
		firstAnswer        error
		stop               = make(chan struct{})
		done               = make(chan struct{})
	)
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			err := prober.inPod(func() error {
				c, err := net.DialTimeout("tcp", netip.AddrPortFrom(addr, 5555).String(), 300*time.Millisecond)
				if err == nil {
					c.Close()
				}
				return err
			})
			mu.Lock()
			attempts++
			if err == nil || errors.Is(err, syscall.ECONNREFUSED) {
				answered++
				if firstAnswer == nil {
					firstAnswer = fmt.Errorf("attempt %d: %v", attempts, err)
				}
			}
			mu.Unlock()
		}
	}()
	nsName, name, _ := strings.Cut(network, "/")
	p := podSpec(nss[""], "server", fmt.Sprintf(`[{"name":%q,"namespace":%q,"ips":["%s/24"]}]`, name, nsName, addr))
	p.Labels = map[string]string{"app": "mnp-e2e", "name": "server"}
	createPods(t, []*corev1.Pod{p})
	t.Cleanup(func() { deletePod(t, p.Namespace, p.Name) }) // its records gone; the other pods' cleanup waits for theirs
	got := waitRunning(t, p.Namespace, p.Name, 90*time.Second)
	files := podRecords(t, p.Namespace, p.Name)
	if len(files) != 1 {
		t.Fatalf("pod server: %d attachment records, want 1", len(files))
	}
	server := &mnpRunning{pod: got, addr: attachmentIP(t, got, "net1"), netns: target.path(readRecord(t, files[0]).Netns)}
	if has, err := server.hasPolicyTable(); err != nil || !has {
		t.Errorf("when pod server first runs, its netns has table inet %s: %v (%v); want it since its ADD", nftpolicy.TableName, has, err)
	}
	time.Sleep(time.Second) // a few more attempts once it runs
	close(stop)
	<-done
	mu.Lock()
	defer mu.Unlock()
	if attempts < 3 {
		t.Errorf("the prober made %d connection attempts during the pod's creation: the test proved nothing", attempts)
	}
	if answered > 0 {
		t.Errorf("%d of %d connection attempts of a denied peer were answered while the pod was created (%v): it was reachable unprotected", answered, attempts, firstAnswer)
	}
	return server
}

// mustReach waits (at most mnpAllowedWithin) until from reaches to on TCP
// 5555 (want) or no longer does (!want): the rules follow a change
// asynchronously.
func mustReach(t *testing.T, from, to *mnpRunning, want bool) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(mnpAllowedWithin); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if err = reach(from, to, tcp5555); (err == nil) == want {
			return
		}
	}
	t.Fatalf("%s reaches %s on TCP 5555: %v (%v), want %v within %v", from.pod.Name, to.pod.Name, err == nil, err, want, mnpAllowedWithin)
}

// setNamespaceLabel sets (value "": removes) a label of namespace ns.
func setNamespaceLabel(t *testing.T, ns, key, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
	if value == "" {
		patch = fmt.Sprintf(`{"metadata":{"labels":{%q:null}}}`, key)
	}
	ctx := testContext(t, 30*time.Second)
	if _, err := testCluster.kube.CoreV1().Namespaces().Patch(ctx, ns, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("label namespace %s: %v", ns, err)
	}
}

// setPodLabel sets a label of pod p.
func setPodLabel(t *testing.T, p *mnpRunning, key, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
	ctx := testContext(t, 30*time.Second)
	if _, err := testCluster.kube.CoreV1().Pods(p.pod.Namespace).Patch(ctx, p.pod.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("label pod %s: %v", p.pod.Name, err)
	}
}

// keepsEstablished: a TCP connection from friend to server, established
// under the policy, still carries data after multinetd restarted (its
// re-sync finds the table right and leaves it, or replaces it whole with
// established connections accepted first).
func keepsEstablished(t *testing.T, friend, server *mnpRunning) {
	t.Helper()
	const port = 7777
	err := server.inPod(func() error {
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
		if err != nil {
			return err
		}
		t.Cleanup(func() { l.Close() })
		go func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				t.Cleanup(func() { c.Close() })
				go func() { _, _ = io.Copy(c, c) }() // no deadline: lives across the restart
			}
		}()
		return nil
	})
	if err != nil {
		t.Fatalf("listen in pod server: %v", err)
	}
	var c net.Conn
	err = friend.inPod(func() error {
		c, err = net.DialTimeout("tcp", netip.AddrPortFrom(server.addr, port).String(), 5*time.Second)
		return err
	})
	if err != nil {
		t.Fatalf("friend cannot connect to server:%d: %v", port, err)
	}
	defer c.Close()
	echo := func(msg string) error {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte(msg)); err != nil {
			return err
		}
		buf := make([]byte, len(msg))
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != msg {
			return fmt.Errorf("echo %q: got %q, %v", msg, buf, err)
		}
		return nil
	}
	if err := echo("before"); err != nil {
		t.Fatalf("established connection before the restart: %v", err)
	}
	restartDaemon(t)
	// The new multinetd re-syncs every sandbox once its informers listed.
	err = wait.PollUntilContextTimeout(testContext(t, 70*time.Second), 250*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		m := []byte(target.daemonMetrics(t))
		return metricSum(m, "multinet_policy_syncs_total", `result="unchanged"`)+metricSum(m, "multinet_policy_syncs_total", `result="applied"`) > 0, nil
	})
	if err != nil {
		t.Errorf("the restarted multinetd re-synced no sandbox within 60 s: %v", err)
	}
	if err := echo("after"); err != nil {
		t.Errorf("the established connection broke across multinetd's restart: %v", err)
	}
	if has, err := server.hasPolicyTable(); err != nil || !has {
		t.Errorf("after the restart, server's table: %v (%v), want it", has, err)
	}
}

// hotPlugUnderPolicy: a pod the policy selects that gets network by
// hot-plug has its rules when its network-status first lists the new
// interface; its DEL leaves no table in its network namespace (held open
// here past the runtime's removal of it).
func hotPlugUnderPolicy(t *testing.T, ns, network string) {
	t.Helper()
	p := podSpec(ns, "late", "")
	p.Labels = map[string]string{"app": "mnp-e2e", "name": "server"}
	runPod(t, p)
	nsName, name, _ := strings.Cut(network, "/")
	networks := fmt.Sprintf(`[{"name":%q,"namespace":%q,"ips":["2.2.7.21/24"]}]`, name, nsName)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"k8s.v1.cni.cncf.io/networks":%q}}}`, networks)
	ctx := testContext(t, 90*time.Second)
	if _, err := testCluster.kube.CoreV1().Pods(ns).Patch(ctx, "late", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("hot-plug pod late: %v", err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := testCluster.kube.CoreV1().Pods(ns).Get(ctx, "late", metav1.GetOptions{})
		return err == nil && strings.Contains(got.Annotations[status.Annotation], `"net1"`), nil
	})
	if err != nil {
		t.Fatalf("pod late: net1 never in its network-status after the hot-plug: %v", err)
	}
	files := podRecords(t, ns, "late")
	if len(files) != 1 {
		t.Fatalf("pod late: %d attachment records, want 1", len(files))
	}
	path := target.path(readRecord(t, files[0]).Netns)
	late := &mnpRunning{pod: p, netns: path}
	if has, err := late.hasPolicyTable(); err != nil || !has {
		t.Errorf("when its network-status first lists the hot-plugged net1, pod late's table: %v (%v), want it", has, err)
	}
	held, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatalf("hold pod late's netns: %v", err)
	}
	defer held.Close()
	deletePod(t, ns, "late")
	conn, err := nftables.New(nftables.WithNetNSFd(int(held)))
	if err != nil {
		t.Fatal(err)
	}
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		if tb.Name == nftpolicy.TableName {
			t.Errorf("pod late's DEL left table inet %s in its network namespace", nftpolicy.TableName)
		}
	}
}

// noInterfacePlugin is a CNI plugin whose attachment has no kernel
// interface in the pod, as vhost-user and memif plugins report: its result
// names an interface outside the sandbox.
const noInterfacePlugin = `#!/bin/sh
case "$CNI_COMMAND" in
ADD) printf '{"cniVersion":"1.0.0","interfaces":[{"name":"vhu-%s"}],"ips":[]}' "$CNI_IFNAME" ;;
VERSION) printf '{"cniVersion":"1.0.0","supportedVersions":["0.3.1","0.4.0","1.0.0","1.1.0"]}' ;;
esac
`

// TestNetworkPolicyUnenforceableReported: a policy selecting an attachment
// without a kernel interface gives a NoKernelInterface Warning Event on the
// pod and on the policy; a policy naming a network that does not exist gets
// an UnknownNetwork Warning Event.
func TestNetworkPolicyUnenforceableReported(t *testing.T) {
	ns := newNamespace(t)
	plugin := "mn-e2e-novif-" + randHex(3)
	bin := target.path(filepath.Join(testCluster.mustEnv(t, "CNI_BIN_DIR"), plugin))
	if err := os.WriteFile(bin, []byte(noInterfacePlugin), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(bin) })
	createNAD(t, ns, "vhu", map[string]any{"cniVersion": "1.0.0", "name": "vhu", "type": plugin}, nil)
	createMNP(t, ns, "vhu", mnpPolicy{name: "vm-in", version: "v1beta2", spec: "podSelector: {matchLabels: {name: vm}}\npolicyTypes: [Ingress]"})
	p := podSpec(ns, "vm", "vhu")
	p.Labels = map[string]string{"name": "vm"}
	runPod(t, p)
	waitEvent(t, ns, "vm", policy.ReasonNoKernelInterface, "vhu")
	waitEvent(t, ns, "vm-in", policy.ReasonNoKernelInterface, "vm")

	createMNP(t, ns, "no-such-network", mnpPolicy{name: "typo", version: "v1beta2", spec: "podSelector: {}"})
	waitEvent(t, ns, "typo", policy.ReasonUnknownNetwork, "no-such-network")
	deletePod(t, ns, "vm")
}
