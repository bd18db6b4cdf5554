package podnetworks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/spec/netconf"
	"github.com/multinet/multinet/pkg/spec/selection"
)

const (
	plainConf = `{"cniVersion":"1.0.0","type":"bridge"}`
	macConf   = `{"cniVersion":"1.0.0","plugins":[{"type":"bridge"},{"type":"tuning","capabilities":{"mac":true}}]}`
)

// nadSource is a NADs over a map that counts lookups; err, when set, is
// every lookup's answer; notKnown lists keys it cannot know.
type nadSource struct {
	nads     map[string]*nadv1.NetworkAttachmentDefinition
	calls    map[string]int
	err      error
	notKnown map[string]bool
}

func source(nads ...*nadv1.NetworkAttachmentDefinition) *nadSource {
	s := &nadSource{nads: map[string]*nadv1.NetworkAttachmentDefinition{}, calls: map[string]int{}, notKnown: map[string]bool{}}
	for _, n := range nads {
		s.nads[n.Namespace+"/"+n.Name] = n
	}
	return s
}

func (s *nadSource) Get(_ context.Context, namespace, name string) (*nadv1.NetworkAttachmentDefinition, error) {
	key := namespace + "/" + name
	s.calls[key]++
	switch n, ok := s.nads[key]; {
	case s.err != nil:
		return nil, s.err
	case s.notKnown[key]:
		return nil, &NotKnownError{Reason: "NetworkAttachmentDefinition " + key + " is not in the input"}
	case ok:
		return n, nil
	}
	return nil, apierrors.NewNotFound(nadv1.Resource(nadv1.NetworkAttachmentDefinitionResource), name)
}

func nad(ns, name, config string, annotations map[string]string) *nadv1.NetworkAttachmentDefinition {
	return &nadv1.NetworkAttachmentDefinition{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: annotations},
		Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: config},
	}
}

func networks(v string) map[string]string { return map[string]string{selection.NetworksAnnotation: v} }

func check(t *testing.T, annotations map[string]string, s *nadSource, opts Options) *Verdict {
	t.Helper()
	opts.NADs = s
	v, err := Check(context.Background(), Pod{Namespace: "ns1", Annotations: annotations}, opts)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return v
}

func problems(v *Verdict) []string {
	var out []string
	for _, p := range v.Problems {
		out = append(out, p.Error())
	}
	return out
}

// Each distinct NAD is looked up once, however often it is selected; and
// the verdict plans every element on its interface with its capability
// args, the default network's interface and the device ordinals.
func TestCheckPlans(t *testing.T) {
	s := source(nad("ns1", "net-a", macConf, map[string]string{nadv1.ResourceNameAnnotation: "example.com/vf"}), nad("ns1", "plain", plainConf, nil))
	v := check(t, networks(`[{"name":"net-a","mac":"02:00:00:00:00:01"},{"name":"plain","interface":"net1"},{"name":"net-a"}]`), s, Options{})
	if len(v.Problems) != 0 {
		t.Fatalf("problems %q", problems(v))
	}
	if s.calls["ns1/net-a"] != 1 || s.calls["ns1/plain"] != 1 {
		t.Errorf("lookups %v, want one per NAD", s.calls)
	}
	var got []string
	for _, a := range v.Attachments {
		got = append(got, fmt.Sprintf("%d %s %s %v %s %d %v", a.Index, a.NetworkKey, a.IfName, a.CapabilityArgs, a.Resource, a.Device, a.Planned))
	}
	want := []string{
		"0 ns1/net-a net2 map[mac:02:00:00:00:00:01] example.com/vf 1 true",
		"1 ns1/plain net1 map[]  0 true",
		"2 ns1/net-a net3 map[] example.com/vf 2 true",
	}
	if !slices.Equal(got, want) {
		t.Errorf("attachments\n got %q\nwant %q", got, want)
	}
	if d := v.Demand(); !slices.Equal(d.Order, []string{"example.com/vf"}) || d.Counts["example.com/vf"] != 2 {
		t.Errorf("demand %+v", d)
	}
}

