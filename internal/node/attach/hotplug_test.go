package attach

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"

	nadv1 "github.com/multinet/multinet/api/k8s.cni.cncf.io/v1"
	"github.com/multinet/multinet/internal/node/hotplug"
	"github.com/multinet/multinet/internal/node/kube"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/internal/testing/cnitest"
	"github.com/multinet/multinet/pkg/spec/selection"
	"github.com/multinet/multinet/pkg/spec/status"
)

// withNetworks returns a copy of pod whose networks annotation is networks
// ("-": no annotation), registered as the pod's current version.
func (e *env) withNetworks(pod *corev1.Pod, networks string) *corev1.Pod {
	p := pod.DeepCopy()
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	if networks == "-" {
		delete(p.Annotations, selection.NetworksAnnotation)
	} else {
		p.Annotations[selection.NetworksAnnotation] = networks
	}
	e.pods.add(p)
	return p
}

// hotPlug changes pod's annotation to networks and runs HotPlug on it.
func (e *env) hotPlug(pod *corev1.Pod, networks string) (*corev1.Pod, *hotplug.Result, error) {
	p := e.withNetworks(pod, networks)
	res, err := e.hp.HotPlug(context.Background(), p)
	return p, res, err
}

// mustHotPlug is hotPlug that fails the test on error.
func (e *env) mustHotPlug(pod *corev1.Pod, networks string) (*corev1.Pod, *hotplug.Result) {
	e.t.Helper()
	p, res, err := e.hotPlug(pod, networks)
	if err != nil {
		e.t.Fatalf("hot-plug to %q: %v", networks, err)
	}
	return p, res
}

// addrs returns the IPv4 addresses (CIDR) of interface ifName in the pod.
func (e *env) addrs(ifName string) []string {
	e.t.Helper()
	h := cnitest.Handle(e.t, e.netns)
	l, err := h.LinkByName(ifName)
	if err != nil {
		e.t.Fatalf("link %s: %v", ifName, err)
	}
	as, err := h.AddrList(l, netlink.FAMILY_V4)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, a := range as {
		out = append(out, a.IPNet.String())
	}
	return out
}

// lastStatus decodes the last network-status PATCH of pod.
func (e *env) lastStatus(pod *corev1.Pod) []status.NetworkStatus {
	e.t.Helper()
	var last *statusCall
	for _, c := range e.status.all() {
		if c.Namespace == pod.Namespace && c.Name == pod.Name {
			last = &c
		}
	}
	if last == nil {
		e.t.Fatalf("no network-status PATCH of %s/%s", pod.Namespace, pod.Name)
	}
	list, err := status.Decode(last.Value)
	if err != nil {
		e.t.Fatalf("network-status %s: %v", last.Value, err)
	}
	return list
}

// wantSandbox checks that container id of pod has exactly the default
// network on eth0 and want: the pod's links, the record's attachments
// (all added, none pending) and the last network-status, compared as sets.
func (e *env) wantSandbox(id string, pod *corev1.Pod, want ...attachment) {
	t := e.t
	t.Helper()
	all := append([]attachment{{e.defaultNet, "eth0"}}, want...)
	e.wantLinks(wantIfNames(all)...)
	rec := e.record(id)
	var got []attachment
	for _, a := range rec.Attachments {
		got = append(got, attachment{a.Network, a.IfName})
		if a.Phase != state.PhaseAdded || a.Detach {
			t.Errorf("record attachment %s@%s: phase %s detach %v, want added", a.Network, a.IfName, a.Phase, a.Detach)
		}
	}
	if rec.HotPlug != nil {
		t.Errorf("record still has a hot-plug in progress: %+v", rec.HotPlug)
	}
	if !sameAttachments(got, all) {
		t.Errorf("record attachments = %v, want %v", got, all)
	}
	got = nil
	for _, s := range e.lastStatus(pod) {
		got = append(got, attachment{s.Name, s.Interface})
	}
	if !sameAttachments(got, all) {
		t.Errorf("network-status = %v, want %v", got, all)
	}
}

func sameAttachments(a, b []attachment) bool {
	key := func(x attachment) string { return x.network + "@" + x.ifName }
	ka, kb := make([]string, len(a)), make([]string, len(b))
	for i := range a {
		ka[i] = key(a[i])
	}
	for i := range b {
		kb[i] = key(b[i])
	}
	slices.Sort(ka)
	slices.Sort(kb)
	return slices.Equal(ka, kb)
}

