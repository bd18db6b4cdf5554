//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// The local cluster runs multinet's components either deployed (hack/
// cluster-up.sh's default MULTINET_DEPLOY=manifests: DaemonSets and a
// Deployment in multinet-system, applied from deploy/overlays/local) or as
// host processes with PID files (MULTINET_DEPLOY=host). The helpers here
// find and restart a component either way; the tests are the same.

// systemNamespace is where deploy/ installs multinet.
const systemNamespace = "multinet-system"

// deployedComponents maps a component to the app.kubernetes.io/name label
// of its pods in deploy/.
var deployedComponents = map[string]string{
	"multinetd":             "multinetd",
	"multinet-deviceplugin": "multinet-deviceplugin",
}

// detectDeployed reports whether multinetd runs as the DaemonSet of deploy/.
func detectDeployed(ctx context.Context, c *cluster) (bool, error) {
	_, err := c.kube.AppsV1().DaemonSets(systemNamespace).Get(ctx, "multinetd", metav1.GetOptions{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	default:
		return false, fmt.Errorf("get daemonset %s/multinetd: %w", systemNamespace, err)
	}
}

// requireDeployed fails the test unless multinet runs deployed.
func requireDeployed(t *testing.T) {
	t.Helper()
	if !testCluster.deployed {
		t.Fatal("multinet runs as host processes on this cluster (MULTINET_DEPLOY=host); this test needs the deployed components (make cluster-down cluster-up)")
	}
}

// nodeComponents are the cluster components each node runs its own copy
// of; the others (kube-apiserver, ...) run once, on the host.
var nodeComponents = map[string]bool{"kubelet": true, "containerd": true, "kube-proxy": true}

// componentPID returns the host PID of a cluster component: for a deployed
// multinet DaemonSet, the main process of its pod's container on the
// target node; for a node component, the target node's; otherwise the PID
// file the cluster scripts wrote. (The deployed webhook has two replicas:
// see webhookTarget.)
func componentPID(t *testing.T, name string) int {
	t.Helper()
	if label, ok := deployedComponents[name]; ok && testCluster.deployed {
		return containerPID(t, runningPod(t, label))
	}
	if nodeComponents[name] {
		return readPIDFile(t, target.componentPIDFile(t, name))
	}
	return readPIDFile(t, filepath.Join(testCluster.mustEnv(t, "PID_DIR"), name+".pid"))
}

// runningPods returns the running, not terminating pods of multinet-system
// with app.kubernetes.io/name=label.
func runningPods(t *testing.T, label string) []*corev1.Pod {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	list, err := testCluster.kube.CoreV1().Pods(systemNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + label})
	if err != nil {
		t.Fatalf("list %s pods: %v", label, err)
	}
	var found []*corev1.Pod
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			found = append(found, p)
		}
	}
	if len(found) == 0 {
		t.Fatalf("no running %s pod in %s:\n%s", label, systemNamespace, describePods(list.Items))
	}
	return found
}

// runningPod returns the one running, not terminating pod of multinet-system
// with app.kubernetes.io/name=label on the target node (a DaemonSet's).
func runningPod(t *testing.T, label string) *corev1.Pod {
	t.Helper()
	all := runningPods(t, label)
	var found []*corev1.Pod
	for _, p := range all {
		if p.Spec.NodeName == target.Name {
			found = append(found, p)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d running %s pods in %s on node %s, want 1:\n%s", len(found), label, systemNamespace, target.Name, describePods(derefPods(all)))
	}
	return found[0]
}

func derefPods(ps []*corev1.Pod) []corev1.Pod {
	out := make([]corev1.Pod, len(ps))
	for i, p := range ps {
		out[i] = *p
	}
	return out
}

// containerPID returns the host PID of the pod's first container from the
// runtime's task state on the pod's node (containerd keeps it in
// <state>/io.containerd.runtime.v2.task/k8s.io/<id>/init.pid).
func containerPID(t *testing.T, p *corev1.Pod) int {
	t.Helper()
	if len(p.Status.ContainerStatuses) == 0 {
		t.Fatalf("pod %s/%s has no container status", p.Namespace, p.Name)
	}
	id := p.Status.ContainerStatuses[0].ContainerID
	_, id, ok := strings.Cut(id, "://")
	if !ok || id == "" {
		t.Fatalf("pod %s/%s: container ID %q", p.Namespace, p.Name, p.Status.ContainerStatuses[0].ContainerID)
	}
	return readPIDFile(t, taskPIDFile(t, nodeOf(t, p), id))
}

// taskPIDFile is where this process finds the init.pid of the node's
// containerd task id (a container).
func taskPIDFile(t *testing.T, n clusterNode, id string) string {
	t.Helper()
	return n.path(filepath.Join(testCluster.mustEnv(t, "MULTINET_CLUSTER_DIR"), "containerd", "state", "io.containerd.runtime.v2.task", "k8s.io", id, "init.pid"))
}

// restartDaemon restarts multinetd: deployed, by deleting its pod (the
// DaemonSet makes a new one); otherwise through the cluster hook. It returns
// once the new daemon is Ready (its readiness probe is /readyz: informers
// synced, CNI config written).
func restartDaemon(t *testing.T) {
	t.Helper()
	if !testCluster.deployed {
		ctx := testContext(t, 90*time.Second)
		cmd := exec.CommandContext(ctx, "../../hack/cluster-cni-multinet.sh", "restart")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("restart multinetd: %v\n%s", err, out)
		}
		return
	}
	old := runningPod(t, "multinetd")
	ctx := testContext(t, 120*time.Second)
	if err := testCluster.kube.CoreV1().Pods(systemNamespace).Delete(ctx, old.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete pod %s: %v", old.Name, err)
	}
	waitComponentReady(t, "multinetd", old.UID, 120*time.Second)
}

// waitComponentReady waits until the component's pod on the target node is
// Ready and is not the pod with UID notUID ("": any), and returns it.
func waitComponentReady(t *testing.T, label string, notUID types.UID, within time.Duration) *corev1.Pod {
	t.Helper()
	ctx := testContext(t, within)
	var ready *corev1.Pod
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := targetPods(ctx, systemNamespace, "app.kubernetes.io/name="+label)
		if err != nil || len(list.Items) != 1 {
			return false, nil
		}
		p := &list.Items[0]
		if p.UID == notUID {
			return false, nil
		}
		if p.DeletionTimestamp == nil && podCondition(p, corev1.PodReady) {
			ready = p
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		list, _ := testCluster.kube.CoreV1().Pods(systemNamespace).List(context.Background(), metav1.ListOptions{})
		t.Fatalf("no Ready %s pod within %v:\n%s", label, within, describePods(list.Items))
	}
	return ready
}

// podLogs returns the logs of the pod's first container.
func podLogs(t *testing.T, p *corev1.Pod) string {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	b, err := testCluster.kube.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		t.Fatalf("logs of %s/%s: %v", p.Namespace, p.Name, err)
	}
	return string(b)
}