// Isolation is checked before any lookup: a forbidden NAD is never looked
// up, so the answer does not depend on whether it exists; the override
// obeys it too.
func TestCheckIsolationBeforeLookup(t *testing.T) {
	s := source(nad("other", "x", plainConf, nil), nad("ns1", "plain", plainConf, nil))
	opts := Options{Policy: Policy{Isolation: selection.IsolationPolicy{Enabled: true}}}
	v := check(t, map[string]string{selection.NetworksAnnotation: "plain,other/x,other/gone", selection.DefaultNetworkAnnotation: "other/x"}, s, opts)
	if s.calls["other/x"] != 0 || s.calls["other/gone"] != 0 || s.calls["ns1/plain"] != 1 {
		t.Errorf("lookups %v: forbidden NADs looked up", s.calls)
	}
	got := problems(v)
	if len(got) != 3 || !strings.Contains(got[0], `networks[1]: network "other/x"`) || !strings.Contains(got[1], `networks[2]: network "other/gone"`) ||
		!strings.HasPrefix(got[2], `metadata.annotations["v1.multus-cni.io/default-network"]: network "other/x"`) {
		t.Errorf("problems %q", got)
	}
	if v.DefaultNetwork == nil || v.DefaultNetwork.Planned || v.DefaultNetwork.NAD != nil {
		t.Errorf("forbidden override %+v: want it unplanned and not looked up", v.DefaultNetwork)
	}
}

// A lookup that fails otherwise than NotFound makes the verdict unknown: a
// *LookupError naming the NAD.
func TestCheckLookupError(t *testing.T) {
	s := source()
	s.err = errors.New("connection refused")
	_, err := Check(context.Background(), Pod{Namespace: "ns1", Annotations: networks("net-a")}, Options{NADs: s})
	var le *LookupError
	if !errors.As(err, &le) || le.NAD != "ns1/net-a" || err.Error() != "looking up NetworkAttachmentDefinition ns1/net-a: connection refused" {
		t.Fatalf("err = %v, want a *LookupError for ns1/net-a", err)
	}
	if _, err := Check(context.Background(), Pod{}, Options{}); err == nil {
		t.Error("Check without NADs succeeded")
	}
}

// After MaxMissingLookups distinct missing NADs no further NAD is looked
// up, and the problem says so.
func TestCheckMissingLookupsBounded(t *testing.T) {
	var names []string
	for i := range 20 {
		names = append(names, fmt.Sprintf("gone-%d", i))
	}
	s := source()
	v := check(t, networks(strings.Join(names, ",")), s, Options{})
	if len(s.calls) != MaxMissingLookups {
		t.Errorf("%d lookups, want %d", len(s.calls), MaxMissingLookups)
	}
	got := problems(v)
	if len(got) != MaxMissingLookups+1 || !strings.Contains(got[MaxMissingLookups], "networks[8] and later: not checked: lookups stopped after 8 missing") {
		t.Errorf("problems %q", got)
	}
}

// A NAD the source does not know (lint) and a NAD without spec.config when
// no Configs is given are planned with a stand-in declaring every
// capability: no capability problem, a note; with Configs, the node's
// config is used and checked.
func TestCheckUnknownConfigs(t *testing.T) {
	s := source(nad("ns1", "disk", "", nil))
	s.notKnown["ns1/elsewhere"] = true
	ann := networks(`[{"name":"disk","mac":"02:00:00:00:00:01"},{"name":"elsewhere","ips":["10.0.0.1"]}]`)
	v := check(t, ann, s, Options{})
	if len(v.Problems) != 0 || len(v.Notes) != 2 {
		t.Fatalf("problems %q notes %q", problems(v), v.Notes)
	}
	if a := v.Attachments[0]; a.Config != ConfigUnknown || a.NAD == nil || !a.Planned || !strings.Contains(a.Note, `the CNI config named "disk" in the node's CNI conf dir`) {
		t.Errorf("disk: %+v", a)
	}
	if a := v.Attachments[1]; a.Config != ConfigUnknown || a.NAD != nil || !strings.Contains(v.Notes[1], "ns1/elsewhere is not in the input; its config and capabilities are not checked") {
		t.Errorf("elsewhere: %+v, notes %q", a, v.Notes)
	}

	node := configsFunc(func(ns, name, specConfig string) (*libcni.NetworkConfigList, error) {
		return netconf.Resolve(ns, name, plainConf, nil) // the node's config declares no capability
	})
	delete(s.notKnown, "ns1/elsewhere")
	v = check(t, networks(`[{"name":"disk","mac":"02:00:00:00:00:01"}]`), s, Options{Configs: node})
	if got := problems(v); len(got) != 1 || !strings.Contains(got[0], `field "mac": needs runtimeConfig "mac"`) || v.Attachments[0].Config != ConfigNode {
		t.Errorf("with the node's config: problems %q, config %q", got, v.Attachments[0].Config)
	}
}

