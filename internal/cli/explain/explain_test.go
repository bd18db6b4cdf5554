package explain

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
	"github.com/multinet/multinet/pkg/spec/selection"
)

const (
	// macConf declares "mac" on its second plugin and has args.cni.
	macConf = `{"cniVersion":"1.0.0","name":"net-a","plugins":[` +
		`{"type":"bridge","bridge":"br-a","args":{"cni":{"keep":"yes","over":"nad"}}},` +
		`{"type":"tuning","capabilities":{"mac":true}}]}`
	plainConf = `{"cniVersion":"1.0.0","type":"macvlan","master":"eth1"}`
)

// nadStore is a NADGetter over a map, counting lookups.
type nadStore struct {
	nads  map[string]*nadv1.NetworkAttachmentDefinition
	calls map[string]int
	err   error // returned for every lookup when set
}

func newStore(nads ...*nadv1.NetworkAttachmentDefinition) *nadStore {
	s := &nadStore{nads: map[string]*nadv1.NetworkAttachmentDefinition{}, calls: map[string]int{}}
	for _, n := range nads {
		s.nads[n.Namespace+"/"+n.Name] = n
	}
	return s
}

func (s *nadStore) get(_ context.Context, namespace, name string) (*nadv1.NetworkAttachmentDefinition, error) {
	key := namespace + "/" + name
	s.calls[key]++
	if s.err != nil {
		return nil, s.err
	}
	n, ok := s.nads[key]
	if !ok {
		return nil, apierrors.NewNotFound(nadv1.Resource("network-attachment-definitions"), name)
	}
	return n, nil
}

func nad(ns, name, config string, annotations map[string]string) *nadv1.NetworkAttachmentDefinition {
	return &nadv1.NetworkAttachmentDefinition{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: config},
	}
}

func pod(ns, name string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec:       corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c"}}},
	}
}

func explainOK(t *testing.T, p *corev1.Pod, s *nadStore, opts Options) *Explanation {
	t.Helper()
	x, err := Explain(context.Background(), p, s.get, opts)
	if err != nil {
		t.Fatalf("Explain: %v", err)
	}
	if x.Selection == nil || x.Attachments == nil || x.Errors == nil || x.Notes == nil {
		t.Fatalf("lists must not be nil: %+v", x)
	}
	return x
}

