package status

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// The three annotations of spec §5.4, with the export's garbling repaired
// (missing brackets/commas, "tvpe", "device" for "device-info", a leading
// space in two MACs); see docs/decisions/status.md.
const (
	example54SingleGateway = `[
  {
    "name": "namespace-a/cluster-wide-default",
    "interface": "eth0",
    "ips": [ "192.0.2.2/24", "2001:db8::2230/32" ],
    "mac": "02:11:22:33:44:54",
    "mtu": 1500,
    "default-route": ["192.0.2.1"],
    "default": true
  },
  {
    "name": "namespace-b/some-network",
    "interface": "eth1",
    "ips": [ "192.0.2.2/24", "2001:db8::2234/32" ],
    "mac": "02:11:22:33:44:55",
    "dns": {
      "nameservers": [ "192.0.2.1", "2001:db8:4860::8888" ],
      "search": [ "eng.example.com", "example.com" ]
    },
    "default": false
  },
  {
    "name": "namespace-a/an-ip-over-infiniband-network",
    "interface": "ib0",
    "ips": [ "198.51.100.1/24" ],
    "infiniband-guid": "80:00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:00:11:22",
    "default": false
  }
]`
	example54MultipleGateways = `[
  {
    "name": "namespace-a/cluster-wide-default",
    "interface": "eth5",
    "ips": [ "192.0.2.2/24", "2001:db8::2230/32" ],
    "mac": "02:11:22:33:44:54",
    "default-route": ["192.0.2.1", "2001:db8::1", "2001:db8::2"],
    "default": true
  },
  {
    "name": "namespace-b/some-network",
    "interface": "eth1",
    "ips": [ "192.0.2.2/24", "2001:db8::2234/32" ],
    "mac": "02:11:22:33:44:55",
    "dns": {
      "nameservers": [ "192.0.2.1", "2001:db8:4860::8888" ],
      "search": [ "eng.example.com", "example.com" ]
    },
    "default": false
  }
]`
	example54DeviceInfo = `[
  {
    "name": "namespace-a/cluster-wide-default",
    "interface": "eth0",
    "ips": [ "192.0.2.2/24", "2001:db8::2230/32" ],
    "mac": "02:11:22:33:44:54",
    "mtu": 1500,
    "default-route": ["192.0.2.1"]
  },
  {
    "name": "namespace-b/sriov-network_a",
    "interface": "net1",
    "device-info": {
      "type": "pci",
      "version": "1.0.0",
      "pci": { "pci-address": "0000:18:02.5", "pf-pci-address": "0000:18:00.0" }
    }
  },
  {
    "name": "namespace-b/sriov-network_b",
    "interface": "net2",
    "device-info": {
      "type": "pci",
      "version": "1.0.0",
      "pci": { "pci-address": "0000:18:0a.2", "vhost-net": "/dev/vhost-net/", "pf-pci-address": "0000:18:00.1" }
    }
  },
  {
    "name": "namespace-c/userspace_net1",
    "interface": "net3",
    "mac": "64:1f:74:32:2e:6d",
    "device-info": {
      "type": "vhost-user",
      "version": "1.0.0",
      "vhost-user": { "mode": "client", "path": "/var/run/net3/vhost.sock" }
    }
  },
  {
    "name": "namespace-d/vdpa_net1",
    "interface": "virtio0",
    "mac": "64:1f:74:32:2e:6e",
    "device-info": {
      "type": "vdpa",
      "version": "1.0.0",
      "vdpa": {
        "parent-device": "/sys/bus/vdpa/devices",
        "driver": "vhost",
        "device": "vdpa2",
        "path": "/dev/vhost-vdpa0",
        "pci-address": "0000:04:02.7",
        "pf-pci-address": "0000:04:00.0"
      }
    }
  }
]`
)

