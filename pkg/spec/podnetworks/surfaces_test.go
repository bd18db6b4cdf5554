package podnetworks_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ktypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	"sigs.k8s.io/yaml"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/internal/cli/lint"
	"github.com/multinet/multinet/internal/node/attach"
	"github.com/multinet/multinet/internal/node/cnirequest"
	"github.com/multinet/multinet/internal/node/cniserver/api"
	"github.com/multinet/multinet/internal/node/kube"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/internal/webhook"
	nadlisters "github.com/multinet/multinet/pkg/client/listers/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
	"github.com/multinet/multinet/pkg/spec/selection"
)

// The namespaces of the table: the pod is in podNS; otherNS is one
// isolation forbids it; sharedNS is global.
const (
	podNS    = "team"
	otherNS  = "other"
	sharedNS = "shared"
)

// NAD configs of the table.
const (
	// nocapConf declares no capability.
	nocapConf = `{"cniVersion":"1.0.0","type":"bridge"}`
	// capsConf declares ips (static IPAM) and mac (tuning).
	capsConf = `{"cniVersion":"1.0.0","plugins":[{"type":"macvlan","capabilities":{"ips":true}},{"type":"tuning","capabilities":{"mac":true}}]}`
	// multusRouteConf is Multus's own default-route e2e NAD: macvlan with
	// static IPAM and no "ips" capability (test-default-route1.sh).
	multusRouteConf = `{"cniVersion":"0.3.1","name":"macvlan1-config","type":"macvlan","master":"eth1","mode":"bridge","ipam":{"type":"static"}}`
)

func nadOf(ns, name, config string, annotations map[string]string) *nadv1.NetworkAttachmentDefinition {
	return &nadv1.NetworkAttachmentDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: nadv1.SchemeGroupVersion.String(), Kind: nadv1.NetworkAttachmentDefinitionKind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: config},
	}
}

// standardNADs: team/nocap, team/caps, team/macvlan1 (Multus's
// default-route NAD), team/badtype (a plugin type with a path separator),
// team/badversion (cniVersion 9.9.9), team/badargs (args not an object;
// accepts cni-args), team/argsok (accepts cni-args), team/ports (portmap),
// team/badrn (a malformed resourceName), team/disk (no spec.config),
// other/net, shared/net, shared/side (for defaultNetworks).
func standardNADs() []*nadv1.NetworkAttachmentDefinition {
	return []*nadv1.NetworkAttachmentDefinition{
		nadOf(podNS, "nocap", nocapConf, nil),
		nadOf(podNS, "caps", capsConf, nil),
		nadOf(podNS, "macvlan1", multusRouteConf, nil),
		nadOf(podNS, "badtype", `{"cniVersion":"0.3.1","plugins":[{"type":"bridge"},{"type":"../bin/sh"}]}`, nil),
		nadOf(podNS, "badversion", `{"cniVersion":"9.9.9","type":"bridge"}`, nil),
		nadOf(podNS, "badargs", `{"cniVersion":"1.0.0","type":"bridge","args":"not an object"}`, map[string]string{podnetworks.AcceptCNIArgsAnnotation: "true"}),
		nadOf(podNS, "argsok", nocapConf, map[string]string{podnetworks.AcceptCNIArgsAnnotation: "true"}),
		nadOf(podNS, "ports", `{"cniVersion":"1.0.0","plugins":[{"type":"bridge"},{"type":"portmap","capabilities":{"portMappings":true}}]}`, nil),
		nadOf(podNS, "badrn", nocapConf, map[string]string{nadv1.ResourceNameAnnotation: "sriov"}),
		nadOf(podNS, "disk", "", nil),
		nadOf(otherNS, "net", nocapConf, nil),
		nadOf(sharedNS, "net", nocapConf, nil),
		nadOf(sharedNS, "side", nocapConf, nil),
	}
}

