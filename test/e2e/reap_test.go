//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// TestStaleSandboxIsReaped: a sandbox the runtime no longer has, whose DEL
// never reached multinetd (containerd's one cleanup DEL of a failed ADD gives
// up while multinetd is in a crash loop, and containerd never calls CNI GC:
// the chaos suite's leak), is torn down by multinetd's reaper: its addresses
// on the pod's network and on the default network are released and its
// record removed, while the pod's live sandbox keeps everything.
func TestStaleSandboxIsReaped(t *testing.T) {
	ns := newNamespace(t)
	net := bridgeNet(t, ns, "reap", "1.0.0", nil)
	runPod(t, podSpec(ns, "p", "reap"))
	reapedBefore, failedBefore := staleSandboxes(t, "reaped"), staleSandboxes(t, "failed")
	recs := podRecords(t, ns, "p")
	if len(recs) != 1 {
		t.Fatalf("want one record of the pod, got %v", recs)
	}
	live := readRecord(t, recs[0])

	// A sandbox of the same pod that the runtime does not list: ADD as the
	// runtime would run it, into a network namespace of the test.
	netnsName := "mn-reap-" + randHex(3)
	hostRun(t, "ip", "netns", "add", netnsName)
	t.Cleanup(func() { target.try("ip", "netns", "del", netnsName) })
	stale := strings.Repeat("e", 52) + randHex(6)
	args := strings.ReplaceAll(live.CNIArgs, live.ContainerID, stale)
	if out, err := runShim(t, "ADD", stale, "/run/netns/"+netnsName, args); err != nil {
		t.Fatalf("shim ADD of the stale sandbox: %v\n%s", err, out)
	}
	if !holds(net.allocations(t), stale) || !holds(defaultNetworkLeases(t), stale) {
		t.Fatalf("the stale sandbox holds no address: %v, default network %v", net.allocations(t), defaultNetworkLeases(t))
	}
	// The runtime removed it: its netns is gone, and its record is older
	// than reapMinAge.
	hostRun(t, "ip", "netns", "del", netnsName)
	recordFile := filepath.Join(recordsDir(t), stale+".json")
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(recordFile, old, old); err != nil {
		t.Fatalf("age the stale record: %v", err)
	}

	// reapInterval is 10s on the local cluster.
	var statErr error
	err := wait.PollUntilContextTimeout(testContext(t, 100*time.Second), time.Second, 90*time.Second, true, func(context.Context) (bool, error) {
		_, statErr = os.Stat(recordFile)
		// The reaper counts a pass's reaps when the pass is over.
		return os.IsNotExist(statErr) && !holds(net.allocations(t), stale) && !holds(defaultNetworkLeases(t), stale) &&
			staleSandboxes(t, "reaped") >= reapedBefore+1, nil
	})
	if err != nil {
		t.Fatalf("90s after the stale sandbox's record aged: record present=%v, addresses %v, default network %v, multinet_stale_sandboxes_total{result=reaped} %v (was %v)",
			statErr == nil, net.allocations(t), defaultNetworkLeases(t), staleSandboxes(t, "reaped"), reapedBefore)
	}
	// The reaper counted it, so the pass that removed the stale sandbox is
	// over, and that pass went through every record, the live sandbox's among
	// them: the live sandbox keeping everything below is a verdict on a reap
	// that ran, not on one that may not have come yet.
	if got := staleSandboxes(t, "failed"); got != failedBefore {
		t.Errorf("multinet_stale_sandboxes_total{result=failed} = %v, was %v", got, failedBefore)
	}
	if !holds(net.allocations(t), live.ContainerID) || !holds(defaultNetworkLeases(t), live.ContainerID) {
		t.Errorf("the live sandbox lost an address: %v, default network %v", net.allocations(t), defaultNetworkLeases(t))
	}
	if r := podRecords(t, ns, "p"); len(r) != 1 || r[0] != recs[0] {
		t.Errorf("records of the pod after the reap = %v, want the live one %v", r, recs)
	}
	deletePod(t, ns, "p")
	assertReleased(t, net)
}

// staleSandboxes returns the target node's multinetd's
// multinet_stale_sandboxes_total for result (0 before the first one; the
// test fails when the metrics cannot be read).
func staleSandboxes(t *testing.T, result string) float64 {
	t.Helper()
	return metricSum([]byte(target.daemonMetrics(t)), "multinet_stale_sandboxes_total", `result="`+result+`"`)
}

// holds reports whether one of the leases ("ip → containerID") is the
// container's.
func holds(leases map[string]string, containerID string) bool {
	for _, id := range leases {
		if strings.TrimSpace(id) == containerID {
			return true
		}
	}
	return false
}

// defaultNetworkLeases lists the addresses host-local holds for the default
// network on the target node (DEFAULT_NETWORK_CONF: the first plugin's
// ipam.dataDir, else host-local's /var/lib/cni/networks, then the network's
// name).
func defaultNetworkLeases(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(target.path(testCluster.mustEnv(t, "DEFAULT_NETWORK_CONF")))
	if err != nil {
		t.Fatal(err)
	}
	var conf struct {
		Name    string `json:"name"`
		Plugins []struct {
			IPAM struct {
				DataDir string `json:"dataDir"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(b, &conf); err != nil || len(conf.Plugins) == 0 {
		t.Fatalf("default network conflist: %v", err)
	}
	dir := conf.Plugins[0].IPAM.DataDir
	if dir == "" {
		dir = "/var/lib/cni/networks"
	}
	return (&testNet{Name: conf.Name, DataDir: dir}).allocations(t)
}
