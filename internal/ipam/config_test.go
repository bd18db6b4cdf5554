package ipam

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func mustConfig(t testing.TB, stdin string) *Config {
	t.Helper()
	nc, err := ParseNetConf([]byte(stdin))
	if err != nil {
		t.Fatal(err)
	}
	c, err := nc.Config()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestConfigDefaults(t *testing.T) {
	c := mustConfig(t, `{"cniVersion":"1.0.0","name":"blue","ipam":{"type":"multinet-ipam",
		"ranges":[[{"subnet":"10.1.2.0/24"}],[{"subnet":"fd10::/64"}]]}}`)
	if c.Pool != "blue" || c.Network != "blue" {
		t.Errorf("pool/network = %q/%q, want the network name", c.Pool, c.Network)
	}
	v4, v6 := c.RangeSets[0][0], c.RangeSets[1][0]
	want := []struct{ got, want string }{
		{v4.Start.String(), "10.1.2.1"}, {v4.End.String(), "10.1.2.254"}, {v4.Gateway.String(), "10.1.2.1"},
		{v6.Start.String(), "fd10::1"}, {v6.End.String(), "fd10::ffff:ffff:ffff:ffff"}, {v6.Gateway.String(), "fd10::1"},
	}
	for _, w := range want {
		if w.got != w.want {
			t.Errorf("got %s, want %s", w.got, w.want)
		}
	}
	// A /31 and a /32 use every address and have no gateway.
	c = mustConfig(t, `{"name":"p2p","ipam":{"type":"multinet-ipam","ranges":[[{"subnet":"10.9.0.0/31"}]]}}`)
	if r := c.RangeSets[0][0]; r.Start.String() != "10.9.0.0" || r.End.String() != "10.9.0.1" || r.Gateway.IsValid() {
		t.Errorf("/31 range = %+v", r)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct{ name, ipam, field string }{
		{"no ranges", `"ranges":[]`, "ipam.ranges"},
		{"empty set", `"ranges":[[]]`, "ipam.ranges[0]"},
		{"bad subnet", `"ranges":[[{"subnet":"10.1.2.0"}]]`, "ipam.ranges[0][0].subnet"},
		{"start outside", `"ranges":[[{"subnet":"10.1.2.0/24","rangeStart":"10.1.3.1"}]]`, "ipam.ranges[0][0].rangeStart"},
		{"end before start", `"ranges":[[{"subnet":"10.1.2.0/24","rangeStart":"10.1.2.9","rangeEnd":"10.1.2.8"}]]`, "ipam.ranges[0][0].rangeEnd"},
		{"gateway outside", `"ranges":[[{"subnet":"10.1.2.0/24","gateway":"10.1.3.1"}]]`, "ipam.ranges[0][0].gateway"},
		{"mixed family", `"ranges":[[{"subnet":"10.1.2.0/24"},{"subnet":"fd00::/64"}]]`, "ipam.ranges[0]"},
		{"overlap", `"ranges":[[{"subnet":"10.1.2.0/24"}],[{"subnet":"10.1.2.0/25"}]]`, "ipam.ranges[1][0]"},
		{"bad exclude", `"ranges":[[{"subnet":"10.1.2.0/24"}]],"exclude":["x"]`, "ipam.exclude[0]"},
		{"long pool", `"pool":"` + strings.Repeat("a", 254) + `","ranges":[[{"subnet":"10.1.2.0/24"}]]`, "ipam.pool"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := ParseNetConf([]byte(`{"name":"n","ipam":{"type":"multinet-ipam",` + tc.ipam + `}}`))
			if err == nil {
				_, err = nc.Config()
			}
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Fatalf("err = %v, want a ConfigError on %s", err, tc.field)
			}
		})
	}
	if _, err := ParseNetConf([]byte(`{"name":"n","ipam":{"type":"host-local"}}`)); err == nil {
		t.Error("another ipam type was accepted")
	}
	if _, err := ParseNetConf([]byte(`{"name":"n"}`)); err == nil {
		t.Error("a configuration without ipam was accepted")
	}
}