// statusIPs returns the IPs network-status lists for ifName.
func statusIPs(list []status.NetworkStatus, ifName string) []string {
	for _, s := range list {
		if s.Interface == ifName {
			return s.IPs
		}
	}
	return nil
}

// crashedHotPlug hot-plugs pod to networks and then puts container id's
// record back as it was on disk when the delegate's command (ADD or DEL)
// on ifName began: what a multinetd killed at that moment leaves. It fails
// the test when that delegate call never came.
func (e *env) crashedHotPlug(id string, pod *corev1.Pod, networks, command, ifName string) (*corev1.Pod, *hotplug.Result) {
	t := e.t
	t.Helper()
	path := e.store.Dir() + "/" + id + ".json"
	var intent []byte
	e.exec.before = func(c call) {
		if c.Command == command && c.IfName == ifName {
			b, err := os.ReadFile(path)
			if err != nil {
				t.Error(err)
			}
			intent = b
		}
	}
	pod, res := e.mustHotPlug(pod, networks)
	e.exec.before = nil
	if intent == nil {
		t.Fatalf("the %s on %s never ran", command, ifName)
	}
	if err := os.WriteFile(path, intent, 0o600); err != nil {
		t.Fatal(err)
	}
	return pod, res
}

// restart replaces the engine and hot-plug with new ones over the same
// records and options, as a restarted multinetd, and returns the new
// hot-plug.
func (e *env) restart() *hotplug.HotPlugger {
	e.t.Helper()
	e.eng, e.hp = newHotPlugEngine(e.t, e.eng.opts, e.pub)
	e.exec.reset()
	return e.hp
}

// Hot-plug: adding one and then two networks to a running pod attaches
// exactly the added elements, on the requested interface or the first free
// netN, with the requested IP and MAC; the interfaces the pod had keep
// their names and addresses and see no delegate call; network-status lists
// every attachment; each added one gets an AddedInterface Event.
func TestHotPlugAddOneThenTwo(t *testing.T) {
	e := newEnv(t, nil)
	e.bridgeNAD("net-a")
	e.bridgeNAD("net-b")
	sub := e.bridgeNAD("net-c")
	brS := cnitest.UniqueName("mnu")
	cnitest.DeleteLinkAtCleanup(t, brS)
	e.nads.put(podNS, "net-s", `{"cniVersion":"1.0.0","name":"net-s","plugins":[`+
		`{"type":"bridge","bridge":"`+brS+`","capabilities":{"ips":true},"ipam":{"type":"static"}},`+
		`{"type":"tuning","capabilities":{"mac":true}}]}`, nil)

	pod := e.podWithNetworks("net-a")
	id := "ctr-" + cnitest.UniqueName("")
	e.add(id, pod)
	eth0, net1 := e.addrs("eth0"), e.addrs("net1")
	e.exec.reset()

	pod, res := e.mustHotPlug(pod, "net-a, net-b")
	if !slices.Equal(res.Added, []string{"ns1/net-b@net2"}) || len(res.Removed) != 0 {
		t.Errorf("hot-plug result %+v, want net-b added on net2", res)
	}
	e.wantSandbox(id, pod, attachment{"ns1/net-a", "net1"}, attachment{"ns1/net-b", "net2"})
	if got := ifNames(e.exec.of("")); !slices.Equal(got, []string{"net2"}) {
		t.Errorf("delegate calls on %q, want only the ADD of net2", got)
	}

	e.exec.reset()
	networks := `[{"name":"net-a"},{"name":"net-b"},{"name":"net-c","interface":"data0"},` +
		`{"name":"net-s","ips":["192.0.2.10/24"],"mac":"02:00:00:00:12:34"}]`
	pod, res = e.mustHotPlug(pod, networks)
	if !slices.Equal(res.Added, []string{"ns1/net-c@data0", "ns1/net-s@net3"}) {
		t.Errorf("hot-plug result %+v, want net-c on data0 and net-s on net3", res)
	}
	e.wantSandbox(id, pod, attachment{"ns1/net-a", "net1"}, attachment{"ns1/net-b", "net2"},
		attachment{"ns1/net-c", "data0"}, attachment{"ns1/net-s", "net3"})
	for _, c := range e.exec.of("") {
		if c.IfName != "data0" && c.IfName != "net3" {
			t.Errorf("delegate %s ran on %s, which the hot-plug did not add", c.Command, c.IfName)
		}
	}
	if got := e.addrs("eth0"); !slices.Equal(got, eth0) {
		t.Errorf("eth0 addresses %q, want %q as before", got, eth0)
	}
	if got := e.addrs("net1"); !slices.Equal(got, net1) {
		t.Errorf("net1 addresses %q, want %q as before", got, net1)
	}
	if got := e.addrs("net3"); !slices.Equal(got, []string{"192.0.2.10/24"}) {
		t.Errorf("net3 addresses %q, want the requested 192.0.2.10/24", got)
	}
	l, err := cnitest.Handle(t, e.netns).LinkByName("net3")
	if err != nil {
		t.Fatal(err)
	}
	if mac := l.Attrs().HardwareAddr.String(); mac != "02:00:00:00:12:34" {
		t.Errorf("net3 MAC %s, want the requested 02:00:00:00:12:34", mac)
	}
	list := e.lastStatus(pod)
	if ips := statusIPs(list, "data0"); len(ips) != 1 || !strings.HasPrefix(ips[0], sub+".") {
		t.Errorf("network-status IPs of data0 %q, want one of %s.0/24", ips, sub)
	}
	if ips := statusIPs(list, "net3"); !slices.Equal(ips, []string{"192.0.2.10"}) {
		t.Errorf("network-status IPs of net3 %q, want 192.0.2.10", ips)
	}
	for _, s := range list {
		if s.Default != (s.Interface == "eth0") {
			t.Errorf("network-status %s default=%v", s.Interface, s.Default)
		}
	}
	if got := len(e.events.of(corev1.EventTypeNormal, kube.ReasonAddedInterface)); got != 1+1+2 {
		t.Errorf("AddedInterface Events %d, want 4 (ADD's net1, then net2, data0, net3)", got)
	}
	if rec := e.record(id); rec.NetworkStatus == nil || rec.NetworkStatus.State != state.StatusLanded {
		t.Errorf("record network-status %+v, want landed", rec.NetworkStatus)
	}
}

