package status

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	types040 "github.com/containernetworking/cni/pkg/types/040"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/types/create"
	"github.com/containernetworking/cni/pkg/version"
)

// parseResult parses real CNI result bytes with the CNI library, detecting the version.
func parseResult(t testing.TB, js string) types.Result {
	t.Helper()
	r, err := create.CreateFromBytes([]byte(js))
	if err != nil {
		t.Fatalf("CNI library rejected test result: %v\n%s", err, js)
	}
	return r
}

func TestFromResult(t *testing.T) {
	tests := []struct {
		name   string
		result string // CNI result JSON; "" means no result
		ifName string
		opts   Options
		want   NetworkStatus
	}{
		{
			name:   "§5.1.1 no result: minimal status map",
			ifName: "net1",
			want:   NetworkStatus{Name: "ns/net", Interface: "net1"},
		},
		{
			name:   "§5.1.1 §4.1.2.1.9 no result, default-route requested: the requested gateways",
			ifName: "net1",
			opts:   Options{DefaultRoute: true, GatewayRequest: []string{"192.0.2.1", "192.0.2.1"}},
			want:   NetworkStatus{Name: "ns/net", Interface: "net1", DefaultRoute: []string{"192.0.2.1"}},
		},
		{
			name: "§5.3.2.1 §5.3.3.1 0.2.0: interface from CNI_IFNAME, ips from ip4+ip6, gateway of a gw-less default route",
			result: `{"cniVersion":"0.2.0",
				"ip4":{"ip":"10.1.0.5/16","gateway":"10.1.0.1","routes":[{"dst":"0.0.0.0/0"},{"dst":"10.9.0.0/16","gw":"10.1.0.9"}]},
				"ip6":{"ip":"2001:db8::5/64","gateway":"2001:db8::1"},
				"dns":{"nameservers":["10.1.0.1"],"options":["ndots:2"]}}`,
			ifName: "net1",
			opts:   Options{DefaultRoute: true},
			want: NetworkStatus{Name: "ns/net", Interface: "net1", IPs: []string{"10.1.0.5", "2001:db8::5"},
				DNS: &DNS{Nameservers: []string{"10.1.0.1"}}, DefaultRoute: []string{"10.1.0.1"}},
		},
		{
			name:   "§5.3.2.1 0.1.0 (no cniVersion): legacy path",
			result: `{"ip4":{"ip":"10.1.0.6/16"}}`,
			ifName: "eth0",
			opts:   Options{Default: true},
			want:   NetworkStatus{Name: "ns/net", Interface: "eth0", IPs: []string{"10.1.0.6"}, Default: true},
		},
		{
			name: "§5.3.2.1 §5.3.3.1 §5.3.4.1 0.3.1: host veth first, only the sandbox interface's ips",
			result: `{"cniVersion":"0.3.1",
				"interfaces":[{"name":"veth1a2b","mac":"aa:aa:aa:aa:aa:01"},
				              {"name":"eth1","mac":"02:11:22:33:44:55","sandbox":"/var/run/netns/p1"}],
				"ips":[{"version":"4","interface":0,"address":"169.254.1.1/32"},
				       {"version":"4","interface":1,"address":"10.2.0.5/24","gateway":"10.2.0.1"}],
				"routes":[{"dst":"0.0.0.0/0","gw":"10.2.0.1"}]}`,
			ifName: "net7",
			want: NetworkStatus{Name: "ns/net", Interface: "eth1", Mac: "02:11:22:33:44:55",
				IPs: []string{"10.2.0.5"}},
		},
		{
			name: "§5.3.7 §5.3.7.4 0.4.0 dual stack: dns, default-route from the default routes only",
			result: `{"cniVersion":"0.4.0",
				"interfaces":[{"name":"net1","mac":"02:00:00:00:00:01","sandbox":"/var/run/netns/p2"}],
				"ips":[{"version":"4","interface":0,"address":"192.0.2.2/24","gateway":"192.0.2.1"},
				       {"version":"6","interface":0,"address":"2001:db8::2/64","gateway":"2001:db8::1"}],
				"routes":[{"dst":"10.0.0.0/8","gw":"192.0.2.254"},{"dst":"0.0.0.0/0","gw":"192.0.2.1"},
				          {"dst":"::/0","gw":"2001:db8::1"},{"dst":"::/0","gw":"2001:db8::2"},{"dst":"::/0","gw":"2001:db8::1"}],
				"dns":{"nameservers":["192.0.2.53","2001:db8::53"],"domain":"example.com","search":["eng.example.com"],"options":["rotate"]}}`,
			opts: Options{DefaultRoute: true},
			want: NetworkStatus{Name: "ns/net", Interface: "net1", Mac: "02:00:00:00:00:01",
				IPs:          []string{"192.0.2.2", "2001:db8::2"},
				DNS:          &DNS{Nameservers: []string{"192.0.2.53", "2001:db8::53"}, Domain: "example.com", Search: []string{"eng.example.com"}},
				DefaultRoute: []string{"192.0.2.1", "2001:db8::1", "2001:db8::2"}},
		},
		{
			name: "§5.3.7.4 default routes but no default-route key on the element: not written",
			result: `{"cniVersion":"0.4.0",
				"interfaces":[{"name":"net1","sandbox":"/var/run/netns/p2"}],
				"ips":[{"version":"4","interface":0,"address":"192.0.2.2/24","gateway":"192.0.2.1"}],
				"routes":[{"dst":"0.0.0.0/0","gw":"192.0.2.1"}]}`,
			want: NetworkStatus{Name: "ns/net", Interface: "net1", IPs: []string{"192.0.2.2"}},
		},
		{
			name: "§4.1.2.1.9 §5.3.7.4 requested gateways are what default-route reports",
			result: `{"cniVersion":"1.0.0",
				"interfaces":[{"name":"net2","sandbox":"/var/run/netns/p3"}],
				"ips":[{"interface":0,"address":"198.51.100.7/24","gateway":"198.51.100.1"}],
				"routes":[{"dst":"0.0.0.0/0","gw":"198.51.100.1"}]}`,
			opts: Options{DefaultRoute: true, GatewayRequest: []string{"198.51.100.254"}},
			want: NetworkStatus{Name: "ns/net", Interface: "net2", IPs: []string{"198.51.100.7"},
				DefaultRoute: []string{"198.51.100.254"}},
		},
		{
			name: "§5.3.3.1 1.0.0 sandbox interface, ips without any interface index: unattributed ips used",
			result: `{"cniVersion":"1.0.0",
				"interfaces":[{"name":"net3","mac":"02:00:00:00:00:03","sandbox":"/var/run/netns/p4"}],
				"ips":[{"address":"10.3.0.3/24"},{"address":"fd00::3/64"}]}`,
			want: NetworkStatus{Name: "ns/net", Interface: "net3", Mac: "02:00:00:00:00:03",
				IPs: []string{"10.3.0.3", "fd00::3"}},
		},
		{
			name: "§5.3.3.1 1.0.0 plugin indexes ips, none on the sandbox interface: no ips",
			result: `{"cniVersion":"1.0.0",
				"interfaces":[{"name":"br0"},{"name":"net3","sandbox":"/var/run/netns/p4"}],
				"ips":[{"interface":0,"address":"10.3.0.1/24"},{"address":"10.3.0.3/24"},{"interface":9,"address":"10.3.0.9/24"}]}`,
			want: NetworkStatus{Name: "ns/net", Interface: "net3"},
		},
		{
			name: "§5.3.3.1 rule 2 1.0.0 no interfaces: ips without index or with a negative index",
			result: `{"cniVersion":"1.0.0",
				"ips":[{"address":"10.4.0.4/24"},{"interface":-1,"address":"2001:db8:4::4/64"}]}`,
			ifName: "net4",
			want:   NetworkStatus{Name: "ns/net", IPs: []string{"10.4.0.4", "2001:db8:4::4"}},
		},
		{
			name: "§5.3.3.1 rule 2 only host interfaces: ips without index, not the host's",
			result: `{"cniVersion":"1.0.0",
				"interfaces":[{"name":"vethh","mac":"aa:aa:aa:aa:aa:02"}],
				"ips":[{"interface":0,"address":"10.5.0.1/24"},{"address":"10.5.0.5/24"}]}`,
			want: NetworkStatus{Name: "ns/net", IPs: []string{"10.5.0.5"}},
		},
		{
			name: "§5.1.1 §5.3.2.1 host interface only, no ips: name and default only",
			result: `{"cniVersion":"1.0.0",
				"interfaces":[{"name":"vethh","mac":"aa:aa:aa:aa:aa:02"}]}`,
			ifName: "net5",
			want:   NetworkStatus{Name: "ns/net"},
		},
		{
			name: "§5.3.5 §5.3.8 1.1.0: mtu, pciID becomes pci device-info, non-main-table default route skipped",
			result: `{"cniVersion":"1.1.0",
				"interfaces":[{"name":"pf0vf3"},
				              {"name":"net6","mac":"02:00:00:00:00:06","mtu":9000,"sandbox":"/var/run/netns/p6","pciID":"0000:18:02.5"}],
				"ips":[{"interface":1,"address":"10.6.0.6/24","gateway":"10.6.0.1"},{"interface":1,"address":"fd06::6/64"}],
				"routes":[{"dst":"0.0.0.0/0","gw":"10.6.0.99","table":100},{"dst":"0.0.0.0/0","table":254}]}`,
			opts: Options{DefaultRoute: true},
			want: NetworkStatus{Name: "ns/net", Interface: "net6", Mac: "02:00:00:00:00:06", MTU: 9000,
				IPs: []string{"10.6.0.6", "fd06::6"}, DefaultRoute: []string{"10.6.0.1"},
				DeviceInfo: json.RawMessage(`{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:18:02.5"}}`)},
		},
		{
			name: "§5.3.8 1.1.0: the device-info file wins over pciID; socketPath is not reported",
			result: `{"cniVersion":"1.1.0",
				"interfaces":[{"name":"net7","sandbox":"/var/run/netns/p7","pciID":"0000:18:02.6","socketPath":"/run/vhu/net7.sock"}]}`,
			opts: Options{Default: true, DeviceInfo: json.RawMessage(`{ "type": "pci", "version": "1.1.0",
				"pci": {"pci-address": "0000:18:02.6", "pf-pci-address": "0000:18:00.0"} }`)},
			want: NetworkStatus{Name: "ns/net", Interface: "net7", Default: true,
				DeviceInfo: json.RawMessage(`{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:18:02.6","pf-pci-address":"0000:18:00.0"}}`)},
		},
		{
			name: "§5.3.8 1.1.0: a pciID that is not a PCI address gives no device-info",
			result: `{"cniVersion":"1.1.0",
				"interfaces":[{"name":"net8","sandbox":"/var/run/netns/p8","pciID":"8086:154c"}]}`,
			want: NetworkStatus{Name: "ns/net", Interface: "net8"},
		},
		{
			name: "§5.3.8 1.1.0: a pciID with a domain longer than the device-info spec's dddd gives no device-info",
			result: `{"cniVersion":"1.1.0",
				"interfaces":[{"name":"net9","sandbox":"/var/run/netns/p9","pciID":"10000:18:02.5"}]}`,
			want: NetworkStatus{Name: "ns/net", Interface: "net9"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r types.Result
			if tt.result != "" {
				r = parseResult(t, tt.result)
			}
			got, err := FromResult(r, "ns/net", tt.ifName, tt.opts)
			if err != nil {
				t.Fatalf("FromResult: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("FromResult =\n%#v\nwant\n%#v", got, tt.want)
			}
			// Every produced entry is a valid annotation element and round-trips.
			enc, err := Encode([]NetworkStatus{got})
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			back, err := Decode(enc)
			if err != nil {
				t.Fatalf("Decode(Encode): %v\n%s", err, enc)
			}
			if !reflect.DeepEqual(back[0], got) {
				t.Errorf("round trip =\n%#v\nwant\n%#v", back[0], got)
			}
		})
	}
}

// TestFromResultAllVersions: the same attachment reported in every result
// version the CNI library can produce gives the same entry (less mac/interface
// before 0.3.0, §5.3.2.1, and mtu before 1.0.0).
func TestFromResultAllVersions(t *testing.T) {
	src := parseResult(t, `{"cniVersion":"1.1.0",
		"interfaces":[{"name":"veth9"},{"name":"net1","mac":"02:00:00:00:00:09","mtu":1400,"sandbox":"/var/run/netns/p9"}],
		"ips":[{"interface":1,"address":"10.9.0.9/24","gateway":"10.9.0.1"},{"interface":1,"address":"fd09::9/64","gateway":"fd09::1"}],
		"routes":[{"dst":"0.0.0.0/0","gw":"10.9.0.1"},{"dst":"::/0","gw":"fd09::1"}],
		"dns":{"nameservers":["10.9.0.53"]}}`)
	for _, v := range []string{"0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"} {
		t.Run(v, func(t *testing.T) {
			conv, err := src.GetAsVersion(v)
			if err != nil {
				t.Fatalf("GetAsVersion(%s): %v", v, err)
			}
			// Go through the bytes, as the daemon gets them from a plugin.
			var buf strings.Builder
			if err := conv.PrintTo(&buf); err != nil {
				t.Fatal(err)
			}
			r, err := version.NewResult(v, []byte(buf.String()))
			if err != nil {
				t.Fatalf("version.NewResult(%s): %v", v, err)
			}
			got, err := FromResult(r, "ns/net", "net1", Options{DefaultRoute: true})
			if err != nil {
				t.Fatal(err)
			}
			want := NetworkStatus{Name: "ns/net", Interface: "net1", Mac: "02:00:00:00:00:09", MTU: 1400,
				IPs: []string{"10.9.0.9", "fd09::9"}, DNS: &DNS{Nameservers: []string{"10.9.0.53"}},
				DefaultRoute: []string{"10.9.0.1", "fd09::1"}}
			switch v {
			case "0.1.0", "0.2.0":
				want.Mac, want.MTU = "", 0
			case "0.3.0", "0.3.1", "0.4.0":
				want.MTU = 0 // "mtu" came with the 1.0.0/1.1.0 types the library shares
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got\n%#v\nwant\n%#v", got, want)
			}
		})
	}
}

func TestFromResultErrors(t *testing.T) {
	good := parseResult(t, `{"cniVersion":"1.0.0","interfaces":[{"name":"net1","sandbox":"/x"}]}`)
	tests := []struct {
		name    string
		result  types.Result
		key     string
		opts    Options
		wantErr string
	}{
		{"§5.3.1 empty network key", good, "", Options{}, `"name"`},
		{"§4.1.2.1.9 gateway request not an IP", good, "ns/n", Options{DefaultRoute: true, GatewayRequest: []string{"10.0.0.1", "gw"}}, `default-route[1]: "gw"`},
		{"§5.3.8 device-info not a map", good, "ns/n", Options{DeviceInfo: json.RawMessage(`["pci"]`)}, "device-info: want a JSON map, got a list"},
		{"§5.3.8 device-info malformed", good, "ns/n", Options{DeviceInfo: json.RawMessage(`{"type":`)}, "device-info: malformed"},
		{"unknown result version", &types040.Result{CNIVersion: "9.9.9"}, "ns/n", Options{}, `converting CNI result version "9.9.9"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FromResult(tt.result, tt.key, "net1", tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestFromResultTypedNilAndNoMutation(t *testing.T) {
	var nilResult *current.Result
	got, err := FromResult(nilResult, "ns/n", "net1", Options{})
	if err != nil || !reflect.DeepEqual(got, NetworkStatus{Name: "ns/n", Interface: "net1"}) {
		t.Fatalf("typed nil result: got %#v, %v; want the minimal entry", got, err)
	}

	// A 1.1.0 result without cniVersion would be stamped by GetAsVersion; FromResult must not touch it.
	r := &current.Result{Interfaces: []*current.Interface{{Name: "net1", Sandbox: "/x"}}}
	if _, err := FromResult(r, "ns/n", "net1", Options{}); err != nil {
		t.Fatal(err)
	}
	if r.CNIVersion != "" {
		t.Errorf("FromResult modified the result: CNIVersion = %q", r.CNIVersion)
	}
}

// A nameserver of the result that is not an IP address (§5.3.7.1: "an array
// of IPv4 and/or IPv6 addresses") is left out and reported as an Omission;
// the entry, the other nameservers, "domain" and "search" are kept and no
// error fails the ADD. With every nameserver dropped, "dns" keeps the rest.
func TestFromResultDropsNonIPNameserver(t *testing.T) {
	r := parseResult(t, `{"cniVersion":"1.1.0",
		"interfaces":[{"name":"net1","mac":"02:00:00:00:00:01","sandbox":"/var/run/netns/p"}],
		"ips":[{"interface":0,"address":"10.1.0.2/24","gateway":"10.1.0.1"}],
		"dns":{"nameservers":["10.1.0.53","dns.example.com","fd00::53"," 10.1.0.54"],"domain":"example.com","search":["a.example.com"]}}`)
	got, omitted, err := FromResultWithOmissions(r, "ns/net", "net1", Options{})
	if err != nil {
		t.Fatalf("FromResultWithOmissions: %v", err)
	}
	want := NetworkStatus{Name: "ns/net", Interface: "net1", Mac: "02:00:00:00:00:01", IPs: []string{"10.1.0.2"},
		DNS: &DNS{Nameservers: []string{"10.1.0.53", "fd00::53"}, Domain: "example.com", Search: []string{"a.example.com"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%#v\nwant\n%#v", got, want)
	}
	if len(omitted) != 2 || omitted[0].Field != "dns.nameservers[1]" || omitted[1].Field != "dns.nameservers[3]" ||
		!strings.Contains(omitted[0].Reason, `"dns.example.com" is not an IP address`) {
		t.Errorf("omitted = %q, want dns.nameservers[1] and [3] named with why", omitted)
	}
	if _, err := Encode([]NetworkStatus{got}); err != nil {
		t.Errorf("the entry does not encode: %v", err)
	}
	// FromResult gives the same entry.
	if plain, err := FromResult(r, "ns/net", "net1", Options{}); err != nil || !reflect.DeepEqual(plain, want) {
		t.Errorf("FromResult = %#v, %v; want the same entry", plain, err)
	}

	only := &current.Result{CNIVersion: "1.1.0", DNS: types.DNS{Nameservers: []string{"ns1.example.com"}, Search: []string{"example.com"}}}
	got, omitted, err = FromResultWithOmissions(only, "ns/n", "net1", Options{})
	if err != nil || len(omitted) != 1 || got.DNS == nil || got.DNS.Nameservers != nil || !reflect.DeepEqual(got.DNS.Search, []string{"example.com"}) {
		t.Errorf("only a bad nameserver: got %#v, omitted %q, err %v; want dns with search only", got.DNS, omitted, err)
	}
	none := &current.Result{CNIVersion: "1.1.0", DNS: types.DNS{Nameservers: []string{"ns1.example.com"}}}
	if got, omitted, err = FromResultWithOmissions(none, "ns/n", "net1", Options{}); err != nil || len(omitted) != 1 || got.DNS != nil {
		t.Errorf("nothing usable in dns: got %#v, omitted %q, err %v; want no dns", got.DNS, omitted, err)
	}
}

// A sandbox interface's "mac" that is not a hardware address or belongs to
// an interface without a name (§5.3.4), or a negative "mtu" (§5.3.5), is
// left out and reported as an Omission: optional values, not a failed ADD.
// The rest of the entry is kept and encodes.
func TestFromResultOmitsUnusableMacAndMTU(t *testing.T) {
	tests := []struct {
		name   string
		result string
		want   NetworkStatus
		omit   []Omission // Reason is matched by substring
	}{
		{
			name: "§5.3.4 mac not a hardware address",
			result: `{"cniVersion":"1.1.0","interfaces":[{"name":"veth0","mac":"zz"},{"name":"net1","mac":"zz:00","mtu":1400,"sandbox":"/p"}],
				"ips":[{"interface":1,"address":"10.1.0.2/24"}]}`,
			want: NetworkStatus{Name: "ns/net", Interface: "net1", MTU: 1400, IPs: []string{"10.1.0.2"}},
			omit: []Omission{{Field: "mac", Reason: `interfaces[1].mac "zz:00" is not a hardware address (spec §5.3.4)`}},
		},
		{
			name:   "§5.3.4 mac of an interface without a name",
			result: `{"cniVersion":"1.0.0","interfaces":[{"mac":"02:00:00:00:00:01","sandbox":"/p"}]}`,
			want:   NetworkStatus{Name: "ns/net"},
			omit:   []Omission{{Field: "mac", Reason: `interfaces[0] has no name, and "mac" needs "interface" (spec §5.3.4)`}},
		},
		{
			name:   "§5.3.5 negative mtu",
			result: `{"cniVersion":"1.0.0","interfaces":[{"name":"net1","mac":"02:00:00:00:00:01","mtu":-1,"sandbox":"/p"}]}`,
			want:   NetworkStatus{Name: "ns/net", Interface: "net1", Mac: "02:00:00:00:00:01"},
			omit:   []Omission{{Field: "mtu", Reason: `interfaces[0].mtu -1 is negative, and "mtu" is a uint (spec §5.3.5)`}},
		},
		{
			name: "§5.3.4 §5.3.5 §5.3.7.1 all three, in result order",
			result: `{"cniVersion":"1.1.0","interfaces":[{"name":"net1","mac":"02-00","mtu":-9000,"sandbox":"/p"}],
				"dns":{"nameservers":["dns.example.com","10.0.0.53"]}}`,
			want: NetworkStatus{Name: "ns/net", Interface: "net1", DNS: &DNS{Nameservers: []string{"10.0.0.53"}}},
			omit: []Omission{
				{Field: "mac", Reason: `"02-00" is not a hardware address`},
				{Field: "mtu", Reason: "-9000 is negative"},
				{Field: "dns.nameservers[0]", Reason: `"dns.example.com" is not an IP address`},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := parseResult(t, tt.result)
			got, omitted, err := FromResultWithOmissions(r, "ns/net", "net1", Options{})
			if err != nil {
				t.Fatalf("FromResultWithOmissions: %v; want the entry without the value", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got\n%#v\nwant\n%#v", got, tt.want)
			}
			if len(omitted) != len(tt.omit) {
				t.Fatalf("omitted = %q, want %q", omitted, tt.omit)
			}
			for i, o := range omitted {
				if o.Field != tt.omit[i].Field || !strings.Contains(o.Reason, tt.omit[i].Reason) {
					t.Errorf("omitted[%d] = %q, want %q", i, o, tt.omit[i])
				}
			}
			if _, err := Encode([]NetworkStatus{got}); err != nil {
				t.Errorf("the entry does not encode: %v", err)
			}
			if plain, err := FromResult(r, "ns/net", "net1", Options{}); err != nil || !reflect.DeepEqual(plain, tt.want) {
				t.Errorf("FromResult = %#v, %v; want the same entry", plain, err)
			}
		})
	}
}
