package attach

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/vishvananda/netlink"

	"github.com/multinet/multinet/internal/node/cniserver/api"
	"github.com/multinet/multinet/internal/node/kube"
	"github.com/multinet/multinet/internal/node/state"
	"github.com/multinet/multinet/internal/testing/cnitest"
)

// attachment is a network and the interface it should get.
type attachment struct{ network, ifName string }

// ADD attaches the default network on CNI_IFNAME first (§6.2), then every
// selected network in annotation order, in both annotation forms (§4.1.1,
// §4.1.2): explicit interfaces (§4.1.2.1.5) are kept and generated names
// net1, net2, … skip them; a network may be selected twice (§4.2). The
// runtime gets the default network's result in its own cniVersion (§7.1),
// the record holds every attachment with its result, network-status is
// written once with "default": true only on the default entry (§5.2, §5.3.6)
// and each selected attachment gets an AddedInterface Event.
func TestAddDefaultAndSelectedNetworks(t *testing.T) {
	tests := []struct {
		name     string
		networks string
		want     []attachment
	}{
		{
			name:     "comma form §4.1.1",
			networks: "net-a, net-b@net1, ns1/net-c",
			want:     []attachment{{"ns1/net-a", "net2"}, {"ns1/net-b", "net1"}, {"ns1/net-c", "net3"}},
		},
		{
			name:     "JSON form §4.1.2, same network twice §4.2",
			networks: `[{"name":"net-a"},{"name":"net-b","interface":"net1"},{"name":"net-c","namespace":"ns1"},{"name":"net-a","interface":"extra0"}]`,
			want:     []attachment{{"ns1/net-a", "net2"}, {"ns1/net-b", "net1"}, {"ns1/net-c", "net3"}, {"ns1/net-a", "extra0"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			for _, n := range []string{"net-a", "net-b", "net-c"} {
				e.bridgeNAD(n)
			}
			pod := e.podWithNetworks(tt.networks)
			id := "ctr-" + cnitest.UniqueName("")
			out := e.add(id, pod)

			want := append([]attachment{{e.defaultNet, "eth0"}}, tt.want...)
			if got := ifNames(e.exec.of("ADD")); !slices.Equal(got, wantIfNames(want)) {
				t.Errorf("delegate ADD order = %q, want %q (default network first, §6.2)", got, wantIfNames(want))
			}
			e.wantLinks(wantIfNames(want)...)

			// The runtime's result: the default network's, in cniVersion 0.4.0.
			var res struct {
				CNIVersion string `json:"cniVersion"`
				Interfaces []struct {
					Name    string `json:"name"`
					Sandbox string `json:"sandbox"`
				} `json:"interfaces"`
				IPs []struct {
					Address string `json:"address"`
				} `json:"ips"`
			}
			if err := json.Unmarshal(out, &res); err != nil {
				t.Fatalf("result %s: %v", out, err)
			}
			if res.CNIVersion != "0.4.0" {
				t.Errorf("result cniVersion = %q, want the request's 0.4.0", res.CNIVersion)
			}
			if len(res.IPs) != 1 || !strings.HasPrefix(res.IPs[0].Address, "10.200.1.") {
				t.Errorf("result ips = %+v, want one address of the default network 10.200.1.0/24", res.IPs)
			}
			for _, i := range res.Interfaces {
				if i.Sandbox != "" && i.Name != "eth0" {
					t.Errorf("result has sandbox interface %q of another network", i.Name)
				}
			}

			rec, err := e.store.Load(id)
			if err != nil {
				t.Fatal(err)
			}
			if !rec.Complete || len(rec.Attachments) != len(want) {
				t.Fatalf("record complete=%v with %d attachments, want complete with %d", rec.Complete, len(rec.Attachments), len(want))
			}
			for i, a := range rec.Attachments {
				if a.Network != want[i].network || a.IfName != want[i].ifName || a.Default != (i == 0) {
					t.Errorf("record attachment %d = %s@%s default=%v, want %s@%s default=%v", i, a.Network, a.IfName, a.Default, want[i].network, want[i].ifName, i == 0)
				}
				if a.Phase != state.PhaseAdded || len(a.Result) == 0 {
					t.Errorf("record attachment %d: phase %q, result %q; want %q with a result", i, a.Phase, a.Result, state.PhaseAdded)
				}
			}
			if rec.PodNamespace != pod.Namespace || rec.PodName != pod.Name || rec.PodUID != string(pod.UID) || rec.Netns != e.netns.Path() {
				t.Errorf("record pod %s/%s uid %s netns %s, want %s/%s %s %s", rec.PodNamespace, rec.PodName, rec.PodUID, rec.Netns, pod.Namespace, pod.Name, pod.UID, e.netns.Path())
			}

			list := e.networkStatus(pod)
			if len(list) != len(want) {
				t.Fatalf("network-status has %d entries, want %d", len(list), len(want))
			}
			for i, s := range list {
				if s.Name != want[i].network || s.Interface != want[i].ifName || s.Default != (i == 0) {
					t.Errorf("network-status[%d] = %s@%s default=%v, want %s@%s default=%v", i, s.Name, s.Interface, s.Default, want[i].network, want[i].ifName, i == 0)
				}
				if len(s.IPs) != 1 || s.Mac == "" {
					t.Errorf("network-status[%d] ips %q mac %q, want one IP and a MAC", i, s.IPs, s.Mac)
				}
				if (len(s.DefaultRoute) > 0) != (i == 0) {
					t.Errorf("network-status[%d] default-route %q: want it on the default network only", i, s.DefaultRoute)
				}
			}

			if got := e.events.of("Normal", kube.ReasonAddedInterface); len(got) != len(tt.want) {
				t.Errorf("AddedInterface events = %+v, want %d", got, len(tt.want))
			}
			if got := e.events.of("Warning", kube.ReasonAttachFailed); len(got) != 0 {
				t.Errorf("unexpected Warning events %+v", got)
			}
			e.wantLeases(e.defaultNet, 1)
			e.wantLeases("net-b", 1)
		})
	}
}

func wantIfNames(as []attachment) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.ifName
	}
	return out
}

