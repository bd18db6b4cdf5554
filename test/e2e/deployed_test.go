//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestDeployedComponents: `kubectl apply -k deploy/overlays/local` (through
// hack/cluster-deployed.sh, which cluster-up runs) left multinetd and the
// device plugin and DRA driver DaemonSets and the webhook Deployment fully rolled out and
// Ready on every node with the images of the last `make images`, the
// webhook's CA in both configurations, and multinetd's CNI config on the
// target node.
func TestDeployedComponents(t *testing.T) {
	requireDeployed(t)
	ctx := testContext(t, 30*time.Second)
	images := builtImages(t)
	apps := testCluster.kube.AppsV1()
	nodes := int32(len(clusterNodes(t)))

	for _, name := range []string{"multinetd", "multinet-deviceplugin", "multinet-dra-driver"} {
		ds, err := apps.DaemonSets(systemNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("daemonset %s: %v", name, err)
		}
		st := ds.Status
		if st.DesiredNumberScheduled != nodes || st.NumberReady != nodes || st.UpdatedNumberScheduled != nodes || st.ObservedGeneration != ds.Generation {
			t.Errorf("daemonset %s not rolled out and Ready on all %d nodes: %+v", name, nodes, st)
		}
		checkImages(t, name, ds.Spec.Template.Spec.Containers[0].Image, images)
	}
	d, err := apps.Deployments(systemNamespace).Get(ctx, "multinet-webhook", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("deployment multinet-webhook: %v", err)
	}
	if d.Status.ReadyReplicas != *d.Spec.Replicas || d.Status.UpdatedReplicas != *d.Spec.Replicas {
		t.Errorf("deployment multinet-webhook not rolled out and Ready: %+v", d.Status)
	}
	checkImages(t, "multinet-webhook", d.Spec.Template.Spec.Containers[0].Image, images)
	checkDaemonSetSpec(t, ctx, "multinetd")

	adm := testCluster.kube.AdmissionregistrationV1()
	mwc, err := adm.MutatingWebhookConfigurations().Get(ctx, "multinet-webhook", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	vwc, err := adm.ValidatingWebhookConfigurations().Get(ctx, "multinet-webhook", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clientConfigs := map[string]admv1.WebhookClientConfig{}
	for _, w := range mwc.Webhooks {
		clientConfigs["mutating "+w.Name] = w.ClientConfig
	}
	for _, w := range vwc.Webhooks {
		clientConfigs["validating "+w.Name] = w.ClientConfig
	}
	if len(clientConfigs) != 4 {
		t.Errorf("%d webhooks, want 4 (mutate pods, validate pods, NADs and multinetd's IPAMClaim status writes)", len(clientConfigs))
	}
	// The API server calls the webhook through its Service, as on any
	// cluster (it routes to the endpoints itself: no kube-proxy here).
	for name, cc := range clientConfigs {
		if len(cc.CABundle) == 0 {
			t.Errorf("%s has no caBundle", name)
		}
		if cc.URL != nil || cc.Service == nil || cc.Service.Namespace != systemNamespace || cc.Service.Name != "multinet-webhook" {
			t.Errorf("%s clientConfig url %v service %+v, want the Service %s/multinet-webhook", name, cc.URL, cc.Service, systemNamespace)
		}
	}
	// Two replicas, kept available by the PodDisruptionBudget.
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("multinet-webhook replicas %v, want 2", d.Spec.Replicas)
	}
	waitWebhookAvailable(t)
	conf := filepath.Join(testCluster.mustEnv(t, "CNI_CONF_DIR"), "00-multinet.conflist")
	if _, err := os.Stat(target.path(conf)); err != nil {
		t.Errorf("multinetd's CNI config on node %s: %v", target.Name, err)
	}
	// The shim the init container installed is the image's (not the host
	// bootstrap's): multinetd's pod ran install-cni to completion.
	p := runningPod(t, "multinetd")
	if len(p.Status.InitContainerStatuses) != 1 || p.Status.InitContainerStatuses[0].State.Terminated == nil ||
		p.Status.InitContainerStatuses[0].State.Terminated.ExitCode != 0 {
		t.Errorf("multinetd's install-cni init container did not complete: %+v", p.Status.InitContainerStatuses)
	}
}

// checkDaemonSetSpec checks what the issue asks of multinetd's DaemonSet as
// the API server has it: node-critical priority, a one-at-a-time rolling
// update, probes on /healthz and /readyz, and requests and limits.
func checkDaemonSetSpec(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	ds, err := testCluster.kube.AppsV1().DaemonSets(systemNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := ds.Spec.Template.Spec
	if spec.PriorityClassName != "system-node-critical" {
		t.Errorf("%s priorityClassName %q", name, spec.PriorityClassName)
	}
	if ds.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || ds.Spec.UpdateStrategy.RollingUpdate == nil ||
		ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable.String() != "1" {
		t.Errorf("%s updateStrategy %+v, want RollingUpdate maxUnavailable 1", name, ds.Spec.UpdateStrategy)
	}
	c := spec.Containers[0]
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("%s liveness probe %+v, want GET /healthz", name, c.LivenessProbe)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("%s readiness probe %+v, want GET /readyz", name, c.ReadinessProbe)
	}
	if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() || c.Resources.Requests.Cpu().IsZero() {
		t.Errorf("%s resources %+v, want memory requests and limits and a CPU request", name, c.Resources)
	}
}

// builtImages reads _output/images/images.txt ("<name> <ref>") of the last
// make images.
func builtImages(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "_output", "images", "images.txt"))
	if err != nil {
		t.Fatalf("images of the last make images: %v", err)
	}
	defer f.Close()
	images := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if name, ref, ok := strings.Cut(strings.TrimSpace(sc.Text()), " "); ok {
			images[name] = ref
		}
	}
	return images
}

