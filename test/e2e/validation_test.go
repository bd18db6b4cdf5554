//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
	"github.com/multinet/multinet/pkg/spec/selection"
)

// One validation of a pod's networks. Everything that can be
// known without the node is refused at admission with the message
// multinetd's ADD error and Event would carry: podnetworks.Check's, which
// these tests compute themselves against the cluster's NADs and the
// deployed policy (docs/validation.md lists the cases).

// The admission webhooks of deploy/webhook-configurations.yaml.
const (
	mutatingPodWebhook   = "pod-resources.webhook.multinet.io"
	validatingPodWebhook = "pod-networks.webhook.multinet.io"
	nadWebhook           = "nad-config.webhook.multinet.io"
)

// clusterNADs reads the cluster's NetworkAttachmentDefinitions for
// podnetworks.Check (what the webhook's live lookup reads).
type clusterNADs struct{}

func (clusterNADs) Get(ctx context.Context, namespace, name string) (*nadv1.NetworkAttachmentDefinition, error) {
	return testCluster.multi.K8sCniCncfIoV1().NetworkAttachmentDefinitions(namespace).Get(ctx, name, metav1.GetOptions{})
}

// deployedPolicy is the policy the deployed webhook and multinetd apply:
// namespace isolation with their global namespaces, no defaultNetworks.
func deployedPolicy(t *testing.T) podnetworks.Policy {
	t.Helper()
	return podnetworks.Policy{Isolation: selection.IsolationPolicy{Enabled: true, GlobalNamespaces: deployedIsolation(t)}}
}

// verdictMessage returns podnetworks.Check's message for pod p against the
// cluster's NADs under policy: the message the webhook denies p with and
// multinetd's Event carries. It fails the test when Check finds p valid.
func verdictMessage(t *testing.T, p *corev1.Pod, policy podnetworks.Policy) string {
	t.Helper()
	v, err := podnetworks.Check(testContext(t, 30*time.Second),
		podnetworks.Pod{Namespace: p.Namespace, Annotations: p.Annotations, HostNetwork: p.Spec.HostNetwork},
		podnetworks.Options{Policy: policy, NADs: clusterNADs{}})
	if err != nil {
		t.Fatalf("podnetworks.Check of pod %s/%s: %v", p.Namespace, p.Name, err)
	}
	if v.Err() == nil {
		t.Fatalf("podnetworks.Check finds pod %s/%s (annotations %q) valid", p.Namespace, p.Name, p.Annotations)
	}
	return v.Err().Error()
}

