//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// helmRelease is the release hack/cluster-deployed.sh installs the chart
// deploy/helm/multinet as (MULTINET_DEPLOY=helm).
const helmRelease = "multinet"

// partOf is the label every object of the chart (and of deploy/) carries.
const partOf = "app.kubernetes.io/part-of=multinet"

// TestHelmUpgradeUninstall: the Helm chart deploy/helm/multinet on the
// local cluster (docs/install.md "Helm"). Installed (MULTINET_DEPLOY=helm;
// a cluster deployed with kustomize is taken over by the release), every
// component is Ready; `helm upgrade` with a changed value (the global
// namespaces) renames multinetd's ConfigMap, rolls multinetd and the webhook
// (the webhook to the new --global-namespaces) and removes the old ConfigMap; `helm uninstall` leaves
// no object labelled app.kubernetes.io/part-of=multinet but the CRDs (kept
// on purpose: docs/decisions/helm.md) and no release. The cluster's mode of
// deployment is restored at the end.
func TestHelmUpgradeUninstall(t *testing.T) {
	requireDeployed(t)
	ctx := testContext(t, 40*time.Minute)
	mode := "manifests"
	if helmManaged(t, ctx) {
		mode = "helm"
	}
	restored := false
	t.Cleanup(func() {
		if !restored {
			deployedScript(t, 10*time.Minute, []string{"MULTINET_DEPLOY=" + mode}, "apply")
		}
	})
	// What kustomize applied before the release took the cluster over
	// (its hash-suffixed ConfigMaps, which the chart names otherwise) is
	// not the release's: helm neither adopts nor removes it.
	preexisting := map[string]bool{}
	if mode != "helm" {
		for _, o := range labelledObjects(t, ctx) {
			preexisting[o] = true
		}
		// The first helm use builds the helm command (go install, minutes on
		// a cold build cache).
		deployedScript(t, 25*time.Minute, []string{"MULTINET_DEPLOY=helm"}, "apply")
		if !helmManaged(t, ctx) {
			t.Fatalf("DaemonSet multinetd is not the release %s's after the helm install", helmRelease)
		}
	}
	oldConfig := multinetdConfigMap(t, ctx)

	// Upgrade with a changed value.
	deployedScript(t, 10*time.Minute, nil, "helm-upgrade", "--reuse-values", "--set", "namespaceIsolation.globalNamespaces={default,multinet-e2e-helm-shared}")
	for _, w := range []string{"daemonset/multinetd", "deployment/multinet-webhook"} {
		if out, err := kubectl(ctx, "-n", systemNamespace, "rollout", "status", w, "--timeout=180s"); err != nil {
			t.Fatalf("kubectl rollout status %s after helm upgrade: %v\n%s", w, err, out)
		}
	}
	newConfig := multinetdConfigMap(t, ctx)
	if newConfig == oldConfig {
		t.Errorf("multinetd's ConfigMap still %s after a changed value, want a new name (the content hash)", oldConfig)
	}
	// (Its content on the local cluster is deploy/overlays/local's
	// multinetd.yaml, put in place by the post-renderer: the chart's own
	// rendering of the value is TestChartValues's.)
	if _, err := testCluster.kube.CoreV1().ConfigMaps(systemNamespace).Get(ctx, newConfig, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, "ConfigMap "+oldConfig+" (before the upgrade)", func(ctx context.Context) error {
		_, err := testCluster.kube.CoreV1().ConfigMaps(systemNamespace).Get(ctx, oldConfig, metav1.GetOptions{})
		return err
	})
	d, err := testCluster.kube.AppsV1().Deployments(systemNamespace).Get(ctx, "multinet-webhook", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if args := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(args, "--global-namespaces=default,multinet-e2e-helm-shared") {
		t.Errorf("webhook args after the upgrade: %q", args)
	}

	// Uninstall: multinetd removes its CNI config when it stops
	// (docs/install.md "Uninstall" step 2), then helm uninstall.
	if out, err := kubectl(ctx, "-n", systemNamespace, "set", "env", "daemonset/multinetd", "MULTINET_REMOVE_CNI_CONFIG_ON_EXIT=true"); err != nil {
		t.Fatalf("kubectl set env: %v\n%s", err, out)
	}
	if out, err := kubectl(ctx, "-n", systemNamespace, "rollout", "status", "daemonset/multinetd", "--timeout=180s"); err != nil {
		t.Fatalf("kubectl rollout status: %v\n%s", err, out)
	}
	deployedScript(t, 5*time.Minute, nil, "helm", "uninstall", helmRelease, "--wait", "--timeout=180s")
	left := labelledObjects(t, ctx)
	var notCRDs []string
	for _, o := range left {
		// On the local cluster the namespace is there before the chart
		// (namespace.create=false: the host bootstrap made it, an earlier
		// kubectl apply labelled it); it is not the release's.
		if o == "namespace/"+systemNamespace || preexisting[o] {
			continue
		}
		if !strings.HasPrefix(o, "customresourcedefinition.apiextensions.k8s.io/") {
			notCRDs = append(notCRDs, o)
		}
	}
	if len(notCRDs) > 0 {
		t.Errorf("after helm uninstall, objects labelled %s are left besides the CRDs: %v", partOf, notCRDs)
	}
	crds := 0
	for _, o := range left {
		if strings.HasPrefix(o, "customresourcedefinition.apiextensions.k8s.io/") {
			crds++
		}
	}
	chartCRDs, err := filepath.Glob(filepath.Join("..", "..", "deploy", "helm", "multinet", "crds", "*.yaml"))
	if err != nil || len(chartCRDs) == 0 {
		t.Fatalf("the chart's crds/: %v %v", chartCRDs, err)
	}
	if crds != len(chartCRDs) {
		t.Errorf("after helm uninstall, %d CRDs labelled %s, want the %d the chart installs (kept): %v", crds, partOf, len(chartCRDs), left)
	}
	waitNoPods(t, ctx)
	if out, err := helmScript(ctx, "status", helmRelease); err == nil {
		t.Errorf("helm status %s after the uninstall succeeded:\n%s", helmRelease, out)
	}

	restored = true
	deployedScript(t, 10*time.Minute, []string{"MULTINET_DEPLOY=" + mode}, "apply")
}

// helmManaged: the DaemonSet multinetd belongs to the Helm release.
func helmManaged(t *testing.T, ctx context.Context) bool {
	t.Helper()
	ds, err := testCluster.kube.AppsV1().DaemonSets(systemNamespace).Get(ctx, "multinetd", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ds.Annotations["meta.helm.sh/release-name"] == helmRelease
}

// multinetdConfigMap is the ConfigMap the multinetd DaemonSet mounts at
// /etc/multinet.
func multinetdConfigMap(t *testing.T, ctx context.Context) string {
	t.Helper()
	ds, err := testCluster.kube.AppsV1().DaemonSets(systemNamespace).Get(ctx, "multinetd", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.Name == "config" && v.ConfigMap != nil {
			return v.ConfigMap.Name
		}
	}
	t.Fatalf("DaemonSet multinetd mounts no config ConfigMap")
	return ""
}

// labelledObjects lists every listable object in the cluster labelled
// app.kubernetes.io/part-of=multinet, as kind.group/name.
func labelledObjects(t *testing.T, ctx context.Context) []string {
	t.Helper()
	out, err := kubectl(ctx, "api-resources", "--verbs=list", "-o", "name")
	if err != nil {
		t.Fatalf("kubectl api-resources: %v\n%s", err, out)
	}
	var kinds []string
	for _, k := range strings.Fields(out) {
		// Events carry no labels of ours; listing them is slow.
		if k != "events" && k != "events.events.k8s.io" {
			kinds = append(kinds, k)
		}
	}
	out, err = kubectl(ctx, "get", strings.Join(kinds, ","), "-A", "-l", partOf, "-o", "name", "--ignore-not-found")
	if err != nil {
		t.Fatalf("kubectl get -l %s: %v\n%s", partOf, err, out)
	}
	return strings.Fields(out)
}

// waitNoPods waits until no pod of a multinet workload is left in the
// namespace (helm uninstall --wait waits for the objects it deletes, the
// pods go after their owners).
func waitNoPods(t *testing.T, ctx context.Context) {
	t.Helper()
	var left []string
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := testCluster.kube.CoreV1().Pods(systemNamespace).List(ctx, metav1.ListOptions{
			LabelSelector: "app.kubernetes.io/name in (multinetd,multinet-webhook,multinet-deviceplugin,multinet-dra-driver,multinet-ipam-cleanup)",
		})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		left = left[:0]
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				left = append(left, p.Name)
			}
		}
		return len(left) == 0, nil
	})
	if err != nil {
		t.Errorf("pods of multinet's workloads left after helm uninstall: %v (%v)", left, err)
	}
}

// helmScript runs helm against the local cluster (hack/cluster-deployed.sh helm).
func helmScript(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join("..", "..", "hack", "cluster-deployed.sh"), append([]string{"helm"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("hack/cluster-deployed.sh helm %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}