func hasSub(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func TestExplainPlansLikeTheDaemon(t *testing.T) {
	s := newStore(
		nad("ns1", "net-a", macConf, map[string]string{nadv1.ResourceNameAnnotation: "example.com/pool", podnetworks.AcceptCNIArgsAnnotation: "true"}),
		nad("shared", "net-b", plainConf, nil),
	)
	p := pod("ns1", "web", map[string]string{selection.NetworksAnnotation: `[` +
		`{"name":"net-a","mac":"02:00:00:00:00:AA","cni-args":{"over":"pod","n":1}},` +
		`{"name":"net-b","namespace":"shared","interface":"net1"},` +
		`{"name":"net-a"}]`})
	p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"example.com/pool": resource.MustParse("2")}

	x := explainOK(t, p, s, Options{})
	if !x.OK || len(x.Errors) != 0 || x.Node != "node-a" {
		t.Fatalf("want OK: %+v", x)
	}
	if s.calls["ns1/net-a"] != 1 || s.calls["shared/net-b"] != 1 {
		t.Errorf("lookups %v: want one per NAD", s.calls)
	}
	if len(x.Selection) != 3 || x.Selection[0].Namespace != "ns1" || x.Selection[0].MacRequest != "02:00:00:00:00:aa" {
		t.Errorf("selection = %+v", x.Selection)
	}
	// Generated names skip the requested net1 (§4.1.2.1.5).
	for i, want := range []string{"net2", "net1", "net3"} {
		if got := x.Attachments[i].Interface; got != want {
			t.Errorf("attachment %d interface %q, want %q", i, got, want)
		}
	}
	a := x.Attachments[0]
	if a.Network != "ns1/net-a" || !a.NADFound || a.ConfigSource != SourceSpecConfig || a.ResourceName != "example.com/pool" || a.Error != "" {
		t.Errorf("attachment 0 = %+v", a)
	}
	if got, _ := json.Marshal(a.RuntimeConfig); string(got) != `{"mac":"02:00:00:00:00:aa"}` {
		t.Errorf("runtimeConfig = %s", got)
	}
	if len(a.Plugins) != 2 || a.Plugins[0].Type != "bridge" || len(a.Plugins[0].RuntimeConfig) != 0 ||
		a.Plugins[1].Type != "tuning" || strings.Join(a.Plugins[1].RuntimeConfig, ",") != "mac" {
		t.Errorf("plugins = %+v", a.Plugins)
	}
	var conf struct {
		Name    string `json:"name"`
		Plugins []struct {
			Args struct {
				CNI map[string]any `json:"cni"`
			} `json:"args"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(a.Config, &conf); err != nil {
		t.Fatalf("config %s: %v", a.Config, err)
	}
	if conf.Name != "net-a" || conf.Plugins[0].Args.CNI["over"] != "pod" || conf.Plugins[0].Args.CNI["keep"] != "yes" || conf.Plugins[1].Args.CNI["n"] != 1.0 {
		t.Errorf("args.cni not merged with the element winning (§4.1.2.1.6): %s", a.Config)
	}
	// A single config becomes a one-plugin list named after the NAD (§3.4.2).
	if b := x.Attachments[1]; !strings.Contains(string(b.Config), `"name":"net-b"`) || b.RuntimeConfig != nil {
		t.Errorf("attachment 1 = %+v (config %s)", b, b.Config)
	}
	if !hasSub(a.Notes, "device 1 of resource example.com/pool") || !hasSub(x.Attachments[2].Notes, "device 2 of resource") {
		t.Errorf("device notes: %q / %q", a.Notes, x.Attachments[2].Notes)
	}
	if !hasSub(x.Notes, "eth0: the cluster-wide default network") || !hasSub(x.Notes, "namespace isolation not checked") {
		t.Errorf("notes = %q", x.Notes)
	}
}

func TestExplainFailures(t *testing.T) {
	for _, tc := range []struct {
		name     string
		networks string
		nads     []*nadv1.NetworkAttachmentDefinition
		opts     Options
		// errs[i] is a substring of attachment i's error, "" for none.
		errs   []string
		podErr string // substring of a pod-level error
		ifaces []string
		calls  map[string]int
	}{
		{name: "missing NAD, the others still planned", networks: "net-a,missing",
			nads:   []*nadv1.NetworkAttachmentDefinition{nad("ns1", "net-a", plainConf, nil)},
			errs:   []string{"", "NetworkAttachmentDefinition ns1/missing not found"},
			ifaces: []string{"net1", "net2"}},
		{name: "capability no plugin declares", networks: `[{"name":"net-a","ips":["10.1.1.1/24"]}]`,
			nads:   []*nadv1.NetworkAttachmentDefinition{nad("ns1", "net-a", macConf, nil)},
			errs:   []string{`networks[0] "net-a": field "ips": needs runtimeConfig "ips"`},
			ifaces: []string{"net1"}},
		{name: "unusable spec.config", networks: "net-a",
			nads:   []*nadv1.NetworkAttachmentDefinition{nad("ns1", "net-a", `{"cniVersion":"1.0.0","plugins":[{"type":"a/b"}]}`, nil)},
			errs:   []string{"plugins[0].type"},
			ifaces: []string{"net1"}},
		{name: "isolation forbids without looking the NAD up", networks: "other/net-x,default/net-d,net-a",
			nads: []*nadv1.NetworkAttachmentDefinition{nad("ns1", "net-a", plainConf, nil),
				nad("other", "net-x", plainConf, nil), nad("default", "net-d", plainConf, nil)},
			opts:   Options{Isolation: &selection.IsolationPolicy{Enabled: true, GlobalNamespaces: []string{"default"}}},
			errs:   []string{"namespace isolation", "", ""},
			ifaces: []string{"net1", "net2", "net3"},
			calls:  map[string]int{"default/net-d": 1, "ns1/net-a": 1}},
		{name: "invalid annotation", networks: `[{"name":"net-a","mac":"zz"}]`,
			podErr: `metadata.annotations["k8s.v1.cni.cncf.io/networks"]: networks[0] "net-a": field "mac"`,
			calls:  map[string]int{}},
		{name: "the default network's interface requested", networks: "net-a@eth0",
			nads: []*nadv1.NetworkAttachmentDefinition{nad("ns1", "net-a", plainConf, nil)},
			errs: []string{`networks[0] "net-a": field "interface": "eth0" is used by the default network`}, ifaces: []string{"eth0"}},
		{name: "more attachments of a resource than devices requested", networks: "dev,dev",
			nads: []*nadv1.NetworkAttachmentDefinition{nad("ns1", "dev", plainConf,
				map[string]string{nadv1.LegacyResourceNameAnnotation: "example.com/vf"})},
			errs:   []string{"", `networks[1] "dev": needs device 2 of resource "example.com/vf", but the pod's containers request 1`},
			ifaces: []string{"net1", "net2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := pod("ns1", "web", map[string]string{selection.NetworksAnnotation: tc.networks})
			p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{"example.com/vf": resource.MustParse("1")}
			s := newStore(tc.nads...)
			x := explainOK(t, p, s, tc.opts)
			if x.OK {
				t.Fatalf("OK = true, want false: %+v", x)
			}
			if !hasSub(x.Notes, "spec §7.2") {
				t.Errorf("notes lack the §7.2 consequence: %q", x.Notes)
			}
			if tc.podErr != "" && !hasSub(x.Errors, tc.podErr) {
				t.Errorf("errors %q lack %q", x.Errors, tc.podErr)
			}
			if tc.podErr == "" && len(x.Errors) != 0 {
				t.Errorf("unexpected pod errors %q", x.Errors)
			}
			if len(x.Attachments) != len(tc.errs) {
				t.Fatalf("%d attachments, want %d: %+v", len(x.Attachments), len(tc.errs), x.Attachments)
			}
			for i, a := range x.Attachments {
				if tc.errs[i] == "" && a.Error != "" || !strings.Contains(a.Error, tc.errs[i]) {
					t.Errorf("attachment %d error %q, want %q", i, a.Error, tc.errs[i])
				}
				if a.Interface != tc.ifaces[i] {
					t.Errorf("attachment %d interface %q, want %q", i, a.Interface, tc.ifaces[i])
				}
			}
			if tc.calls != nil && len(s.calls) != len(tc.calls) {
				t.Errorf("NAD lookups %v, want %v", s.calls, tc.calls)
			}
			for k, n := range tc.calls {
				if s.calls[k] != n {
					t.Errorf("NAD lookups %v, want %v", s.calls, tc.calls)
				}
			}
		})
	}
}

