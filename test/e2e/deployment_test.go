//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// TestDeploymentOnDefaultNetwork: a Deployment of two replicas is scheduled by
// the real scheduler onto the target node (its nodeSelector), both pods run
// and get distinct addresses of the node's default network pod subnet, and
// `kubectl exec` into one shows that address on its eth0.
func TestDeploymentOnDefaultNetwork(t *testing.T) {
	image := testCluster.mustEnv(t, "TEST_IMAGE")
	node := target.Name
	subnet, err := netip.ParsePrefix(target.PodCIDR)
	if err != nil {
		t.Fatalf("pod CIDR of node %s: %v", node, err)
	}
	ns := newNamespace(t)
	ctx := testContext(t, 4*time.Minute)
	labels := map[string]string{"app": "e2e-default-net"}

	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "default-net", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:                  map[string]string{corev1.LabelHostname: node},
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers: []corev1.Container{{
						Name:            "busybox",
						Image:           image,
						ImagePullPolicy: corev1.PullNever,
						Command:         []string{"sleep", "infinity"},
					}},
				},
			},
		},
	}
	deps := testCluster.kube.AppsV1().Deployments(ns)
	if _, err := deps.Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment: %v", err)
	}
	t.Cleanup(func() { deleteDeploymentAndWait(t, ns, dep.Name, labels) })

	var pods []corev1.Pod
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := testCluster.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=e2e-default-net"})
		if err != nil {
			return false, nil
		}
		pods = list.Items
		running := 0
		for _, p := range pods {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
				running++
			}
		}
		return running == 2 && len(pods) == 2, nil
	})
	if err != nil {
		t.Fatalf("2 pods did not run with an IP in 3 min: %v\n%s", err, describePods(pods))
	}

	seen := map[string]string{}
	for _, p := range pods {
		if p.Spec.NodeName != node {
			t.Errorf("pod %s on node %q, want %q", p.Name, p.Spec.NodeName, node)
		}
		if !podCondition(&p, corev1.PodScheduled) {
			t.Errorf("pod %s has no PodScheduled=True condition (not scheduled by the scheduler?)", p.Name)
		}
		if p.Spec.SchedulerName != corev1.DefaultSchedulerName {
			t.Errorf("pod %s schedulerName %q, want %q", p.Name, p.Spec.SchedulerName, corev1.DefaultSchedulerName)
		}
		ip, err := netip.ParseAddr(p.Status.PodIP)
		if err != nil || !subnet.Contains(ip) {
			t.Errorf("pod %s IP %q not in the default network's subnet %s", p.Name, p.Status.PodIP, subnet)
		}
		if other, dup := seen[p.Status.PodIP]; dup {
			t.Errorf("pods %s and %s share IP %s", p.Name, other, p.Status.PodIP)
		}
		seen[p.Status.PodIP] = p.Name
	}

	// kubectl exec (API server -> kubelet -> containerd) into the first pod.
	pod := pods[0]
	out, err := kubectl(ctx, "-n", ns, "exec", pod.Name, "--", "ip", "-4", "-o", "addr", "show", "dev", "eth0")
	if err != nil {
		t.Fatalf("kubectl exec %s: %v\n%s", pod.Name, err, out)
	}
	if !strings.Contains(out, " "+pod.Status.PodIP+"/") {
		t.Errorf("ip addr in pod %s does not show its IP %s:\n%s", pod.Name, pod.Status.PodIP, out)
	}
}

func podCondition(p *corev1.Pod, typ corev1.PodConditionType) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func describePods(pods []corev1.Pod) string {
	var b strings.Builder
	for _, p := range pods {
		fmt.Fprintf(&b, "  pod %s: phase=%s node=%q ip=%q", p.Name, p.Status.Phase, p.Spec.NodeName, p.Status.PodIP)
		for _, c := range p.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				fmt.Fprintf(&b, " %s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message)
			}
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Waiting != nil {
				fmt.Fprintf(&b, " waiting=%s(%s)", cs.State.Waiting.Reason, cs.State.Waiting.Message)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// kubectl runs the cluster's kubectl with its kubeconfig (deadline: a
// minute) and returns its stdout, with its stderr appended when it fails.
// Only stdout on success: kubectl may log to stderr (exec stream notices,
// warnings about cluster-scoped resources), which is no part of the answer.
func kubectl(ctx context.Context, args ...string) (string, error) {
	return kubectlTimeout(ctx, 60*time.Second, args...)
}

// kubectlTimeout is kubectl with deadline d.
func kubectlTimeout(ctx context.Context, d time.Duration, args ...string) (string, error) {
	return kubectlInput(ctx, d, nil, args...)
}

// kubectlInput is kubectlTimeout with stdin (nil: none), e.g. for
// "apply -f -".
func kubectlInput(ctx context.Context, d time.Duration, stdin []byte, args ...string) (string, error) {
	bin := testCluster.env["KUBECTL"]
	if bin == "" {
		bin = "kubectl"
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", testCluster.env["KUBECONFIG"]}, args...)...)
	var stdout, stderr bytes.Buffer
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String() + stderr.String(), err
	}
	return stdout.String(), nil
}

// deleteDeploymentAndWait deletes the Deployment and waits until its pods are
// gone, so their network teardown (CNI DEL) happens while the cluster runs.
func deleteDeploymentAndWait(t *testing.T, ns, name string, labels map[string]string) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	fg := metav1.DeletePropagationForeground
	if err := testCluster.kube.AppsV1().Deployments(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
		t.Errorf("delete deployment %s/%s: %v", ns, name, err)
		return
	}
	sel := metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: labels})
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 80*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := testCluster.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		return err == nil && len(list.Items) == 0, nil
	})
	if err != nil {
		t.Errorf("pods of deployment %s/%s still exist after 80s: %v", ns, name, err)
	}
}