// Hot-plug: removing an element detaches exactly its attachment, whether
// its interface name was generated or requested; its address is released;
// the remaining attachments keep their interface names (net2 stays net2
// although the annotation would now name it net1) and see no delegate
// call; a network added later gets the first free netN.
func TestHotPlugRemove(t *testing.T) {
	e := newEnv(t, nil)
	for _, n := range []string{"net-a", "net-b", "net-c"} {
		e.bridgeNAD(n)
	}
	pod := e.podWithNetworks("net-a, net-b, net-c@ext1")
	id := "ctr-" + cnitest.UniqueName("")
	e.add(id, pod)
	net2 := e.addrs("net2")
	e.exec.reset()

	// A generated name (net1).
	pod, res := e.mustHotPlug(pod, "net-b, net-c@ext1")
	if !slices.Equal(res.Removed, []string{"ns1/net-a@net1"}) || len(res.Added) != 0 {
		t.Errorf("hot-plug result %+v, want net-a@net1 removed", res)
	}
	e.wantSandbox(id, pod, attachment{"ns1/net-b", "net2"}, attachment{"ns1/net-c", "ext1"})
	e.wantLeases("net-a", 0)
	e.wantLeases("net-b", 1)
	if got := e.exec.of(""); len(got) != 1 || got[0].Command != "DEL" || got[0].IfName != "net1" {
		t.Errorf("delegate calls %+v, want the DEL of net1 only", got)
	}
	if got := e.addrs("net2"); !slices.Equal(got, net2) {
		t.Errorf("net2 addresses %q, want %q as before", got, net2)
	}

	// A requested name (ext1), the element given in the other form.
	e.exec.reset()
	pod, res = e.mustHotPlug(pod, `[{"name":"net-b","namespace":"ns1"}]`)
	if !slices.Equal(res.Removed, []string{"ns1/net-c@ext1"}) || len(res.Added) != 0 {
		t.Errorf("hot-plug result %+v, want net-c@ext1 removed only", res)
	}
	e.wantSandbox(id, pod, attachment{"ns1/net-b", "net2"})
	e.wantLeases("net-c", 0)

	// net1 is free again.
	pod, _ = e.mustHotPlug(pod, "net-b, net-a")
	e.wantSandbox(id, pod, attachment{"ns1/net-b", "net2"}, attachment{"ns1/net-a", "net1"})

	// No annotation at all: every element is removed; the default network stays.
	pod, _ = e.mustHotPlug(pod, "-")
	e.wantSandbox(id, pod)
	e.wantLeases("net-a", 0)
	e.wantLeases("net-b", 0)
	e.wantLeases(e.defaultNet, 1)
	if got := len(e.events.of(corev1.EventTypeNormal, kube.ReasonRemovedInterface)); got != 4 {
		t.Errorf("RemovedInterface Events %d, want 4", got)
	}
}