func TestExplainNodeConfig(t *testing.T) {
	s := newStore(nad("ns1", "on-disk", "", nil))
	p := pod("ns1", "web", map[string]string{selection.NetworksAnnotation: `[{"name":"on-disk","mac":"02:00:00:00:00:01"}]`})
	x := explainOK(t, p, s, Options{})
	a := x.Attachments[0]
	if !x.OK || a.ConfigSource != SourceNode || a.Config != nil || a.Plugins != nil || a.Error != "" || a.Interface != "net1" {
		t.Fatalf("attachment = %+v", a)
	}
	if a.RuntimeConfig["mac"] != "02:00:00:00:00:01" {
		t.Errorf("runtimeConfig = %v: the requested keys are still shown", a.RuntimeConfig)
	}
	if !hasSub(a.Notes, `the CNI config named "on-disk" in the node's CNI conf dir`) {
		t.Errorf("notes = %q", a.Notes)
	}
}

func TestExplainDefaultNetworkOverride(t *testing.T) {
	s := newStore(nad("ns1", "alt", plainConf, nil))
	p := pod("ns1", "web", map[string]string{selection.DefaultNetworkAnnotation: "alt"})
	x := explainOK(t, p, s, Options{DefaultIfName: "eth9"})
	d := x.DefaultNetwork
	if d == nil || d.Index != -1 || d.Interface != "eth9" || d.Network != "ns1/alt" || d.Error != "" || d.Config == nil {
		t.Fatalf("default network = %+v", d)
	}
	if !x.OK || len(x.Attachments) != 0 || !hasSub(x.Notes, "no k8s.v1.cni.cncf.io/networks annotation") {
		t.Errorf("explanation = %+v", x)
	}

	p.Annotations[selection.DefaultNetworkAnnotation] = "other/alt"
	x = explainOK(t, p, newStore(), Options{Isolation: &selection.IsolationPolicy{Enabled: true}})
	if x.OK || x.DefaultNetwork == nil || !strings.Contains(x.DefaultNetwork.Error, "namespace isolation") {
		t.Errorf("isolation applies to the default network override (§7.4): %+v", x.DefaultNetwork)
	}
}

