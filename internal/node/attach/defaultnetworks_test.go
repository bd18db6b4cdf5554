package attach

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	corev1 "k8s.io/api/core/v1"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/internal/node/cniserver/api"
	"github.com/multinet/multinet/internal/node/kube"
	"github.com/multinet/multinet/internal/testing/cnitest"
	"github.com/multinet/multinet/pkg/spec/selection"
)

// Multus's defaultNetworks and systemNamespaces (multinetd's keys of the
// same names): operatorNets are the engine's
// DefaultNetworks of these tests, NADs of namespaces other than the pod's
// (globalNS and otherNS), so that namespace isolation would refuse them
// were the pod to select them.
var operatorNets = []selection.Element{{Namespace: globalNS, Name: "side-a"}, {Namespace: otherNS, Name: "side-b"}}

// newDefaultNetsEnv is an env whose engine attaches operatorNets to every
// pod outside systemNamespaces; opt adjusts the options further.
func newDefaultNetsEnv(t *testing.T, systemNamespaces []string, opt func(*envOptions)) *env {
	t.Helper()
	e := newEnv(t, func(o *envOptions) {
		o.DefaultNetworks = operatorNets
		o.SystemNamespaces = systemNamespaces
		if opt != nil {
			opt(o)
		}
	})
	e.nads.put(globalNS, "side-a", e.bridgeConf("side-a", ""), nil)
	e.nads.put(otherNS, "side-b", e.bridgeConf("side-b", ""), nil)
	return e
}