// Hot-plug: a hot-plug attach that fails in its delegate (the bridge ran,
// the next plugin failed) is rolled back: no interface, no address, no
// record entry, network-status unchanged; a NetworkHotPlugFailed Warning
// names the network; the pod's other attachments are untouched; the
// error asks for a retry, which succeeds once the delegate does.
func TestHotPlugFailedAttachRolledBack(t *testing.T) {
	e := newEnv(t, nil)
	e.bridgeNAD("net-a")
	br := cnitest.UniqueName("mnu")
	cnitest.DeleteLinkAtCleanup(t, br)
	e.nads.put(podNS, "net-t", `{"cniVersion":"1.0.0","name":"net-t","plugins":[{"type":"bridge","bridge":"`+br+`","ipam":{"type":"host-local","dataDir":"`+e.ipamDir+`","ranges":[[{"subnet":"10.200.90.0/24"}]]}},{"type":"tuning"}]}`, nil)
	pod := e.podWithNetworks("net-a")
	id := "ctr-" + cnitest.UniqueName("")
	e.add(id, pod)
	patches := len(e.status.all())

	var mu sync.Mutex
	failing := true
	e.exec.fail = func(c call) error {
		mu.Lock()
		defer mu.Unlock()
		if failing && c.Command == "ADD" && c.Plugin == "tuning" {
			return errors.New("injected tuning failure")
		}
		return nil
	}
	e.exec.reset()
	p, _, err := e.hotPlug(pod, "net-a, net-t")
	var he *hotplug.Error
	if !errors.As(err, &he) || !he.Retry || !strings.Contains(err.Error(), "injected tuning failure") {
		t.Fatalf("hot-plug error %v, want a *hotplug.Error to retry naming the delegate's failure", err)
	}
	if bridges := e.exec.of("ADD"); len(bridges) == 0 || bridges[0].Plugin != "bridge" {
		t.Fatalf("delegate ADDs %+v, want the bridge to have run", bridges)
	}
	e.wantLinks("eth0", "net1")
	e.wantLeases("net-t", 0)
	rec := e.record(id)
	if len(rec.Attachments) != 2 || rec.HotPlug != nil {
		t.Errorf("record attachments %d (hot-plug %+v), want the 2 of ADD and nothing pending", len(rec.Attachments), rec.HotPlug)
	}
	if got := len(e.status.all()); got != patches {
		t.Errorf("network-status PATCHes %d, want %d (nothing changed)", got, patches)
	}
	w := e.events.of(corev1.EventTypeWarning, kube.ReasonHotPlugFailed)
	if len(w) != 1 || !strings.Contains(w[0].Message, "ns1/net-t") || !strings.Contains(w[0].Message, "rolled back") {
		t.Errorf("Warnings %+v, want one NetworkHotPlugFailed naming ns1/net-t, rolled back", w)
	}

	mu.Lock()
	failing = false
	mu.Unlock()
	if _, err := e.hp.HotPlug(context.Background(), p); err != nil {
		t.Fatalf("retry: %v", err)
	}
	e.wantSandbox(id, p, attachment{"ns1/net-a", "net1"}, attachment{"ns1/net-t", "net2"})
	e.wantLeases("net-t", 1)
}

