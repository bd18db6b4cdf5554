//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
)

// TestNADAppliedWithPodAfterRestart: multinetd is
// restarted and, before the new daemon is Ready (its informers may not
// have synced; the CNI config file stayed in place, so the runtime calls
// it at once), a NAD and a pod selecting it are applied in one
// `kubectl apply`. The pod runs with network-status, and its sandbox never
// failed: ADD waited for the NAD informer's first list and read a NAD the
// cache did not have yet from the API server, instead of answering
// "NetworkAttachmentDefinition … not found".
//
// The apply waits for the new daemon's container to run (not to be Ready):
// while no daemon listens on the socket at all (the old one stopped, the
// new one not started) the shim answers CNI error 11, a failed sandbox this
// test is not about.
func TestNADAppliedWithPodAfterRestart(t *testing.T) {
	requireDeployed(t)
	ns := newNamespace(t)
	net, conf := bridgeNetConf(t, ns, "lag", "1.0.0", nil)
	manifest := nadAndPodManifest(t, ns, "lag", conf, podSpec(ns, "lagged", "lag"))

	old := runningPod(t, "multinetd")
	ctx := testContext(t, 3*time.Minute)
	if err := testCluster.kube.CoreV1().Pods(systemNamespace).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete pod %s: %v", old.Name, err)
	}
	started := waitComponentStarted(t, "multinetd", old.UID, 2*time.Minute)
	if out, err := kubectlInput(ctx, 60*time.Second, manifest, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply of the NAD and the pod: %v\n%s", err, out)
	}
	t.Logf("kubectl apply done %v after the new multinetd pod %s was seen running (Ready then: %v)",
		time.Since(started.at).Round(time.Millisecond), started.pod.Name, podCondition(started.pod, corev1.PodReady))

	// waitRunning fails the test when a sandbox of the pod failed on the
	// way (firstAttachProblems).
	p := waitRunning(t, ns, "lagged", 90*time.Second)
	checkStatusMatchesPod(t, p, []string{"eth0", "net1"})
	waitComponentReady(t, "multinetd", old.UID, 2*time.Minute)
	var lines []string
	for _, l := range strings.Split(target.daemonMetrics(t), "\n") {
		if strings.HasPrefix(l, "multinet_nad_live_lookups_total") || strings.HasPrefix(l, "multinet_nad_sync_wait_seconds_count") {
			lines = append(lines, l)
		}
	}
	t.Logf("the new multinetd's NAD lookups:\n%s", strings.Join(lines, "\n"))

	deletePod(t, ns, "lagged")
	assertReleased(t, net)
	assertNoRecords(t, ns)
}

// nadAndPodManifest returns one YAML document stream (JSON documents)
// holding NAD ns/name with spec.config conf, then pod.
func nadAndPodManifest(t *testing.T, ns, name string, conf map[string]any, pod *corev1.Pod) []byte {
	t.Helper()
	cfg, err := json.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	nad := &nadv1.NetworkAttachmentDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: nadv1.SchemeGroupVersion.String(), Kind: "NetworkAttachmentDefinition"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: string(cfg)},
	}
	pod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	var docs []string
	for _, obj := range []any{nad, pod} {
		b, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	return []byte(strings.Join(docs, "\n---\n") + "\n")
}

// startedPod is a component's pod whose container was seen running, and
// when.
type startedPod struct {
	pod *corev1.Pod
	at  time.Time
}

// waitComponentStarted waits until the component's pod other than notUID
// has its first container running (Ready or not) and returns it.
func waitComponentStarted(t *testing.T, label string, notUID types.UID, within time.Duration) startedPod {
	t.Helper()
	ctx := testContext(t, within)
	var got startedPod
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := targetPods(ctx, systemNamespace, "app.kubernetes.io/name="+label)
		if err != nil {
			return false, nil
		}
		for i := range list.Items {
			p := &list.Items[i]
			if p.UID == notUID || p.DeletionTimestamp != nil || len(p.Status.ContainerStatuses) == 0 {
				continue
			}
			if p.Status.ContainerStatuses[0].State.Running != nil {
				got = startedPod{pod: p, at: time.Now()}
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		list, _ := testCluster.kube.CoreV1().Pods(systemNamespace).List(context.Background(), metav1.ListOptions{})
		t.Fatalf("no started %s pod within %v:\n%s", label, within, describePods(list.Items))
	}
	return got
}