func TestRequestedIPs(t *testing.T) {
	nc, err := ParseNetConf([]byte(`{"name":"n","ipam":{"type":"multinet-ipam","ranges":[[{"subnet":"10.1.2.0/24"}]]},
		"runtimeConfig":{"ips":["10.1.2.7/24","fd00::9"],"ipamClaimReference":"c1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	ips, err := nc.RequestedIPs()
	if err != nil || len(ips) != 2 || ips[0] != netip.MustParseAddr("10.1.2.7") || ips[1] != netip.MustParseAddr("fd00::9") {
		t.Errorf("ips = %v, %v", ips, err)
	}
	if nc.ClaimReference() != "c1" {
		t.Errorf("claim = %q", nc.ClaimReference())
	}
	nc.RuntimeConfig.IPs = []string{"10.1.2.300"}
	if _, err := nc.RequestedIPs(); err == nil || !strings.Contains(err.Error(), "runtimeConfig.ips[0]") {
		t.Errorf("err = %v", err)
	}
}

func TestAssignRequested(t *testing.T) {
	c := mustConfig(t, `{"name":"n","ipam":{"type":"multinet-ipam","exclude":["10.1.2.64/26"],
		"ranges":[[{"subnet":"10.1.2.0/24","rangeEnd":"10.1.2.200"}],[{"subnet":"fd10::/64"}]]}}`)
	for _, tc := range []struct {
		ip   string
		want string // "" = accepted
	}{
		{"10.1.2.7", ""},
		{"fd10::7", ""},
		{"10.1.2.201", "none of its ranges"},
		{"10.1.3.1", "none of its ranges"},
		{"10.1.2.1", "the gateway"},
		{"10.1.2.70", "excluded"},
	} {
		_, err := c.assignRequested([]netip.Addr{netip.MustParseAddr(tc.ip)})
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrOutOfRange)) {
			t.Errorf("%s: err = %v, want %q", tc.ip, err, tc.want)
		}
	}
	if _, err := c.assignRequested([]netip.Addr{netip.MustParseAddr("10.1.2.7"), netip.MustParseAddr("10.1.2.8")}); err == nil {
		t.Error("two requested addresses of one range set were accepted")
	}
}

func TestObjectName(t *testing.T) {
	for _, tc := range []struct{ pool, addr, want string }{
		{"blue", "10.1.2.3", "blue.10-1-2-3"},
		{"blue", "fd10::8", "blue.fd10-0-0-0-0-0-0-8"},
		{"a.b", "10.0.0.1", "a.b.10-0-0-1"},
	} {
		if got := ObjectName(tc.pool, netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("ObjectName(%s, %s) = %s, want %s", tc.pool, tc.addr, got, tc.want)
		}
	}
	// Pools that are not DNS names get a hashed, valid name, different
	// from each other.
	a, b := ObjectName("Blue_Net", netip.MustParseAddr("10.0.0.1")), ObjectName("blue-net", netip.MustParseAddr("10.0.0.1"))
	if a == b || !strings.HasPrefix(a, "blue-net-") {
		t.Errorf("names %s, %s", a, b)
	}
}

// The cursor visits every address of a range set exactly once, across
// ranges, from any start and with any stride.
func TestCursor(t *testing.T) {
	c := mustConfig(t, `{"name":"n","ipam":{"type":"multinet-ipam","ranges":[[
		{"subnet":"10.0.0.0/29"},{"subnet":"10.0.1.0/30"}]]}}`)
	set := c.RangeSets[0]
	if set.size() != 6+2 {
		t.Fatalf("size = %d", set.size())
	}
	for start := uint64(0); start < 20; start++ {
		for _, stride := range []uint64{0, 1, 2, 3, 4, 6, 8, 1 << 63, 12345678901} {
			seen := map[netip.Addr]int{}
			var order []netip.Addr
			cur := newCursor(set, start, stride)
			for {
				a, r, ok := cur.next()
				if !ok {
					break
				}
				if a.Less(r.Start) || r.End.Less(a) {
					t.Fatalf("%s outside its range %s-%s", a, r.Start, r.End)
				}
				seen[a]++
				order = append(order, a)
			}
			if len(seen) != 8 || len(order) != 8 {
				t.Errorf("start %d stride %d: visited %v", start, stride, order)
			}
		}
	}
}

func FuzzParseNetConf(f *testing.F) {
	f.Add([]byte(`{"name":"n","ipam":{"type":"multinet-ipam","ranges":[[{"subnet":"10.1.2.0/24"}]]}}`))
	f.Add([]byte(`{"name":"n","ipam":{"type":"multinet-ipam","exclude":["10.0.0.0/8"],"ranges":[[{"subnet":"fd00::/120","rangeStart":"fd00::5","gateway":"fd00::1"}]]},"runtimeConfig":{"ips":["fd00::9/120"]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		nc, err := ParseNetConf(data)
		if err != nil {
			return
		}
		_, _ = nc.RequestedIPs()
		c, err := nc.Config()
		if err != nil {
			return
		}
		for _, s := range c.RangeSets {
			for _, r := range s {
				if !r.Subnet.Contains(r.Start) || !r.Subnet.Contains(r.End) || r.End.Less(r.Start) {
					t.Fatalf("accepted a range outside its subnet: %+v", r)
				}
			}
			cur := newCursor(s, 12345, 678)
			for i := 0; i < 10; i++ {
				a, r, ok := cur.next()
				if !ok {
					break
				}
				if a.Less(r.Start) || r.End.Less(a) {
					t.Fatalf("cursor left its range: %s not in %s-%s", a, r.Start, r.End)
				}
			}
		}
	})
}

// Configurations we did not write: whereabouts' README examples with only
// the IPAM type changed are refused with the field and the way to write
// them, not read as a network without ranges.
func TestConfigWhereaboutsKeys(t *testing.T) {
	for _, c := range []struct{ name, ipam, field string }{
		{"README range and exclude", `"range":"192.168.2.225/28","exclude":["192.168.2.229/30","192.168.2.236/32"]`, "ipam.range"},
		{"range_start and range_end", `"range":"192.168.2.0/24","range_start":"192.168.2.10","range_end":"192.168.2.100"`, "ipam.range"},
		{"dual stack ipRanges", `"ipRanges":[{"range":"192.168.10.0/24"},{"range":"abcd::0/64"}]`, "ipam.ipRanges"},
	} {
		t.Run(c.name, func(t *testing.T) {
			nc, err := ParseNetConf([]byte(`{"cniVersion":"0.3.0","name":"whereaboutsexample","type":"macvlan","master":"eth0","mode":"bridge","ipam":{"type":"multinet-ipam",` + c.ipam + `}}`))
			if err != nil {
				t.Fatal(err)
			}
			_, err = nc.Config()
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field != c.field || !strings.Contains(ce.Msg, "whereabouts") || !strings.Contains(ce.Msg, `"ranges"`) {
				t.Errorf("Config() = %v, want a ConfigError on %s naming whereabouts and \"ranges\"", err, c.field)
			}
		})
	}
}

// A network configuration may not name multinet-ipam's socket: the key is
// refused, naming it, whatever its value (multinetd's CNI socket, or even
// the right one).
func TestConfigSocketPathRefused(t *testing.T) {
	for _, p := range []string{"/run/multinet/multinetd.sock", "/run/multinet/ipam.sock", ""} {
		nc, err := ParseNetConf([]byte(`{"name":"n","ipam":{"type":"multinet-ipam","socketPath":"` + p + `","ranges":[[{"subnet":"10.1.0.0/24"}]]}}`))
		if err != nil {
			t.Fatal(err)
		}
		_, err = nc.Config()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != "ipam.socketPath" || !strings.Contains(ce.Msg, "node configuration") {
			t.Errorf("socketPath %q: %v, want a ConfigError naming ipam.socketPath", p, err)
		}
	}
}