// kubectlRun runs the cluster's kubectl with args (stdin: nil for none) and
// returns its exit code, stdout and stderr.
func kubectlRun(t *testing.T, stdin []byte, args ...string) (int, string, string) {
	t.Helper()
	bin := testCluster.env["KUBECTL"]
	if bin == "" {
		bin = "kubectl"
	}
	cmd := exec.CommandContext(testContext(t, 60*time.Second), bin, append([]string{"--kubeconfig", testCluster.env["KUBECONFIG"]}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("kubectl %q: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), out.String(), errOut.String()
}

// manifest returns obj as a one-document manifest (JSON).
func manifest(t *testing.T, obj any) []byte {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// assertKubectlDenied fails unless kubectl exited non-zero and its stderr
// says that admission webhook hook denied the request with exactly msg
// (the rest of the line after "denied the request: "), which also contains
// every part.
func assertKubectlDenied(t *testing.T, code int, stdout, stderr, hook, msg string, parts ...string) {
	t.Helper()
	if code == 0 {
		t.Fatalf("kubectl succeeded (stdout %q), want the request denied by %s with %q", stdout, hook, msg)
	}
	prefix := "admission webhook \"" + hook + "\" denied the request: "
	_, got, ok := strings.Cut(stderr, prefix)
	if !ok {
		t.Fatalf("kubectl stderr %q: no denial by %s", stderr, hook)
	}
	got, _, _ = strings.Cut(got, "\n")
	if got != msg {
		t.Errorf("kubectl stderr, denial by %s:\n got %q\nwant %q (podnetworks' message)", hook, got, msg)
	}
	for _, p := range parts {
		if !strings.Contains(got, p) {
			t.Errorf("denial %q does not contain %q", got, p)
		}
	}
}

// unvalidatedLabel marks the NADs storeUnvalidatedNADs creates past the NAD
// webhook.
const unvalidatedLabel = "multinet.io/e2e-unvalidated"

// storeUnvalidatedNADs creates NADs the NAD webhook would refuse (a config
// that does not parse, an unsupported cniVersion), as a cluster holds them
// when they were stored before the webhook validated NADs: for the while
// of the creates, the cluster's nad-config webhook skips objects carrying
// unvalidatedLabel (its objectSelector; no other object is affected), and
// the NADs carry it. The objectSelector is restored before it returns, and
// at the end of the test if it failed on the way.
func storeUnvalidatedNADs(t *testing.T, nads ...*nadv1.NetworkAttachmentDefinition) {
	t.Helper()
	configs := testCluster.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	setSelector := func(ctx context.Context, sel *metav1.LabelSelector) (prev *metav1.LabelSelector, err error) {
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			v, err := configs.Get(ctx, "multinet-webhook", metav1.GetOptions{})
			if err != nil {
				return err
			}
			for i := range v.Webhooks {
				if v.Webhooks[i].Name == nadWebhook {
					prev, v.Webhooks[i].ObjectSelector = v.Webhooks[i].ObjectSelector, sel
					_, err = configs.Update(ctx, v, metav1.UpdateOptions{})
					return err
				}
			}
			return errors.New("ValidatingWebhookConfiguration multinet-webhook has no webhook " + nadWebhook)
		})
		return prev, err
	}
	ctx := testContext(t, 90*time.Second)
	prev, err := setSelector(ctx, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: unvalidatedLabel, Operator: metav1.LabelSelectorOpDoesNotExist}}})
	if err != nil {
		t.Fatalf("let the NAD webhook skip %s: %v", unvalidatedLabel, err)
	}
	restore := sync.OnceFunc(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := setSelector(ctx, prev); err != nil {
			t.Errorf("restore the objectSelector of webhook %s: %v", nadWebhook, err)
		}
	})
	t.Cleanup(restore)
	for _, n := range nads {
		n = n.DeepCopy()
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[unvalidatedLabel] = "true"
		// The API server sees the new objectSelector through its informer.
		var createErr error
		_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, createErr = testCluster.multi.K8sCniCncfIoV1().NetworkAttachmentDefinitions(n.Namespace).Create(ctx, n, metav1.CreateOptions{})
			return createErr == nil || !strings.Contains(createErr.Error(), "denied the request"), nil
		})
		if createErr != nil {
			t.Fatalf("create NAD %s/%s past the NAD webhook: %v", n.Namespace, n.Name, createErr)
		}
	}
	restore()
}

func nadObject(ns, name, config string, annotations map[string]string) *nadv1.NetworkAttachmentDefinition {
	return &nadv1.NetworkAttachmentDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: nadv1.SchemeGroupVersion.String(), Kind: nadv1.NetworkAttachmentDefinitionKind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: config},
	}
}

// NAD configs of the tests (none of their plugins ever runs: every pod
// selecting them is refused).
const (
	// nocapConfig declares no capability.
	nocapConfig = `{"cniVersion":"1.0.0","name":"nocap","type":"bridge","bridge":"mnebad"}`
	// capsConfig declares ips and mac.
	capsConfig = `{"cniVersion":"1.0.0","name":"caps","plugins":[{"type":"bridge","bridge":"mnebad","capabilities":{"ips":true}},{"type":"tuning","capabilities":{"mac":true}}]}`
	// badArgsConfig has "args" that is no object: cni-args cannot merge.
	badArgsConfig = `{"cniVersion":"1.0.0","name":"badargs","type":"bridge","bridge":"mnebad","args":"not an object"}`
	// badJSONConfig does not parse.
	badJSONConfig = `{"cniVersion":"1.0.0","name":"badjson","type":`
	// badVersionConfig names a cniVersion libcni does not support.
	badVersionConfig = `{"cniVersion":"9.9.9","name":"badversion","type":"bridge"}`
)