// podSecurity is a policy under which the pod's namespace enforces Pod
// Security level.
func podSecurity(level string) podnetworks.Policy {
	return podnetworks.Policy{NADTrust: podnetworks.NADTrust{Namespaces: podnetworks.NamespaceLabelsFunc(func(_ context.Context, ns string) (map[string]string, error) {
		if ns != podNS {
			return nil, nil
		}
		return map[string]string{podnetworks.PodSecurityEnforceLabel: level}, nil
	})}}
}

var (
	isolated = podnetworks.Policy{Isolation: selection.IsolationPolicy{Enabled: true, GlobalNamespaces: []string{sharedNS}}}
	operator = podnetworks.Policy{DefaultNetworks: []selection.Element{{Namespace: sharedNS, Name: "side"}}, SystemNamespaces: []string{"kube-system"}}
)

const (
	nets = `metadata.annotations["k8s.v1.cni.cncf.io/networks"]: `
	over = `metadata.annotations["v1.multus-cni.io/default-network"]: `
)

// surfaceCase is one pod of the table: its selection annotations, the
// policy multinetd, the webhook and lint are given, and the problems all
// three must report (none: valid), each Problem.Error().
type surfaceCase struct {
	name     string
	networks string // the networks annotation; "-" leaves it out
	override string // the default-network annotation; "" leaves it out
	policy   podnetworks.Policy
	// hostNetwork pods never reach multinetd (no CNI ADD runs for them).
	hostNetwork bool
	want        []string
	// daemon, when set, is what multinetd reports instead: what only the
	// node can know (docs/validation.md). Lint and the webhook report want.
	daemon []string
}

