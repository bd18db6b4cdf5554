//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// flakyPlugin is a CNI plugin that fails its first ADD (none has run while
// MARKER does not exist: it makes it and answers CNI error 100 with MSG),
// and is the bridge plugin for everything else.
const flakyPlugin = `#!/bin/sh
if [ "$CNI_COMMAND" = ADD ] && [ ! -e MARKER ]; then
	cat >/dev/null
	: > MARKER
	printf '{"cniVersion":"1.0.0","code":100,"msg":"MSG"}\n'
	exit 1
fi
exec "$(dirname "$0")/bridge"
`

// installFlakyPlugin installs a flakyPlugin under a name of its own in the
// target node's CNI bin dir, and returns its type, its marker file and the
// message of its one failure.
func installFlakyPlugin(t *testing.T) (name, marker, msg string) {
	t.Helper()
	name = "mn-e2e-flaky-" + randHex(3)
	marker = filepath.Join(t.TempDir(), "failed-once")
	msg = name + ": the first ADD fails on purpose"
	script := strings.NewReplacer("MARKER", marker, "MSG", msg).Replace(flakyPlugin)
	p := target.path(filepath.Join(testCluster.mustEnv(t, "CNI_BIN_DIR"), name))
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(p) })
	return name, marker, msg
}

// TestFirstAttachIsChecked: the check every pod of the suite goes through
// (runPod, waitRunning: firstAttachProblems) catches a pod that runs only
// because the kubelet retried its sandbox. A network's plugin fails its
// first ADD once and then works: the first pod's first sandbox fails, the
// kubelet's retry succeeds and the pod runs, and the check reports the
// failure (the kubelet's FailedCreatePodSandBox with the plugin's message);
// naming that failure (expectFailedAdd) passes it, naming another does not.
// A second pod of the same network attaches at once and passes; naming a
// failure for it fails, since none happened.
func TestFirstAttachIsChecked(t *testing.T) {
	ns := newNamespace(t)
	plugin, marker, msg := installFlakyPlugin(t)
	net, conf := bridgeNetConf(t, ns, "flaky", "1.0.0", nil)
	conf["plugins"].([]map[string]any)[0]["type"] = plugin
	createNAD(t, ns, "flaky", conf, nil)

	ctx := testContext(t, 30*time.Second)
	if _, err := testCluster.kube.CoreV1().Pods(ns).Create(ctx, podSpec(ns, "retried", "flaky"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	p := waitPodRunning(t, ns, "retried", 80*time.Second)
	if _, err := os.Stat(target.path(marker)); err != nil {
		t.Fatalf("the plugin never failed (%v): the scenario did not happen", err)
	}
	checkStatusMatchesPod(t, p, []string{"eth0", "net1"})

	problems := firstAttachProblems(t, p)
	t.Logf("the check on the retried pod:\n%s", strings.Join(problems, "\n"))
	if got := strings.Join(problems, "\n"); !strings.Contains(got, "FailedCreatePodSandBox") || !strings.Contains(got, msg) {
		t.Errorf("the check does not report the kubelet's FailedCreatePodSandBox with %q for a pod whose first ADD failed; it reports %q\nevents:\n%s",
			msg, problems, podEvents(ns, p.Name))
	}
	if named := firstAttachProblems(t, p, expectFailedAdd(msg)); len(named) != 0 {
		t.Errorf("with the failure named (expectFailedAdd(%q)) the check still reports %q", msg, named)
	}
	if other := firstAttachProblems(t, p, expectFailedAdd("some other failure")); len(other) <= len(problems) {
		t.Errorf("with another failure named the check reports %q, want the pod's failures and the one that did not happen", other)
	}

	q := runPod(t, podSpec(ns, "at-once", "flaky")) // fails the test when its ADD failed
	checkStatusMatchesPod(t, q, []string{"eth0", "net1"})
	if named := firstAttachProblems(t, q, expectFailedAdd(msg)); len(named) != 1 || !strings.Contains(named[0], "did not happen") {
		t.Errorf("a failure named for a pod that attached at once: the check reports %q, want that it did not happen", named)
	}

	deletePod(t, ns, "retried")
	deletePod(t, ns, "at-once")
	assertReleased(t, net)
	assertNoRecords(t, ns)
}
