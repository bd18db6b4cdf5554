package netdevplugin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseConfAndDevice(t *testing.T) {
	sysfs := t.TempDir()
	if err := os.MkdirAll(filepath.Join(sysfs, "bus", "pci", "devices", "0000:3b:02.1", "net", "ens1f0v1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(sysfs, "bus", "pci", "devices", "0000:3b:02.2"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		conf, device, hostName, err string
	}{
		{conf: `{"runtimeConfig": {"deviceID": "eth3"}, "deviceID": "eth9"}`, device: "eth3", hostName: "eth3"},
		{conf: `{"deviceID": "eth9"}`, device: "eth9", hostName: "eth9"},
		{conf: `{"deviceID": "0000:3b:02.1"}`, device: "ens1f0v1"},
		{conf: `{"deviceID": "0000:3b:02.2"}`, err: "has 0 network interfaces"},
		{conf: `{"deviceID": "0000:3b:02.3"}`, err: "0000:3b:02.3"},
		{conf: `{}`, err: `"deviceID"`},
		{conf: `{"deviceID": "a/b"}`, err: "neither an interface name"},
		{conf: `{"deviceID": "much-too-long-name"}`, err: "neither an interface name"},
		{conf: `{"runtimeConfig": {"deviceID": "eth3", "CNIDeviceInfoFile": "rel/x.json"}}`, err: "absolute"},
		{conf: `{"deviceID": 3}`, err: "parse"},
	} {
		c, err := ParseConf([]byte(tc.conf))
		var dev string
		if err == nil {
			dev, err = c.resolveDevice(sysfs)
		}
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: err = %v, want one containing %q", tc.conf, err, tc.err)
			}
			continue
		}
		if err != nil || dev != tc.device || c.hostName() != tc.hostName {
			t.Errorf("%s: device %q, hostName %q, err %v; want %q, %q", tc.conf, dev, c.hostName(), err, tc.device, tc.hostName)
		}
	}
}
