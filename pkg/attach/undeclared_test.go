package attach

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/multinet/multinet/internal/cnitest"
	"github.com/multinet/multinet/pkg/cniserver/api"
	"github.com/multinet/multinet/pkg/kube"
	"github.com/multinet/multinet/pkg/podnetworks"
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
	e := newEnv(t, func(o *Options) { o.Policy.UndeclaredCapabilities = podnetworks.MultusUndeclared })
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
