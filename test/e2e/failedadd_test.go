//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// missingPlugin is a plugin type whose binary is in no CNI bin dir.
const missingPlugin = "mne-no-such-plugin"

// TestFailedAddPodIsDeleted: a pod selecting a NAD whose plugin binary does
// not exist fails its ADD before any delegate runs (a NetworkAttachFailed
// Event names the plugin); deleting it completes, without FailedKillPod and
// without a record left, whether the NAD is left broken, fixed (updated to
// a working config, so that the pod then starts) or deleted in between
// (§7.2: only the attachments "that were attempted" are torn down).
// Before, DEL fell back to the API and ran the missing plugin's
// DEL, which failed on every retry: kubelet could never stop the sandbox
// (KillPodSandboxError), its record stayed, and with the NAD fixed the pod
// never started (all three cases fail that way with the earlier daemon).
func TestFailedAddPodIsDeleted(t *testing.T) {
	cases := []struct {
		name string
		// between changes the NAD after the failed ADD, before the deletion.
		between func(t *testing.T, ns string, net *testNet, working string)
	}{
		{name: "NAD unchanged", between: func(*testing.T, string, *testNet, string) {}},
		{name: "NAD fixed", between: func(t *testing.T, ns string, net *testNet, working string) {
			setNADConfig(t, ns, net.Name, working)
			// kubelet retries the sandbox; with the plugin fixed it starts.
			// Its earlier sandboxes failed on purpose: those failures name
			// the missing plugin, and no other may be there.
			p := waitRunning(t, ns, "p", 80*time.Second, expectFailedAdd(missingPlugin))
			checkStatusMatchesPod(t, p, []string{"eth0", "net1"})
		}},
		{name: "NAD deleted", between: func(t *testing.T, ns string, net *testNet, _ string) {
			ctx := testContext(t, 30*time.Second)
			if err := testCluster.multi.K8sCniCncfIoV1().NetworkAttachmentDefinitions(ns).Delete(ctx, net.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatalf("delete NAD %s/%s: %v", ns, net.Name, err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			ns := newNamespace(t)
			net := bridgeNet(t, ns, "net", "1.0.0", nil)
			working := nadConfig(t, ns, net.Name)
			setNADConfig(t, ns, net.Name, strings.Replace(working, `"type":"bridge"`, `"type":"`+missingPlugin+`"`, 1))

			ctx := testContext(t, 30*time.Second)
			if _, err := testCluster.kube.CoreV1().Pods(ns).Create(ctx, podSpec(ns, "p", "net"), metav1.CreateOptions{}); err != nil {
				t.Fatalf("create pod: %v", err)
			}
			msg := waitEvent(t, ns, "p", "NetworkAttachFailed", ns+"/net", missingPlugin)
			t.Logf("event: %s", msg)
			p, err := testCluster.kube.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if p.Status.Phase == corev1.PodRunning {
				t.Fatalf("pod runs although its plugin binary does not exist")
			}

			c.between(t, ns, net, working)
			deletePod(t, ns, "p") // fails when the pod stays Terminating
			if ev := podEvents(ns, "p"); strings.Contains(ev, "FailedKillPod") {
				t.Errorf("deleting the pod failed on the way:\n%s", ev)
			}
			assertReleased(t, net)
			assertNoRecords(t, ns)
		})
	}
}

// nadConfig returns the spec.config of NAD ns/name.
func nadConfig(t *testing.T, ns, name string) string {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	nad, err := testCluster.multi.K8sCniCncfIoV1().NetworkAttachmentDefinitions(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get NAD %s/%s: %v", ns, name, err)
	}
	return nad.Spec.Config
}

// setNADConfig replaces the spec.config of NAD ns/name.
func setNADConfig(t *testing.T, ns, name, config string) {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	nads := testCluster.multi.K8sCniCncfIoV1().NetworkAttachmentDefinitions(ns)
	nad, err := nads.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get NAD %s/%s: %v", ns, name, err)
	}
	nad.Spec.Config = config
	if _, err := nads.Update(ctx, nad, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update NAD %s/%s: %v", ns, name, err)
	}
}
