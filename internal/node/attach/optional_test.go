package attach

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/multinet/multinet/internal/node/kube"
	"github.com/multinet/multinet/internal/testing/cnitest"
	"github.com/multinet/multinet/pkg/spec/status"
)

// An optional value that cannot be published does not fail the pod:
// network-status (§5) leaves it out, the ADD succeeds, and a Warning Event
// names the network, the field and why (docs/decisions/attach.md "§5 — an
// unusable optional value is left out").

// wantIgnored fails the test unless exactly one Warning Event
// NetworkValueIgnored was posted on pod and its message contains every
// string of want; and unless no NetworkAttachFailed was posted.
func wantIgnored(t *testing.T, e *env, want ...string) {
	t.Helper()
	evs := e.events.of("Warning", kube.ReasonValueIgnored)
	if len(evs) != 1 {
		t.Fatalf("%s Warning Events = %+v, want 1", kube.ReasonValueIgnored, evs)
	}
	t.Logf("Warning %s: %s", evs[0].Reason, evs[0].Message)
	for _, w := range want {
		if !strings.Contains(evs[0].Message, w) {
			t.Errorf("Warning Event %q does not name %q", evs[0].Message, w)
		}
	}
	if f := e.events.of("Warning", kube.ReasonAttachFailed); len(f) != 0 {
		t.Errorf("ADD posted %s: %+v", kube.ReasonAttachFailed, f)
	}
}