// surfaceCases covers every pod case of internal/cli/lint's tests, the three
// capability and interface cases (mac and ips without the capability,
// nocap@eth0), and every
// admission-knowable case it lists.
var surfaceCases = []surfaceCase{
	{name: "comma form, generated names", networks: "nocap,caps,shared/net"},
	{name: "capabilities declared", networks: `[{"name":"caps","ips":["10.1.1.5/24"],"mac":"02-00-00-00-00-01"}]`},
	{name: "an empty annotation selects nothing", networks: ""},
	{name: "the same network twice, requested names kept", networks: `[{"name":"nocap"},{"name":"nocap","interface":"net1"},{"name":"nocap"}]`},
	{name: "capabilities: mac on a NAD no plugin of which declares mac", networks: `[{"name":"nocap"},{"name":"nocap","mac":"02:00:00:00:00:01"}]`,
		want: []string{nets + `networks[1] "nocap": field "mac": needs runtimeConfig "mac", but no plugin of CNI config "nocap" declares "capabilities": {"mac": true} (spec §4.1.2.1.4.2)`}},
	{name: "capabilities: ips on Multus's default-route NAD", networks: `[{"name":"macvlan1","ips":["10.1.1.21/24"],"default-route":["10.1.1.254"]}]`,
		want: []string{nets + `networks[0] "macvlan1": field "ips": needs runtimeConfig "ips", but no plugin of CNI config "macvlan1-config" declares "capabilities": {"ips": true} (spec §4.1.2.1.3.2)`}},
	{name: "interface: nocap@eth0, the default network's interface", networks: "nocap@eth0",
		want: []string{nets + `networks[0] "nocap": field "interface": "eth0" is used by the default network (spec §4.1.2.1.5)`}},
	{name: "eth0 does not hide another element's missing capability", networks: `[{"name":"nocap","interface":"eth0"},{"name":"nocap","mac":"02:00:00:00:00:01"}]`,
		want: []string{
			nets + `networks[0] "nocap": field "interface": "eth0" is used by the default network (spec §4.1.2.1.5)`,
			nets + `networks[1] "nocap": field "mac": needs runtimeConfig "mac", but no plugin of CNI config "nocap" declares "capabilities": {"mac": true} (spec §4.1.2.1.4.2)`}},
	{name: "each network's missing capabilities", networks: `[{"name":"nocap","ips":["10.0.0.1"]},{"name":"caps","mac":"02:00:00:00:00:01"},{"name":"nocap","portMappings":[{"hostPort":1,"containerPort":2}]}]`,
		want: []string{
			nets + `networks[0] "nocap": field "ips": needs runtimeConfig "ips", but no plugin of CNI config "nocap" declares "capabilities": {"ips": true} (spec §4.1.2.1.3.2)`,
			nets + `networks[2] "nocap": field "portMappings": needs runtimeConfig "portMappings", but no plugin of CNI config "nocap" declares "capabilities": {"portMappings": true} (spec §4.1.2.1.7.2)`}},
	{name: "bandwidth and infiniband-guid without the capability", networks: `[{"name":"nocap","bandwidth":{"ingressRate":1000}},{"name":"nocap","infiniband-guid":"00:11:22:33:44:55:66:77"}]`,
		want: []string{
			nets + `networks[0] "nocap": field "bandwidth": needs runtimeConfig "bandwidth", but no plugin of CNI config "nocap" declares "capabilities": {"bandwidth": true} (spec §4.1.2.1.8.2)`,
			nets + `networks[1] "nocap": field "infiniband-guid": needs runtimeConfig "infinibandGUID", but no plugin of CNI config "nocap" declares "capabilities": {"infinibandGUID": true} (spec §4.1.2.1.10.2)`}},
	{name: "a bad value names the element and the field", networks: `[{"name":"nocap"},{"name":"caps","mac":"zz"}]`,
		want: []string{nets + `networks[1] "caps": field "mac": "zz" is not a 6-byte MAC address (spec §4.1.2.1.4)`}},
	{name: "several problems are all reported", networks: `[{"name":"a","ip":["10.0.0.1"]},{"name":"B"}]`,
		want: []string{
			nets + `networks[0] "a": field "ip": is not a key of the spec; did you mean "ips"? (spec §4.1.2.1)`,
			nets + `networks[1] "B": field "name": "B" is not a DNS-1123 subdomain: must be lower case (spec §3.3)`}},
	{name: "a missing NAD", networks: "nocap,gone",
		want: []string{nets + `networks[1] "gone": NetworkAttachmentDefinition team/gone not found (spec §3.4.1)`}},
	{name: "a NAD whose config is unusable", networks: "badtype",
		want: []string{nets + `networks[0] "badtype": NetworkAttachmentDefinition team/badtype: spec.config: field plugins[1].type: "../bin/sh" contains a path separator or NUL: plugins are looked up by name in the CNI bin dirs (spec §3.4.1)`}},
	{name: "a NAD with an unsupported cniVersion", networks: "badversion",
		want: []string{nets + `networks[0] "badversion": NetworkAttachmentDefinition team/badversion: spec.config: field cniVersion: "9.9.9" is not a CNI version this library supports (0.1.0, 0.2.0, 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0) (spec §3.4.1)`}},
	{name: "a NAD with a malformed resourceName", networks: "badrn",
		want: []string{nets + `networks[0] "badrn": NetworkAttachmentDefinition team/badrn: metadata.annotations["k8s.v1.cni.cncf.io/resourceName"]: resourceName "sriov": must be vendor-domain/type, e.g. example.com/net-a`}},
	{name: "cni-args that cannot merge", networks: `[{"name":"badargs","cni-args":{"k":"v"}}]`,
		want: []string{nets + `networks[0] "badargs": field "cni-args": cannot be merged into CNI config "badargs" plugins[0].args: not a JSON object: "not an object" (spec §4.1.2.1.6.2)`}},
	{name: "ips with ipam-claim-reference", networks: `[{"name":"caps","ips":["10.1.1.5/24"],"ipam-claim-reference":"claim-1"}]`,
		want: []string{nets + `networks[0] "caps": field "ipam-claim-reference": "claim-1" cannot be combined with "ips" in one element: the IPAMClaim decides the addresses (spec §4.1.2.1.11)`}},
	{name: "interface names that collide", networks: "nocap@data0,caps@data0",
		want: []string{nets + `networks[1] "caps": field "interface": "data0" is already requested by networks[0] "nocap" (spec §4.1.2.1.5)`}},
	{name: "default-route on two attachments", networks: `[{"name":"nocap","default-route":[]},{"name":"caps","default-route":[]}]`,
		want: []string{nets + `networks[1] "caps": field "default-route": is already set by networks[0] "nocap"; only one element may carry it (spec §4.1.2.1.9)`}},
	{name: "isolation: another namespace", networks: "nocap,other/net,shared/net", policy: isolated,
		want: []string{nets + `networks[1]: network "other/net" is in namespace "other", which a pod in namespace "team" may not use: namespace isolation allows only the pod's own namespace and the global namespaces "shared" (spec §7.4)`}},
	{name: "isolation off: another namespace", networks: "other/net"},
	{name: "default-network override: valid", override: "nocap", networks: "caps"},
	{name: "default-network override: interface refused", override: `{"name":"nocap","interface":"e0"}`,
		want: []string{over + `default-network[0] "nocap": field "interface": "e0" cannot be set: the default network always uses the runtime's CNI_IFNAME (spec §4.1.2.1.5)`}},
	{name: "default-network override: missing NAD", override: "gone",
		want: []string{over + `default-network[0] "gone": NetworkAttachmentDefinition team/gone not found (spec §3.4.1)`}},
	{name: "default-network override: mac without the capability", override: `{"name":"nocap","mac":"02:00:00:00:00:01"}`,
		want: []string{over + `default-network[0] "nocap": field "mac": needs runtimeConfig "mac", but no plugin of CNI config "nocap" declares "capabilities": {"mac": true} (spec §4.1.2.1.4.2)`}},
	{name: "default-network override: isolation", override: "other/net", networks: "nocap", policy: isolated,
		want: []string{over + `network "other/net" is in namespace "other", which a pod in namespace "team" may not use: namespace isolation allows only the pod's own namespace and the global namespaces "shared" (spec §7.4)`}},
	{name: "cni-args to a NAD that does not opt in", networks: `[{"name":"nocap","cni-args":{"sysctl":{"net.ipv4.ip_forward":"1"}}}]`,
		want: []string{nets + `networks[0] "nocap": field "cni-args": NetworkAttachmentDefinition team/nocap does not accept cni-args: its plugins would read them as their own configuration (host-local and static "ips", tuning "mac" and "sysctl"); its owner opts in with the annotation multinet.io/accept-cni-args: "true" (spec §4.1.2.1.6)`}},
	{name: "cni-args to a NAD that opts in", networks: `[{"name":"argsok","cni-args":{"sysctl":{"net.ipv4.ip_forward":"1"}}}]`},
	{name: "cni-args under undeclaredCapabilities multus (Multus's behaviour)", networks: `[{"name":"nocap","cni-args":{"sysctl":{"net.ipv4.ip_forward":"1"}}}]`,
		policy: podnetworks.Policy{UndeclaredCapabilities: podnetworks.MultusUndeclared}},
	{name: "more selection elements than the default limit", networks: strings.Repeat("nocap,", 999) + "nocap",
		want: []string{nets + `networks annotation: selects 1000 network selection elements; a pod may have at most 32 (multinetd's maxSelectionElements, the webhook's --max-selection-elements)`}},
	{name: "more selection elements than a configured limit", networks: "nocap,caps,argsok", policy: podnetworks.Policy{MaxSelectionElements: 2},
		want: []string{nets + `networks annotation: selects 3 network selection elements; a pod may have at most 2 (multinetd's maxSelectionElements, the webhook's --max-selection-elements)`}},
	{name: "as many selection elements as a configured limit", networks: "nocap,caps", policy: podnetworks.Policy{MaxSelectionElements: 2}},
	{name: "portMappings in a namespace that enforces Pod Security baseline", networks: `[{"name":"ports","portMappings":[{"hostPort":8080,"containerPort":80}]}]`,
		policy: podSecurity("baseline"),
		want:   []string{nets + `networks[0] "ports": field "portMappings": namespace team enforces Pod Security level "baseline" (label pod-security.kubernetes.io/enforce), which forbids hostPort; portMappings maps a port of the node into the pod as a hostPort does (spec §4.1.2.1.7)`}},
	{name: "portMappings in a privileged namespace", networks: `[{"name":"ports","portMappings":[{"hostPort":8080,"containerPort":80}]}]`,
		policy: podSecurity("privileged")},
	{name: "both annotations wrong: networks first", override: "gone", networks: "nocap@eth0",
		want: []string{
			nets + `networks[0] "nocap": field "interface": "eth0" is used by the default network (spec §4.1.2.1.5)`,
			over + `default-network[0] "gone": NetworkAttachmentDefinition team/gone not found (spec §3.4.1)`}},
	{name: "defaultNetworks: their interfaces are taken", networks: "nocap@net1", policy: operator,
		want: []string{nets + `networks[0] "nocap": field "interface": "net1" is used by network "shared/side" of multinetd's defaultNetworks (spec §4.1.2.1.5)`}},
	{name: "defaultNetworks: generated names skip them", networks: "nocap,caps", policy: operator},
	{name: "a hostNetwork pod's selection is never honoured", networks: "nocap", hostNetwork: true,
		want: []string{"spec.hostNetwork: true: the pod shares the node's network namespace, so no CNI plugin runs for it and its network selection annotations are never honoured"}},
	{name: "a NAD without spec.config: only the node knows its config", networks: "disk",
		daemon: []string{nets + `networks[0] "disk": NetworkAttachmentDefinition team/disk: spec.config: empty`, "no CNI config with that network name (spec §3.4.1)"}},
}