type configsFunc func(ns, name, specConfig string) (*libcni.NetworkConfigList, error)

func (f configsFunc) Resolve(ns, name, specConfig string) (*libcni.NetworkConfigList, error) {
	return f(ns, name, specConfig)
}

// multinetd's defaultNetworks: planned on net1, … (not for system
// namespaces), their names taken from the pod's networks, and a missing or
// device NAD among them is a problem naming the setting.
func TestCheckDefaultNetworks(t *testing.T) {
	s := source(nad("ops", "side", plainConf, nil), nad("ns1", "plain", plainConf, nil),
		nad("ops", "dev", plainConf, map[string]string{nadv1.ResourceNameAnnotation: "example.com/vf"}))
	policy := Policy{DefaultNetworks: []selection.Element{{Namespace: "ops", Name: "side"}}, SystemNamespaces: []string{"kube-system"}}
	v := check(t, networks("plain"), s, Options{Policy: policy})
	if len(v.Problems) != 0 || len(v.DefaultNetworks) != 1 || v.DefaultNetworks[0].IfName != "net1" || !v.DefaultNetworks[0].Planned || v.Attachments[0].IfName != "net2" {
		t.Fatalf("problems %q, defaultNetworks %+v, attachments %+v", problems(v), v.DefaultNetworks, v.Attachments)
	}
	sys, err := Check(context.Background(), Pod{Namespace: "kube-system", Annotations: networks("plain")}, Options{Policy: policy, NADs: source(nad("kube-system", "plain", plainConf, nil))})
	if err != nil || len(sys.DefaultNetworks) != 0 || sys.Attachments[0].IfName != "net1" {
		t.Errorf("system namespace: %v, %+v", err, sys)
	}
	policy.DefaultNetworks = []selection.Element{{Namespace: "ops", Name: "gone"}, {Namespace: "ops", Name: "dev"}}
	v = check(t, nil, s, Options{Policy: policy})
	got := problems(v)
	if len(got) != 2 || got[0] != "multinetd defaultNetworks[0]: NetworkAttachmentDefinition ops/gone not found (spec §3.4.1)" ||
		!strings.HasPrefix(got[1], `multinetd defaultNetworks[1]: NetworkAttachmentDefinition ops/dev names device resource "example.com/vf"`) {
		t.Errorf("problems %q", got)
	}
}

// Device problems: each attachment needing a device beyond the pod's
// requests of its resource, the override counted first.
func TestDeviceProblems(t *testing.T) {
	s := source(nad("ns1", "dev", plainConf, map[string]string{nadv1.LegacyResourceNameAnnotation: "example.com/vf"}))
	v := check(t, map[string]string{selection.NetworksAnnotation: "dev,dev", selection.DefaultNetworkAnnotation: "dev"}, s, Options{})
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "a", Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"example.com/vf": resource.MustParse("1")}}},
		{Name: "b", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"example.com/vf": resource.MustParse("1")}}},
	}}}
	if got := PodRequest(pod, "example.com/vf"); got != 2 {
		t.Errorf("PodRequest = %d, want 2", got)
	}
	var got []string
	for _, p := range v.DeviceProblems(pod) {
		got = append(got, p.Error())
	}
	want := `metadata.annotations["k8s.v1.cni.cncf.io/networks"]: networks[1] "dev": needs device 3 of resource "example.com/vf", but the pod's containers request 2 of it`
	if len(got) != 1 || !strings.HasPrefix(got[0], want) {
		t.Errorf("device problems %q, want one starting %q", got, want)
	}
}