// A failing attachment fails the whole ADD at once (§7.2): the attachments
// made before it, the default network's included, and the failed one are
// torn down in reverse order, later ones are never attempted, the error and
// a Warning Event name the network, the plugin and the reason, and the
// record is left empty so that the runtime's DEL has nothing to do. A plugin
// binary missing from CNI_PATH fails the ADD before any delegate runs (its
// config list could not be DELeted either) and leaves an empty record too.
func TestAddFailureTearsDownEarlierAttachments(t *testing.T) {
	tests := []struct {
		name string
		// netB creates NAD ns1/net-b that fails and returns its CNI network
		// name and the number of leases in it not made by this pod.
		netB       func(e *env) (string, int)
		wantPlugin string
		wantReason string
		// wantAdd and wantDel are the delegate invocations' CNI_IFNAMEs.
		wantAdd, wantDel []string
	}{
		{
			name: "IPAM exhausted",
			netB: func(e *env) (string, int) {
				k := e.nextSubnet()
				ip := fmt.Sprintf("10.200.%d.9", k)
				rng := fmt.Sprintf(`{"subnet":"10.200.%d.0/24","rangeStart":%q,"rangeEnd":%q}`, k, ip, ip)
				e.nads.put(podNS, "net-b", e.bridgeConfRange("net-b", rng, ""), nil)
				cnitest.WriteFile(t, filepath.Join(e.ipamDir, "net-b"), ip, []byte("other-container\r\neth0"))
				return "net-b", 1
			},
			wantPlugin: "bridge",
			wantReason: "no IP addresses available",
			wantAdd:    []string{"eth0", "net1", "net2"},
			wantDel:    []string{"net2", "net1", "eth0"},
		},
		{
			name: "plugin binary missing",
			netB: func(e *env) (string, int) {
				c := strings.Replace(e.bridgeConf("net-b", ""), `}]}`, `},{"type":"mnu-no-such-plugin"}]}`, 1)
				e.nads.put(podNS, "net-b", c, nil)
				return "net-b", 0
			},
			wantPlugin: "mnu-no-such-plugin",
			wantReason: "failed to find plugin",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			e.bridgeNAD("net-a")
			netB, foreign := tt.netB(e)
			e.bridgeNAD("net-c")
			pod := e.podWithNetworks("net-a,net-b,net-c")
			id := "ctr-" + cnitest.UniqueName("")

			_, err := e.eng.Add(context.Background(), e.req(api.CmdAdd, id, pod))
			var te *types.Error
			if !errors.As(err, &te) {
				t.Fatalf("ADD error = %v (%T), want a *types.Error", err, err)
			}
			for _, s := range []string{"ns1/net-b", tt.wantPlugin, tt.wantReason} {
				if !strings.Contains(te.Msg, s) {
					t.Errorf("ADD error %q does not name %q", te.Msg, s)
				}
			}
			if got := ifNames(e.exec.of("ADD")); !slices.Equal(got, tt.wantAdd) {
				t.Errorf("delegate ADDs = %q, want %q (net-c never attempted)", got, tt.wantAdd)
			}
			if got := ifNames(e.exec.of("DEL")); !slices.Equal(got, tt.wantDel) {
				t.Errorf("delegate DELs = %q, want %q (reverse order)", got, tt.wantDel)
			}
			e.wantLinks()
			e.wantLeases(e.defaultNet, 0)
			e.wantLeases("net-a", 0)
			e.wantLeases(netB, foreign)
			e.wantLeases("net-c", 0)

			warnings := e.events.of("Warning", kube.ReasonAttachFailed)
			if len(warnings) != 1 || !strings.Contains(warnings[0].Message, "ns1/net-b") || warnings[0].Pod != podNS+"/"+pod.Name {
				t.Errorf("Warning events = %+v, want one on the pod naming ns1/net-b", warnings)
			}
			if calls := e.status.all(); len(calls) != 0 {
				t.Errorf("network-status written after a failed ADD: %+v", calls)
			}
			rec, err := e.store.Load(id)
			switch {
			case err != nil:
				t.Fatal(err)
			case len(rec.Attachments) != 0 || rec.Complete:
				t.Errorf("record after failed ADD: %d attachments, complete=%v; want empty", len(rec.Attachments), rec.Complete)
			}

			// The runtime's DEL after the failed ADD, with the API server
			// down: nothing left to run.
			e.exec.reset()
			e.pods.setErr(errors.New("API server down"))
			e.del(id, pod)
			if got := ifNames(e.exec.of("")); len(got) != 0 {
				t.Errorf("DEL after the failed ADD ran delegates on %q, want none", got)
			}
			if _, err := e.store.Load(id); !errors.Is(err, state.ErrNotFound) {
				t.Errorf("record after DEL: %v, want ErrNotFound", err)
			}
		})
	}
}