// checkImages checks that a component runs the image make images built.
func checkImages(t *testing.T, component, image string, images map[string]string) {
	t.Helper()
	name := strings.TrimPrefix(component, "multinet-")
	want := images[name]
	if want == "" || image != want {
		t.Errorf("%s runs image %q, want %q (the last make images: %v)", component, image, want, images)
	}
}

// TestDeployedRBAC: each multinet ServiceAccount may do what its component
// needs and nothing listed as forbidden (deploy/rbac-checks.txt): multinetd
// cannot read Secrets or write NADs, the webhook cannot touch other
// Secrets or webhook configurations, the device plugin can do nothing.
// Asked the way an operator would: kubectl auth can-i --as.
func TestDeployedRBAC(t *testing.T) {
	requireDeployed(t)
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "rbac-checks.txt"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testContext(t, 5*time.Minute)
	n := 0
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if len(f) < 4 || (f[0] != "yes" && f[0] != "no") {
			t.Fatalf("rbac-checks.txt: malformed line %q", line)
		}
		want, sa, args := f[0], f[1], f[2:]
		out, _ := kubectl(ctx, append([]string{"auth", "can-i", "--as=system:serviceaccount:" + systemNamespace + ":" + sa}, args...)...)
		// The answer is stdout's line; kubectl exits 1 on "no" and then
		// the helper appends stderr (warnings about cluster-scoped
		// resources).
		got, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
		if got != want {
			t.Errorf("kubectl auth can-i %s --as=%s: %q, want %q", strings.Join(args, " "), sa, got, want)
		}
		n++
	}
	if n < 30 {
		t.Fatalf("only %d checks in rbac-checks.txt", n)
	}
	t.Logf("%d kubectl auth can-i checks", n)
}

// waitWebhookAvailable waits until both webhook replicas are Ready and the
// PodDisruptionBudget counts them (2 healthy, 1 disruption allowed).
func waitWebhookAvailable(t *testing.T) {
	t.Helper()
	ctx := testContext(t, 2*time.Minute)
	var last string
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		d, err := testCluster.kube.AppsV1().Deployments(systemNamespace).Get(ctx, "multinet-webhook", metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		pdb, err := testCluster.kube.PolicyV1().PodDisruptionBudgets(systemNamespace).Get(ctx, "multinet-webhook", metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("deployment %+v; PodDisruptionBudget %+v", d.Status, pdb.Status)
		return d.Status.ReadyReplicas == 2 && d.Status.UpdatedReplicas == 2 && d.Status.Replicas == 2 &&
			pdb.Status.CurrentHealthy == 2 && pdb.Status.DisruptionsAllowed == 1, nil
	})
	if err != nil {
		t.Fatalf("multinet-webhook not available with 2 replicas: %s", last)
	}
}

// TestWebhookDisruptionBudget: the webhook's two replicas and its
// PodDisruptionBudget (minAvailable 1) keep admission working through a
// drain. Evicting one replica is allowed; evicting the other right after is
// refused (HTTP 429) while the first one's replacement is not Ready; pods
// selecting a device network still get their resources injected through
// the Service meanwhile, and the Deployment gets back to two Ready
// replicas.
func TestWebhookDisruptionBudget(t *testing.T) {
	requireDeployed(t)
	waitWebhookAvailable(t)
	env := devicesEnv(t)
	ns := newNamespace(t)
	vhost := env["VHOST_RESOURCE"]
	vhostNet(t, ns, "vh", vhost)

	pods := runningPods(t, "multinet-webhook")
	if len(pods) != 2 {
		t.Fatalf("%d running webhook pods, want 2", len(pods))
	}
	ctx := testContext(t, 30*time.Second)
	evict := func(p *corev1.Pod) error {
		return testCluster.kube.CoreV1().Pods(systemNamespace).EvictV1(ctx, &policyv1.Eviction{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
		})
	}
	if err := evict(pods[0]); err != nil {
		t.Fatalf("evict %s (1 disruption allowed): %v", pods[0].Name, err)
	}
	err := evict(pods[1])
	if !apierrors.IsTooManyRequests(err) {
		t.Errorf("evict %s right after %s: %v, want 429 (the PodDisruptionBudget keeps one replica)", pods[1].Name, pods[0].Name, err)
	}
	waitInjected(t, podSpec(ns, "during", "vh"), vhost, 1)
	waitWebhookAvailable(t)
	for _, p := range runningPods(t, "multinet-webhook") {
		if p.UID == pods[0].UID {
			t.Errorf("evicted pod %s still runs", p.Name)
		}
	}
	waitInjected(t, podSpec(ns, "after", "vh,vh"), vhost, 2)
}