// admissionCase is one pod of TestAdmissionRefusesInvalidSelections.
type admissionCase struct {
	name     string
	networks string // the networks annotation ("" leaves it out)
	override string // the default-network annotation ("" leaves it out)
	host     bool   // hostNetwork
	// parts must be in the message (besides it being podnetworks'); NS and
	// OTHER stand for the pod's namespace and the forbidden one.
	parts []string
}

// TestAdmissionRefusesInvalidSelections: `kubectl apply`
// of a pod whose network selection is invalid for a reason known without
// the node is refused by the deployed webhook, and kubectl's stderr carries
// exactly podnetworks.Check's message for it, the message multinetd's ADD
// error and Event carry (TestDaemonRefusesWithTheSameMessage runs multinetd
// on some of them): a missing NAD; a NAD whose config does not parse, names
// an unsupported cniVersion, or has a malformed resourceName (stored past
// the NAD webhook, as before it existed); each runtimeConfig key (ips, mac,
// portMappings, bandwidth, infiniband-guid) on a NAD no plugin of which
// declares the capability; ips with ipam-claim-reference; interface names
// colliding with each other and with the default network's eth0
// (nocap@eth0); cni-args that cannot merge; default-route on two
// attachments; a key that is not the spec's; an isolation violation; the
// v1.multus-cni.io/default-network override (missing NAD, capability,
// interface, isolation); a hostNetwork pod with a selection. No pod object
// is left (none waits in ContainerCreating).
func TestAdmissionRefusesInvalidSelections(t *testing.T) {
	policy := deployedPolicy(t)
	ns, other := newNamespace(t), newNamespace(t)
	createNAD(t, ns, "nocap", nocapConfig, nil)
	createNAD(t, ns, "caps", capsConfig, nil)
	createNAD(t, ns, "badargs", badArgsConfig, map[string]string{podnetworks.AcceptCNIArgsAnnotation: "true"}) // the pod's cni-args must reach the merge
	createNAD(t, other, "net", nocapConfig, nil)
	storeUnvalidatedNADs(t,
		nadObject(ns, "badjson", badJSONConfig, nil),
		nadObject(ns, "badversion", badVersionConfig, nil),
		nadObject(ns, "badrn", nocapConfig, map[string]string{nadv1.ResourceNameAnnotation: "sriov"}))

	const mac = `"mac":"02:00:00:00:00:01"`
	cases := []admissionCase{
		{name: "missing-nad", networks: "nocap,gone", parts: []string{`networks[1] "gone": NetworkAttachmentDefinition NS/gone not found`}},
		{name: "config-does-not-parse", networks: "badjson", parts: []string{`NetworkAttachmentDefinition NS/badjson: spec.config`, "not a JSON object"}},
		{name: "unsupported-cniversion", networks: "badversion", parts: []string{`field cniVersion: "9.9.9" is not a CNI version`}},
		{name: "malformed-resourcename", networks: "badrn", parts: []string{`resourceName "sriov": must be vendor-domain/type`}},
		{name: "mac-no-capability", networks: `[{"name":"nocap",` + mac + `}]`,
			parts: []string{`networks[0] "nocap": field "mac": needs runtimeConfig "mac", but no plugin of CNI config "nocap" declares "capabilities": {"mac": true}`}},
		{name: "ips-no-capability", networks: `[{"name":"nocap","ips":["10.1.1.5/24"]}]`,
			parts: []string{`field "ips": needs runtimeConfig "ips"`, `declares "capabilities": {"ips": true}`}},
		{name: "portmappings-no-capability", networks: `[{"name":"nocap","portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"tcp"}]}]`,
			parts: []string{`field "portMappings": needs runtimeConfig "portMappings"`}},
		{name: "bandwidth-no-capability", networks: `[{"name":"nocap","bandwidth":{"ingressRate":1000,"ingressBurst":1000}}]`,
			parts: []string{`field "bandwidth": needs runtimeConfig "bandwidth"`}},
		{name: "infiniband-guid-no-capability", networks: `[{"name":"nocap","infiniband-guid":"00:11:22:33:44:55:66:77"}]`,
			parts: []string{`field "infiniband-guid": needs runtimeConfig "infinibandGUID"`}},
		{name: "ips-with-ipam-claim-reference", networks: `[{"name":"caps","ips":["10.1.1.5/24"],"ipam-claim-reference":"claim-1"}]`,
			parts: []string{`field "ipam-claim-reference"`, `cannot be combined with "ips"`, "4.1.2.1.11"}},
		{name: "interfaces-collide", networks: "nocap@data0,caps@data0",
			parts: []string{`networks[1] "caps": field "interface": "data0" is already requested by networks[0] "nocap"`}},
		{name: "nocap-at-eth0", networks: "nocap@eth0",
			parts: []string{`networks[0] "nocap": field "interface": "eth0" is used by the default network`}},
		{name: "cni-args-cannot-merge", networks: `[{"name":"badargs","cni-args":{"k":"v"}}]`,
			parts: []string{`field "cni-args": cannot be merged into CNI config "badargs"`}},
		{name: "default-route-twice", networks: `[{"name":"nocap","default-route":[]},{"name":"caps","default-route":[]}]`,
			parts: []string{`field "default-route": is already set by networks[0] "nocap"`}},
		{name: "unknown-key", networks: `[{"name":"nocap","ip":["10.0.0.1"]}]`, parts: []string{`field "ip": is not a key of the spec; did you mean "ips"?`}},
		{name: "isolation", networks: "nocap,OTHER/net",
			parts: []string{`networks[1]: network "OTHER/net" is in namespace "OTHER", which a pod in namespace "NS" may not use`}},
		{name: "override-missing-nad", override: "gone", parts: []string{`v1.multus-cni.io/default-network`, `NetworkAttachmentDefinition NS/gone not found`}},
		{name: "override-mac-no-capability", override: `{"name":"nocap",` + mac + `}`,
			parts: []string{`v1.multus-cni.io/default-network`, `field "mac": needs runtimeConfig "mac"`}},
		{name: "override-interface", override: `{"name":"nocap","interface":"e0"}`,
			parts: []string{`v1.multus-cni.io/default-network`, `"e0" cannot be set: the default network always uses the runtime's CNI_IFNAME`}},
		{name: "override-isolation", networks: "nocap", override: "OTHER/net",
			parts: []string{`v1.multus-cni.io/default-network`, `network "OTHER/net" is in namespace "OTHER"`}},
		{name: "host-network", networks: "nocap", host: true, parts: []string{"spec.hostNetwork: true"}},
	}
	subst := strings.NewReplacer("OTHER", other, "NS", ns)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := podSpec(ns, "p-"+c.name, subst.Replace(c.networks))
			p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
			if c.override != "" {
				p.Annotations[selection.DefaultNetworkAnnotation] = subst.Replace(c.override)
			}
			p.Spec.HostNetwork = c.host
			want := verdictMessage(t, p, policy)
			parts := make([]string, len(c.parts))
			for i, s := range c.parts {
				parts[i] = subst.Replace(s)
			}
			code, stdout, stderr := kubectlRun(t, manifest(t, p), "apply", "-f", "-")
			assertKubectlDenied(t, code, stdout, stderr, mutatingPodWebhook, want, parts...)
			t.Logf("kubectl apply: %s", strings.TrimSpace(stderr))
			if _, err := testCluster.kube.CoreV1().Pods(ns).Get(testContext(t, 20*time.Second), p.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("pod %s/%s after the refusal: %v, want NotFound", ns, p.Name, err)
			}
		})
	}
	list, err := testCluster.kube.CoreV1().Pods(ns).List(testContext(t, 20*time.Second), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("namespace %s holds pods after every apply was refused:\n%s", ns, describePods(list.Items))
	}
}