// wantMessage is the message of an invalid verdict (podnetworks.Error).
func wantMessage(problems []string) string {
	if len(problems) == 1 {
		return problems[0]
	}
	return fmt.Sprintf("the pod's network selection has %d problems: %s", len(problems), strings.Join(problems, "; "))
}

func (c surfaceCase) annotations() map[string]string {
	a := map[string]string{}
	if c.networks != "-" {
		a[selection.NetworksAnnotation] = c.networks
	}
	if c.override != "" {
		a[selection.DefaultNetworkAnnotation] = c.override
	}
	return a
}

func (c surfaceCase) pod() *corev1.Pod {
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: podNS, Name: "p", UID: "uid-p", Annotations: c.annotations()},
		Spec:       corev1.PodSpec{HostNetwork: c.hostNetwork, Containers: []corev1.Container{{Name: "app", Image: "busybox"}}},
	}
}

// TestOneVerdict runs every case of the table through kubectl multinet
// lint, the webhook's pod handlers (mutating and validating CREATE, and a
// validating UPDATE that sets the annotations) and multinetd's ADD, and
// checks that all three give the same verdict with the same message:
// lint's errors are the problems, the webhook denies with their message,
// and multinetd fails the ADD (CNI error 7, nothing run) and posts the
// Warning Event with it.
func TestOneVerdict(t *testing.T) {
	for _, c := range surfaceCases {
		t.Run(c.name, func(t *testing.T) {
			if got := lintErrors(t, c); strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("lint errors:\n got %q\nwant %q", got, c.want)
			}
			for name, resp := range webhookResponses(t, c) {
				if len(c.want) == 0 {
					if !resp.Allowed {
						t.Errorf("webhook %s: denied %q, want allowed", name, message(resp))
					}
					continue
				}
				if resp.Allowed || message(resp) != wantMessage(c.want) {
					t.Errorf("webhook %s: allowed %v\n got %q\nwant %q", name, resp.Allowed, message(resp), wantMessage(c.want))
				}
			}
			if c.hostNetwork {
				return
			}
			want := c.want
			if c.daemon != nil {
				want = c.daemon
			}
			checkDaemon(t, c, want, c.daemon != nil)
		})
	}
}