// TestDecodeSpecExamples: the §5.4 examples decode to the expected values and
// re-encode to an equal value.
func TestDecodeSpecExamples(t *testing.T) {
	tests := []struct {
		name  string
		value string
		want  []NetworkStatus
	}{
		{"§5.4 single gateway", example54SingleGateway, []NetworkStatus{
			{Name: "namespace-a/cluster-wide-default", Interface: "eth0", IPs: []string{"192.0.2.2/24", "2001:db8::2230/32"},
				Mac: "02:11:22:33:44:54", MTU: 1500, DefaultRoute: []string{"192.0.2.1"}, Default: true},
			{Name: "namespace-b/some-network", Interface: "eth1", IPs: []string{"192.0.2.2/24", "2001:db8::2234/32"},
				Mac: "02:11:22:33:44:55", DNS: &DNS{Nameservers: []string{"192.0.2.1", "2001:db8:4860::8888"}, Search: []string{"eng.example.com", "example.com"}}},
			{Name: "namespace-a/an-ip-over-infiniband-network", Interface: "ib0", IPs: []string{"198.51.100.1/24"},
				Extra: map[string]json.RawMessage{"infiniband-guid": json.RawMessage(`"80:00:11:22:33:44:55:66:77:88:99:aa:bb:cc:dd:ee:ff:00:11:22"`)}},
		}},
		{"§5.4 multiple gateways", example54MultipleGateways, []NetworkStatus{
			{Name: "namespace-a/cluster-wide-default", Interface: "eth5", IPs: []string{"192.0.2.2/24", "2001:db8::2230/32"},
				Mac: "02:11:22:33:44:54", DefaultRoute: []string{"192.0.2.1", "2001:db8::1", "2001:db8::2"}, Default: true},
			{Name: "namespace-b/some-network", Interface: "eth1", IPs: []string{"192.0.2.2/24", "2001:db8::2234/32"},
				Mac: "02:11:22:33:44:55", DNS: &DNS{Nameservers: []string{"192.0.2.1", "2001:db8:4860::8888"}, Search: []string{"eng.example.com", "example.com"}}},
		}},
		{"§5.4 §5.3.8 device information", example54DeviceInfo, []NetworkStatus{
			{Name: "namespace-a/cluster-wide-default", Interface: "eth0", IPs: []string{"192.0.2.2/24", "2001:db8::2230/32"},
				Mac: "02:11:22:33:44:54", MTU: 1500, DefaultRoute: []string{"192.0.2.1"}},
			{Name: "namespace-b/sriov-network_a", Interface: "net1",
				DeviceInfo: json.RawMessage(`{"type":"pci","version":"1.0.0","pci":{"pci-address":"0000:18:02.5","pf-pci-address":"0000:18:00.0"}}`)},
			{Name: "namespace-b/sriov-network_b", Interface: "net2",
				DeviceInfo: json.RawMessage(`{"type":"pci","version":"1.0.0","pci":{"pci-address":"0000:18:0a.2","vhost-net":"/dev/vhost-net/","pf-pci-address":"0000:18:00.1"}}`)},
			{Name: "namespace-c/userspace_net1", Interface: "net3", Mac: "64:1f:74:32:2e:6d",
				DeviceInfo: json.RawMessage(`{"type":"vhost-user","version":"1.0.0","vhost-user":{"mode":"client","path":"/var/run/net3/vhost.sock"}}`)},
			{Name: "namespace-d/vdpa_net1", Interface: "virtio0", Mac: "64:1f:74:32:2e:6e",
				DeviceInfo: json.RawMessage(`{"type":"vdpa","version":"1.0.0","vdpa":{"parent-device":"/sys/bus/vdpa/devices","driver":"vhost","device":"vdpa2","path":"/dev/vhost-vdpa0","pci-address":"0000:04:02.7","pf-pci-address":"0000:04:00.0"}}`)},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(tt.value)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Decode =\n%#v\nwant\n%#v", got, tt.want)
			}
			enc, err := Encode(got)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			again, err := Decode(enc)
			if err != nil {
				t.Fatalf("Decode(Encode): %v\n%s", err, enc)
			}
			if !reflect.DeepEqual(again, got) {
				t.Errorf("re-encoded value differs:\n%#v\nwant\n%#v", again, got)
			}
			// As JSON values (ignoring whitespace and key order) the re-encoding equals
			// the example, except that "default": false is always written (§5.3.6 required).
			var a, b any
			if err := json.Unmarshal([]byte(enc), &a); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tt.value), &b); err != nil {
				t.Fatal(err)
			}
			for _, m := range b.([]any) {
				if _, ok := m.(map[string]any)["default"]; !ok {
					m.(map[string]any)["default"] = false
				}
			}
			if !reflect.DeepEqual(a, b) {
				t.Errorf("re-encoded JSON differs from the example:\n%s", enc)
			}
		})
	}
}