// Hot-plug: multinetd dies after a hot-plug's delegates ran and before its
// final save (the record on disk is its intent: the new attachment planned;
// or, dead while detaching, the removed one marked detach). A new multinetd
// (a new Engine over the same state) rolls the attach back, or finishes the
// detach, and converges to the annotation: no duplicate interface, no
// leaked address.
func TestHotPlugCrashThenConverge(t *testing.T) {
	e := newEnv(t, nil)
	for _, n := range []string{"net-a", "net-b", "net-c"} {
		e.bridgeNAD(n)
	}
	pod := e.podWithNetworks("net-a, net-b")
	id := "ctr-" + cnitest.UniqueName("")
	e.add(id, pod)

	// Dead when the last delegate of the hot-plug (the ADD of net-c) runs.
	pod, res := e.crashedHotPlug(id, pod, "net-b, net-c", "ADD", "net1")
	if !slices.Equal(res.Added, []string{"ns1/net-c@net1"}) || !slices.Equal(res.Removed, []string{"ns1/net-a@net1"}) {
		t.Fatalf("hot-plug result %+v", res)
	}
	crashed := e.record(id)
	if crashed.HotPlug == nil || !crashed.Attachments[len(crashed.Attachments)-1].HotPlugged || crashed.Attachments[len(crashed.Attachments)-1].Phase != state.PhasePlanned {
		t.Fatalf("intent record %+v, want a hot-plug in progress with net-c planned", crashed)
	}

	// The restart: a new engine over the same records.
	eng2 := e.restart()
	pod = e.withNetworks(pod, "net-b, net-c")
	if _, err := eng2.HotPlug(context.Background(), pod); err != nil {
		t.Fatalf("hot-plug after the restart: %v", err)
	}
	e.wantSandbox(id, pod, attachment{"ns1/net-b", "net2"}, attachment{"ns1/net-c", "net1"})
	e.wantLeases("net-a", 0)
	e.wantLeases("net-c", 1)
	if calls := e.exec.of(""); len(calls) != 2 || calls[0].Command != "DEL" || calls[1].Command != "ADD" {
		t.Errorf("delegate calls after the restart %+v, want the rollback DEL of net-c then its ADD", calls)
	}

	// Dead while detaching net-b: the record says detach; the restarted
	// multinetd runs its DEL again and forgets it.
	pod, _ = e.crashedHotPlug(id, pod, "net-c", "DEL", "net2")
	if r := e.record(id); r.HotPlug == nil || len(r.Attachments) != 3 || !r.Attachments[1].Detach {
		t.Fatalf("intent record %+v, want net-b marked detach", r)
	}
	eng3 := e.restart()
	if _, err := eng3.HotPlug(context.Background(), pod); err != nil {
		t.Fatalf("hot-plug after the second restart: %v", err)
	}
	e.wantSandbox(id, pod, attachment{"ns1/net-c", "net1"})
	e.wantLeases("net-b", 0)
	if calls := e.exec.of(""); len(calls) != 1 || calls[0].Command != "DEL" || calls[0].IfName != "net2" {
		t.Errorf("delegate calls after the second restart %+v, want the DEL of net2 only", calls)
	}
}

// Hot-plug: an annotation that flips back and forth converges to its last
// value: after each hot-plug the sandbox has exactly the attachments of
// the annotation, with one address each, never a duplicate interface.
// Hot-plug: a crash after a hot-plug detached an attachment but before
// it saved its result leaves the record's network-status listing the
// detached attachment. When the next hot-plug attaches the same network on
// the same interface again (the annotation flipped back), network-status
// lists it once, with its new address, not the detached one's entry too.
func TestHotPlugCrashThenSameNetworkBack(t *testing.T) {
	e := newEnv(t, nil)
	for _, n := range []string{"net-a", "net-b", "net-c"} {
		e.bridgeNAD(n)
	}
	pod := e.podWithNetworks("net-a, net-b")
	id := "ctr-" + cnitest.UniqueName("")
	e.add(id, pod)
	before := statusIPs(e.lastStatus(pod), "net1")

	// Dead during the ADD of net-c, after net-a (net1) was detached.
	pod, _ = e.crashedHotPlug(id, pod, "net-b, net-c", "ADD", "net1")
	eng2 := e.restart()
	pod = e.withNetworks(pod, "net-a, net-b")
	if _, err := eng2.HotPlug(context.Background(), pod); err != nil {
		t.Fatalf("hot-plug after the restart: %v", err)
	}
	e.wantSandbox(id, pod, attachment{"ns1/net-a", "net1"}, attachment{"ns1/net-b", "net2"})
	got, link := statusIPs(e.lastStatus(pod), "net1"), e.addrs("net1")
	if len(got) != 1 || len(link) != 1 || !strings.HasPrefix(link[0], got[0]+"/") {
		t.Errorf("network-status of net1 lists %v, the interface has %v (before the hot-plugs: %v)", got, link, before)
	}
	e.wantLeases("net-a", 1)
	e.wantLeases("net-c", 0)
}

