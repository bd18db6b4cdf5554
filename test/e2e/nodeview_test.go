//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/multinet/multinet/internal/testing/testskip"
	"github.com/multinet/multinet/pkg/spec/status"
)

// Delegates see the node, not multinetd's container.

// nodeViewPlugin is a delegate written as the node's users write scripts: a
// dynamically linked /bin/sh running the node's jq and iptables. It appends
// what it sees to the file its config names in "probeFile" and passes
// prevResult through on ADD. Inside multinetd's from-scratch container none
// of /bin/sh, jq, iptables or the marker file exist.
const nodeViewPlugin = `#!/bin/sh
conf=$(cat)
out=$(printf '%s' "$conf" | jq -r '.probeFile')
marker=$(printf '%s' "$conf" | jq -r '.markerFile')
{
  printf 'command=%s\n' "$CNI_COMMAND"
  printf 'iptables=%s\n' "$(iptables --version 2>&1 | head -n 1)"
  printf 'marker=%s\n' "$(cat "$marker" 2>&1)"
  printf 'cgroup=%s\n' "$(grep -E '^[0-9]+:memory:' /proc/self/cgroup | cut -d: -f3)"
  printf 'cpucgroup=%s\n' "$(grep -E '^[0-9]+:(cpu|cpu,cpuacct):' /proc/self/cgroup | cut -d: -f3)"
  printf 'runtimeConfig=%s\n' "$(printf '%s' "$conf" | jq -c '.runtimeConfig // {}')"
} >>"$out"
case "$CNI_COMMAND" in
ADD) printf '%s' "$conf" | jq -c '.prevResult' ;;
VERSION) echo '{"cniVersion":"1.0.0","supportedVersions":["0.3.1","0.4.0","1.0.0"]}' ;;
esac
`

// installNodeViewPlugin writes the script delegate into the target node's
// CNI bin dir and returns its type name.
func installNodeViewPlugin(t *testing.T) string {
	t.Helper()
	name := "mn-e2e-nodeview-" + randHex(3)
	p := target.path(filepath.Join(testCluster.mustEnv(t, "CNI_BIN_DIR"), name))
	if err := os.WriteFile(p, []byte(nodeViewPlugin), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(p) })
	return name
}

// probeLines reads the script's reports: one map per CNI call.
func probeLines(t *testing.T, path string) []map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("the delegate left no report at %s on the node: %v", path, err)
	}
	defer f.Close()
	var out []map[string]string
	cur := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		if k == "command" && len(cur) > 0 {
			out = append(out, cur)
			cur = map[string]string{}
		}
		cur[k] = v
	}
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

// memoryCgroup returns the memory cgroup path of host process pid.
func memoryCgroup(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if parts := strings.SplitN(l, ":", 3); len(parts) == 3 && parts[1] == "memory" {
			return parts[2]
		}
	}
	t.Fatalf("pid %d has no memory cgroup: %s", pid, b)
	return ""
}

// TestDelegatesRunInTheNodeView: a delegate that needs the node's shell, C
// library, jq, iptables and a file only the node has runs as a secondary
// network's plugin for ADD and DEL; it runs outside multinetd's container
// cgroup; and the runtime's portMappings reach the default network only
// (multi-net spec §7.5), never a secondary delegate that declares the
// capability.
func TestDelegatesRunInTheNodeView(t *testing.T) {
	if testCluster.env["CNI_MODE"] != "multinet" {
		testskip.Skip(t, "needs multinetd (CNI_MODE=%s)", testCluster.env["CNI_MODE"])
	}
	ns := newNamespace(t)
	plugin := installNodeViewPlugin(t)
	dir := t.TempDir() // on the node (every node shares the host's /tmp), outside every multinetd mount
	probeFile := filepath.Join(dir, "report")
	markerFile := filepath.Join(dir, "marker")
	marker := "node-only-" + randHex(4)
	if err := os.WriteFile(markerFile, []byte(marker), 0o644); err != nil {
		t.Fatal(err)
	}
	n := bridgeNet(t, ns, "nodeview", "1.0.0", nil, map[string]any{
		"type": plugin, "probeFile": probeFile, "markerFile": markerFile,
		"capabilities": map[string]bool{"portMappings": true},
	})

	p := podSpec(ns, "nodeview", "nodeview")
	p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 18181, Protocol: corev1.ProtocolTCP}}
	runPod(t, p)

	adds := probeLines(t, probeFile)
	if len(adds) != 1 || adds[0]["command"] != "ADD" {
		t.Fatalf("delegate reports after ADD: %v, want one ADD", adds)
	}
	r := adds[0]
	if !strings.HasPrefix(r["iptables"], "iptables v") {
		t.Errorf("the delegate could not run the node's iptables: %q", r["iptables"])
	}
	if r["marker"] != marker {
		t.Errorf("the delegate read %q from %s, want the node's file %q", r["marker"], markerFile, marker)
	}
	if strings.Contains(r["runtimeConfig"], "portMappings") {
		t.Errorf("a secondary delegate got the runtime's portMappings (spec §7.5: default network only): %s", r["runtimeConfig"])
	}
	if testCluster.deployed {
		daemon := runningPod(t, "multinetd")
		dcg := memoryCgroup(t, containerPID(t, daemon))
		if r["cgroup"] != "/" || r["cgroup"] == dcg {
			t.Errorf("the delegate ran in memory cgroup %q; multinetd's container is in %q: want the node's root cgroup (delegateCgroup /)", r["cgroup"], dcg)
		}
		if r["cpucgroup"] != "/" {
			t.Errorf("the delegate ran in cpu cgroup %q, want the node's root (not multinetd's CPU weight)", r["cpucgroup"])
		}
	}

	deletePod(t, ns, "nodeview")
	all := probeLines(t, probeFile)
	if len(all) < 2 || all[len(all)-1]["command"] != "DEL" || all[len(all)-1]["marker"] != marker {
		t.Errorf("delegate reports after the pod's deletion: %v, want a DEL in the node's view", all)
	}
	assertReleased(t, n)
	assertNoRecords(t, ns)
}