// TestEncodeLayout pins the layout: §5.3 key order, extension keys sorted
// after, two-space indentation, no HTML escaping, "default" always written.
func TestEncodeLayout(t *testing.T) {
	list := []NetworkStatus{
		{Name: "ns/a", Interface: "net1", IPs: []string{"10.0.0.2"}, Mac: "02:00:00:00:00:01", MTU: 1500,
			DNS: &DNS{Nameservers: []string{"10.0.0.53"}}, DefaultRoute: []string{"10.0.0.1"},
			DeviceInfo: json.RawMessage(`{"type":"pci"}`),
			Extra:      map[string]json.RawMessage{"org.example.z": json.RawMessage(`1`), "org.example.a": json.RawMessage(`"<&>"`)}},
		{Name: "cbr0", Default: true},
	}
	want := `[
  {
    "name": "ns/a",
    "interface": "net1",
    "ips": [
      "10.0.0.2"
    ],
    "mac": "02:00:00:00:00:01",
    "mtu": 1500,
    "default": false,
    "dns": {
      "nameservers": [
        "10.0.0.53"
      ]
    },
    "default-route": [
      "10.0.0.1"
    ],
    "device-info": {
      "type": "pci"
    },
    "org.example.a": "<&>",
    "org.example.z": 1
  },
  {
    "name": "cbr0",
    "default": true
  }
]`
	got, err := Encode(list)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("Encode =\n%s\nwant\n%s", got, want)
	}
	for _, empty := range [][]NetworkStatus{nil, {}} {
		if got, err := Encode(empty); err != nil || got != "[]" {
			t.Errorf("Encode(%#v) = %q, %v; want \"[]\"", empty, got, err)
		}
	}
}

