package attach

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"

	"github.com/multinet/multinet/internal/node/cniserver/api"
	"github.com/multinet/multinet/internal/node/kube"
	"github.com/multinet/multinet/internal/testing/cnitest"
	"github.com/multinet/multinet/pkg/spec/podnetworks"
)

// undeclaredNADs creates the peers' NADs on bridges (macvlan needs a
// parent in the plugins' namespace): "dnc-ipam" as
// multus-dynamic-networks-controller's macvlanNetworkWitStaticIPAM (only
// "ips" declared, static IPAM, then tuning) and "default-route-config" as
// Multus's default-route1 template (static IPAM, no capability).
func (e *env) undeclaredNADs() {
	e.t.Helper()
	for _, n := range []struct{ name, caps string }{{"dnc-ipam", `"capabilities":{"ips":true},`}, {"default-route-config", ""}} {
		br := cnitest.UniqueName("mnu")
		cnitest.DeleteLinkAtCleanup(e.t, br)
		e.nads.put(podNS, n.name, fmt.Sprintf(`{"cniVersion":"0.3.0","name":%q,"plugins":[`+
			`{"type":"bridge","bridge":%q,%s"ipam":{"type":"static"}},{"type":"tuning"}]}`, n.name, br, n.caps), nil)
	}
}

const (
	undeclaredMAC = "02:00:00:00:20:01"
	dncElement    = `{"name":"dnc-ipam","ips":["192.0.2.20/24"],"interface":"ens202","mac":"` + undeclaredMAC + `"}`
	routeElement  = `{"name":"default-route-config","ips":["198.51.100.21/24"]}`
)

// TestUndeclaredCapabilitiesMultus: with undeclaredCapabilities: multus,
// an ADD whose element asks for a "mac" no plugin declares and a hot-plug
// of an element asking for "ips" no plugin declares both run: tuning sets
// the MAC from CNI_ARGS MAC=, static IPAM the addresses from CNI_ARGS IP=;
// a Warning Event names each NAD and the missing capability; the record
// keeps the pairs for DEL, which tears everything down.
func TestUndeclaredCapabilitiesMultus(t *testing.T) {
	e := newEnv(t, func(o *envOptions) { o.Policy.UndeclaredCapabilities = podnetworks.MultusUndeclared })
	e.undeclaredNADs()
	pod := e.podWithNetworks("[" + dncElement + "]")
	id := "ctr-" + cnitest.UniqueName("")
	e.add(id, pod)

	if got := e.addrs("ens202"); !slices.Equal(got, []string{"192.0.2.20/24"}) {
		t.Errorf("ens202 addresses %q, want 192.0.2.20/24", got)
	}
	l, err := cnitest.Handle(t, e.netns).LinkByName("ens202")
	if err != nil {
		t.Fatal(err)
	}
	if mac := l.Attrs().HardwareAddr.String(); mac != undeclaredMAC {
		t.Errorf("ens202 MAC %s, want %s (tuning reads CNI_ARGS MAC)", mac, undeclaredMAC)
	}
	e.wantUndeclaredEvent(pod, podNS+"/dnc-ipam", `"mac"`, "§4.1.2.1.4.2", "CNI_ARGS MAC=")
	if a := e.record(id).Attachments[1]; !slices.Equal(a.CNIArgs, [][2]string{{"MAC", undeclaredMAC}}) {
		t.Errorf("recorded CNI args of %s: %q, want MAC=%s", a.Network, a.CNIArgs, undeclaredMAC)
	}

	pod, _ = e.mustHotPlug(pod, "["+dncElement+","+routeElement+"]")
	if got := e.addrs("net1"); !slices.Equal(got, []string{"198.51.100.21/24"}) {
		t.Errorf("hot-plugged net1 addresses %q, want 198.51.100.21/24 (static IPAM reads CNI_ARGS IP)", got)
	}
	e.wantUndeclaredEvent(pod, podNS+"/default-route-config", `"ips"`, "§4.1.2.1.3.2", "CNI_ARGS IP=")

	e.exec.reset()
	e.del(id, pod)
	if dels := e.exec.of("DEL"); len(dels) == 0 {
		t.Error("DEL ran no delegate")
	}
	e.wantLinks()
}

