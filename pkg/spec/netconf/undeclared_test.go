package netconf

import (
	"errors"
	"reflect"
	"testing"

	"github.com/multinet/multinet/pkg/spec/selection"
)

// multus-dynamic-networks-controller's e2e NAD macvlanNetworkWitStaticIPAM
// (e2e/e2e_test.go): only "ips" declared; tuning reads CNI_ARGS MAC.
const dncStaticIPAM = `{"cniVersion":"0.3.0","disableCheck":true,"name":"tenant-network-ipam","plugins":[
	{"type":"macvlan","capabilities":{"ips":true},"master":"eth0","mode":"bridge","ipam":{"type":"static"}},
	{"type":"tuning"}]}`

// Multus's e2e/templates/default-route1.yml.j2: no capability at all.
const multusDefaultRoute1 = `{"cniVersion":"0.4.0","plugins":[{"type":"macvlan","master":"eth1","mode":"bridge","ipam":{"type":"static"}}]}`

// TestPlanHandOverUndeclared: with HandOverUndeclared, "mac" and "ips"
// that no plugin declares reach every plugin as CNI_ARGS MAC= and IP= (as
// Multus hands them) and no plugin's runtimeConfig, declared keys still go
// to runtimeConfig, and Undeclared lists the handed-over keys; without it
// the plan fails with ErrNoCapability naming the spec section.
func TestPlanHandOverUndeclared(t *testing.T) {
	cases := []struct {
		name, conf string
		el         selection.Element
		wantArgs   string // CNI_ARGS of every plugin (runAdd passes K8S_POD_NAMESPACE; internal/node/attach puts IgnoreUnknown=1 first)
		wantRC     []map[string]any
		wantKeys   []UndeclaredKey
		section    string // of the refusal
	}{{
		name: "dnc-mac", conf: dncStaticIPAM,
		el:       selection.Element{Namespace: "ns1", Name: "tenant-network-ipam", IPRequest: []string{"10.10.10.111/24"}, MacRequest: "02:03:04:05:06:07", InterfaceRequest: "ens202"},
		wantArgs: "K8S_POD_NAMESPACE=ns1;MAC=02:03:04:05:06:07",
		wantRC:   []map[string]any{{"ips": []any{"10.10.10.111/24"}}, nil},
		wantKeys: []UndeclaredKey{{Key: "mac", Capability: CapMAC, Section: "4.1.2.1.4.2", CNIArg: "MAC"}},
		section:  "4.1.2.1.4.2",
	}, {
		name: "default-route1", conf: multusDefaultRoute1,
		el:       selection.Element{Namespace: "ns1", Name: "default-route-config", IPRequest: []string{"10.1.1.21/24", "fd00::21/64"}, PortMappingsRequest: []selection.PortMapping{{HostPort: 80, ContainerPort: 80}}},
		wantArgs: "K8S_POD_NAMESPACE=ns1;IP=10.1.1.21/24,fd00::21/64",
		wantRC:   []map[string]any{nil},
		wantKeys: []UndeclaredKey{{Key: "ips", Capability: CapIPs, Section: "4.1.2.1.3.2", CNIArg: "IP"}, {Key: "portMappings", Capability: CapPortMappings, Section: "4.1.2.1.7.2"}},
		section:  "4.1.2.1.3.2",
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := mustResolve(t, c.el.Name, c.conf)
			_, err := PlanAttachment(Network{Element: c.el, ConfList: l}, "net1")
			var ke *KeyError
			if !errors.Is(err, ErrNoCapability) || !errors.As(err, &ke) || ke.Section != c.section {
				t.Fatalf("without HandOverUndeclared: error %v, want a *KeyError of §%s wrapping ErrNoCapability", err, c.section)
			}
			if got := UndeclaredKeys(&c.el, l); !reflect.DeepEqual(got, c.wantKeys) {
				t.Errorf("UndeclaredKeys = %+v, want %+v", got, c.wantKeys)
			}

			a, err := PlanAttachment(Network{Element: c.el, ConfList: l, HandOverUndeclared: true}, "net1")
			if err != nil {
				t.Fatalf("with HandOverUndeclared: %v", err)
			}
			if !reflect.DeepEqual(a.Undeclared, c.wantKeys) {
				t.Errorf("Undeclared = %+v, want %+v", a.Undeclared, c.wantKeys)
			}
			calls := runAdd(t, &a)
			if len(calls) != len(c.wantRC) {
				t.Fatalf("libcni ran %d plugins, want %d", len(calls), len(c.wantRC))
			}
			for i, call := range calls {
				if call.cniArgs != c.wantArgs {
					t.Errorf("plugin %d CNI_ARGS = %q, want %q", i, call.cniArgs, c.wantArgs)
				}
				rc, _ := call.stdin["runtimeConfig"].(map[string]any)
				if !reflect.DeepEqual(rc, c.wantRC[i]) {
					t.Errorf("plugin %d runtimeConfig = %v, want %v", i, rc, c.wantRC[i])
				}
			}
		})
	}
}

// TestPlanHandOverDeclaredUnchanged: a key some plugin declares is planned
// as before under HandOverUndeclared: runtimeConfig only, no CNI_ARGS.
func TestPlanHandOverDeclaredUnchanged(t *testing.T) {
	l := capsList(t, "net-m", CapMAC)
	el := selection.Element{Namespace: "ns1", Name: "net-m", MacRequest: "02:00:00:00:00:01"}
	a, err := PlanAttachment(Network{Element: el, ConfList: l, HandOverUndeclared: true}, "net1")
	if err != nil {
		t.Fatal(err)
	}
	if a.Undeclared != nil || a.CNIArgs != nil || !reflect.DeepEqual(a.CapabilityArgs, map[string]any{"mac": "02:00:00:00:00:01"}) {
		t.Errorf("attachment: undeclared %v, CNI args %v, capability args %v; want none, none, the mac", a.Undeclared, a.CNIArgs, a.CapabilityArgs)
	}
}