func TestExplainStatusAndHostNetwork(t *testing.T) {
	s := newStore(nad("ns1", "net-a", plainConf, nil))
	p := pod("ns1", "web", map[string]string{
		selection.NetworksAnnotation: "net-a",
		"k8s.v1.cni.cncf.io/network-status": `[{"name":"default-net","interface":"eth0","ips":["10.0.0.2"],"default":true},` +
			`{"name":"ns1/net-a","interface":"net1","ips":["10.1.0.2"],"mac":"02:00:00:00:00:01"}]`,
	})
	x := explainOK(t, p, s, Options{})
	if len(x.NetworkStatus) != 2 || x.Attachments[0].Status == nil || x.Attachments[0].Status.IPs[0] != "10.1.0.2" {
		t.Errorf("status not matched: %+v", x.Attachments[0])
	}

	p.Annotations["k8s.v1.cni.cncf.io/network-status"] = `{"name":"x"}`
	x = explainOK(t, p, s, Options{})
	if x.NetworkStatus != nil || !strings.Contains(x.NetworkStatusError, "want a JSON list") || !x.OK {
		t.Errorf("invalid status: %+v", x)
	}

	p.Spec.HostNetwork = true
	x = explainOK(t, p, s, Options{})
	if x.OK || !hasSub(x.Errors, "spec.hostNetwork: true: the pod shares the node's network namespace") {
		t.Errorf("hostNetwork: %+v", x)
	}
}

func TestExplainLookupError(t *testing.T) {
	s := newStore()
	s.err = errors.New("connection refused")
	p := pod("ns1", "web", map[string]string{selection.NetworksAnnotation: "net-a"})
	_, err := Explain(context.Background(), p, s.get, Options{})
	if err == nil || err.Error() != "pod ns1/web: looking up NetworkAttachmentDefinition ns1/net-a: connection refused" {
		t.Fatalf("err = %v", err)
	}
}

// TestExplainUndeclaredCapabilities: explain gives multinetd's verdict
// under undeclaredCapabilities: a "mac" no plugin declares is an error by
// default and, with "multus", a planned attachment with a note naming the
// NAD, the capability and CNI_ARGS MAC=.
func TestExplainUndeclaredCapabilities(t *testing.T) {
	s := newStore(nad("ns1", "plain", plainConf, nil))
	p := pod("ns1", "web", map[string]string{selection.NetworksAnnotation: `[{"name":"plain","mac":"02:00:00:00:00:01"}]`})
	x := explainOK(t, p, s, Options{})
	if x.OK || len(x.Attachments) != 1 || !strings.Contains(x.Attachments[0].Error, "(spec §4.1.2.1.4.2)") {
		t.Fatalf("default: %+v, want the attachment refused (§4.1.2.1.4.2)", x.Attachments)
	}
	x = explainOK(t, p, s, Options{UndeclaredCapabilities: podnetworks.MultusUndeclared})
	if !x.OK || len(x.Attachments) != 1 || x.Attachments[0].Error != "" {
		t.Fatalf("multus: %+v, want the attachment planned", x.Attachments)
	}
	if a := x.Attachments[0]; !hasSub(a.Notes, `NetworkAttachmentDefinition ns1/plain declares no capability "mac"`) || !hasSub(a.Notes, "CNI_ARGS MAC=") {
		t.Errorf("multus: notes %q, want the hand-over named", a.Notes)
	}
}
