package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const exampleYAML = `
pools:
- resourceName: example.com/netdev-a
  netdev:
    names: [eth1]
    patterns: ["ens*f1"]
- resourceName: example.com/sriov-a
  pci:
    vendors: ["0x8086"]
    devices: ["154c"]
    drivers: [iavf, vfio-pci]
    pfNames: [ens1f0]
- resourceName: example.com/vhost
  vhostUser:
    dir: /var/run/multinet/vhost
    slots: 4
    mode: client
    containerPath: /var/run/vhost-user
- resourceName: example.com/memif
  memif:
    dir: /var/run/multinet/memif
    slots: 2
    role: slave
    mode: ethernet
    containerPath: /run/memif
`

func TestParseYAMLAndJSON(t *testing.T) {
	c, err := Parse([]byte(exampleYAML))
	if err != nil {
		t.Fatalf("Parse(yaml): %v", err)
	}
	if len(c.Pools) != 4 {
		t.Fatalf("pools = %d, want 4", len(c.Pools))
	}
	kinds := []string{"netdev", "pci", "vhostUser", "memif"}
	for i, k := range kinds {
		if got := c.Pools[i].Kind(); got != k {
			t.Errorf("pools[%d].Kind() = %q, want %q", i, got, k)
		}
	}
	if c.Pools[2].VhostUser.SocketName != DefaultVhostUserSocket || c.Pools[3].Memif.SocketName != DefaultMemifSocket {
		t.Errorf("socket name defaults not applied: %q %q", c.Pools[2].VhostUser.SocketName, c.Pools[3].Memif.SocketName)
	}

	j := `{"pools":[{"resourceName":"example.com/a","netdev":{"names":["mnt0"]}}]}`
	c, err = Parse([]byte(j))
	if err != nil || c.Pools[0].Netdev.Names[0] != "mnt0" {
		t.Fatalf("Parse(json) = %+v, %v", c, err)
	}
}

func TestLoad(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(exampleYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err != nil {
		t.Fatalf("Load: %v", err)
	}
	if _, err := Load(p + ".missing"); err == nil {
		t.Fatal("Load(missing) succeeded")
	}
	big := filepath.Join(t.TempDir(), "big.yaml")
	_ = os.WriteFile(big, []byte(strings.Repeat("#", MaxFileSize+1)), 0o600)
	if _, err := Load(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("Load(big) = %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	pool := func(body string) string { return "pools:\n- resourceName: example.com/a\n" + body }
	tests := []struct{ name, yaml, want string }{
		{"no pools", "pools: []", "at least one pool"},
		{"unknown key", "pools:\n- resourceName: example.com/a\n  netdevs: {names: [x]}", "unknown field"},
		{"no selector", "pools:\n- resourceName: example.com/a", "exactly one of"},
		{"two selectors", pool("  netdev: {names: [x]}\n  pci: {vendors: ['8086']}"), "exactly one of"},
		{"resourceName missing", "pools:\n- netdev: {names: [x]}", "resourceName: is required"},
		{"resourceName no slash", "pools:\n- resourceName: net-a\n  netdev: {names: [x]}", "vendor-domain/type"},
		{"resourceName two slashes", "pools:\n- resourceName: a.com/b/c\n  netdev: {names: [x]}", "resourceName"},
		{"resourceName bad domain", "pools:\n- resourceName: Example_com/a\n  netdev: {names: [x]}", "resourceName"},
		{"resourceName kubernetes.io", "pools:\n- resourceName: kubernetes.io/a\n  netdev: {names: [x]}", "reserved"},
		{"resourceName long type", "pools:\n- resourceName: example.com/" + strings.Repeat("a", 64) + "\n  netdev: {names: [x]}", "resourceName"},
		{"duplicate resourceName", "pools:\n- resourceName: example.com/a\n  netdev: {names: [x]}\n- resourceName: example.com/a\n  netdev: {names: [y]}", "also used"},
		{"env collision", "pools:\n- resourceName: example.com/a-b\n  netdev: {names: [x]}\n- resourceName: example.com/a.b\n  netdev: {names: [y]}", "same environment variable"},
		{"netdev empty", pool("  netdev: {}"), "names, patterns"},
		{"netdev long name", pool("  netdev: {names: [abcdefghijklmnop]}"), "netdev.names[0]"},
		{"netdev slash", pool("  netdev: {names: [a/b]}"), "netdev.names[0]"},
		{"netdev bad glob", pool("  netdev: {patterns: ['eth[']}"), "netdev.patterns[0]"},
		{"pci empty", pool("  pci: {}"), "at least one of vendors"},
		{"pci vendor", pool("  pci: {vendors: ['808']}"), "pci.vendors[0]"},
		{"pci device", pool("  pci: {devices: [zzzz]}"), "pci.devices[0]"},
		{"pci address", pool("  pci: {addresses: ['01:00.0']}"), "pci.addresses[0]"},
		{"pci address device > 0x1f", pool("  pci: {addresses: ['0000:01:20.0']}"), "pci.addresses[0]"},
		{"pci pfName", pool("  pci: {pfNames: ['']}"), "pci.pfNames[0]"},
		{"vhost mode", pool("  vhostUser: {dir: /d, slots: 1, mode: master, containerPath: /c}"), "vhostUser.mode"},
		{"vhost dir relative", pool("  vhostUser: {dir: d, slots: 1, mode: client, containerPath: /c}"), "vhostUser.dir"},
		{"vhost slots 0", pool("  vhostUser: {dir: /d, slots: 0, mode: client, containerPath: /c}"), "vhostUser.slots"},
		{"vhost slots many", pool("  vhostUser: {dir: /d, slots: 5000, mode: client, containerPath: /c}"), "vhostUser.slots"},
		{"vhost socketName", pool("  vhostUser: {dir: /d, slots: 1, mode: client, socketName: ../x, containerPath: /c}"), "vhostUser.socketName"},
		{"vhost containerPath root", pool("  vhostUser: {dir: /d, slots: 1, mode: client, containerPath: /}"), "vhostUser.containerPath"},
		{"memif role", pool("  memif: {dir: /d, slots: 1, role: client, mode: ip, containerPath: /c}"), "memif.role"},
		{"memif mode", pool("  memif: {dir: /d, slots: 1, role: master, mode: l2, containerPath: /c}"), "memif.mode"},
		{"shared dir", "pools:\n- resourceName: example.com/a\n  vhostUser: {dir: /d, slots: 1, mode: client, containerPath: /c}\n- resourceName: example.com/b\n  memif: {dir: /d/, slots: 1, role: master, mode: ip, containerPath: /c}", "dir \"/d\" is also used"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse = %v, want error containing %q", err, tc.want)
			}
		})
	}
}

func TestEnvName(t *testing.T) {
	for in, want := range map[string]string{
		"example.com/net-a":    "MULTINET_EXAMPLE_COM_NET_A",
		"intel.com/sriov_dpdk": "MULTINET_INTEL_COM_SRIOV_DPDK",
		"a.io/X1":              "MULTINET_A_IO_X1",
	} {
		if got := EnvName(in); got != want {
			t.Errorf("EnvName(%q) = %q, want %q", in, got, want)
		}
	}
}
