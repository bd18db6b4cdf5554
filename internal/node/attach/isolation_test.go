package attach

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/multinet/multinet/internal/node/cniserver/api"
	"github.com/multinet/multinet/internal/node/kube"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/internal/testing/cnitest"
	"github.com/multinet/multinet/pkg/spec/selection"
)

// Namespaces of the isolation tests: the pod is in podNS ("ns1"); otherNS
// is a namespace the pod may not use under isolation; globalNS is one of
// the policy's global namespaces.
const (
	otherNS  = "ns2"
	globalNS = "shared"
)

// isolationOn is the policy of the isolation tests: the pod's own namespace
// and globalNS (spec §7.4, multinetd's namespaceIsolation and
// globalNamespaces).
var isolationOn = selection.IsolationPolicy{Enabled: true, GlobalNamespaces: []string{"default", globalNS}}

// isolationNADs creates ns1/net-a, ns2/net-b and shared/net-g, each its own
// bridge network (the CNI network names differ, so their host-local leases
// are told apart).
func (e *env) isolationNADs() {
	e.t.Helper()
	e.nads.put(podNS, "net-a", e.bridgeConf("net-a", ""), nil)
	e.nads.put(otherNS, "net-b", e.bridgeConf("net-b", ""), nil)
	e.nads.put(globalNS, "net-g", e.bridgeConf("net-g", ""), nil)
}

// wantRefused checks an ADD the isolation policy refused before anything
// ran: a CNI error and a Warning Event on the pod, both naming the
// forbidden network, its namespace and the pod's; no delegate invoked, no
// interface, no lease, no network-status; the record the engine keeps for
// an ADD that attempted nothing (pod named, no attachments, not complete);
// and a DEL that runs nothing and removes it.
func (e *env) wantRefused(id string, err error, network, namespace string) {
	t := e.t
	t.Helper()
	var te *types.Error
	if !errors.As(err, &te) {
		t.Fatalf("ADD error = %v (%T), want a *types.Error refusing %s", err, err, network)
	}
	if te.Code != types.ErrInvalidNetworkConfig {
		t.Errorf("ADD error code %d, want %d (ErrInvalidNetworkConfig: retrying cannot help)", te.Code, types.ErrInvalidNetworkConfig)
	}
	want := []string{`"` + network + `"`, `namespace "` + namespace + `"`, `pod in namespace "` + podNS + `"`, "namespace isolation", "§7.4"}
	for _, s := range want {
		if !strings.Contains(te.Msg, s) {
			t.Errorf("ADD error %q does not contain %q", te.Msg, s)
		}
	}
	warnings := e.events.of("Warning", kube.ReasonAttachFailed)
	if len(warnings) != 1 || !strings.Contains(warnings[0].Message, `namespace "`+namespace+`"`) || !strings.Contains(warnings[0].Message, "namespace isolation") {
		t.Errorf("Warning events = %+v, want one %s naming namespace %q and isolation", warnings, kube.ReasonAttachFailed, namespace)
	}
	if got := e.exec.of(""); len(got) != 0 {
		t.Errorf("delegates ran for a refused selection: %+v", got)
	}
	e.wantLinks()
	for _, net := range []string{e.defaultNet, "net-a", "net-b", "net-g"} {
		e.wantLeases(net, 0)
	}
	if calls := e.status.all(); len(calls) != 0 {
		t.Errorf("network-status written for a refused selection: %+v", calls)
	}
	switch rec, err := e.store.Load(id); {
	case err != nil:
		t.Errorf("record after the refused ADD: %v, want one with no attachments", err)
	case len(rec.Attachments) != 0 || rec.Complete || rec.PodNamespace != podNS:
		t.Errorf("record after the refused ADD = %+v, want pod of %s, no attachments, not complete", rec, podNS)
	}
	e.exec.reset()
	if err := e.eng.Del(context.Background(), e.req(api.CmdDel, id, nil)); err != nil {
		t.Errorf("DEL after the refused ADD: %v", err)
	}
	if got := e.exec.of(""); len(got) != 0 {
		t.Errorf("DEL after the refused ADD ran delegates: %+v", got)
	}
	if _, err := e.store.Load(id); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("record after DEL: %v, want ErrNotFound", err)
	}
}

// wantAttached checks a successful ADD: the delegates ran on the runtime's
// interface and then net1, net2, …; the record holds the networks in order
// (the default network, or its override, first).
func (e *env) wantAttached(id string, networks ...string) {
	t := e.t
	t.Helper()
	ifs := []string{"eth0"}
	for i := 1; i < len(networks); i++ {
		ifs = append(ifs, "net"+string(rune('0'+i)))
	}
	if got := ifNames(e.exec.of("ADD")); !slices.Equal(got, ifs) {
		t.Errorf("delegate ADDs on %q, want %q", got, ifs)
	}
	e.wantLinks(ifs...)
	rec, err := e.store.Load(id)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range rec.Attachments {
		got = append(got, a.Network)
	}
	if !rec.Complete || !slices.Equal(got, networks) {
		t.Errorf("record: complete=%v networks %q, want complete with %q", rec.Complete, got, networks)
	}
	if w := e.events.of("Warning", kube.ReasonAttachFailed); len(w) != 0 {
		t.Errorf("unexpected Warning events %+v", w)
	}
}