// A malformed annotation is reported problem by problem with its field
// path, and nothing is looked up for it.
func TestCheckParseProblems(t *testing.T) {
	s := source()
	v := check(t, map[string]string{selection.NetworksAnnotation: `[{"name":"a","mac":"zz"},{"name":"B"}]`, selection.DefaultNetworkAnnotation: "a,b"}, s, Options{})
	got := problems(v)
	want := []string{
		`metadata.annotations["k8s.v1.cni.cncf.io/networks"]: networks[0] "a": field "mac": "zz" is not a 6-byte MAC address (spec §4.1.2.1.4)`,
		`metadata.annotations["k8s.v1.cni.cncf.io/networks"]: networks[1] "B": field "name": "B" is not a DNS-1123 subdomain: must be lower case (spec §3.3)`,
		`metadata.annotations["v1.multus-cni.io/default-network"]: default-network: selects 2 networks; it must select exactly one (spec §4.1.2)`,
	}
	if !slices.Equal(got, want) || len(s.calls) != 0 {
		t.Errorf("problems\n got %q\nwant %q\nlookups %v", got, want, s.calls)
	}
	if msg := v.Err().Error(); !strings.HasPrefix(msg, "the pod's network selection has 3 problems: ") {
		t.Errorf("Err() = %q", msg)
	}
	var ve *selection.ValidationError
	if !errors.As(v.Err(), &ve) || ve.Field != "mac" {
		t.Errorf("errors.As finds %+v, want the mac problem", ve)
	}
}

func TestParseDefaultNetworks(t *testing.T) {
	got, err := ParseDefaultNetworks([]string{"kube-system/sidecar", "team-a/mon.v2"})
	if err != nil || len(got) != 2 || got[1].Namespace != "team-a" || got[1].Name != "mon.v2" {
		t.Fatalf("ParseDefaultNetworks = %+v, %v", got, err)
	}
	for ref, want := range map[string]string{
		"sidecar":               "want a NetworkAttachmentDefinition namespace/name (Multus looked a plain name up in its multusNamespace",
		"/etc/cni/net.d/a.conf": "a path",
		"Kube_System/a":         `namespace "Kube_System"`,
		"ns/a/b":                `name "a/b"`,
	} {
		if _, err := ParseDefaultNetworks([]string{ref}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", ref, err, want)
		}
	}
	if _, err := ParseDefaultNetworks([]string{"ns/a", "ns/a"}); err == nil || !strings.Contains(err.Error(), "listed twice (also defaultNetworks[0])") {
		t.Errorf("duplicate: %v", err)
	}
}

func TestCheckNAD(t *testing.T) {
	f := CheckNAD(nad("ns1", "Bad_Name", `{"cniVersion":"9.9.9","type":"bridge"}`, map[string]string{
		nadv1.ResourceNameAnnotation: "sriov", nadv1.LegacyResourceNameAnnotation: "example.com/ok"}), nil)
	var errs, notes []string
	for _, e := range f.Errors {
		errs = append(errs, e.String())
	}
	for _, n := range f.Notes {
		notes = append(notes, n.String())
	}
	wantErrs := []string{`metadata.name: "Bad_Name": a lowercase RFC 1123 subdomain`, `metadata.annotations["k8s.v1.cni.cncf.io/resourceName"]: resourceName "sriov": must be vendor-domain/type`, `spec.config: field cniVersion: "9.9.9" is not a CNI version`}
	if len(errs) != len(wantErrs) {
		t.Fatalf("errors %q, want %q", errs, wantErrs)
	}
	for i := range wantErrs {
		if !strings.HasPrefix(errs[i], wantErrs[i]) {
			t.Errorf("errors[%d] = %q, want prefix %q", i, errs[i], wantErrs[i])
		}
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "the spelling of the cni-dp proposal") {
		t.Errorf("notes %q", notes)
	}
	w := CheckNAD(nad("ns1", "n", `{"type":"bridge","name":"other"}`, nil), nil)
	if len(w.Errors) != 0 || len(w.Warnings) != 1 || w.Warnings[0].Field != "cniVersion" && !strings.HasPrefix(w.Warnings[0].String(), "spec.config: field cniVersion: missing") ||
		len(w.Notes) != 1 || !strings.Contains(w.Notes[0].String(), `field name: "other" differs from metadata.name "n"`) {
		t.Errorf("findings %+v", w)
	}
	if g := CheckNAD(&nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", GenerateName: "net-"}, Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: plainConf}}, nil); len(g.Errors) != 0 {
		t.Errorf("generateName NAD: %+v", g.Errors)
	}
}