func TestHotPlugFlipFlop(t *testing.T) {
	e := newEnv(t, nil)
	e.bridgeNAD("net-a")
	e.bridgeNAD("net-b")
	pod := e.podWithNetworks("net-a")
	id := "ctr-" + cnitest.UniqueName("")
	e.add(id, pod)
	for i := range 5 {
		pod, _ = e.mustHotPlug(pod, "net-a, net-b@flip")
		e.wantSandbox(id, pod, attachment{"ns1/net-a", "net1"}, attachment{"ns1/net-b", "flip"})
		e.wantLeases("net-b", 1)
		if i == 4 {
			break
		}
		pod, _ = e.mustHotPlug(pod, "net-a")
		e.wantSandbox(id, pod, attachment{"ns1/net-a", "net1"})
		e.wantLeases("net-b", 0)
	}
	e.wantLeases("net-a", 1)
	// The same value again changes nothing and runs no delegate.
	e.exec.reset()
	if res, err := e.hp.HotPlug(context.Background(), pod); res != nil || err != nil {
		t.Errorf("hot-plug of an unchanged annotation = %+v, %v; want nothing", res, err)
	}
	if calls := e.exec.of(""); len(calls) != 0 {
		t.Errorf("delegate calls %+v for an unchanged annotation", calls)
	}
}

// Hot-plug: the runtime's DEL after hot-plugs tears down everything the
// sandbox has, hot-plugged attachments included.
func TestHotPlugThenRuntimeDel(t *testing.T) {
	e := newEnv(t, nil)
	pod, id := e.addThree()
	pod, _ = e.mustHotPlug(pod, "net-b, net-c, net-a@late0")
	e.wantSandbox(id, pod, attachment{"ns1/net-b", "net2"}, attachment{"ns1/net-c", "net3"}, attachment{"ns1/net-a", "late0"})
	e.del(id, pod)
	e.wantLinks()
	e.wantNoLeases()
	if _, err := e.store.Load(id); !errors.Is(err, state.ErrNotFound) {
		t.Errorf("record after DEL: %v, want ErrNotFound", err)
	}
	if _, err := e.hp.HotPlug(context.Background(), e.withNetworks(pod, "net-a")); !errors.Is(err, hotplug.ErrNoSandbox) {
		t.Errorf("hot-plug after DEL: %v, want ErrNoSandbox", err)
	}
}

// Hot-plug: hot-plug never touches the default network, the runtime's
// interface or multinetd's defaultNetworks: an element may not take eth0
// or a defaultNetworks interface, removing every element leaves them, and
// no delegate ever runs on them.
func TestHotPlugLeavesDefaultNetworks(t *testing.T) {
	e := newDefaultNetsEnv(t, nil, nil)
	e.bridgeNAD("net-a")
	pod := e.podWithNetworks("net-a")
	id := "ctr-" + cnitest.UniqueName("")
	e.add(id, pod) // eth0, side-a net1, side-b net2, net-a net3
	base := []attachment{{globalNS + "/side-a", "net1"}, {otherNS + "/side-b", "net2"}}
	e.exec.reset()

	pod, _ = e.mustHotPlug(pod, "net-a, net-a@extra")
	e.wantSandbox(id, pod, append(base, attachment{"ns1/net-a", "net3"}, attachment{"ns1/net-a", "extra"})...)
	pod, _ = e.mustHotPlug(pod, "-")
	e.wantSandbox(id, pod, base...)
	_, _, err := e.hotPlug(pod, "net-a@eth0")
	if err == nil || !strings.Contains(err.Error(), "eth0") {
		t.Errorf("hot-plug of an element on eth0: %v, want an error naming eth0", err)
	}
	_, _, err = e.hotPlug(pod, "net-a@net1")
	if err == nil || !strings.Contains(err.Error(), "net1") {
		t.Errorf("hot-plug of an element on a defaultNetworks interface: %v, want an error naming net1", err)
	}
	for _, c := range e.exec.of("") {
		if c.IfName == "eth0" || c.IfName == "net1" || c.IfName == "net2" {
			t.Errorf("hot-plug ran delegate %s on %s", c.Command, c.IfName)
		}
	}
	e.wantSandbox(id, pod, base...)
}