// TestHostPort: the default network (containerd's conflist: bridge +
// portmap, or kind's: ptp + portmap) gets the runtime's portMappings and
// portmap programs the node's iptables: the pod answers on the node's
// address and its hostPort (the target node's pod gateway, from the node's
// network namespace); after deletion its rules are gone.
func TestHostPort(t *testing.T) {
	ns := newNamespace(t)
	const hostPort = 18182
	body := "hostport-" + randHex(4)
	p := podSpec(ns, "web", "")
	p.Spec.Containers[0].Command = []string{"sh", "-c",
		"mkdir -p /tmp/www && echo " + body + " >/tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"}
	p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: hostPort, Protocol: corev1.ProtocolTCP}}
	got := runPod(t, p)
	podIP := got.Status.PodIP

	gw := target.podGateway(t)
	url := fmt.Sprintf("http://%s:%d/", gw, hostPort)
	ctx := testContext(t, 60*time.Second)
	var answer string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		answer = target.httpGet(ctx, url)
		return strings.TrimSpace(answer) == body, nil
	})
	if err != nil {
		t.Fatalf("GET %s (hostPort %d → %s:8080) = %q, want %q\n%s", url, hostPort, podIP, answer, body, natRules(t))
	}
	if !strings.Contains(natRules(t), podIP) {
		t.Errorf("no iptables nat rule mentions the pod %s", podIP)
	}
	var sts []status.NetworkStatus
	if err := json.Unmarshal([]byte(got.Annotations[status.Annotation]), &sts); err != nil || len(sts) != 1 {
		t.Errorf("network-status %q: want the default network only", got.Annotations[status.Annotation])
	}

	deletePod(t, ns, "web")
	if rules := natRules(t); strings.Contains(rules, podIP+"/32") || strings.Contains(rules, podIP+":8080") {
		t.Errorf("iptables rules of the deleted pod %s are still there:\n%s", podIP, rules)
	}
	if a := target.httpGet(ctx, url); a != "" {
		t.Errorf("GET %s after the pod's deletion answered %q", url, a)
	}
}

// natRules returns the target node's nat table (iptables -S).
func natRules(t *testing.T) string {
	t.Helper()
	return target.run(t, "iptables", "-w", "5", "-t", "nat", "-S")
}

