package netconf

import (
	"fmt"
	"testing"

	"github.com/multinet/multinet/pkg/spec/selection"
)

const benchMacvlan = `{"cniVersion":"1.0.0","name":"macvlan-conf","type":"macvlan","master":"eth0","mode":"bridge",
 "capabilities":{"ips":true,"mac":true},
 "ipam":{"type":"host-local","subnet":"192.168.1.0/24","rangeStart":"192.168.1.200","rangeEnd":"192.168.1.216",
  "routes":[{"dst":"0.0.0.0/0"}],"gateway":"192.168.1.1"}}`

const benchList = `{"cniVersion":"1.0.0","name":"bridge-list","plugins":[
 {"type":"bridge","bridge":"br0","isGateway":true,"ipam":{"type":"host-local","subnet":"10.10.0.0/16"}},
 {"type":"portmap","capabilities":{"portMappings":true}},
 {"type":"tuning","sysctl":{"net.ipv4.conf.all.log_martians":"1"}}]}`

// BenchmarkResolveSpecConfig is the per-attachment cost of turning a NAD's
// spec.config into a config list (§3.4.1 rule 1).
func BenchmarkResolveSpecConfig(b *testing.B) {
	for _, c := range []struct{ name, config string }{
		{"config", benchMacvlan},
		{"configlist3", benchList},
		{"thick-name-injection", `{"cniVersion":"0.3.0","type":"awesome-plugin"}`},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Resolve("ns1", "nad", c.config, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// The daemon's hot path: the NAD's spec.config is unchanged since the
	// last pod, so the Resolver's memo answers.
	b.Run("resolver-memo-hit", func(b *testing.B) {
		r := NewResolver(nil, 0)
		config := string([]byte(benchMacvlan)) // as an informer would hold it
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.Resolve("ns1", "nad", config); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkPlan plans three attachments of a pod: one with ips+mac, one with
// cni-args over a three-plugin list, one plain.
func BenchmarkPlan(b *testing.B) {
	mac := mustResolve(b, "macvlan-conf", benchMacvlan)
	list := mustResolve(b, "bridge-list", benchList)
	nets := []Network{
		{Element: selection.Element{Namespace: "ns1", Name: "macvlan-conf", IPRequest: []string{"192.168.1.205/24"}, MacRequest: "c2:b0:57:49:47:f1"}, ConfList: mac},
		{Element: selection.Element{Namespace: "ns1", Name: "bridge-list", CNIArgs: map[string]any{"foo": "bar", "n": 1}}, ConfList: list},
		{Element: selection.Element{Namespace: "ns1", Name: "macvlan-conf", InterfaceRequest: "data0"}, ConfList: mac},
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Plan(nets, PlanOptions{DefaultIfName: "eth0"}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkConfDirLookup is an on-disk lookup (§3.4.1 rules 2–3) in a
// directory of 10 files whose parse is cached: one readdir and ten stats.
func BenchmarkConfDirLookup(b *testing.B) {
	dir := b.TempDir()
	for i := range 10 {
		writeFile(b, dir, fmt.Sprintf("%02d-net.conf", i), fmt.Sprintf(`{"cniVersion":"1.0.0","name":"net-%d","type":"bridge"}`, i))
	}
	cd := NewConfDir(ConfDirOptions{Dir: dir})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cd.Lookup("net-9"); err != nil {
			b.Fatal(err)
		}
	}
}