// entry returns the network-status entry named name.
func entry(t *testing.T, list []status.NetworkStatus, name string) status.NetworkStatus {
	t.Helper()
	for _, s := range list {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("network-status has no entry %s: %+v", name, list)
	return status.NetworkStatus{}
}

// A delegate whose result lists a nameserver that is not an IP address
// (§5.3.7.1 "an array of IPv4 and/or IPv6 addresses"): that nameserver is
// left out of network-status, the rest of the entry is published.
func TestAddDropsNonIPNameserver(t *testing.T) {
	e := newEnv(t, nil)
	br := cnitest.UniqueName("mnu")
	cnitest.DeleteLinkAtCleanup(t, br)
	k := e.nextSubnet()
	e.nads.put(podNS, "net-dns", fmt.Sprintf(`{"cniVersion":"1.0.0","name":"net-dns","plugins":[{"type":"bridge","bridge":%q,
		"dns":{"nameservers":["192.0.2.53","dns.example.com","2001:db8::53"],"search":["example.com"]},
		"ipam":{"type":"host-local","dataDir":%q,"ranges":[[{"subnet":"10.200.%d.0/24"}]]}}]}`, br, e.ipamDir, k), nil)
	pod := e.podWithNetworks("net-dns")
	e.add("ctr-"+cnitest.UniqueName(""), pod)

	e.wantLinks("eth0", "net1")
	list := e.networkStatus(pod)
	if len(list) != 2 || !list[0].Default {
		t.Fatalf("network-status = %+v, want the default network and ns1/net-dns", list)
	}
	s := entry(t, list, "ns1/net-dns")
	if s.DNS == nil || !slices.Equal(s.DNS.Nameservers, []string{"192.0.2.53", "2001:db8::53"}) || !slices.Equal(s.DNS.Search, []string{"example.com"}) {
		t.Errorf("network-status dns = %+v, want the two IP nameservers and the search list", s.DNS)
	}
	if s.Interface != "net1" || len(s.IPs) != 1 || !strings.HasPrefix(s.IPs[0], fmt.Sprintf("10.200.%d.", k)) || s.Mac == "" {
		t.Errorf("network-status entry = %+v, want net1 with its address and mac", s)
	}
	wantIgnored(t, e, "ns1/net-dns", "dns.nameservers[1]", "dns.example.com", "not an IP address")
}

// A device-info file whose "version" we cannot use ("v1.1.0": the form of
// the spec repository's tags, not of the key, device-info spec §3.1.2),
// whether the device plugin or the CNI plugin wrote it: the entry has no
// "device-info", the rest is published. An unknown version in the spec's
// form ("2.0.0") is published best-effort, with no Event.
func TestAddUnusableDeviceInfoVersion(t *testing.T) {
	const badVersion = `{"type":"pci","version":"v1.1.0","pci":{"pci-address":"0000:00:03.0"}}`
	const unknownVersion = `{"type":"pci","version":"2.0.0","pci":{"pci-address":"0000:00:03.0"}}`
	// writerPlugin answers ADD like the echo plugin after writing CONTENT to
	// the CNIDeviceInfoFile of its runtimeConfig (device-info spec §5.1.2).
	const writerPlugin = `in=$(cat)
case "$CNI_COMMAND" in
ADD) f=$(printf '%s' "$in" | sed -n 's/.*"CNIDeviceInfoFile":"\([^"]*\)".*/\1/p')
     mkdir -p "$(dirname "$f")" && printf '%s' 'CONTENT' > "$f"
     printf '{"cniVersion":"1.0.0","interfaces":[{"name":"%s","sandbox":"%s"}],"ips":[]}' "$CNI_IFNAME" "$CNI_NETNS" ;;
VERSION) printf '{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}' ;;
esac
`
	for _, tc := range []struct {
		name, content string
		devicePlugin  bool // the device plugin writes content, else the CNI plugin
		published     bool
	}{
		{"device plugin file v1.1.0", badVersion, true, false},
		{"CNI plugin file v1.1.0", badVersion, false, false},
		{"device plugin file 2.0.0", unknownVersion, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id0 := "0000:00:03.0"
			d := newDeviceEnv(t, id0)
			network := "ns1/dev-net"
			if tc.devicePlugin {
				p, err := d.devinfo.DPPath(devResource, id0)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(d.devinfo.DPDir(), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(tc.content), 0o644); err != nil {
					t.Fatal(err)
				}
			} else {
				binDir := d.eng.opts.BinDirs[1]
				cnitest.ScriptPlugin(t, binDir, "mnu-devwriter", strings.ReplaceAll(writerPlugin, "CONTENT", tc.content))
				d.nads.put(podNS, "writer-net", `{"cniVersion":"1.0.0","name":"writer-net","plugins":[{"type":"mnu-devwriter","capabilities":{"CNIDeviceInfoFile":true}}]}`, nil)
				network = "ns1/writer-net"
			}
			pod := d.podWithNetworks(strings.TrimPrefix(network, "ns1/"))
			d.add("ctr-"+cnitest.UniqueName(""), pod)

			list := d.networkStatus(pod)
			if len(list) != 2 || !list[0].Default {
				t.Fatalf("network-status = %+v, want the default network and %s", list, network)
			}
			s := entry(t, list, network)
			if s.Interface != "net1" {
				t.Errorf("network-status %s interface = %q, want net1", network, s.Interface)
			}
			if tc.published {
				if !jsonEqual(t, s.DeviceInfo, []byte(tc.content)) {
					t.Errorf("network-status device-info = %s, want %s", s.DeviceInfo, tc.content)
				}
				if evs := d.events.of("Warning", kube.ReasonValueIgnored); len(evs) != 0 {
					t.Errorf("Warning Events %+v for a device-info published best-effort", evs)
				}
				return
			}
			if len(s.DeviceInfo) != 0 {
				t.Errorf("network-status device-info = %s, want it left out", s.DeviceInfo)
			}
			wantIgnored(t, d.env, network, `"device-info"`, "v1.1.0", "version")
		})
	}
}