// runtimeConfig keys of a selection element reach the delegates only through
// a plugin declaring the capability; when none does, ADD fails before any
// delegate runs and the error names the key (§4.1.2.1.3.2, §4.1.2.1.4.2).
func TestAddCapabilities(t *testing.T) {
	tests := []struct {
		name    string
		config  func(e *env) string
		element string
		wantErr string
		check   func(t *testing.T, e *env)
	}{
		{
			name:    "ips without capability §4.1.2.1.3.2",
			config:  func(e *env) string { return e.bridgeConf("net-x", "") },
			element: `{"name":"net-x","ips":["10.200.77.5/24"]}`,
			wantErr: `"ips"`,
		},
		{
			name:    "mac without capability §4.1.2.1.4.2",
			config:  func(e *env) string { return e.bridgeConf("net-x", "") },
			element: `{"name":"net-x","mac":"02:00:00:00:00:42"}`,
			wantErr: `"mac"`,
		},
		{
			name: "ips to static IPAM",
			config: func(e *env) string {
				br := cnitest.UniqueName("mnu")
				cnitest.DeleteLinkAtCleanup(t, br)
				return fmt.Sprintf(`{"cniVersion":"1.0.0","name":"net-x","plugins":[{"type":"bridge","bridge":%q,"capabilities":{"ips":true},"ipam":{"type":"static"}}]}`, br)
			},
			element: `{"name":"net-x","ips":["10.200.77.5/24"]}`,
			check: func(t *testing.T, e *env) {
				wantAddr(t, e, "net1", "10.200.77.5/24")
			},
		},
		{
			name: "mac to tuning",
			config: func(e *env) string {
				c := e.bridgeConf("net-x", "")
				return strings.Replace(c, `}]}`, `},{"type":"tuning","capabilities":{"mac":true}}]}`, 1)
			},
			element: `{"name":"net-x","mac":"02:00:00:00:00:42"}`,
			check: func(t *testing.T, e *env) {
				l, err := cnitest.Handle(t, e.netns).LinkByName("net1")
				if err != nil {
					t.Fatal(err)
				}
				if got := l.Attrs().HardwareAddr.String(); got != "02:00:00:00:00:42" {
					t.Errorf("net1 MAC = %s, want the requested 02:00:00:00:00:42", got)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, nil)
			e.nads.put(podNS, "net-x", tt.config(e), nil)
			pod := e.podWithNetworks("[" + tt.element + "]")
			id := "ctr-" + cnitest.UniqueName("")
			_, err := e.eng.Add(context.Background(), e.req(api.CmdAdd, id, pod))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("ADD: %v", err)
				}
				tt.check(t, e)
				e.del(id, pod)
				return
			}
			var te *types.Error
			if !errors.As(err, &te) || !strings.Contains(te.Msg, tt.wantErr) || !strings.Contains(te.Msg, "capabilit") {
				t.Fatalf("ADD error = %v, want a CNI error naming capability %s", err, tt.wantErr)
			}
			if calls := e.exec.of(""); len(calls) != 0 {
				t.Errorf("delegates ran before the capability check: %+v", calls)
			}
			if rec, err := e.store.Load(id); err != nil || len(rec.Attachments) != 0 {
				t.Errorf("record after a planning failure = %+v, %v; want one with no attachments (nothing attempted)", rec, err)
			}
			if w := e.events.of("Warning", kube.ReasonAttachFailed); len(w) != 1 || !strings.Contains(w[0].Message, tt.wantErr) {
				t.Errorf("Warning events = %+v, want one naming %s", w, tt.wantErr)
			}
			e.wantLinks()
		})
	}
}

