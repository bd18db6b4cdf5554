//go:build e2e

package e2e

// Upgrade and uninstall of the deployed components (docs/install.md). The
// file name sorts last on purpose: the uninstall removes the namespace
// multinet-system with everything in it, also what the host-process
// bootstrap of hack/cluster-devices.sh left there for other tests, and
// installs multinet again afterwards.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestUpgrade: building images with a new tag and applying them (make
// images + kubectl apply, hack/cluster-deployed.sh up) rolls the multinetd
// DaemonSet: a new pod runs the new image and says so in its log. A pod
// attached before the upgrade deletes cleanly through the new daemon (its
// addresses released, its records gone), and a new pod attaches.
func TestUpgrade(t *testing.T) {
	requireDeployed(t)
	acrossDaemonChange(t, func() {
		old := runningPod(t, "multinetd")
		oldImageID := old.Status.ContainerStatuses[0].ImageID

		tag := "e2e-upgrade-" + randHex(3)
		deployedScript(t, 15*time.Minute, []string{"IMAGE_TAG=" + tag}, "up")

		d := waitComponentReady(t, "multinetd", old.UID, 2*time.Minute)
		if img := d.Spec.Containers[0].Image; !strings.HasSuffix(img, ":"+tag) {
			t.Errorf("multinetd pod after the upgrade runs %q, want tag %s", img, tag)
		}
		if id := d.Status.ContainerStatuses[0].ImageID; id == "" || id == oldImageID {
			t.Errorf("multinetd image ID %q after the upgrade, was %q: not a new image", id, oldImageID)
		}
		if logs := podLogs(t, d); !strings.Contains(logs, `"multinetd starting" version="`+tag+`"`) {
			t.Errorf("the new multinetd does not log version %s:\n%s", tag, firstLines(logs, 5))
		}
		for _, c := range []string{"multinet-webhook", "multinet-deviceplugin"} {
			for _, p := range runningPods(t, c) {
				if img := p.Spec.Containers[0].Image; !strings.HasSuffix(img, ":"+tag) {
					t.Errorf("%s pod %s runs %q after the upgrade, want tag %s", c, p.Name, img, tag)
				}
			}
		}
	})
}