// Hot-plug: what cannot be hot-plugged is refused, changes nothing, and is
// reported once per annotation value: a device network (resourceName), an
// element with "default-route", a missing NAD (a Warning at each attempt:
// it may be created), a namespace isolation violation; an annotation that
// does not parse changes nothing (never "nothing selected").
func TestHotPlugRefused(t *testing.T) {
	e := newEnv(t, func(o *envOptions) { o.Isolation = selection.IsolationPolicy{Enabled: true} })
	e.bridgeNAD("net-a")
	e.nads.put(podNS, "net-dev", e.bridgeConf("net-dev", ""), map[string]string{nadv1.ResourceNameAnnotation: "example.com/nic"})
	e.nads.put("other", "net-o", e.bridgeConf("net-o", ""), nil)
	pod := e.podWithNetworks("net-a")
	id := "ctr-" + cnitest.UniqueName("")
	e.add(id, pod)
	e.exec.reset()

	for _, tc := range []struct{ networks, want string }{
		{"net-a, net-dev", "needs a device"},
		{`[{"name":"net-a"},{"name":"net-a","interface":"gw0","default-route":[]}]`, "default-route"},
		{"net-a, missing", "not found"},
		{"net-a, other/net-o", "other"},
		{"net-a, BAD!", "networks"},
	} {
		_, _, err := e.hotPlug(pod, tc.networks)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("hot-plug to %q: %v, want an error containing %q", tc.networks, err, tc.want)
		}
		e.wantLinks("eth0", "net1")
	}
	if calls := e.exec.of(""); len(calls) != 0 {
		t.Errorf("refused hot-plugs ran delegates %+v", calls)
	}
	w := len(e.events.of(corev1.EventTypeWarning, kube.ReasonHotPlugFailed))
	if w != 5 {
		t.Errorf("NetworkHotPlugFailed Warnings %d, want one per refused value (5)", w)
	}
	// The same refused value again: no new Warning.
	_, _, err := e.hotPlug(pod, "net-a, net-dev")
	var he *hotplug.Error
	if !errors.As(err, &he) || he.Retry {
		t.Errorf("device network again: %v, want a refusal not to retry", err)
	}
	if got := len(e.events.of(corev1.EventTypeWarning, kube.ReasonHotPlugFailed)); got != w+1 {
		// net-dev was last warned before the others: news again.
		t.Errorf("Warnings %d after repeating an earlier value, want %d", got, w+1)
	}
	_, _, _ = e.hotPlug(pod, "net-a, net-dev")
	if got := len(e.events.of(corev1.EventTypeWarning, kube.ReasonHotPlugFailed)); got != w+1 {
		t.Errorf("Warnings %d after the same refused value twice in a row, want %d", got, w+1)
	}

	// The element that carries the pod's default route can be neither
	// removed nor changed.
	e.del(id, pod)
	pod = e.podWithNetworks(`[{"name":"net-a","default-route":[]}]`)
	id = "ctr-" + cnitest.UniqueName("")
	e.add(id, pod)
	for _, networks := range []string{"-", `[{"name":"net-a"}]`} {
		_, _, err := e.hotPlug(pod, networks)
		if err == nil || !strings.Contains(err.Error(), "cannot be removed") {
			t.Errorf("hot-plug of the default-route element to %q: %v, want a refusal", networks, err)
		}
		e.wantLinks("eth0", "net1")
	}
}

// A pod whose ADD is in flight has no sandbox hot-plug may change.
func TestHotPlugWaitsForADD(t *testing.T) {
	e := newEnv(t, nil)
	e.bridgeNAD("net-a")
	pod := e.podWithNetworks("net-a")
	id := "ctr-" + cnitest.UniqueName("")
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e.exec.before = func(c call) {
		if c.Command == "ADD" && c.IfName == "net1" {
			once.Do(func() { close(started) })
			<-release
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.add(id, pod)
	}()
	<-started
	if _, err := e.hp.HotPlug(context.Background(), e.withNetworks(pod, "-")); !errors.Is(err, hotplug.ErrNoSandbox) {
		t.Errorf("hot-plug during ADD: %v, want ErrNoSandbox", err)
	}
	close(release)
	<-done
	e.wantLinks("eth0", "net1")
}