// wantPlanned checks a successful ADD of container id for pod: the delegates
// ran in the order of want, each on its interface; the pod has exactly
// those links; the record and network-status list want in order, the
// default network first and the only default one; every attachment but the
// default network got an AddedInterface Event.
func (e *env) wantPlanned(id string, pod *corev1.Pod, want []attachment) {
	t := e.t
	t.Helper()
	if got := ifNames(e.exec.of("ADD")); !slices.Equal(got, wantIfNames(want)) {
		t.Errorf("delegate ADDs on %q, want %q", got, wantIfNames(want))
	}
	e.wantLinks(wantIfNames(want)...)
	rec, err := e.store.Load(id)
	if err != nil {
		t.Fatal(err)
	}
	var got []attachment
	for _, a := range rec.Attachments {
		got = append(got, attachment{a.Network, a.IfName})
	}
	if !rec.Complete || !slices.Equal(got, want) {
		t.Errorf("record: complete=%v attachments %v, want complete with %v", rec.Complete, got, want)
	}
	got = nil
	for i, s := range e.networkStatus(pod) {
		got = append(got, attachment{s.Name, s.Interface})
		if s.Default != (i == 0) {
			t.Errorf("network-status[%d] %s: default=%v, want %v", i, s.Name, s.Default, i == 0)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("network-status lists %v, want %v", got, want)
	}
	if ev := e.events.of("Normal", kube.ReasonAddedInterface); len(ev) != len(want)-1 {
		t.Errorf("AddedInterface events = %+v, want %d", ev, len(want)-1)
	}
	if w := e.events.of("Warning", kube.ReasonAttachFailed); len(w) != 0 {
		t.Errorf("unexpected Warning events %+v", w)
	}
}

// defaultNetworks are attached to every pod after the default network and
// before the pod's own selection (§6.2 keeps the default network first), in
// the configured order, on net1, net2, …; the pod's networks continue the
// numbering (net3, …) around the interfaces they request, in both annotation
// forms. A pod without a selection gets them too. DEL tears all of them
// down.
func TestAddDefaultNetworksOrderAndNames(t *testing.T) {
	tests := []struct {
		name     string
		networks string // "": no annotation
		want     []attachment
	}{
		{
			name: "no selection",
			want: []attachment{{"shared/side-a", "net1"}, {"ns2/side-b", "net2"}},
		},
		{
			name:     "comma form",
			networks: "net-a, net-b@data0, ns1/net-c",
			want:     []attachment{{"shared/side-a", "net1"}, {"ns2/side-b", "net2"}, {"ns1/net-a", "net3"}, {"ns1/net-b", "data0"}, {"ns1/net-c", "net4"}},
		},
		{
			name:     "JSON form, an explicit net3 skipped by the generated names",
			networks: `[{"name":"net-a"},{"name":"net-b","interface":"net3"},{"name":"net-c"}]`,
			want:     []attachment{{"shared/side-a", "net1"}, {"ns2/side-b", "net2"}, {"ns1/net-a", "net4"}, {"ns1/net-b", "net3"}, {"ns1/net-c", "net5"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newDefaultNetsEnv(t, []string{"kube-system"}, nil)
			for _, n := range []string{"net-a", "net-b", "net-c"} {
				e.bridgeNAD(n)
			}
			pod := e.pod(map[string]string{})
			if tt.networks != "" {
				pod = e.podWithNetworks(tt.networks)
			}
			id := "ctr-" + cnitest.UniqueName("")
			e.add(id, pod)
			e.wantPlanned(id, pod, append([]attachment{{e.defaultNet, "eth0"}}, tt.want...))
			e.wantLeases("side-a", 1)
			e.wantLeases("side-b", 1)

			e.del(id, pod)
			e.wantLinks()
			for _, n := range []string{e.defaultNet, "side-a", "side-b", "net-a", "net-b", "net-c"} {
				e.wantLeases(n, 0)
			}
		})
	}
}

// A pod's element may not request an interface a network of defaultNetworks
// has (§4.1.2.1.5: unique interface names): the ADD fails before anything
// runs, naming the interface and the operator's network.
func TestAddDefaultNetworksInterfaceTaken(t *testing.T) {
	e := newDefaultNetsEnv(t, nil, nil)
	e.bridgeNAD("net-a")
	pod := e.podWithNetworks("net-a@net2")
	_, err := e.eng.Add(context.Background(), e.req(api.CmdAdd, "ctr-"+cnitest.UniqueName(""), pod))
	var te *types.Error
	if !errors.As(err, &te) || te.Code != types.ErrInvalidNetworkConfig ||
		!strings.Contains(te.Msg, `field "interface": "net2" is used by network "ns2/side-b" of multinetd's defaultNetworks (spec §4.1.2.1.5)`) {
		t.Fatalf("ADD error = %v, want CNI error %d naming net2 and ns2/side-b of defaultNetworks", err, types.ErrInvalidNetworkConfig)
	}
	if got := e.exec.of(""); len(got) != 0 {
		t.Errorf("delegates ran: %+v", got)
	}
	e.wantLinks()
}

// Pods of systemNamespaces do not get defaultNetworks. Their own selection
// still applies, as in Multus (which skips only defaultNetworks for them):
// a pod there that selects a network gets the default network and that
// network, on net1.
func TestAddSystemNamespaceSkipsDefaultNetworks(t *testing.T) {
	tests := []struct {
		name     string
		networks string
		want     []attachment
	}{
		{name: "no selection: the default network only"},
		{name: "own selection kept", networks: "net-a", want: []attachment{{"ns1/net-a", "net1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newDefaultNetsEnv(t, []string{"kube-system", podNS}, nil)
			e.bridgeNAD("net-a")
			pod := e.pod(map[string]string{})
			if tt.networks != "" {
				pod = e.podWithNetworks(tt.networks)
			}
			id := "ctr-" + cnitest.UniqueName("")
			e.add(id, pod)
			e.wantPlanned(id, pod, append([]attachment{{e.defaultNet, "eth0"}}, tt.want...))
			e.wantLeases("side-a", 0)
			e.wantLeases("side-b", 0)
			e.del(id, pod)
		})
	}
}

// The networks of defaultNetworks are the operator's choice, not the pod's:
// namespace isolation (§7.4) does not apply to them, so a pod gets them
// although their namespaces are neither its own nor global. The pod's own
// selection of the same NAD is still refused.
func TestAddDefaultNetworksExemptFromIsolation(t *testing.T) {
	policy := selection.IsolationPolicy{Enabled: true, GlobalNamespaces: []string{"default"}}
	e := newDefaultNetsEnv(t, nil, func(o *envOptions) { o.Isolation = policy })
	e.bridgeNAD("net-a")

	pod := e.podWithNetworks("net-a")
	id := "ctr-" + cnitest.UniqueName("")
	e.add(id, pod)
	e.wantPlanned(id, pod, []attachment{{e.defaultNet, "eth0"}, {"shared/side-a", "net1"}, {"ns2/side-b", "net2"}, {"ns1/net-a", "net3"}})
	e.del(id, pod)

	e.exec.reset()
	refused := e.podWithNetworks("ns2/side-b")
	_, err := e.eng.Add(context.Background(), e.req(api.CmdAdd, "ctr-"+cnitest.UniqueName(""), refused))
	if err == nil || !strings.Contains(err.Error(), "namespace isolation") || !strings.Contains(err.Error(), `"ns2/side-b"`) {
		t.Fatalf("ADD of a pod selecting ns2/side-b itself: %v, want refused by namespace isolation", err)
	}
	if got := e.exec.of(""); len(got) != 0 {
		t.Errorf("delegates ran for a refused selection: %+v", got)
	}
}

// A network of defaultNetworks that cannot be attached fails the ADD before
// any delegate runs, with a message that says it is multinetd's
// defaultNetworks (not the pod's selection) and why: a NAD that does not
// exist, or one with a device resource name (the webhook requests devices
// only for the networks a pod selects, so kubelet allocated none).
func TestAddDefaultNetworksRefused(t *testing.T) {
	tests := []struct {
		name  string
		setup func(e *env)
		want  []string
	}{
		{
			name:  "NAD missing",
			setup: func(e *env) { e.nads.put(globalNS, "side-a", e.bridgeConf("side-a", ""), nil) },
			want:  []string{"multinetd defaultNetworks[1]: NetworkAttachmentDefinition ns2/side-b not found"},
		},
		{
			name: "device network",
			setup: func(e *env) {
				e.nads.put(globalNS, "side-a", e.bridgeConf("side-a", ""), map[string]string{nadv1.ResourceNameAnnotation: "example.com/nic"})
				e.nads.put(otherNS, "side-b", e.bridgeConf("side-b", ""), nil)
			},
			want: []string{"multinetd defaultNetworks[0]: NetworkAttachmentDefinition shared/side-a", `device resource "example.com/nic"`, "cannot be a device network"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(o *envOptions) { o.DefaultNetworks = operatorNets })
			tt.setup(e)
			pod := e.pod(map[string]string{})
			id := "ctr-" + cnitest.UniqueName("")
			_, err := e.eng.Add(context.Background(), e.req(api.CmdAdd, id, pod))
			var te *types.Error
			if !errors.As(err, &te) || te.Code != types.ErrInvalidNetworkConfig {
				t.Fatalf("ADD error = %v, want CNI error %d", err, types.ErrInvalidNetworkConfig)
			}
			for _, s := range tt.want {
				if !strings.Contains(te.Msg, s) {
					t.Errorf("ADD error %q does not contain %q", te.Msg, s)
				}
			}
			if w := e.events.of("Warning", kube.ReasonAttachFailed); len(w) != 1 || !strings.Contains(w[0].Message, "defaultNetworks") {
				t.Errorf("Warning events = %+v, want one naming defaultNetworks", w)
			}
			if got := e.exec.of(""); len(got) != 0 {
				t.Errorf("delegates ran: %+v", got)
			}
			e.wantLinks()
		})
	}
}

// "default-route" on a pod's element (§4.1.2.1.9) moves the default route to
// that element's attachment, which comes after those of defaultNetworks.
func TestAddDefaultNetworksDefaultRoute(t *testing.T) {
	e := newDefaultNetsEnv(t, nil, nil)
	prefix := e.bridgeNAD("net-a")
	pod := e.podWithNetworks(fmt.Sprintf(`[{"name":"net-a","default-route":["%s.1"]}]`, prefix))
	e.add("ctr-"+cnitest.UniqueName(""), pod)

	defaults := e.defaultRoutes()
	if want := []string{prefix + ".1 dev net3"}; !slices.Equal(defaults, want) {
		t.Errorf("default routes in the pod = %q, want %q", defaults, want)
	}
	for _, s := range e.networkStatus(pod) {
		if want := s.Name == "ns1/net-a"; (len(s.DefaultRoute) > 0) != want {
			t.Errorf("network-status %s default-route = %q, want it on ns1/net-a only", s.Name, s.DefaultRoute)
		}
	}
}