// wantAddr fails t unless interface ifName of the env's netns has addr.
func wantAddr(t *testing.T, e *env, ifName, addr string) {
	t.Helper()
	h := cnitest.Handle(t, e.netns)
	l, err := h.LinkByName(ifName)
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := h.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range addrs {
		got = append(got, a.IPNet.String())
	}
	if !slices.Contains(got, addr) {
		t.Errorf("addresses of %s = %q, want %s", ifName, got, addr)
	}
}

// "default-route" (§4.1.2.1.9) moves the pod's default route to the selected
// attachment, through the listed gateway or, for an empty list, the gateway
// of the attachment's CNI result; the default network loses its own, and
// network-status reports "default-route" on that attachment only (§5.3.7.4).
func TestAddDefaultRoute(t *testing.T) {
	for _, gws := range []string{`["PREFIX.1"]`, `[]`} {
		t.Run("default-route "+gws, func(t *testing.T) {
			e := newEnv(t, nil)
			prefix := e.bridgeNAD("net-a")
			e.bridgeNAD("net-b")
			list := strings.ReplaceAll(gws, "PREFIX", prefix)
			pod := e.podWithNetworks(fmt.Sprintf(`[{"name":"net-b"},{"name":"net-a","default-route":%s}]`, list))
			e.add("ctr-"+cnitest.UniqueName(""), pod)

			defaults := e.defaultRoutes()
			if want := []string{prefix + ".1 dev net2"}; !slices.Equal(defaults, want) {
				t.Errorf("default routes in the pod = %q, want %q", defaults, want)
			}
			for _, s := range e.networkStatus(pod) {
				wantRoute := s.Name == "ns1/net-a"
				if got := slices.Equal(s.DefaultRoute, []string{prefix + ".1"}); got != wantRoute {
					t.Errorf("network-status %s default-route = %q; want %v", s.Name, s.DefaultRoute, wantRoute)
				}
				if !wantRoute && len(s.DefaultRoute) > 0 {
					t.Errorf("network-status %s has default-route %q", s.Name, s.DefaultRoute)
				}
			}
		})
	}
}

// A gateway that is not on any network of the attachment fails the ADD and
// tears everything down (§7.2), rather than leaving a pod without a default
// route.
func TestAddDefaultRouteUnreachableGateway(t *testing.T) {
	e := newEnv(t, nil)
	e.bridgeNAD("net-a")
	pod := e.podWithNetworks(`[{"name":"net-a","default-route":["192.0.2.1"]}]`)
	_, err := e.eng.Add(context.Background(), e.req(api.CmdAdd, "ctr-"+cnitest.UniqueName(""), pod))
	if err == nil || !strings.Contains(err.Error(), "192.0.2.1") || !strings.Contains(err.Error(), "ns1/net-a") {
		t.Fatalf("ADD error = %v, want one naming the network and the gateway", err)
	}
	e.wantLinks()
	e.wantLeases(e.defaultNet, 0)
	e.wantLeases("net-a", 0)
}

// An ADD of a container that already has attachments (the runtime retried
// after a timeout) tears the earlier ones down first: the pod ends up with
// one set of interfaces and addresses.
func TestAddAgainTearsDownEarlierAdd(t *testing.T) {
	e := newEnv(t, nil)
	e.bridgeNAD("net-a")
	pod := e.podWithNetworks("net-a")
	id := "ctr-" + cnitest.UniqueName("")
	e.add(id, pod)
	e.exec.reset()
	e.add(id, pod)
	if got, want := ifNames(e.exec.of("DEL")), []string{"net1", "eth0"}; !slices.Equal(got, want) {
		t.Errorf("second ADD first DELed %q, want %q", got, want)
	}
	e.wantLinks("eth0", "net1")
	e.wantLeases(e.defaultNet, 1)
	e.wantLeases("net-a", 1)
}

// With AsyncStatus, ADD returns before network-status is written; Wait
// returns once it is, and it is written once all the same.
func TestAddAsyncStatus(t *testing.T) {
	e := newEnv(t, func(o *envOptions) { o.AsyncStatus = true })
	e.bridgeNAD("net-a")
	pod := e.podWithNetworks("net-a")
	e.add("ctr-"+cnitest.UniqueName(""), pod)
	if err := e.pub.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if list := e.networkStatus(pod); len(list) != 2 || !list[0].Default || list[1].Name != "ns1/net-a" {
		t.Errorf("network-status = %+v", list)
	}
}
