//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/pkg/spec/selection"
)

// Namespace isolation (multi-net spec §7.4) as deploy/ ships it: on in
// multinetd and in the webhook, with the same global namespaces
// (docs/install.md "Namespace isolation"). These tests run against the
// deployed components: the webhook refuses a cross-namespace selection at
// admission, multinetd refuses it at ADD for the pods the webhook does not
// see, and a NAD of a global namespace works from any namespace.

// webhookExcludedNamespace is a namespace whose pods the deployed webhook
// configurations do not send to the webhook (their namespaceSelector), so
// that only multinetd checks them.
const webhookExcludedNamespace = "kube-system"

// deployedIsolation fails the test unless the deployed multinetd
// (namespaceIsolation, globalNamespaces in its ConfigMap) and webhook
// (--namespace-isolation, --global-namespaces) both have isolation on with
// the same global namespaces, and returns them.
func deployedIsolation(t *testing.T) []string {
	t.Helper()
	requireDeployed(t)
	ctx := testContext(t, 30*time.Second)
	redeploy := "(the deployed components predate deploy/'s namespace isolation? hack/cluster-deployed.sh apply)"

	ds, err := testCluster.kube.AppsV1().DaemonSets(systemNamespace).Get(ctx, "multinetd", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("multinetd DaemonSet: %v", err)
	}
	cmName := ""
	for _, v := range ds.Spec.Template.Spec.Volumes {
		if v.Name == "config" && v.ConfigMap != nil {
			cmName = v.ConfigMap.Name
		}
	}
	cm, err := testCluster.kube.CoreV1().ConfigMaps(systemNamespace).Get(ctx, cmName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("multinetd's ConfigMap %q: %v", cmName, err)
	}
	var cfg struct {
		NamespaceIsolation bool     `json:"namespaceIsolation"`
		GlobalNamespaces   []string `json:"globalNamespaces"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data["multinetd.yaml"]), &cfg); err != nil {
		t.Fatalf("multinetd.yaml of ConfigMap %s: %v", cmName, err)
	}
	if !cfg.NamespaceIsolation {
		t.Fatalf("deployed multinetd.yaml has namespaceIsolation off %s", redeploy)
	}

	d, err := testCluster.kube.AppsV1().Deployments(systemNamespace).Get(ctx, "multinet-webhook", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("multinet-webhook Deployment: %v", err)
	}
	fs := flag.NewFlagSet("multinet-webhook", flag.ContinueOnError)
	on := fs.Bool("namespace-isolation", false, "")
	globals := fs.String("global-namespaces", "", "")
	var ours []string
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		if name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); name == "namespace-isolation" || name == "global-namespaces" {
			ours = append(ours, a)
		}
	}
	if err := fs.Parse(ours); err != nil {
		t.Fatalf("webhook args %q: %v", ours, err)
	}
	var list []string
	for _, ns := range strings.Split(*globals, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			list = append(list, ns)
		}
	}
	if !*on {
		t.Fatalf("deployed webhook runs without --namespace-isolation %s", redeploy)
	}
	if !slices.Equal(list, cfg.GlobalNamespaces) {
		t.Fatalf("deployed webhook --global-namespaces %q, multinetd globalNamespaces %q: want the same list", list, cfg.GlobalNamespaces)
	}
	return cfg.GlobalNamespaces
}

// requireWebhookSkips fails the test unless no pod webhook of the deployed
// configurations is called for pods of namespace ns (its namespaceSelector
// excludes it), so that a pod created there reaches multinetd unchecked.
func requireWebhookSkips(t *testing.T, ns string) {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	n, err := testCluster.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	adm := testCluster.kube.AdmissionregistrationV1()
	m, err := adm.MutatingWebhookConfigurations().Get(ctx, "multinet-webhook", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	v, err := adm.ValidatingWebhookConfigurations().Get(ctx, "multinet-webhook", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Only the webhooks called for pods: the IPAMClaim status webhook
	// sees every namespace, but no pod.
	selectors := map[string]*metav1.LabelSelector{}
	for _, w := range m.Webhooks {
		if forPods(w.Rules) {
			selectors[w.Name] = w.NamespaceSelector
		}
	}
	for _, w := range v.Webhooks {
		if forPods(w.Rules) {
			selectors[w.Name] = w.NamespaceSelector
		}
	}
	if len(selectors) == 0 {
		t.Fatal("the deployed webhook configurations have no pod webhook")
	}
	for name, s := range selectors {
		sel, err := metav1.LabelSelectorAsSelector(s)
		if err != nil {
			t.Fatalf("webhook %s: namespaceSelector: %v", name, err)
		}
		if s == nil || sel.Matches(labels.Set(n.Labels)) {
			t.Fatalf("webhook %s is called for pods of %s (namespaceSelector %v): no pod there skips admission", name, ns, s)
		}
	}
}

// forPods reports whether rules send pods (or every resource) to a webhook.
func forPods(rules []admv1.RuleWithOperations) bool {
	for _, r := range rules {
		if slices.Contains(r.Resources, "pods") || slices.Contains(r.Resources, "*") {
			return true
		}
	}
	return false
}

// isolationMessage is what both components say about a pod of podNS
// selecting network of namespace ns under the deployed policy.
func isolationMessage(network, ns, podNS string) []string {
	return []string{`network "` + network + `"`, `is in namespace "` + ns + `"`, `pod in namespace "` + podNS + `"`, "namespace isolation"}
}

// createExcludedPod creates pod p in webhookExcludedNamespace, where only
// multinetd checks it, and deletes it (waiting for its records to go) when
// the test ends.
func createExcludedPod(t *testing.T, p *corev1.Pod) {
	t.Helper()
	ctx := testContext(t, 30*time.Second)
	if _, err := testCluster.kube.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s/%s: %v", p.Namespace, p.Name, err)
	}
	t.Cleanup(func() { deletePod(t, p.Namespace, p.Name) })
}

// deleteNAD deletes NetworkAttachmentDefinition ns/name (gone already is
// fine), for NADs of namespaces that outlive the test, such as "default".
func deleteNAD(t *testing.T, ns, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := testCluster.multi.K8sCniCncfIoV1().NetworkAttachmentDefinitions(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete NAD %s/%s: %v", ns, name, err)
	}
}

// recordAttachments returns the attachments of every record multinetd
// holds for pod ns/name.
func recordAttachments(t *testing.T, ns, name string) []state.Attachment {
	t.Helper()
	dir := recordsDir(t)
	var out []state.Attachment
	for _, f := range podRecords(t, ns, name) {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			continue // removed by the DEL of the failed sandbox meanwhile
		}
		var r state.Record
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("record %s: %v", f, err)
		}
		out = append(out, r.Attachments...)
	}
	return out
}

// assertRefusedByDaemon waits until multinetd refused the sandbox of pod
// ns/name for namespace isolation (its NetworkAttachFailed Event, and the
// kubelet's FailedCreatePodSandBox carrying the same CNI error, both with
// parts) and checks that nothing was attached: the pod does not run, its
// records hold no attachment (not even the default network), and the nets
// hold no address and no bridge port.
func assertRefusedByDaemon(t *testing.T, ns, name string, parts []string, nets ...*testNet) {
	t.Helper()
	msg := waitEvent(t, ns, name, "NetworkAttachFailed", parts...)
	t.Logf("multinetd: %s", msg)
	kubelet := waitEvent(t, ns, name, "FailedCreatePodSandBox", "namespace isolation")
	t.Logf("kubelet: %s", kubelet)
	p, err := testCluster.kube.CoreV1().Pods(ns).Get(testContext(t, 20*time.Second), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.Phase == corev1.PodRunning || p.Annotations[nadv1.NetworkStatusAnnotation] != "" {
		t.Errorf("pod %s/%s phase %s, network-status %q: want it not running, without network-status", ns, name, p.Status.Phase, p.Annotations[nadv1.NetworkStatusAnnotation])
	}
	if a := recordAttachments(t, ns, name); len(a) != 0 {
		t.Errorf("records of %s/%s hold attachments %+v, want none (refused before any plugin ran)", ns, name, a)
	}
	for _, n := range nets {
		if a := n.allocations(t); len(a) != 0 {
			t.Errorf("network %s/%s: host-local holds %v for a refused selection", n.Namespace, n.Name, a)
		}
		if ports := n.ports(t); len(ports) != 0 {
			t.Errorf("network %s/%s: bridge %s has ports %v for a refused selection", n.Namespace, n.Name, n.Bridge, ports)
		}
	}
}

// TestIsolationWebhookRefusesOtherNamespace: with the deployed webhook, a
// pod of namespace A selecting a NAD of namespace B (comma and JSON forms,
// or naming it in the v1.multus-cni.io/default-network override) is denied
// at creation, with a message naming the annotation, the NAD's namespace and
// the pod's; it is not created. The same pod selecting its own namespace's
// NAD is admitted.
func TestIsolationWebhookRefusesOtherNamespace(t *testing.T) {
	deployedIsolation(t)
	a, b := newNamespace(t), newNamespace(t)
	bridgeNet(t, b, "net-b", "1.0.0", nil)
	bridgeNet(t, a, "net-a", "1.0.0", nil)
	ctx := testContext(t, 90*time.Second)

	cases := []struct {
		name, networks, override, field string
	}{
		{name: "comma", networks: b + "/net-b", field: selection.NetworksAnnotation},
		{name: "json", networks: `[{"name":"net-a"},{"name":"net-b","namespace":"` + b + `"}]`, field: selection.NetworksAnnotation},
		{name: "default-network", override: b + "/net-b", field: selection.DefaultNetworkAnnotation},
		{name: "default-network-json", networks: "net-a", override: `{"name":"net-b","namespace":"` + b + `"}`, field: selection.DefaultNetworkAnnotation},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := podSpec(a, "cross-"+c.name, c.networks)
			if c.override != "" {
				p.Annotations[selection.DefaultNetworkAnnotation] = c.override
			}
			_, err := testCluster.kube.CoreV1().Pods(a).Create(ctx, p, metav1.CreateOptions{})
			assertDenied(t, err, append(isolationMessage(b+"/net-b", b, a), `metadata.annotations["`+c.field+`"]`)...)
			if _, err := testCluster.kube.CoreV1().Pods(a).Get(ctx, p.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("pod %s/%s after the denial: %v, want NotFound", a, p.Name, err)
			}
		})
	}

	// Its own namespace's NAD, in both annotations: admitted (dry run; the
	// webhook may need a moment to see the new NAD).
	var ownErr error
	own := podSpec(a, "own", "net-a")
	own.Annotations[selection.DefaultNetworkAnnotation] = "net-a"
	_ = wait.PollUntilContextTimeout(ctx, 300*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
		_, ownErr = testCluster.kube.CoreV1().Pods(a).Create(ctx, own, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return ownErr == nil, nil
	})
	if ownErr != nil {
		t.Errorf("pod selecting its own namespace's NAD: %v, want admitted", ownErr)
	}
}

// TestIsolationDaemonRefusesOtherNamespace: multinetd enforces isolation
// itself (§7.4 "it must fail the pod network operation"), for the pods the
// webhook never sees: those of namespaces its configurations exclude
// (kube-system). A pod there selecting a NAD of another namespace, or naming
// one as its default-network override, is created, but its sandbox fails:
// multinetd's NetworkAttachFailed Event and the kubelet's
// FailedCreatePodSandBox name the isolation, the NAD's namespace and the
// pod's; nothing is attached (no plugin ran, not even the default
// network's: the records hold no attachment, the NAD's network no address).
func TestIsolationDaemonRefusesOtherNamespace(t *testing.T) {
	deployedIsolation(t)
	requireWebhookSkips(t, webhookExcludedNamespace)
	b := newNamespace(t)
	net := bridgeNet(t, b, "net-b", "1.0.0", nil)
	network := b + "/net-b"

	t.Run("networks", func(t *testing.T) {
		p := podSpec(webhookExcludedNamespace, "multinet-e2e-iso-"+randHex(3), network+"@data0")
		createExcludedPod(t, p)
		assertRefusedByDaemon(t, p.Namespace, p.Name, isolationMessage(network, b, webhookExcludedNamespace), net)
	})
	t.Run("default-network", func(t *testing.T) {
		p := podSpec(webhookExcludedNamespace, "multinet-e2e-iso-"+randHex(3), "")
		p.Annotations[selection.DefaultNetworkAnnotation] = network
		createExcludedPod(t, p)
		assertRefusedByDaemon(t, p.Namespace, p.Name, append(isolationMessage(network, b, webhookExcludedNamespace), `metadata.annotations["`+selection.DefaultNetworkAnnotation+`"]`), net)
	})
	assertReleased(t, net)
}

// TestIsolationGlobalNamespace: a NAD of a global namespace of the deployed
// policy ("default") is usable from any namespace: pods of two fresh
// namespaces (through the webhook and multinetd) and one of kube-system
// (multinetd alone) run with it on net1, with an address of its subnet, and
// release it when deleted.
func TestIsolationGlobalNamespace(t *testing.T) {
	globals := deployedIsolation(t)
	if len(globals) == 0 {
		t.Fatal("the deployed policy has no global namespace")
	}
	global := globals[0]
	name := "mne2e-global-" + randHex(3)
	g := bridgeNet(t, global, name, "1.0.0", nil)
	t.Cleanup(func() { deleteNAD(t, global, name) })
	requireWebhookSkips(t, webhookExcludedNamespace)

	for _, ns := range []string{newNamespace(t), newNamespace(t), webhookExcludedNamespace} {
		spec := podSpec(ns, "multinet-e2e-global-"+randHex(3), global+"/"+name)
		t.Cleanup(func() { // kube-system is not deleted with the test's namespaces
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_ = testCluster.kube.CoreV1().Pods(ns).Delete(ctx, spec.Name, metav1.DeleteOptions{})
		})
		p := runPod(t, spec)
		list := checkStatusMatchesPod(t, p, []string{"eth0", "net1"})
		if len(list) == 2 && (list[1].Name != global+"/"+name || len(list[1].IPs) != 1 || !strings.HasPrefix(list[1].IPs[0], strings.TrimSuffix(g.Subnet, "0/24"))) {
			t.Errorf("pod of %s: network-status[1] = %+v, want %s/%s with an address of %s", ns, list[1], global, name, g.Subnet)
		}
		deletePod(t, ns, p.Name)
	}
	assertReleased(t, g)
}
