//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/multinet/multinet/internal/node/daemon"
	"github.com/multinet/multinet/internal/testing/testskip"
)

// Hung delegates must not stall the node.

// hungPods is how many pods select the hanging network: more than
// multinetd's ADD slots (maxInFlight as deployed: its default for the
// node's CPUs, 32 on 2), so that before the fix they held every slot.
var hungPods = daemon.DefaultMaxInFlight(runtime.NumCPU()) + 4

// hangingPlugin is a delegate that never answers ADD: it appends its
// container ID to STARTED and execs a sleep of SLEEP seconds (one process:
// killing it at multinetd's delegateTimeout ends it, and a sleep of that
// length left on the node is a leak the test sees). Every other command
// answers at once, so that the bridge it is chained after is torn down.
const hangingPlugin = `#!/bin/sh
cat >/dev/null
case "$CNI_COMMAND" in
ADD) echo "$CNI_CONTAINERID" >>"STARTED"; exec sleep SLEEP ;;
VERSION) echo '{"cniVersion":"1.0.0","supportedVersions":["0.3.1","0.4.0","1.0.0"]}' ;;
esac
`

// installHangingPlugin writes hangingPlugin into the target node's CNI bin dir
// (removed when the test ends) and returns its type, the file it reports
// started ADDs in (a node path: delegates run in the node's view) and the
// sleep's argument.
func installHangingPlugin(t *testing.T) (name, started, sleep string) {
	t.Helper()
	name = "mn-e2e-hang-" + randHex(3)
	started = filepath.Join(t.TempDir(), "started")
	sleep = fmt.Sprint(7000 + rand.IntN(2000))
	script := strings.NewReplacer("STARTED", started, "SLEEP", sleep).Replace(hangingPlugin)
	p := target.path(filepath.Join(testCluster.mustEnv(t, "CNI_BIN_DIR"), name))
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(p) })
	return name, started, sleep
}

// startedADDs counts the hung ADDs the plugin has reported.
func startedADDs(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return bytes.Count(b, []byte("\n"))
}

// sleepsLeft lists the pids of node processes running "sleep <arg>" (the
// nodes share the host's PID namespace; arg is the test's own).
func sleepsLeft(arg string) []string {
	var pids []string
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(argv) == 2 && filepath.Base(argv[0]) == "sleep" && argv[1] == arg {
			pids = append(pids, filepath.Base(d))
		}
	}
	return pids
}