// "default-route": [] (§4.1.2.1.9: the list "may be empty") on an
// attachment whose CNI result has no gateway: nothing to route through, so
// it is no default route request. The pod keeps the default network's
// default route, which network-status reports on the default network's
// entry; the selected attachment's entry has no "default-route".
func TestAddEmptyDefaultRouteWithoutGateway(t *testing.T) {
	e := newEnv(t, nil)
	br := cnitest.UniqueName("mnu")
	cnitest.DeleteLinkAtCleanup(t, br)
	k := e.nextSubnet()
	// static IPAM without "gateway": the result's ip has none, and no routes.
	e.nads.put(podNS, "net-a", fmt.Sprintf(`{"cniVersion":"1.0.0","name":"net-a","plugins":[{"type":"bridge","bridge":%q,
		"ipam":{"type":"static","addresses":[{"address":"10.200.%d.5/24"}]}}]}`, br, k), nil)
	pod := e.podWithNetworks(`[{"name":"net-a","default-route":[]}]`)
	e.add("ctr-"+cnitest.UniqueName(""), pod)

	e.wantLinks("eth0", "net1")
	defaults := e.defaultRoutes()
	if want := []string{"10.200.1.1 dev eth0"}; !slices.Equal(defaults, want) {
		t.Errorf("default routes in the pod = %q, want the default network's %q", defaults, want)
	}

	list := e.networkStatus(pod)
	if len(list) != 2 {
		t.Fatalf("network-status = %+v, want 2 entries", list)
	}
	def := entry(t, list, e.defaultNet)
	if !def.Default || !slices.Equal(def.DefaultRoute, []string{"10.200.1.1"}) {
		t.Errorf("default network entry = %+v, want default-route [10.200.1.1]", def)
	}
	s := entry(t, list, "ns1/net-a")
	if len(s.DefaultRoute) != 0 {
		t.Errorf("ns1/net-a default-route = %q, want none", s.DefaultRoute)
	}
	if s.Interface != "net1" || !slices.Equal(s.IPs, []string{fmt.Sprintf("10.200.%d.5", k)}) {
		t.Errorf("ns1/net-a entry = %+v, want net1 with 10.200.%d.5", s, k)
	}
	wantIgnored(t, e, "ns1/net-a", `"default-route"`, "no gateway")
}

// A delegate whose result's sandbox interface has a "mac" that is not a
// hardware address, or belongs to an interface without a name (§5.3.4), or
// a negative "mtu" (§5.3.5): the value is left out of network-status, the
// ADD succeeds and the rest of the entry is published.
func TestAddDropsUnusableMacAndMTU(t *testing.T) {
	// resultPlugin answers ADD with INTERFACE as its sandbox interface.
	const resultPlugin = `cat >/dev/null
case "$CNI_COMMAND" in
ADD) printf '{"cniVersion":"1.0.0","interfaces":[{INTERFACE"sandbox":"%s"}],"ips":[{"interface":0,"address":"192.0.2.7/24"}]}' "$CNI_NETNS" ;;
VERSION) printf '{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}' ;;
esac
`
	for _, tc := range []struct {
		name      string
		intf      string // the interface's keys before "sandbox"
		want      status.NetworkStatus
		wantEvent []string
	}{
		{"mac not a hardware address", `"name":"net1","mac":"not-a-mac","mtu":1400,`,
			status.NetworkStatus{Name: "ns1/odd-net", Interface: "net1", MTU: 1400, IPs: []string{"192.0.2.7"}},
			[]string{`"mac"`, `"not-a-mac" is not a hardware address`, "§5.3.4"}},
		{"mac without interface name", `"mac":"02:00:00:00:00:07",`,
			status.NetworkStatus{Name: "ns1/odd-net", IPs: []string{"192.0.2.7"}},
			[]string{`"mac"`, "no name", "§5.3.4"}},
		{"negative mtu", `"name":"net1","mac":"02:00:00:00:00:07","mtu":-1,`,
			status.NetworkStatus{Name: "ns1/odd-net", Interface: "net1", Mac: "02:00:00:00:00:07", IPs: []string{"192.0.2.7"}},
			[]string{`"mtu"`, "-1 is negative", "§5.3.5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			binDir := t.TempDir()
			cnitest.ScriptPlugin(t, binDir, "mnu-oddresult", strings.ReplaceAll(resultPlugin, "INTERFACE", tc.intf))
			e := newEnv(t, func(o *envOptions) { o.BinDirs = []string{cnitest.BinDir(t), binDir} })
			e.nads.put(podNS, "odd-net", `{"cniVersion":"1.0.0","name":"odd-net","plugins":[{"type":"mnu-oddresult"}]}`, nil)
			pod := e.podWithNetworks("odd-net")
			e.add("ctr-"+cnitest.UniqueName(""), pod)

			list := e.networkStatus(pod)
			if len(list) != 2 || !list[0].Default {
				t.Fatalf("network-status = %+v, want the default network and ns1/odd-net", list)
			}
			if s := entry(t, list, "ns1/odd-net"); !s.Equal(&tc.want) {
				t.Errorf("network-status entry = %+v, want %+v", s, tc.want)
			}
			wantIgnored(t, e, append([]string{"ns1/odd-net"}, tc.wantEvent...)...)
		})
	}
}