// lintErrors lints the standard NADs and the case's pod with
// --require-nads (every NAD of the cluster is in the input).
func lintErrors(t *testing.T, c surfaceCase) []string {
	t.Helper()
	var docs []string
	for _, obj := range append([]any{c.pod()}, toAny(standardNADs())...) {
		b, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	objs, err := lint.Decode([]byte(strings.Join(docs, "\n---\n")), "in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	results, err := lint.Lint(objs, lint.Options{RequireNADs: true, Policy: c.policy})
	if err != nil {
		t.Fatal(err)
	}
	pod := results[0]
	if pod.Kind != "Pod" {
		t.Fatalf("last result %+v, want the pod", pod)
	}
	return pod.Errors
}

func toAny[T any](list []T) []any {
	out := make([]any, len(list))
	for i := range list {
		out[i] = list[i]
	}
	return out
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// webhookResponses returns the answers of the webhook's pod handlers to the
// case's pod: MutatePods and ValidatePods on CREATE, ValidatePods on an
// UPDATE from the pod without selection annotations (hot-plug).
func webhookResponses(t *testing.T, c surfaceCase) map[string]admission.Response {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, n := range standardNADs() {
		if err := idx.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	w, err := webhook.New(webhook.Options{NADs: nadlisters.NewNetworkAttachmentDefinitionLister(idx), Policy: c.policy})
	if err != nil {
		t.Fatal(err)
	}
	p := c.pod()
	old := p.DeepCopy()
	old.Annotations = nil
	ctx := context.Background()
	return map[string]admission.Response{
		"mutate CREATE":   w.MutatePods(ctx, podRequest(t, admissionv1.Create, p, nil)),
		"validate CREATE": w.ValidatePods(ctx, podRequest(t, admissionv1.Create, p, nil)),
		"validate UPDATE": w.ValidatePods(ctx, podRequest(t, admissionv1.Update, p, old)),
	}
}

func podRequest(t *testing.T, op admissionv1.Operation, p, old *corev1.Pod) admission.Request {
	t.Helper()
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "uid", Operation: op, Namespace: p.Namespace, Name: p.Name,
		Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Object:   runtime.RawExtension{Raw: []byte(mustJSON(t, p))},
	}}
	if old != nil {
		req.OldObject = runtime.RawExtension{Raw: []byte(mustJSON(t, old))}
	}
	return req
}

func message(resp admission.Response) string {
	if resp.Result == nil {
		return ""
	}
	return resp.Result.Message
}

// checkDaemon runs multinetd's ADD for the case's pod (delegates faked).
// Valid: the ADD succeeds. Invalid: CNI error 7 whose message is the
// verdict's (contains each of want when contains is set), the same Warning
// Event, and no delegate ran.
func checkDaemon(t *testing.T, c surfaceCase, want []string, contains bool) {
	t.Helper()
	nads := &fakeNADs{}
	for _, n := range standardNADs() {
		nads.put(n)
	}
	events := &fakeEvents{}
	exec := &fakeExec{}
	store, err := state.NewStore(filepath.Join(t.TempDir(), "records"))
	if err != nil {
		t.Fatal(err)
	}
	def, err := libcni.ConfListFromBytes([]byte(`{"cniVersion":"1.0.0","name":"default-net","plugins":[{"type":"fake"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	p := c.pod()
	eng, err := attach.New(attach.Options{
		Store:          store,
		DefaultNetwork: func() (*libcni.NetworkConfigList, string, error) { return def, "default-net", nil },
		Pods:           fakePods{p}, NADs: nads, Events: events, Exec: exec, Policy: c.policy,
		CacheDir: filepath.Join(t.TempDir(), "cache"), DelegateTimeout: 10 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	req := &api.Request{V: api.Version, Command: api.CmdAdd, ContainerID: "ctr-1", Netns: "/var/run/netns/fake", IfName: "eth0",
		Args: fmt.Sprintf("IgnoreUnknown=1;K8S_POD_NAMESPACE=%s;K8S_POD_NAME=%s;K8S_POD_UID=%s", p.Namespace, p.Name, p.UID),
		Path: t.TempDir(), Config: json.RawMessage(`{"cniVersion":"1.0.0","name":"multinet","type":"multinet-shim"}`)}
	_, err = eng.Add(context.Background(), cnirequest.Decode(req))
	if len(want) == 0 {
		if err != nil {
			t.Errorf("multinetd ADD: %v, want success", err)
		}
		return
	}
	var te *types.Error
	if !errors.As(err, &te) || te.Code != types.ErrInvalidNetworkConfig {
		t.Fatalf("multinetd ADD error %v, want CNI error %d", err, types.ErrInvalidNetworkConfig)
	}
	evs := events.warnings(kube.ReasonAttachFailed)
	if len(evs) != 1 {
		t.Fatalf("multinetd Warning Events %q, want one", evs)
	}
	if contains {
		for _, w := range want {
			if !strings.Contains(te.Msg, w) || !strings.Contains(evs[0], w) {
				t.Errorf("multinetd ADD error %q / Event %q, want both to contain %q", te.Msg, evs[0], w)
			}
		}
	} else if te.Msg != wantMessage(want) || evs[0] != wantMessage(want) {
		t.Errorf("multinetd:\n ADD error %q\n Event     %q\nwant       %q", te.Msg, evs[0], wantMessage(want))
	}
	if n := exec.adds(); n != 0 {
		t.Errorf("multinetd ran %d delegate ADDs for a refused selection", n)
	}
}

type fakePods struct{ pod *corev1.Pod }

func (f fakePods) Get(_ context.Context, namespace, name, uid string) (*corev1.Pod, error) {
	if namespace != f.pod.Namespace || name != f.pod.Name || (uid != "" && ktypes.UID(uid) != f.pod.UID) {
		return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
	}
	return f.pod, nil
}

type fakeNADs struct {
	nads map[string]*nadv1.NetworkAttachmentDefinition
}

func (f *fakeNADs) put(n *nadv1.NetworkAttachmentDefinition) {
	if f.nads == nil {
		f.nads = map[string]*nadv1.NetworkAttachmentDefinition{}
	}
	f.nads[n.Namespace+"/"+n.Name] = n
}

func (f *fakeNADs) Get(_ context.Context, namespace, name string) (*nadv1.NetworkAttachmentDefinition, error) {
	if n, ok := f.nads[namespace+"/"+name]; ok {
		return n, nil
	}
	return nil, apierrors.NewNotFound(nadv1.Resource(nadv1.NetworkAttachmentDefinitionResource), name)
}

type fakeEvents struct {
	mu   sync.Mutex
	msgs map[string][]string // by "type reason"
}

func (f *fakeEvents) post(typ, reason, format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.msgs == nil {
		f.msgs = map[string][]string{}
	}
	f.msgs[typ+" "+reason] = append(f.msgs[typ+" "+reason], fmt.Sprintf(format, args...))
}

func (f *fakeEvents) Normal(_ runtime.Object, reason, format string, args ...any) {
	f.post("Normal", reason, format, args...)
}

func (f *fakeEvents) Warning(_ runtime.Object, reason, format string, args ...any) {
	f.post("Warning", reason, format, args...)
}

func (f *fakeEvents) warnings(reason string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.msgs["Warning "+reason]
}

// fakeExec stands for every delegate plugin: it finds any plugin, and
// answers ADD with one interface in the sandbox, in the config's
// cniVersion, and every other command with success.
type fakeExec struct {
	mu sync.Mutex
	n  int // ADDs
}

func (f *fakeExec) ExecPlugin(_ context.Context, _ string, stdin []byte, environ []string) ([]byte, error) {
	env := map[string]string{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	if env["CNI_COMMAND"] != "ADD" {
		return nil, nil
	}
	f.mu.Lock()
	f.n++
	f.mu.Unlock()
	var conf struct {
		CNIVersion string `json:"cniVersion"`
	}
	if err := json.Unmarshal(stdin, &conf); err != nil {
		return nil, err
	}
	return []byte(fmt.Sprintf(`{"cniVersion":%q,"interfaces":[{"name":%q,"sandbox":%q}],"ips":[]}`, conf.CNIVersion, env["CNI_IFNAME"], env["CNI_NETNS"])), nil
}

func (f *fakeExec) FindInPath(plugin string, _ []string) (string, error) {
	return filepath.Join(os.TempDir(), plugin), nil
}

func (f *fakeExec) Decode(b []byte) (version.PluginInfo, error) {
	return version.PluginSupports(version.All.SupportedVersions()...), nil
}

func (f *fakeExec) adds() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}