// TestAdmissionRefusesInvalidSelectionUpdate: on a
// running pod, changing k8s.v1.cni.cncf.io/networks (kubectl annotate
// --overwrite, kubectl patch) or adding the default-network override to
// something invalid is refused by the validating webhook with podnetworks'
// message, and the pod keeps its annotations; a valid change is admitted
// (an equivalent JSON form for real, another network server-side dry run).
func TestAdmissionRefusesInvalidSelectionUpdate(t *testing.T) {
	policy := deployedPolicy(t)
	ns, other := newNamespace(t), newNamespace(t)
	a := bridgeNet(t, ns, "net-a", "1.0.0", nil)
	bridgeNet(t, ns, "net-b", "1.0.0", nil)
	createNAD(t, other, "net", nocapConfig, nil)
	p := runPod(t, podSpec(ns, "hot", "net-a"))

	cases := []struct {
		name string
		// annotations are set by kubectl annotate --overwrite, or by kubectl
		// patch (a merge patch) when patch is set.
		annotations map[string]string
		patch       bool
		parts       []string
	}{
		{name: "interface-eth0", annotations: map[string]string{selection.NetworksAnnotation: "net-a@eth0"},
			parts: []string{`field "interface": "eth0" is used by the default network`}},
		{name: "mac-no-capability", patch: true, annotations: map[string]string{selection.NetworksAnnotation: `[{"name":"net-a","mac":"02:00:00:00:00:01"}]`},
			parts: []string{`field "mac": needs runtimeConfig "mac", but no plugin of CNI config "net-a"`}},
		{name: "missing-nad", annotations: map[string]string{selection.NetworksAnnotation: "net-a,gone"},
			parts: []string{"NetworkAttachmentDefinition " + ns + "/gone not found"}},
		{name: "isolation", patch: true, annotations: map[string]string{selection.NetworksAnnotation: "net-a," + other + "/net"},
			parts: []string{`is in namespace "` + other + `"`, "namespace isolation"}},
		{name: "override-added", annotations: map[string]string{selection.DefaultNetworkAnnotation: "gone"},
			parts: []string{`v1.multus-cni.io/default-network`, "not found"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			changed := p.DeepCopy()
			for k, v := range c.annotations {
				changed.Annotations[k] = v
			}
			want := verdictMessage(t, changed, policy)
			var code int
			var stdout, stderr string
			if c.patch {
				body := manifest(t, map[string]any{"metadata": map[string]any{"annotations": c.annotations}})
				code, stdout, stderr = kubectlRun(t, nil, "-n", ns, "patch", "pod", p.Name, "--type=merge", "-p", string(body))
			} else {
				args := []string{"-n", ns, "annotate", "--overwrite", "pod", p.Name}
				for k, v := range c.annotations {
					args = append(args, k+"="+v)
				}
				code, stdout, stderr = kubectlRun(t, nil, args...)
			}
			assertKubectlDenied(t, code, stdout, stderr, validatingPodWebhook, want, c.parts...)
			t.Logf("kubectl: %s", strings.TrimSpace(stderr))
			now, err := testCluster.kube.CoreV1().Pods(ns).Get(testContext(t, 20*time.Second), p.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got, has := now.Annotations[selection.DefaultNetworkAnnotation]; now.Annotations[selection.NetworksAnnotation] != "net-a" || has {
				t.Errorf("after the refusal: networks %q, default-network %q, want net-a and none", now.Annotations[selection.NetworksAnnotation], got)
			}
		})
	}

	t.Run("valid", func(t *testing.T) {
		if code, _, stderr := kubectlRun(t, nil, "-n", ns, "annotate", "--overwrite", "--dry-run=server", "pod", p.Name, selection.NetworksAnnotation+"=net-a,net-b"); code != 0 {
			t.Errorf("kubectl annotate --dry-run=server networks=net-a,net-b: exit %d: %s", code, stderr)
		}
		const same = `[{"name":"net-a"}]`
		if code, _, stderr := kubectlRun(t, nil, "-n", ns, "annotate", "--overwrite", "pod", p.Name, selection.NetworksAnnotation+"="+same); code != 0 {
			t.Fatalf("kubectl annotate networks=%s: exit %d: %s", same, code, stderr)
		}
		now, err := testCluster.kube.CoreV1().Pods(ns).Get(testContext(t, 20*time.Second), p.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := now.Annotations[selection.NetworksAnnotation]; got != same {
			t.Errorf("networks annotation %q after the admitted change, want %q", got, same)
		}
	})
	deletePod(t, ns, p.Name)
	assertReleased(t, a)
	assertNoRecords(t, ns)
}

// TestAdmissionRefusesInvalidNADs: `kubectl apply` of a
// NetworkAttachmentDefinition whose config does not parse, names an
// unsupported cniVersion, or whose resourceName is malformed is refused by
// the NAD webhook with podnetworks.CheckNAD's errors (kubectl multinet
// lint's), on CREATE and on UPDATE of a valid NAD, which keeps its config.
func TestAdmissionRefusesInvalidNADs(t *testing.T) {
	ns := newNamespace(t)
	createNAD(t, ns, "upd", nocapConfig, nil)
	cases := []struct {
		name, config string
		annotations  map[string]string
		parts        []string
	}{
		{name: "does-not-parse", config: badJSONConfig, parts: []string{"spec.config: not a JSON object"}},
		{name: "unsupported-cniversion", config: badVersionConfig, parts: []string{`spec.config: field cniVersion: "9.9.9" is not a CNI version`}},
		{name: "malformed-resourcename", config: nocapConfig, annotations: map[string]string{nadv1.ResourceNameAnnotation: "sriov"},
			parts: []string{`metadata.annotations["k8s.v1.cni.cncf.io/resourceName"]: resourceName "sriov"`}},
	}
	for _, c := range cases {
		for _, name := range []string{"new-" + c.name, "upd"} {
			op := "create"
			if name == "upd" {
				op = "update"
			}
			t.Run(c.name+"/"+op, func(t *testing.T) {
				nad := nadObject(ns, name, c.config, c.annotations)
				var msgs []string
				for _, f := range podnetworks.CheckNAD(nad, nil).Errors {
					msgs = append(msgs, f.String())
				}
				if len(msgs) == 0 {
					t.Fatalf("podnetworks.CheckNAD finds NAD %s valid", name)
				}
				code, stdout, stderr := kubectlRun(t, manifest(t, nad), "apply", "-f", "-")
				assertKubectlDenied(t, code, stdout, stderr, nadWebhook, strings.Join(msgs, "; "), c.parts...)
				t.Logf("kubectl apply: %s", strings.TrimSpace(stderr))
				got, err := testCluster.multi.K8sCniCncfIoV1().NetworkAttachmentDefinitions(ns).Get(testContext(t, 20*time.Second), name, metav1.GetOptions{})
				switch {
				case name != "upd" && !apierrors.IsNotFound(err):
					t.Errorf("NAD %s after the refusal: %v, want NotFound", name, err)
				case name == "upd" && (err != nil || got.Spec.Config != nocapConfig || got.Annotations[nadv1.ResourceNameAnnotation] != ""):
					t.Errorf("NAD upd after the refused update: %v %+v, want its config unchanged", err, got)
				}
			})
		}
	}
}

// TestDaemonRefusesWithTheSameMessage: multinetd,
// for a pod the webhook never sees (kube-system, which the webhook
// configurations exclude), fails the ADD of the capability and interface cases (mac and
// ips without the capability, nocap@eth0) and of a NAD with an unsupported
// cniVersion with a NetworkAttachFailed Event whose message is exactly
// podnetworks.Check's, the message the webhook refuses the same selection
// with in TestAdmissionRefusesInvalidSelections; no plugin ran (the records
// hold no attachment, the network no address), and deleting the pod
// completes.
func TestDaemonRefusesWithTheSameMessage(t *testing.T) {
	policy := deployedPolicy(t)
	requireWebhookSkips(t, webhookExcludedNamespace)
	ns := webhookExcludedNamespace
	plain := "mne2e-plain-" + randHex(3)
	net := bridgeNet(t, ns, plain, "1.0.0", nil)
	t.Cleanup(func() { deleteNAD(t, ns, plain) })
	badVersion := "mne2e-badversion-" + randHex(3)
	createNAD(t, ns, badVersion, badVersionConfig, nil) // kube-system: no NAD webhook
	t.Cleanup(func() { deleteNAD(t, ns, badVersion) })

	for _, c := range []struct{ name, networks string }{
		{"mac", `[{"name":"` + plain + `","mac":"02:00:00:00:00:09"}]`},
		{"ips", `[{"name":"` + plain + `","ips":["10.212.0.5/24"]}]`},
		{"eth0", plain + "@eth0"},
		{"cniversion", badVersion},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := podSpec(ns, "multinet-e2e-refused-"+randHex(3), c.networks)
			want := verdictMessage(t, p, policy)
			createExcludedPod(t, p)
			msg := waitEvent(t, ns, p.Name, "NetworkAttachFailed")
			t.Logf("multinetd's Event: %s", msg)
			if msg != want {
				t.Errorf("multinetd's Event:\n got %q\nwant %q (podnetworks' message, the webhook's denial)", msg, want)
			}
			got, err := testCluster.kube.CoreV1().Pods(ns).Get(testContext(t, 20*time.Second), p.Name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.Phase == corev1.PodRunning {
				t.Errorf("pod %s runs although its selection is invalid", p.Name)
			}
			if a := recordAttachments(t, ns, p.Name); len(a) != 0 {
				t.Errorf("records of %s hold attachments %+v, want none (refused before any plugin ran)", p.Name, a)
			}
			deletePod(t, ns, p.Name)
		})
	}
	assertReleased(t, net)
}

// TestNADChangedAfterAdmission: a NAD that changes after
// the pod was admitted can still fail the ADD, with the clear Event. The
// pod asks for "mac" on a network whose tuning plugin declares it and is
// admitted, held by a scheduling gate; the NAD is then updated to a valid
// config without the tuning plugin, and the gate removed: multinetd fails
// the ADD with a NetworkAttachFailed Event whose message is podnetworks'
// for the NAD as it now is, and nothing is attached.
func TestNADChangedAfterAdmission(t *testing.T) {
	ns := newNamespace(t)
	tuning := map[string]any{"type": "tuning", "capabilities": map[string]bool{"mac": true}}
	net, conf := bridgeNetConf(t, ns, "net", "1.0.0", nil, tuning)
	createNAD(t, ns, "net", conf, nil)
	p := podSpec(ns, "gated", `[{"name":"net","mac":"02:00:00:00:0c:01"}]`)
	p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "multinet.io/e2e-hold"}}
	ctx := testContext(t, 2*time.Minute)
	if _, err := testCluster.kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod (a valid selection): %v", err)
	}
	t.Cleanup(func() { deletePod(t, ns, p.Name) })

	conf["plugins"] = conf["plugins"].([]map[string]any)[:1]
	b, err := json.Marshal(conf)
	if err != nil {
		t.Fatal(err)
	}
	setNADConfig(t, ns, "net", string(b))
	want := verdictMessage(t, p, deployedPolicy(t))

	msg := releaseGateRefused(t, ctx, p, want)
	if !strings.Contains(msg, `field "mac": needs runtimeConfig "mac", but no plugin of CNI config "net"`) {
		t.Errorf("multinetd's Event %q does not name the capability the NAD lost", msg)
	}
	if a := recordAttachments(t, ns, p.Name); len(a) != 0 {
		t.Errorf("records hold attachments %+v, want none", a)
	}
	deletePod(t, ns, p.Name)
	assertReleased(t, net)
	assertNoRecords(t, ns)
}

// releaseGateRefused removes the scheduling gates of the pod p (created
// with one, so that multinetd's ADD comes after the test changed what it
// reads) and returns multinetd's NetworkAttachFailed Event message, failing
// the test unless it is want (podnetworks' verdict).
func releaseGateRefused(t *testing.T, ctx context.Context, p *corev1.Pod, want string) string {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := testCluster.kube.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec.SchedulingGates = nil
		_, err = testCluster.kube.CoreV1().Pods(p.Namespace).Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("remove the scheduling gate: %v", err)
	}
	msg := waitEvent(t, p.Namespace, p.Name, "NetworkAttachFailed")
	t.Logf("multinetd's Event: %s", msg)
	if msg != want {
		t.Errorf("multinetd's Event:\n got %q\nwant %q", msg, want)
	}
	return msg
}