// TestUninstall follows docs/install.md's uninstall: turn on
// removeCNIConfigOnExit (kubectl set env), then kubectl delete -k
// deploy/overlays/local. Everything it installed is gone (namespace,
// DaemonSets, Deployment, RBAC, webhook configurations, CRDs) and so is the
// CNI config multinetd wrote; a pod attached before keeps running with its
// extra interface. After installing again, that pod deletes cleanly from
// the attachment records kept on the host.
func TestUninstall(t *testing.T) {
	requireDeployed(t)
	ns := newNamespace(t)
	a := bridgeNet(t, ns, "keep", "1.0.0", nil)
	before := runPod(t, podSpec(ns, "survivor", "keep"))
	ifacesBefore := podInterfaces(t, ns, "survivor")
	if ifacesBefore["net1"] == nil {
		t.Fatalf("survivor has no net1: %v", ifacesBefore)
	}
	reinstalled := false
	t.Cleanup(func() {
		if !reinstalled {
			deployedScript(t, 10*time.Minute, nil, "apply")
		}
	})

	ctx := testContext(t, 5*time.Minute)
	if out, err := kubectl(ctx, "-n", systemNamespace, "set", "env", "daemonset/multinetd", "MULTINET_REMOVE_CNI_CONFIG_ON_EXIT=true"); err != nil {
		t.Fatalf("kubectl set env: %v\n%s", err, out)
	}
	if out, err := kubectl(ctx, "-n", systemNamespace, "rollout", "status", "daemonset/multinetd", "--timeout=120s"); err != nil {
		t.Fatalf("kubectl rollout status: %v\n%s", err, out)
	}
	pid := componentPID(t, "multinetd")
	conf := target.path(filepath.Join(testCluster.mustEnv(t, "CNI_CONF_DIR"), "00-multinet.conflist"))
	if _, err := os.Stat(conf); err != nil {
		t.Fatalf("CNI config after the rollout: %v", err)
	}

	// kubectl delete -k works from any checkout: deletion needs only the
	// objects' kinds and names, not the overlay's host paths.
	out, err := kubectlTimeout(ctx, 4*time.Minute, "delete", "-k", filepath.Join("..", "..", "deploy", "overlays", "local"), "--wait=true", "--timeout=180s")
	if err != nil {
		t.Fatalf("kubectl delete -k deploy/overlays/local: %v\n%s", err, out)
	}
	t.Logf("kubectl delete -k:\n%s", out)

	waitGone(t, "namespace "+systemNamespace, func(ctx context.Context) error {
		_, err := testCluster.kube.CoreV1().Namespaces().Get(ctx, systemNamespace, metav1.GetOptions{})
		return err
	})
	gone := map[string]func(context.Context) error{
		"MutatingWebhookConfiguration multinet-webhook": func(ctx context.Context) error {
			_, err := testCluster.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "multinet-webhook", metav1.GetOptions{})
			return err
		},
		"ValidatingWebhookConfiguration multinet-webhook": func(ctx context.Context) error {
			_, err := testCluster.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "multinet-webhook", metav1.GetOptions{})
			return err
		},
		"ClusterRole multinet:multinetd": func(ctx context.Context) error {
			_, err := testCluster.kube.RbacV1().ClusterRoles().Get(ctx, "multinet:multinetd", metav1.GetOptions{})
			return err
		},
		"ClusterRoleBinding multinet:multinetd": func(ctx context.Context) error {
			_, err := testCluster.kube.RbacV1().ClusterRoleBindings().Get(ctx, "multinet:multinetd", metav1.GetOptions{})
			return err
		},
		"CRD network-attachment-definitions": func(ctx context.Context) error {
			_, err := testCluster.multi.K8sCniCncfIoV1().NetworkAttachmentDefinitions(ns).List(ctx, metav1.ListOptions{})
			return err
		},
	}
	for what, get := range gone {
		waitGone(t, what, get)
	}
	if _, err := os.Stat(conf); !os.IsNotExist(err) {
		t.Errorf("multinetd's CNI config %s after the uninstall: %v, want it removed", conf, err)
	}
	if pidAlive(pid) {
		t.Errorf("multinetd (pid %d) still runs after the uninstall", pid)
	}

	// The pod attached before keeps running, untouched.
	p, err := testCluster.kube.CoreV1().Pods(ns).Get(ctx, "survivor", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("survivor after the uninstall: %v", err)
	}
	if p.UID != before.UID || p.Status.Phase != corev1.PodRunning || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("survivor after the uninstall: uid %s (was %s), phase %s, restarts %d", p.UID, before.UID, p.Status.Phase, p.Status.ContainerStatuses[0].RestartCount)
	}
	ifacesAfter := podInterfaces(t, ns, "survivor")
	for _, name := range []string{"eth0", "net1"} {
		if ifacesAfter[name] == nil || strings.Join(ifacesAfter[name].IPs, ",") != strings.Join(ifacesBefore[name].IPs, ",") {
			t.Errorf("survivor's %s after the uninstall: %+v, before: %+v", name, ifacesAfter[name], ifacesBefore[name])
		}
	}

	// Install again; the pod from before deletes cleanly from its records.
	reinstalled = true
	deployedScript(t, 10*time.Minute, nil, "apply")
	// The uninstall deleted the namespace, and with it the Role of the
	// host-process webhook identity that other tests run a webhook with
	// (TestWebhookNamespaceIsolation): put it back, so that the suite can
	// run again on this cluster (make test-layouts runs it once per node).
	if out, err := exec.Command(filepath.Join("..", "..", "hack", "cluster-devices.sh"), "identity").CombinedOutput(); err != nil {
		t.Errorf("hack/cluster-devices.sh identity: %v\n%s", err, out)
	}
	deletePod(t, ns, "survivor")
	assertReleased(t, a)
	assertNoRecords(t, ns)
}

// deployedScript runs hack/cluster-deployed.sh with extra environment.
func deployedScript(t *testing.T, timeout time.Duration, env []string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join("..", "..", "hack", "cluster-deployed.sh"), args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hack/cluster-deployed.sh %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	t.Logf("hack/cluster-deployed.sh %s:\n%s", strings.Join(args, " "), lastLines(string(out), 8))
}

// waitGone waits until get returns NotFound.
func waitGone(t *testing.T, what string, get func(context.Context) error) {
	t.Helper()
	ctx := testContext(t, 3*time.Minute)
	var last error
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		last = get(ctx)
		return apierrors.IsNotFound(last), nil
	})
	if err != nil {
		t.Errorf("%s still there after the uninstall (last: %v)", what, last)
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