// TestHungDelegateDoesNotStallTheNode: 20 pods select a NAD whose plugin
// never answers ADD (chained after a bridge, so that each leaves a lease and
// a veth to clean up). While their ADDs hang, a pod on an ordinary network
// is attached and deleted within 30 s each (it needs an ADD slot, which the
// hung ADDs give back after delegateSlotTimeout, and a DEL slot, which they
// cannot take). The hung ADDs fail at multinetd's delegateTimeout (60 s as
// deployed; the kubelet's runtime request timeout is 2 min, the shim's
// 120 s) with a NetworkAttachFailed Event naming the network and the
// timeout; once the pods are deleted, nothing is left: no record, no lease,
// no bridge port, no plugin process.
//
// Before the fix every command shared the 16 slots: the hung ADDs, the
// kubelet's retries waiting for their containers and the DELs behind them
// held all of them, and the ordinary pod neither started nor went away
// until the hangs timed out.
func TestHungDelegateDoesNotStallTheNode(t *testing.T) {
	if testCluster.env["CNI_MODE"] != "multinet" {
		testskip.Skip(t, "needs multinetd (CNI_MODE=%s)", testCluster.env["CNI_MODE"])
	}
	ns := newNamespace(t)
	plugin, started, sleep := installHangingPlugin(t)
	hang, conf := bridgeNetConf(t, ns, "hang", "1.0.0", nil, map[string]any{"type": plugin})
	createNAD(t, ns, "hang", conf, nil)
	plain := bridgeNet(t, ns, "ok", "1.0.0", nil)

	ctx := testContext(t, 5*time.Minute)
	pods := testCluster.kube.CoreV1().Pods(ns)
	var names []string
	for i := range hungPods {
		name := fmt.Sprintf("hung-%02d", i)
		names = append(names, name)
		if _, err := pods.Create(ctx, podSpec(ns, name, "hang"), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod %s: %v", name, err)
		}
	}
	// Wait until at least 16 hung ADDs hold slots (all of maxInFlight once the
	// rest of the hungPods start).
	const adds = 16
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 45*time.Second, true, func(context.Context) (bool, error) {
		return startedADDs(started) >= adds, nil
	})
	if err != nil {
		t.Fatalf("%d of %d hung ADDs started: %v", startedADDs(started), adds, err)
	}
	t.Logf("%d hung ADDs running", startedADDs(started))

	// An ordinary pod attaches and goes away in normal time meanwhile.
	const bound = 30 * time.Second
	begin := time.Now()
	if _, err := pods.Create(ctx, podSpec(ns, "ordinary", "ok"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod ordinary: %v", err)
	}
	p := waitRunning(t, ns, "ordinary", bound)
	if got := networkStatus(t, p); len(got) != 2 || got[1].Name != ns+"/ok" {
		t.Errorf("ordinary pod's network-status %+v, want the default network and %s/ok", got, ns)
	}
	t.Logf("ordinary pod running after %s", time.Since(begin).Round(time.Second))
	begin = time.Now()
	if err := pods.Delete(ctx, "ordinary", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete pod ordinary: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, bound, true, func(ctx context.Context) (bool, error) {
		_, err := pods.Get(ctx, "ordinary", metav1.GetOptions{})
		return apierrors.IsNotFound(err) && len(podRecords(t, ns, "ordinary")) == 0, nil
	})
	if err != nil {
		t.Fatalf("ordinary pod not deleted (pod and record gone) within %s: %v\n%s", bound, err, podEvents(ns, "ordinary"))
	}
	t.Logf("ordinary pod deleted after %s", time.Since(begin).Round(time.Second))
	assertReleased(t, plain)

	// The hung ADDs fail at the delegate timeout, each pod told why.
	failed := map[string]string{}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 150*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := testCluster.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, e := range list.Items {
			if e.Reason == "NetworkAttachFailed" && strings.Contains(e.Message, "network "+ns+"/hang") &&
				strings.Contains(e.Message, "ADD timed out") && strings.Contains(e.Message, "(delegateTimeout)") {
				failed[e.InvolvedObject.Name] = e.Message
			}
		}
		return len(failed) == hungPods, nil
	})
	if err != nil {
		var missing []string
		for _, n := range names {
			if _, ok := failed[n]; !ok {
				missing = append(missing, n)
			}
		}
		t.Fatalf("no NetworkAttachFailed event naming %s/hang and delegateTimeout for %v: %v\n%s", ns, missing, err, podEvents(ns, missing[0]))
	}
	t.Logf("event: %s", failed[names[0]])

	// Deleting them leaves nothing behind (a retried ADD may hang up to
	// delegateTimeout first).
	for _, n := range names {
		if err := pods.Delete(ctx, n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("delete pod %s: %v", n, err)
		}
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 150*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := pods.List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0 && len(podRecords(t, ns, "")) == 0, nil
	})
	if err != nil {
		list, _ := pods.List(ctx, metav1.ListOptions{})
		var left []string
		for _, p := range list.Items {
			left = append(left, p.Name)
		}
		sort.Strings(left)
		t.Fatalf("pods %v or records %v still there: %v", left, podRecords(t, ns, ""), err)
	}
	assertReleased(t, hang, plain)
	assertNoRecords(t, ns)
	if n := startedADDs(started); n < hungPods {
		t.Errorf("the plugin saw %d ADDs, want at least %d (one per pod)", n, hungPods)
	}
	// Every hung plugin was killed at its timeout.
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		return len(sleepsLeft(sleep)) == 0, nil
	})
	if err != nil {
		t.Errorf("hung plugin processes (sleep %s) left on the node: pids %v", sleep, sleepsLeft(sleep))
	}
}