// wantUndeclaredEvent fails unless pod has an UndeclaredCapability Warning
// containing every part.
func (e *env) wantUndeclaredEvent(pod *corev1.Pod, parts ...string) {
	e.t.Helper()
	evs := e.events.of(corev1.EventTypeWarning, kube.ReasonUndeclaredCapability)
next:
	for _, ev := range evs {
		for _, p := range parts {
			if ev.Pod != pod.Namespace+"/"+pod.Name || !strings.Contains(ev.Message, p) {
				continue next
			}
		}
		return
	}
	e.t.Errorf("no %s Warning on %s/%s containing %q; have %+v", kube.ReasonUndeclaredCapability, pod.Namespace, pod.Name, parts, evs)
}

// TestUndeclaredCapabilitiesRefused: by default the same ADD fails before
// any delegate runs, naming the key and the spec section, and the same
// hot-plug is not attached.
func TestUndeclaredCapabilitiesRefused(t *testing.T) {
	e := newEnv(t, nil)
	e.undeclaredNADs()
	pod := e.podWithNetworks("[" + dncElement + "]")
	id := "ctr-" + cnitest.UniqueName("")
	_, err := e.eng.Add(context.Background(), e.req(api.CmdAdd, id, pod))
	if err == nil || !strings.Contains(err.Error(), `field "mac": needs runtimeConfig "mac"`) || !strings.Contains(err.Error(), "§4.1.2.1.4.2") {
		t.Fatalf("ADD: %v, want the refusal of \"mac\" (spec §4.1.2.1.4.2)", err)
	}
	if n := len(e.exec.of("ADD")); n != 0 {
		t.Errorf("%d delegate ADDs ran, want none", n)
	}

	pod2 := e.podWithNetworks("[]")
	id2 := "ctr-" + cnitest.UniqueName("")
	e.add(id2, pod2)
	_, _, err = e.hotPlug(pod2, "["+routeElement+"]")
	if err == nil || !strings.Contains(err.Error(), "§4.1.2.1.3.2") {
		t.Errorf("hot-plug: %v, want the refusal of \"ips\" (spec §4.1.2.1.3.2)", err)
	}
	if n := len(e.events.of(corev1.EventTypeWarning, kube.ReasonUndeclaredCapability)); n != 0 {
		t.Errorf("%d UndeclaredCapability Warnings, want none", n)
	}
	e.del(id2, pod2)
}

// hostVeth makes a veth pair in the host's namespace (where the plugins
// run), both ends up, removed when the test ends, and returns the first
// end's name: a macvlan master.
func hostVeth(t *testing.T) string {
	t.Helper()
	name := cnitest.UniqueName("mnu")
	la := netlink.NewLinkAttrs()
	la.Name = name
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: name + "p"}); err != nil {
		t.Fatalf("veth %s: %v", name, err)
	}
	cnitest.DeleteLinkAtCleanup(t, name)
	for _, n := range []string{name, name + "p"} {
		l, err := netlink.LinkByName(n)
		if err == nil {
			err = netlink.LinkSetUp(l)
		}
		if err != nil {
			t.Fatalf("set %s up: %v", n, err)
		}
	}
	return name
}

