package status

import (
	"encoding/json"
	"testing"
)

const benchResult = `{"cniVersion":"1.1.0",
	"interfaces":[{"name":"veth0a1b2c","mac":"aa:aa:aa:aa:aa:01"},
	              {"name":"net1","mac":"02:00:00:00:00:01","mtu":9000,"sandbox":"/var/run/netns/cni-1234","pciID":"0000:18:02.5"}],
	"ips":[{"interface":1,"address":"10.1.0.5/24","gateway":"10.1.0.1"},{"interface":1,"address":"fd00:1::5/64","gateway":"fd00:1::1"}],
	"routes":[{"dst":"0.0.0.0/0","gw":"10.1.0.1"},{"dst":"::/0","gw":"fd00:1::1"}],
	"dns":{"nameservers":["10.1.0.53"],"search":["example.com"]}}`

func BenchmarkFromResult(b *testing.B) {
	r := parseResult(b, benchResult)
	opts := Options{DefaultRoute: true}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := FromResult(r, "ns/net", "net1", opts); err != nil {
			b.Fatal(err)
		}
	}
}

func benchList() []NetworkStatus {
	return []NetworkStatus{
		{Name: "cbr0", Interface: "eth0", IPs: []string{"10.244.1.7", "fd00:10:244:1::7"}, Mac: "0a:58:0a:f4:01:07", MTU: 1450,
			Default: true, DefaultRoute: []string{"10.244.1.1", "fd00:10:244:1::1"}},
		{Name: "ns/a", Interface: "net1", IPs: []string{"10.1.0.5", "fd00:1::5"}, Mac: "02:00:00:00:00:01", MTU: 9000,
			DNS: &DNS{Nameservers: []string{"10.1.0.53"}, Search: []string{"example.com"}}},
		{Name: "ns/sriov", Interface: "net2", Mac: "02:00:00:00:00:02",
			DeviceInfo: json.RawMessage(`{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:18:02.5","pf-pci-address":"0000:18:00.0"}}`)},
		{Name: "ns/b", Interface: "net3", IPs: []string{"192.0.2.9"}, Extra: map[string]json.RawMessage{"org.example.k": json.RawMessage(`"v"`)}},
	}
}

func BenchmarkEncode(b *testing.B) {
	list := benchList()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(list); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	s, err := Encode(benchList())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(s); err != nil {
			b.Fatal(err)
		}
	}
}