func TestDecodeAccepts(t *testing.T) {
	tests := []struct {
		name  string
		value string
		want  []NetworkStatus
	}{
		{"§5 empty list", ` [ ] `, []NetworkStatus{}},
		{"§5.3.6 missing default reads as false", `[{"name":"a"}]`, []NetworkStatus{{Name: "a"}}},
		{"§5.3.3 bare and prefixed addresses", `[{"name":"a","ips":["10.0.0.1","fd00::1/64"]}]`,
			[]NetworkStatus{{Name: "a", IPs: []string{"10.0.0.1", "fd00::1/64"}}}},
		{"null values are absent keys; empty lists are nil", `[{"name":"a","interface":null,"ips":[],"dns":{"search":[]},"device-info":null,"default-route":null,"default":null,"org.x.k":null}]`,
			[]NetworkStatus{{Name: "a", DNS: &DNS{}, Extra: map[string]json.RawMessage{"org.x.k": json.RawMessage(`null`)}}}},
		{"§5.3 extension keys kept, compacted", `[{"name":"a","org.example.key": { "x" : [1, 2] }}]`,
			[]NetworkStatus{{Name: "a", Extra: map[string]json.RawMessage{"org.example.key": json.RawMessage(`{"x":[1,2]}`)}}}},
		{"§5.3.4 20-byte IPoIB hardware address", `[{"name":"a","interface":"ib0","mac":"00:00:04:04:fe:80:00:00:00:00:00:00:00:02:c9:03:00:0e:93:61"}]`,
			[]NetworkStatus{{Name: "a", Interface: "ib0", Mac: "00:00:04:04:fe:80:00:00:00:00:00:00:00:02:c9:03:00:0e:93:61"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(tt.value)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Decode =\n%#v\nwant\n%#v", got, tt.want)
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	tests := []struct {
		name    string
		value   string
		wantErr string
	}{
		{"§5 empty text", "", "want a JSON list of maps, got nothing"},
		{"§5 null", "null", "want a JSON list of maps, got null"},
		{"§5 a map, not a list", `{"name":"a"}`, "want a JSON list of maps, got a map"},
		{"§5 malformed list", `[{"name":"a"}`, "malformed JSON"},
		{"§5 trailing garbage", `[] x`, "malformed JSON"},
		{"§5 element not a map", `[{"name":"a"},1]`, "network-status[1]: want a JSON map, got a number"},
		{"§5 element null", `[null]`, "network-status[0]: want a JSON map, got null"},
		{"§5.3.1 name missing", `[{"interface":"eth0"}]`, `network-status[0]: "name": required`},
		{"§5.3.1 name null", `[{"name":null}]`, `network-status[0]: "name": want a string, got null`},
		{"§5.3.1 name not a string", `[{"name":7}]`, `network-status[0]: "name": json: cannot unmarshal number`},
		{"§5.3.3 ips not a list", `[{"name":"a"},{"name":"b","ips":"10.0.0.1"}]`, `network-status[1]: "ips": json: cannot unmarshal string`},
		{"§5.3.3 ips item not an IP", `[{"name":"a","ips":["10.0.0.1","host"]}]`, `network-status[0]: "ips"[1]: "host" is not an IP address`},
		{"§5.3.4 mac without interface", `[{"name":"a","mac":"02:00:00:00:00:01"}]`, `network-status[0]: "mac" is set but "interface" is missing`},
		{"§5.3.4 mac malformed", `[{"name":"a","interface":"e","mac":" 64:1f:74:32:2e:6d"}]`, `network-status[0]: "mac": " 64:1f:74:32:2e:6d" is not a hardware address`},
		{"§5.3.5 mtu negative", `[{"name":"a","mtu":-1}]`, `network-status[0]: "mtu": -1 is negative`},
		{"§5.3.5 mtu not an integer", `[{"name":"a","mtu":1500.5}]`, `network-status[0]: "mtu": json: cannot unmarshal number 1500.5`},
		{"§5.3.6 default not a boolean", `[{"name":"a","default":"true"}]`, `network-status[0]: "default": json: cannot unmarshal string`},
		{"§5.3.6 two defaults", `[{"name":"cbr0","default":true},{"name":"b"},{"name":"ns/x","default":true}]`,
			`network-status[2]: "default" is true for both "cbr0" (index 0) and "ns/x"`},
		{"§5.3.7 dns not a map", `[{"name":"a","dns":["10.0.0.53"]}]`, `network-status[0]: "dns": json: cannot unmarshal array`},
		{"§5.3.7.1 nameserver not an IP", `[{"name":"a","dns":{"nameservers":["ns.example.com"]}}]`, `network-status[0]: "dns".nameservers[0]: "ns.example.com" is not an IP address`},
		{"§5.3.7.4 default-route item not an IP", `[{"name":"a","default-route":["10.0.0.1/24"]}]`, `network-status[0]: "default-route"[0]: "10.0.0.1/24" is not an IP address`},
		{"§5.3.8 device-info not a map", `[{"name":"a","device-info":"pci"}]`, `network-status[0]: "device-info": want a JSON map, got a string`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Decode(tt.value)
			if err == nil {
				t.Fatalf("Decode accepted it: %#v", got)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %q, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestEncodeRejects(t *testing.T) {
	tests := []struct {
		name    string
		list    []NetworkStatus
		wantErr string
	}{
		{"§5.3.6 two defaults", []NetworkStatus{{Name: "a", Default: true}, {Name: "b", Default: true}},
			`network-status[1]: "default" is true for both "a" (index 0) and "b"`},
		{"§5.3.1 no name", []NetworkStatus{{Name: "a"}, {Interface: "net1"}}, `network-status[1]: "name": required`},
		{"§5.3 extension key collides with a standard key", []NetworkStatus{{Name: "a", Extra: map[string]json.RawMessage{"mtu": json.RawMessage(`1`)}}},
			`extension key "mtu" collides`},
		{"§5.3 extension value not JSON", []NetworkStatus{{Name: "a", Extra: map[string]json.RawMessage{"org.x": json.RawMessage(`{`)}}},
			`extension key "org.x": value is not valid JSON`},
		{"§5.3.8 device-info not a map", []NetworkStatus{{Name: "a", DeviceInfo: json.RawMessage(`[]`)}},
			`"device-info": want a JSON map, got a list`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Encode(tt.list)
			if err == nil {
				t.Fatalf("Encode accepted it: %s", got)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %q, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

// TestEncodeDecodeRoundTrip: Encode then Decode gives back an equal list, and
// encoding is deterministic (§5: the daemon compares before it PATCHes).
func TestEncodeDecodeRoundTrip(t *testing.T) {
	lists := [][]NetworkStatus{
		{{Name: "cbr0", Interface: "eth0", IPs: []string{"10.244.1.7", "fd00:10:244:1::7"}, Mac: "0a:58:0a:f4:01:07", MTU: 1450, Default: true,
			DefaultRoute: []string{"10.244.1.1"}}},
		{{Name: "ns/a", Interface: "net1", DNS: &DNS{Domain: "cluster.local"}},
			{Name: "ns/a", Interface: "net2", DeviceInfo: json.RawMessage(`{"type":"memif","version":"1.1.0","memif":{"role":"primary","mode":"ethernet","path":"/run/memif.sock"}}`)},
			{Name: "ns/b", Extra: map[string]json.RawMessage{"org.example.x": json.RawMessage(`{"k":"\u003c"}`)}}},
	}
	for i, list := range lists {
		enc, err := Encode(list)
		if err != nil {
			t.Fatalf("list %d: Encode: %v", i, err)
		}
		got, err := Decode(enc)
		if err != nil {
			t.Fatalf("list %d: Decode: %v\n%s", i, err, enc)
		}
		if !reflect.DeepEqual(got, list) {
			t.Errorf("list %d: round trip =\n%#v\nwant\n%#v", i, got, list)
		}
		enc2, err := Encode(got)
		if err != nil || enc2 != enc {
			t.Errorf("list %d: second Encode differs (%v):\n%s\n%s", i, err, enc2, enc)
		}
	}
}

func TestEqual(t *testing.T) {
	a := NetworkStatus{Name: "a", IPs: []string{}, DNS: &DNS{Search: []string{"x"}}, Extra: map[string]json.RawMessage{}}
	b := NetworkStatus{Name: "a", DNS: &DNS{Search: []string{"x"}}}
	if !a.Equal(&b) {
		t.Errorf("empty and nil lists/maps should compare equal")
	}
	for _, c := range []NetworkStatus{
		{Name: "a"},
		{Name: "a", DNS: &DNS{Search: []string{"y"}}},
		{Name: "a", DNS: &DNS{Search: []string{"x"}}, Default: true},
		{Name: "a", DNS: &DNS{Search: []string{"x"}}, Extra: map[string]json.RawMessage{"o.k": json.RawMessage(`1`)}},
		{Name: "a", DNS: &DNS{Search: []string{"x"}}, DeviceInfo: json.RawMessage(`{}`)},
	} {
		if b.Equal(&c) {
			t.Errorf("%#v should differ from %#v", c, b)
		}
	}
}