// TestDelegateStateSurvivesRestart: host-local without dataDir keeps its
// allocations in the node's /var/lib/cni/networks; a multinetd restart loses
// none of them, so the next pod never gets a duplicate address, and the pod
// from before the restart is torn down from its records.
func TestDelegateStateSurvivesRestart(t *testing.T) {
	if testCluster.env["CNI_MODE"] != "multinet" {
		testskip.Skip(t, "needs multinetd (CNI_MODE=%s)", testCluster.env["CNI_MODE"])
	}
	ns := newNamespace(t)
	n := nextSubnet()
	name := "restart-" + randHex(3) // host-local's directory is the network name
	bridge := "mne" + randHex(4)
	createNAD(t, ns, "restart", map[string]any{
		"cniVersion": "1.0.0", "name": name,
		"plugins": []map[string]any{{"type": "bridge", "bridge": bridge, "ipam": map[string]any{
			"type": "host-local", "ranges": [][]map[string]string{{{"subnet": fmt.Sprintf("10.210.%d.0/28", n)}}}}}},
	}, nil)
	stateDir := filepath.Join("/var/lib/cni/networks", name)
	seen := target.path(stateDir) // stateDir as this process sees the node's
	t.Cleanup(func() { target.try("ip", "link", "del", bridge); _ = os.RemoveAll(seen) })

	a := runPod(t, podSpec(ns, "a", "restart"))
	ipA := secondaryIP(t, a, ns+"/restart")
	if _, err := os.Stat(filepath.Join(seen, ipA)); err != nil {
		t.Fatalf("host-local's allocation of %s is not in the node's %s: %v", ipA, stateDir, err)
	}

	restartDaemon(t)

	b := runPod(t, podSpec(ns, "b", "restart"))
	ipB := secondaryIP(t, b, ns+"/restart")
	if ipA == ipB {
		t.Fatalf("after a multinetd restart the next pod got %s again (duplicate address)", ipB)
	}
	if _, err := os.Stat(filepath.Join(seen, ipA)); err != nil {
		t.Errorf("the allocation of %s did not survive the restart: %v", ipA, err)
	}
	deletePod(t, ns, "a")
	if _, err := os.Stat(filepath.Join(seen, ipA)); !os.IsNotExist(err) {
		t.Errorf("deleting the pod from before the restart did not release %s: %v", ipA, err)
	}
	deletePod(t, ns, "b")
	if _, err := os.Stat(filepath.Join(seen, ipB)); !os.IsNotExist(err) {
		t.Errorf("%s not released: %v", ipB, err)
	}
	assertNoRecords(t, ns)
}

// secondaryIP returns the first IP network-status gives for network name.
func secondaryIP(t *testing.T, p *corev1.Pod, name string) string {
	t.Helper()
	for _, s := range networkStatus(t, p) {
		if s.Name == name && len(s.IPs) > 0 {
			return s.IPs[0]
		}
	}
	t.Fatalf("pod %s/%s: no address for %s in network-status %s", p.Namespace, p.Name, name, p.Annotations[status.Annotation])
	return ""
}

// TestDistributionConflistsAsNADs: the default networks that distributions
// ship, written as NADs the way users copy them (kind's kindnet: ptp +
// host-local with dataDir /run/cni-ipam-state + portmap; containerd's
// example: bridge + host-local in its default dataDir + portmap), attach as
// secondary networks, keep their state in the node's directories, and are
// torn down cleanly.
func TestDistributionConflistsAsNADs(t *testing.T) {
	if testCluster.env["CNI_MODE"] != "multinet" {
		testskip.Skip(t, "needs multinetd (CNI_MODE=%s)", testCluster.env["CNI_MODE"])
	}
	for _, tc := range []struct {
		name, dataDir string
		main          func(subnet string) map[string]any
	}{
		{"kindnet", "/run/cni-ipam-state", func(subnet string) map[string]any {
			return map[string]any{"type": "ptp", "ipMasq": false, "mtu": 1500, "ipam": map[string]any{
				"type": "host-local", "dataDir": "/run/cni-ipam-state",
				"routes": []map[string]string{{"dst": "0.0.0.0/0"}}, "ranges": [][]map[string]string{{{"subnet": subnet}}}}}
		}},
		{"containerd-net", "/var/lib/cni/networks", func(subnet string) map[string]any {
			return map[string]any{"type": "bridge", "bridge": "mne" + randHex(4), "isGateway": true, "ipMasq": true, "promiscMode": true,
				"ipam": map[string]any{"type": "host-local", "ranges": [][]map[string]string{{{"subnet": subnet}}}}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNamespace(t)
			netName := tc.name + "-" + randHex(3)
			main := tc.main(fmt.Sprintf("10.210.%d.0/24", nextSubnet()))
			createNAD(t, ns, "distro", map[string]any{"cniVersion": "0.3.1", "name": netName, "plugins": []map[string]any{
				main, {"type": "portmap", "capabilities": map[string]bool{"portMappings": true}}}}, nil)
			stateDir := filepath.Join(tc.dataDir, netName)
			seen := target.path(stateDir) // stateDir as this process sees the node's
			t.Cleanup(func() {
				_ = os.RemoveAll(seen)
				if br, ok := main["bridge"].(string); ok {
					target.try("ip", "link", "del", br)
				}
			})
			p := runPod(t, podSpec(ns, "distro", "distro"))
			ip := secondaryIP(t, p, ns+"/distro")
			if _, err := os.Stat(filepath.Join(seen, ip)); err != nil {
				t.Errorf("host-local's allocation of %s is not in the node's %s: %v", ip, stateDir, err)
			}
			deletePod(t, ns, "distro")
			if _, err := os.Stat(filepath.Join(seen, ip)); !os.IsNotExist(err) {
				t.Errorf("%s not released from %s: %v", ip, stateDir, err)
			}
			assertNoRecords(t, ns)
		})
	}
}
