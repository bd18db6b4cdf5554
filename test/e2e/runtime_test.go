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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// What containerd 2.x changes for CNI. containerd 2.x asks the
// network plugin for STATUS (CNI spec 1.1) on every CRI Status call when the
// conflist it loaded is 1.1.0 or newer, and reports the answer as the
// runtime's NetworkReady condition, which the kubelet turns into the node's
// Ready condition. multinet's conflist carries the default network's
// cniVersion, and multinetd answers STATUS with the default network's.

// statusPlugin is a delegate whose STATUS fails (code 50, "the plugin is
// not available") while the file its config names in "markerFile" exists;
// ADD appends CNI_NETNS to "<markerFile>.adds" and passes prevResult through.
const statusPlugin = `#!/bin/sh
conf=$(cat)
marker=$(printf '%s' "$conf" | jq -r '.markerFile')
case "$CNI_COMMAND" in
ADD)
  printf '%s\n' "$CNI_NETNS" >>"$marker.adds"
  printf '%s' "$conf" | jq -c '.prevResult' ;;
STATUS)
  if [ -e "$marker" ]; then
    printf '{"cniVersion":"1.1.0","code":50,"msg":"%s"}' "$(cat "$marker")"
    exit 1
  fi ;;
VERSION) echo '{"cniVersion":"1.1.0","supportedVersions":["0.3.1","0.4.0","1.0.0","1.1.0"]}' ;;
esac
`

// nodeReady returns the target node's Ready condition.
func nodeReady(ctx context.Context, t *testing.T) corev1.NodeCondition {
	t.Helper()
	n, err := testCluster.kube.CoreV1().Nodes().Get(ctx, target.Name, metav1.GetOptions{})
	if err != nil {
		return corev1.NodeCondition{Message: err.Error()}
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c
		}
	}
	return corev1.NodeCondition{}
}

// waitNodeReady waits until the node's Ready condition is want (and, when
// msg is not empty, its message holds msg).
func waitNodeReady(t *testing.T, want corev1.ConditionStatus, msg string) corev1.NodeCondition {
	t.Helper()
	ctx := testContext(t, 2*time.Minute)
	var c corev1.NodeCondition
	err := wait.PollUntilContextTimeout(ctx, time.Second, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		c = nodeReady(ctx, t)
		return c.Status == want && strings.Contains(c.Message, msg), nil
	})
	if err != nil {
		t.Fatalf("node Ready condition %s %q, want %s with %q", c.Status, c.Message, want, msg)
	}
	return c
}

// cniVersionOf returns the cniVersion of the conflist at path.
func cniVersionOf(t *testing.T, path string) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	var l struct {
		CNIVersion string `json:"cniVersion"`
	}
	_ = json.Unmarshal(raw, &l)
	return l.CNIVersion
}

// waitCNIVersion waits until multinet's conflist has cniVersion v.
func waitCNIVersion(t *testing.T, multinetConf, v string) {
	t.Helper()
	ctx := testContext(t, time.Minute)
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 45*time.Second, true, func(context.Context) (bool, error) {
		return cniVersionOf(t, multinetConf) == v, nil
	}); err != nil {
		t.Fatalf("%s has cniVersion %q, want %q", multinetConf, cniVersionOf(t, multinetConf), v)
	}
}

// TestRuntimeStatusFollowsTheDefaultNetwork: with a CNI 1.1.0 default
// network, containerd's STATUS call goes through multinet to the default
// network's delegates: a delegate reporting "not available" makes the node
// NotReady with its message, and the node is Ready again once it recovers
// (the target node: its conflists and plugins).
// containerd reloads the rewritten conflist (a pod's ADD runs the new
// chain) and hands delegates the pod's network namespace under its state
// dir (netns_mounts_under_state_dir).
func TestRuntimeStatusFollowsTheDefaultNetwork(t *testing.T) {
	defConf := target.path(testCluster.mustEnv(t, "DEFAULT_NETWORK_CONF"))
	confDir := testCluster.mustEnv(t, "CNI_CONF_DIR")
	multinetConf := target.path(filepath.Join(confDir, "00-multinet.conflist"))
	orig, err := os.ReadFile(defConf)
	if err != nil {
		t.Fatal(err)
	}
	origVersion := cniVersionOf(t, defConf)
	if got := cniVersionOf(t, multinetConf); got != origVersion {
		t.Fatalf("multinet's conflist has cniVersion %q, the default network %q: want the same", got, origVersion)
	}
	waitNodeReady(t, corev1.ConditionTrue, "")

	plugin := "mn-e2e-status-" + randHex(3)
	pluginPath := target.path(filepath.Join(testCluster.mustEnv(t, "CNI_BIN_DIR"), plugin))
	if err := os.WriteFile(pluginPath, []byte(statusPlugin), 0o755); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "not-available")
	t.Cleanup(func() {
		_ = os.Remove(marker)
		if err := os.WriteFile(defConf, orig, 0o644); err != nil {
			t.Errorf("restore %s: %v", defConf, err)
		}
		waitCNIVersion(t, multinetConf, origVersion)
		waitNodeReady(t, corev1.ConditionTrue, "")
		_ = os.Remove(pluginPath)
	})

	var list map[string]any
	if err := json.Unmarshal(orig, &list); err != nil {
		t.Fatalf("%s: %v", defConf, err)
	}
	list["cniVersion"] = "1.1.0"
	list["plugins"] = append(list["plugins"].([]any), map[string]any{"type": plugin, "markerFile": marker})
	raw, _ := json.MarshalIndent(list, "", "  ")
	if err := os.WriteFile(defConf, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	waitCNIVersion(t, multinetConf, "1.1.0")

	why := "e2e-" + randHex(4) + " link down"
	if err := os.WriteFile(marker, []byte(why), 0o644); err != nil {
		t.Fatal(err)
	}
	c := waitNodeReady(t, corev1.ConditionFalse, why)
	t.Logf("node not ready while the default network's STATUS fails: %s", c.Message)

	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	waitNodeReady(t, corev1.ConditionTrue, "")
	ns := newNamespace(t)
	p := runPod(t, podSpec(ns, "after-status", ""))
	if p.Status.PodIP == "" {
		t.Errorf("pod on the 1.1.0 default network has no IP")
	}
	adds, err := os.ReadFile(marker + ".adds")
	if err != nil {
		t.Fatalf("the 1.1.0 chain's last delegate never ran ADD (containerd did not reload the conflist?): %v", err)
	}
	netnsDir := testCluster.mustEnv(t, "CONTAINERD_NETNS_DIR")
	for _, l := range strings.Fields(string(adds)) {
		if !strings.HasPrefix(l, netnsDir+"/") {
			t.Errorf("CNI_NETNS %s, want containerd's netns under %s", l, netnsDir)
		}
	}
}