// With namespace isolation on (spec §7.4: "If the implementation determines
// that a given Network Attachment Definition selected by the Pod is not
// allowed for that Pod, it must fail the pod network operation"), a pod may
// select the NADs of its own namespace and of the global namespaces only.
// A selection of another namespace's NAD fails the ADD before anything is
// attached (not even the default network, nor the allowed elements before
// it), whichever annotation form names it; the error and the pod's Event
// name the network, its namespace and the pod's.
func TestAddNamespaceIsolationNetworks(t *testing.T) {
	tests := []struct {
		name     string
		policy   selection.IsolationPolicy
		networks string
		// refused is the forbidden network ("" when the ADD succeeds).
		refused string
		// want are the record's networks when the ADD succeeds.
		want []string
	}{
		{
			name:     "other namespace refused, comma form",
			policy:   isolationOn,
			networks: "ns2/net-b",
			refused:  "ns2/net-b",
		},
		{
			name:     "other namespace refused, JSON form",
			policy:   isolationOn,
			networks: `[{"name":"net-b","namespace":"ns2","interface":"data0"}]`,
			refused:  "ns2/net-b",
		},
		{
			name:     "other namespace after allowed ones: nothing attached",
			policy:   isolationOn,
			networks: "net-a, shared/net-g, ns2/net-b",
			refused:  "ns2/net-b",
		},
		{
			name:     "other namespace refused without global namespaces",
			policy:   selection.IsolationPolicy{Enabled: true},
			networks: "shared/net-g",
			refused:  "shared/net-g",
		},
		{
			name:     "own and global namespaces allowed",
			policy:   isolationOn,
			networks: "net-a, ns1/net-a, shared/net-g",
			want:     []string{"mnu-default", "ns1/net-a", "ns1/net-a", "shared/net-g"},
		},
		{
			name:     "isolation off: other namespace allowed",
			policy:   selection.IsolationPolicy{GlobalNamespaces: []string{globalNS}},
			networks: "net-a, ns2/net-b, shared/net-g",
			want:     []string{"mnu-default", "ns1/net-a", "ns2/net-b", "shared/net-g"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(o *envOptions) { o.Isolation = tt.policy })
			e.isolationNADs()
			pod := e.podWithNetworks(tt.networks)
			id := "ctr-" + cnitest.UniqueName("")

			_, err := e.eng.Add(context.Background(), e.req(api.CmdAdd, id, pod))
			if tt.refused != "" {
				ns, _, _ := strings.Cut(tt.refused, "/")
				e.wantRefused(id, err, tt.refused, ns)
				if err != nil && tt.policy.Enabled && len(tt.policy.GlobalNamespaces) > 0 && !strings.Contains(err.Error(), `global namespaces "default", "shared"`) {
					t.Errorf("ADD error %q does not list the global namespaces", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ADD: %v", err)
			}
			e.wantAttached(id, tt.want...)
			e.del(id, pod)
		})
	}
}

// The v1.multus-cni.io/default-network override replaces the pod's primary
// network with a NAD; it obeys the same isolation (§7.4) as the networks
// annotation, or any pod could take over another namespace's network as
// its eth0. Refused: the cluster-wide default network is not attached
// either. Allowed (own namespace, a global one, or isolation off): the
// override's NAD is attached on eth0 instead of the default network.
func TestAddNamespaceIsolationDefaultNetworkOverride(t *testing.T) {
	tests := []struct {
		name     string
		policy   selection.IsolationPolicy
		override string
		networks string
		refused  string
		want     []string
	}{
		{
			name:     "other namespace refused",
			policy:   isolationOn,
			override: "ns2/net-b",
			refused:  "ns2/net-b",
		},
		{
			name:     "other namespace refused, JSON object form",
			policy:   isolationOn,
			override: `{"name":"net-b","namespace":"ns2"}`,
			refused:  "ns2/net-b",
		},
		{
			name:     "other namespace refused although the networks are allowed",
			policy:   isolationOn,
			override: "ns2/net-b",
			networks: "net-a",
			refused:  "ns2/net-b",
		},
		{
			name:     "own namespace allowed",
			policy:   isolationOn,
			override: "net-a",
			want:     []string{"ns1/net-a"},
		},
		{
			name:     "global namespace allowed",
			policy:   isolationOn,
			override: "shared/net-g",
			networks: "net-a",
			want:     []string{"shared/net-g", "ns1/net-a"},
		},
		{
			name:     "isolation off: other namespace allowed",
			policy:   selection.IsolationPolicy{},
			override: "ns2/net-b",
			want:     []string{"ns2/net-b"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, func(o *envOptions) { o.Isolation = tt.policy })
			e.isolationNADs()
			annotations := map[string]string{selection.DefaultNetworkAnnotation: tt.override}
			if tt.networks != "" {
				annotations[selection.NetworksAnnotation] = tt.networks
			}
			pod := e.pod(annotations)
			id := "ctr-" + cnitest.UniqueName("")

			_, err := e.eng.Add(context.Background(), e.req(api.CmdAdd, id, pod))
			if tt.refused != "" {
				ns, _, _ := strings.Cut(tt.refused, "/")
				e.wantRefused(id, err, tt.refused, ns)
				if err != nil && !strings.Contains(err.Error(), `metadata.annotations["`+selection.DefaultNetworkAnnotation+`"]`) {
					t.Errorf("ADD error %q does not say that the default-network override is refused", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ADD: %v", err)
			}
			e.wantAttached(id, tt.want...)
			e.wantLeases(e.defaultNet, 0) // replaced, never attached
			list := e.networkStatus(pod)
			if len(list) == 0 || list[0].Name != tt.want[0] || !list[0].Default || list[0].Interface != "eth0" {
				t.Errorf("network-status[0] = %+v, want %s on eth0, default", list, tt.want[0])
			}
			e.del(id, pod)
		})
	}
}
