package webhook

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
)

// peerNADs: multus-dynamic-networks-controller's e2e NADs
// (macvlanNetworkWithoutIPAM; macvlanNetworkWitStaticIPAM, only "ips"
// declared) and Multus's default-route1 template (no capability).
func peerNADs() []*nadv1.NetworkAttachmentDefinition {
	mk := func(name, config string) *nadv1.NetworkAttachmentDefinition {
		return &nadv1.NetworkAttachmentDefinition{ObjectMeta: metav1.ObjectMeta{Namespace: "ns1", Name: name},
			Spec: nadv1.NetworkAttachmentDefinitionSpec{Config: config}}
	}
	return []*nadv1.NetworkAttachmentDefinition{
		mk("tenant-network", `{"cniVersion":"0.3.0","disableCheck":true,"plugins":[{"type":"macvlan","master":"eth0","mode":"bridge"}]}`),
		mk("tenant-network-ipam", `{"cniVersion":"0.3.0","disableCheck":true,"name":"tenant-network-ipam","plugins":[{"type":"macvlan","capabilities":{"ips":true},"master":"eth0","mode":"bridge","ipam":{"type":"static"}},{"type":"tuning"}]}`),
		mk("default-route-config", `{"cniVersion":"0.4.0","plugins":[{"type":"macvlan","master":"eth1","mode":"bridge","ipam":{"type":"static"}}]}`),
	}
}

// TestValidatePodsUndeclaredCapabilities: the peers' pods. By default
// (and with "refuse") they are denied with the spec section; with
// "multus" they are admitted, with one warning per attachment naming the
// NAD and the missing capability. Hot-plug (UPDATE) too.
func TestValidatePodsUndeclaredCapabilities(t *testing.T) {
	initial := networks(`[{"name":"tenant-network","interface":"net1"}]`)
	hotPlugged := networks(`[{"name":"tenant-network","interface":"net1"},` +
		`{"name":"tenant-network-ipam","ips":["10.10.10.111/24"],"interface":"ens202","mac":"02:03:04:05:06:07"}]`)
	route1 := networks(`[{"name":"default-route-config","ips":["10.1.1.21/24"],"default-route":["10.1.1.254"]}]`)
	cases := []struct {
		name     string
		old, new map[string]string
		deny     string // under the default
		warn     []string
	}{
		{name: "hot-plug with mac", old: initial, new: hotPlugged,
			deny: `networks[1] "tenant-network-ipam": field "mac": needs runtimeConfig "mac", but no plugin of CNI config "tenant-network-ipam" declares "capabilities": {"mac": true} (spec §4.1.2.1.4.2)`,
			warn: []string{"ns1/tenant-network-ipam", `declares no capability "mac"`, "CNI_ARGS MAC="}},
		{name: "created with mac", new: networks(`[{"name":"tenant-network","interface":"ens58","mac":"02:03:04:05:06:07"}]`),
			deny: `field "mac": needs runtimeConfig "mac"`, warn: []string{"ns1/tenant-network", `"mac"`}},
		{name: "default-route1", new: route1,
			deny: `networks[0] "default-route-config": field "ips": needs runtimeConfig "ips", but no plugin of CNI config "default-route-config" declares "capabilities": {"ips": true} (spec §4.1.2.1.3.2)`,
			warn: []string{"ns1/default-route-config", `declares no capability "ips"`, "CNI_ARGS IP="}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			op, old := admissionv1.Create, pod("ns1", c.old)
			if c.old == nil {
				old = nil
			} else {
				op = admissionv1.Update
			}
			for _, mode := range []podnetworks.UndeclaredCapabilities{"", podnetworks.RefuseUndeclared} {
				w := newHooks(t, Options{NADs: lister(t, peerNADs()...), Policy: podnetworks.Policy{UndeclaredCapabilities: mode}})
				checkResponse(t, w.ValidatePods(context.Background(), podRequest(t, op, "ns1", pod("ns1", c.new), old)), ResultDenied, c.deny)
			}
			w := newHooks(t, Options{NADs: lister(t, peerNADs()...), Policy: podnetworks.Policy{UndeclaredCapabilities: podnetworks.MultusUndeclared}})
			resp := w.ValidatePods(context.Background(), podRequest(t, op, "ns1", pod("ns1", c.new), old))
			checkResponse(t, resp, ResultAllowed)
			if len(resp.Warnings) != 1 {
				t.Fatalf("warnings %q, want one", resp.Warnings)
			}
			for _, part := range c.warn {
				if !strings.Contains(resp.Warnings[0], part) {
					t.Errorf("warning %q lacks %q", resp.Warnings[0], part)
				}
			}
		})
	}
}

func TestNewUndeclaredCapabilities(t *testing.T) {
	_, err := New(Options{NADs: lister(t), Policy: podnetworks.Policy{UndeclaredCapabilities: "allow"}})
	if err == nil || !strings.Contains(err.Error(), `undeclaredCapabilities "allow"`) {
		t.Errorf("New: %v, want an error naming the value", err)
	}
}