// TestUndeclaredCapabilitiesPeerNADs: the peers' NADs exactly as their e2e
// suites write them (macvlan; multus-dynamic-networks-controller's
// e2e_test.go macvlanNetworkWithoutIPAM and macvlanNetworkWitStaticIPAM,
// Multus's default-route1.yml.j2) under undeclaredCapabilities: multus.
// The controller's pod (tenant-network on net1) gets tenant-network-ipam
// hot-plugged on ens202 with the address and the MAC it asks for (static
// IPAM from runtimeConfig "ips", tuning from CNI_ARGS MAC=), then
// tenant-network on ens58 with a MAC (macvlan from CNI_ARGS MAC=); Multus's
// default-route-worker1 gets 10.1.1.21/24 on net1 (static IPAM from CNI_ARGS
// IP=) and its default route via 10.1.1.254 there.
func TestUndeclaredCapabilitiesPeerNADs(t *testing.T) {
	multus := func(o *envOptions) { o.Policy.UndeclaredCapabilities = podnetworks.MultusUndeclared }
	e := newEnv(t, multus)
	master := hostVeth(t)
	e.nads.put(podNS, "tenant-network", fmt.Sprintf(`{"cniVersion":"0.3.0","disableCheck":true,"plugins":[{"type":"macvlan","master":%q,"mode":"bridge"}]}`, master), nil)
	e.nads.put(podNS, "tenant-network-ipam", fmt.Sprintf(`{"cniVersion":"0.3.0","disableCheck":true,"name":"tenant-network-ipam","plugins":[`+
		`{"type":"macvlan","capabilities":{"ips":true},"master":%q,"mode":"bridge","ipam":{"type":"static"}},{"type":"tuning"}]}`, master), nil)
	net1 := `{"name":"tenant-network","namespace":"ns1","interface":"net1"}`
	pod := e.podWithNetworks("[" + net1 + "]")
	id := "ctr-" + cnitest.UniqueName("")
	e.add(id, pod)

	ipam := `{"name":"tenant-network-ipam","namespace":"ns1","ips":["10.10.10.111/24"],"interface":"ens202","mac":"02:03:04:05:06:07"}`
	ens58 := `{"name":"tenant-network","namespace":"ns1","interface":"ens58","mac":"02:03:04:05:06:08"}`
	pod, _ = e.mustHotPlug(pod, "["+net1+","+ipam+","+ens58+"]")
	if got := e.addrs("ens202"); !slices.Equal(got, []string{"10.10.10.111/24"}) {
		t.Errorf("ens202 addresses %q, want 10.10.10.111/24", got)
	}
	for ifName, want := range map[string]string{"ens202": "02:03:04:05:06:07", "ens58": "02:03:04:05:06:08"} {
		l, err := cnitest.Handle(t, e.netns).LinkByName(ifName)
		if err != nil {
			t.Fatal(err)
		}
		if mac := l.Attrs().HardwareAddr.String(); mac != want {
			t.Errorf("%s MAC %s, want %s", ifName, mac, want)
		}
	}
	e.wantUndeclaredEvent(pod, podNS+"/tenant-network-ipam", `"mac"`)
	e.wantUndeclaredEvent(pod, podNS+"/tenant-network", `"mac"`)
	e.del(id, pod)

	d := newEnv(t, multus)
	d.nads.put(podNS, "default-route-config", fmt.Sprintf(`{"cniVersion":"0.4.0","plugins":[{"type":"macvlan","master":%q,"mode":"bridge","ipam":{"type":"static"}}]}`, master), nil)
	w1 := d.podWithNetworks(`[{"name":"default-route-config","ips":["10.1.1.21/24"],"default-route":["10.1.1.254"]}]`)
	d.add("ctr-"+cnitest.UniqueName(""), w1)
	if got := d.addrs("net1"); !slices.Equal(got, []string{"10.1.1.21/24"}) {
		t.Errorf("default-route-worker1 net1 addresses %q, want 10.1.1.21/24", got)
	}
	defaults := d.defaultRoutes()
	if want := []string{"10.1.1.254 dev net1"}; !slices.Equal(defaults, want) {
		t.Errorf("default routes of default-route-worker1 %q, want %q", defaults, want)
	}
	d.wantUndeclaredEvent(w1, podNS+"/default-route-config", `"ips"`)
}
