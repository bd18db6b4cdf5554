package devinfo

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The examples of spec §4.3 and the device-info maps of §6.1.2, with the
// typographic quotes and missing commas of the published text repaired (see
// docs/decisions/devinfo.md). The vdpa map of §6.1.2 is in TestSpecExampleBadBDF.
var specExamples = []struct {
	name string
	json string
	want DeviceInfo
}{
	{
		name: "§4.3 pci",
		json: `{
    "type": "pci",
    "version": "1.1.0",
    "pci": {
        "pci-address": "0000:01:02.2",
        "pf-pci-address": "0000:01:02.0"
    }
}`,
		want: DeviceInfo{Type: TypePCI, Version: "1.1.0", PCI: &PCI{PCIAddress: "0000:01:02.2", PFPCIAddress: "0000:01:02.0"}},
	},
	{
		name: "§4.3 vdpa",
		json: `{
    "type": "vdpa",
    "version": "1.1.0",
    "vdpa": {
        "parent-device": "vdpa3",
        "driver": "vhost",
        "path": "/dev/vdpa-vhost0"
    }
}`,
		want: DeviceInfo{Type: TypeVDPA, Version: "1.1.0", VDPA: &VDPA{ParentDevice: "vdpa3", Driver: "vhost", Path: "/dev/vdpa-vhost0"}},
	},
	{
		name: "§4.3 vhost-user",
		json: `{
    "type": "vhost-user",
    "version": "1.1.0",
    "vhost-user": {
        "mode": "server",
        "path": "/var/run/vhost.sock"
    }
}`,
		want: DeviceInfo{Type: TypeVhostUser, Version: "1.1.0", VhostUser: &VhostUser{Mode: "server", Path: "/var/run/vhost.sock"}},
	},
	{
		name: "§6.1.2 sriov-network_a",
		json: `{"type": "pci", "version": "1.1.0", "pci": {"pci-address": "0000:18:02.5", "pf-pci-address": "0000:18:00.0"}}`,
		want: DeviceInfo{Type: TypePCI, Version: "1.1.0", PCI: &PCI{PCIAddress: "0000:18:02.5", PFPCIAddress: "0000:18:00.0"}},
	},
	{
		name: "§6.1.2 sriov-network_b",
		json: `{"type": "pci", "version": "1.1.0", "pci": {"pci-address": "0000:18:0a.2", "vhost-net": "/dev/vhost-net", "pf-pci-address": "0000:18:00.1"}}`,
		want: DeviceInfo{Type: TypePCI, Version: "1.1.0", PCI: &PCI{PCIAddress: "0000:18:0a.2", VhostNet: "/dev/vhost-net", PFPCIAddress: "0000:18:00.1"}},
	},
	{
		name: "§6.1.2 userspace_net1",
		json: `{"type": "vhost-user", "version": "1.1.0", "vhost-user": {"mode": "client", "path": "/var/run/net3/vhost.sock"}}`,
		want: DeviceInfo{Type: TypeVhostUser, Version: "1.1.0", VhostUser: &VhostUser{Mode: "client", Path: "/var/run/net3/vhost.sock"}},
	},
	{
		name: "§3.1.6 memif (spec has no example)",
		json: `{"type": "memif", "version": "1.1.0", "memif": {"role": "slave", "path": "/run/memif/memif.sock", "mode": "ethernet"}}`,
		want: DeviceInfo{Type: TypeMemif, Version: "1.1.0", Memif: &Memif{Role: "slave", Path: "/run/memif/memif.sock", Mode: "ethernet"}},
	},
	{
		name: "§3.1.3 all pci keys",
		json: `{"type":"pci","version":"1.0.0","pci":{"pci-address":"0000:3B:02.7","vhost-net":"/dev/vhost-net","rdma-device":"mlx5_3","pf-pci-address":"0000:3b:00.0","representor-device":"eth3"}}`,
		want: DeviceInfo{Type: TypePCI, Version: "1.0.0", PCI: &PCI{PCIAddress: "0000:3B:02.7", VhostNet: "/dev/vhost-net", RDMADevice: "mlx5_3", PFPCIAddress: "0000:3b:00.0", RepresentorDevice: "eth3"}},
	},
}

func TestDecodeSpecExamples(t *testing.T) {
	for _, tc := range specExamples {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Decode([]byte(tc.json))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Fatalf("Decode = %+v, want %+v", *got, tc.want)
			}
			// Round trip: Encode then Decode gives the same value.
			b, err := got.Encode()
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			again, err := Decode(b)
			if err != nil {
				t.Fatalf("Decode(Encode): %v (%s)", err, b)
			}
			if !reflect.DeepEqual(again, got) {
				t.Fatalf("round trip = %+v, want %+v", again, got)
			}
		})
	}
}

// The published §4.3 examples are not JSON (typographic quotes, a missing
// quote); they must be rejected rather than half-parsed.
func TestDecodeGarbledSpecExamples(t *testing.T) {
	for _, s := range []string{
		"{\"type\": \"pci\", \"version\": \"1.1.0\", \"pci\": {\"pci-address\": \"0000:01:02.2\", \u201cpf-pci-address\u201d: \"0000:01:02.0\"}}",
		"{\"type\": \"vdpa\", \"version\": \"1.1.0\", \"vdpa\": {\u201cparent-device\u201d: \u201cvdpa3\u201d, \"driver\": \"vhost\", \"path: \"/dev/vdpa-vhost0\"}}",
	} {
		if _, err := Decode([]byte(s)); err == nil {
			t.Errorf("Decode(%q) = nil error, want a JSON error", s)
		}
	}
}

// §6.1.2's vdpa map has "pci-address": "0000:02:01:6", which is not in the BDF
// form §3.1.4.4 requires; we follow the normative text.
func TestSpecExampleBadBDF(t *testing.T) {
	_, err := Decode([]byte(`{"type": "vdpa", "version": "1.1.0", "vdpa": {"parent-device": "vdpa2", "driver": "vhost", "path": "/dev/vhost-vdpa0", "pci-address": "0000:02:01:6", "pf-pci-address": "0000:02:01:0"}}`))
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "vdpa.pci-address" || fe.Section != "3.1.4.4" {
		t.Fatalf("err = %v, want FieldError for vdpa.pci-address §3.1.4.4", err)
	}
}

func TestValidateErrors(t *testing.T) {
	pci := &PCI{PCIAddress: "0000:01:02.2"}
	tests := []struct {
		name    string
		d       *DeviceInfo
		field   string
		section string
	}{
		{"nil", nil, "type", "3.1.1"},
		{"§3.1.1 type missing", &DeviceInfo{Version: "1.1.0", PCI: pci}, "type", "3.1.1"},
		{"§3.1.1 type unknown", &DeviceInfo{Type: "usb", Version: "1.1.0"}, "type", "3.1.1"},
		{"§3.1.1 type case", &DeviceInfo{Type: "PCI", Version: "1.1.0", PCI: pci}, "type", "3.1.1"},
		{"§3.1.2 version missing", &DeviceInfo{Type: TypePCI, PCI: pci}, "version", "3.1.2"},
		{"§3.1.2 version two parts", &DeviceInfo{Type: TypePCI, Version: "1.1", PCI: pci}, "version", "3.1.2"},
		{"§3.1.2 version v prefix", &DeviceInfo{Type: TypePCI, Version: "v1.1.0", PCI: pci}, "version", "3.1.2"},
		{"§3.1.2 version leading zero", &DeviceInfo{Type: TypePCI, Version: "1.01.0", PCI: pci}, "version", "3.1.2"},
		{"§3.1.2 version suffix", &DeviceInfo{Type: TypePCI, Version: "1.1.0-rc1", PCI: pci}, "version", "3.1.2"},
		{"§3.1.3 pci map missing", &DeviceInfo{Type: TypePCI, Version: "1.1.0"}, "pci", "3.1.3"},
		{"§3.1.3.1 pci-address missing", &DeviceInfo{Type: TypePCI, Version: "1.1.0", PCI: &PCI{}}, "pci.pci-address", "3.1.3.1"},
		{"§3.1.3.1 pci-address short form", &DeviceInfo{Type: TypePCI, Version: "1.1.0", PCI: &PCI{PCIAddress: "01:02.2"}}, "pci.pci-address", "3.1.3.1"},
		{"§3.1.3.4 pf-pci-address bad", &DeviceInfo{Type: TypePCI, Version: "1.1.0", PCI: &PCI{PCIAddress: "0000:01:02.2", PFPCIAddress: "ens1f0"}}, "pci.pf-pci-address", "3.1.3.4"},
		{"§3.1.4 vdpa map missing", &DeviceInfo{Type: TypeVDPA, Version: "1.1.0", PCI: pci}, "vdpa", "3.1.4"},
		{"§3.1.4.1 parent-device missing", &DeviceInfo{Type: TypeVDPA, Version: "1.1.0", VDPA: &VDPA{Driver: "vhost", Path: "/dev/x"}}, "vdpa.parent-device", "3.1.4.1"},
		{"§3.1.4.2 driver missing", &DeviceInfo{Type: TypeVDPA, Version: "1.1.0", VDPA: &VDPA{ParentDevice: "vdpa0", Path: "/dev/x"}}, "vdpa.driver", "3.1.4.2"},
		{"§3.1.4.2 driver bad", &DeviceInfo{Type: TypeVDPA, Version: "1.1.0", VDPA: &VDPA{ParentDevice: "vdpa0", Driver: "mlx5", Path: "/dev/x"}}, "vdpa.driver", "3.1.4.2"},
		{"§3.1.4.3 path missing", &DeviceInfo{Type: TypeVDPA, Version: "1.1.0", VDPA: &VDPA{ParentDevice: "vdpa0", Driver: "virtio"}}, "vdpa.path", "3.1.4.3"},
		{"§3.1.4.3 path relative", &DeviceInfo{Type: TypeVDPA, Version: "1.1.0", VDPA: &VDPA{ParentDevice: "vdpa0", Driver: "virtio", Path: "dev/x"}}, "vdpa.path", "3.1.4.3"},
		{"§3.1.4.5 pf-pci-address bad", &DeviceInfo{Type: TypeVDPA, Version: "1.1.0", VDPA: &VDPA{ParentDevice: "vdpa0", Driver: "virtio", Path: "/dev/x", PFPCIAddress: "x"}}, "vdpa.pf-pci-address", "3.1.4.5"},
		{"§3.1.5 vhost-user map missing", &DeviceInfo{Type: TypeVhostUser, Version: "1.1.0"}, "vhost-user", "3.1.5"},
		{"§3.1.5.1 mode missing", &DeviceInfo{Type: TypeVhostUser, Version: "1.1.0", VhostUser: &VhostUser{Path: "/s"}}, "vhost-user.mode", "3.1.5.1"},
		{"§3.1.5.1 mode bad", &DeviceInfo{Type: TypeVhostUser, Version: "1.1.0", VhostUser: &VhostUser{Mode: "master", Path: "/s"}}, "vhost-user.mode", "3.1.5.1"},
		{"§3.1.5.2 path missing", &DeviceInfo{Type: TypeVhostUser, Version: "1.1.0", VhostUser: &VhostUser{Mode: "client"}}, "vhost-user.path", "3.1.5.2"},
		{"§3.1.6 memif map missing", &DeviceInfo{Type: TypeMemif, Version: "1.1.0"}, "memif", "3.1.6"},
		{"§3.1.6.1 role missing", &DeviceInfo{Type: TypeMemif, Version: "1.1.0", Memif: &Memif{Path: "/s", Mode: "ip"}}, "memif.role", "3.1.6.1"},
		{"§3.1.6.1 role bad", &DeviceInfo{Type: TypeMemif, Version: "1.1.0", Memif: &Memif{Role: "client", Path: "/s", Mode: "ip"}}, "memif.role", "3.1.6.1"},
		{"§3.1.6.2 path missing", &DeviceInfo{Type: TypeMemif, Version: "1.1.0", Memif: &Memif{Role: "master", Mode: "ip"}}, "memif.path", "3.1.6.2"},
		{"§3.1.6.3 mode missing", &DeviceInfo{Type: TypeMemif, Version: "1.1.0", Memif: &Memif{Role: "master", Path: "/s"}}, "memif.mode", "3.1.6.3"},
		{"§3.1.6.3 mode bad", &DeviceInfo{Type: TypeMemif, Version: "1.1.0", Memif: &Memif{Role: "master", Path: "/s", Mode: "l2"}}, "memif.mode", "3.1.6.3"},
		{"other present map validated", &DeviceInfo{Type: TypePCI, Version: "1.1.0", PCI: pci, VhostUser: &VhostUser{Mode: "x", Path: "/s"}}, "vhost-user.mode", "3.1.5.1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.d.Validate()
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate = %v, want *FieldError", err)
			}
			if fe.Field != tc.field || fe.Section != tc.section {
				t.Fatalf("Validate = %v; field %q §%s, want %q §%s", err, fe.Field, fe.Section, tc.field, tc.section)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("error %q does not name the field %q", err, tc.field)
			}
		})
	}
}

func TestValidateAcceptsAllEnumValues(t *testing.T) {
	for _, d := range []DeviceInfo{
		{Type: TypeVDPA, Version: SpecVersion, VDPA: &VDPA{ParentDevice: "vdpa0", Driver: VDPADriverVhost, Path: "/dev/vhost-vdpa0"}},
		{Type: TypeVDPA, Version: SpecVersion, VDPA: &VDPA{ParentDevice: "vdpa0", Driver: VDPADriverVirtio, Path: "/sys/bus/virtio/devices/virtio5", PCIAddress: "0000:65:00.2", PFPCIAddress: "0000:65:00.0", RepresentorDevice: "eth3"}},
		{Type: TypeVhostUser, Version: SpecVersion, VhostUser: &VhostUser{Mode: VhostUserModeClient, Path: "/s"}},
		{Type: TypeVhostUser, Version: SpecVersion, VhostUser: &VhostUser{Mode: VhostUserModeServer, Path: "/s"}},
		{Type: TypeMemif, Version: SpecVersion, Memif: &Memif{Role: MemifRoleMaster, Path: "/s", Mode: MemifModeEthernet}},
		{Type: TypeMemif, Version: SpecVersion, Memif: &Memif{Role: MemifRoleSlave, Path: "/s", Mode: MemifModeIP}},
		{Type: TypeMemif, Version: SpecVersion, Memif: &Memif{Role: MemifRoleSlave, Path: "/s", Mode: MemifModeInjectPunt}},
		{Type: TypePCI, Version: "1.0.0", PCI: &PCI{PCIAddress: "ffff:ff:1f.7"}},
		{Type: TypePCI, Version: "1.10.123", PCI: &PCI{PCIAddress: "0000:00:00.0"}},
	} {
		if err := d.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", d, err)
		}
	}
}

// pciAddressCases are IsPCIAddress's table, also the seeds of
// FuzzIsPCIAddress.
var pciAddressCases = map[string]bool{
	"0000:01:02.2":   true, // spec §4.3 example
	"0000:18:0a.2":   true, // spec §6.1.2 example
	"0000:af:1f.7":   true,
	"0000:AF:1F.7":   true,
	"0000:aF:1f.0":   true,
	"10de:00:00.0":   true,
	"ffff:ff:1f.7":   true,
	"0000:01:02.8":   false, // function 0-7
	"0000:01:02.f":   false,
	"0000:01:20.0":   false, // device 0x00-0x1f
	"0000:01:ff.0":   false,
	"0000:01:02:2":   false, // §6.1.2 vdpa example typo
	"01:02.2":        false, // no domain (lspci's short form)
	"00000:01:02.2":  false, // domain longer than dddd
	"10000:18:02.5":  false,
	"000:01:02.2":    false,
	"0000:1:02.2":    false,
	"0000:001:02.2":  false,
	"0000:01:2.2":    false,
	"0000:0g:02.2":   false,
	"0x00:01:02.2":   false,
	"0000-01-02.2":   false,
	"0000:01:02.":    false,
	"0000:01:02.22":  false,
	" 0000:01:02.2":  false,
	"0000:01:02.2\n": false,
	"0000:01:02.2/":  false,
	"０000:01:02.2":   false, // a full-width digit is not hex
	"8086:154c":      false, // vendor:device ID, not an address
	"":               false,
}

func TestIsPCIAddress(t *testing.T) {
	for s, want := range pciAddressCases {
		if got := IsPCIAddress(s); got != want {
			t.Errorf("IsPCIAddress(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name, json, wantInErr string
	}{
		{"not an object", `[]`, "not a JSON object"},
		{"null", `null`, "not a JSON object"},
		{"empty", ``, "not a JSON object"},
		{"trailing data", `{"type":"vhost-user","version":"1.1.0","vhost-user":{"mode":"client","path":"/s"}} {}`, "trailing data"},
		{"type not a string", `{"type":1,"version":"1.1.0"}`, `"type"`},
		{"nested key not a string", `{"type":"pci","version":"1.1.0","pci":{"pci-address":5}}`, `"pci.pci-address"`},
		{"map not an object", `{"type":"pci","version":"1.1.0","pci":"0000:01:02.2"}`, `"pci"`},
		// JSON keys are case-sensitive: "Type" is not "type" (§3.1.1).
		{"key case", `{"Type":"pci","version":"1.1.0","pci":{"pci-address":"0000:01:02.2"}}`, `"type": is required`},
		{"map key case", `{"type":"pci","version":"1.1.0","pci":{"PCI-Address":"0000:01:02.2"}}`, `"pci.pci-address": is required`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.json))
			if err == nil || !strings.Contains(err.Error(), tc.wantInErr) {
				t.Fatalf("Decode(%s) = %v, want an error containing %q", tc.json, err, tc.wantInErr)
			}
		})
	}
}

func TestDecodeIgnoresUnknownKeys(t *testing.T) {
	d, err := Decode([]byte(`{"type":"pci","version":"1.2.0","org.example/x":{"a":1},"pci":{"pci-address":"0000:01:02.2","future":"y","vhost-net":null}}`))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	want := DeviceInfo{Type: TypePCI, Version: "1.2.0", PCI: &PCI{PCIAddress: "0000:01:02.2"}}
	if !reflect.DeepEqual(*d, want) {
		t.Fatalf("Decode = %+v, want %+v", *d, want)
	}
}

func TestEncodeKeyOrderAndOmitEmpty(t *testing.T) {
	d := DeviceInfo{Type: TypePCI, Version: SpecVersion, PCI: &PCI{PCIAddress: "0000:01:02.2", RDMADevice: "mlx5_0"}}
	b, err := d.Encode()
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:01:02.2","rdma-device":"mlx5_0"}}`
	if string(b) != want {
		t.Fatalf("Encode = %s, want %s", b, want)
	}
	if _, err := (&DeviceInfo{Type: TypePCI, Version: SpecVersion}).Encode(); err == nil {
		t.Fatal("Encode of an invalid map succeeded")
	}
}

// §3.1.2 "version": the versions the spec defines (1.0.0, and 1.1.0, the
// spec's own) are accepted; an unknown version in the spec's
// MAJOR.MINOR.PATCH form (1.2.0, 2.0.0) is read best-effort, i.e. accepted
// when the map passes the §3.1 checks we know; anything else ("v1.1.0", the
// form of the spec repository's tags) is a FieldError on "version". Version
// is checked last, so a version error means the rest of the map is valid.
func TestDecodeVersions(t *testing.T) {
	for _, v := range append(slices.Clone(KnownVersions), "1.2.0", "1.1.7", "2.0.0", "10.0.0") {
		d, err := Decode([]byte(`{"type":"pci","version":"` + v + `","pci":{"pci-address":"0000:01:02.2"}}`))
		if err != nil || d.Version != v {
			t.Errorf("Decode(version %q) = %+v, %v; want it accepted", v, d, err)
		}
	}
	for _, v := range []string{"v1.1.0", "V1.0.0", "1.1", "1.1.0.0", "1.1.0-rc1", "01.1.0", ""} {
		_, err := Decode([]byte(`{"type":"pci","version":"` + v + `","pci":{"pci-address":"0000:01:02.2"}}`))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != "version" || fe.Section != "3.1.2" {
			t.Errorf("Decode(version %q) = %v, want a FieldError on version (§3.1.2)", v, err)
		}
	}
	// A map with a bad version and a bad pci-address: the map's error wins.
	_, err := Decode([]byte(`{"type":"pci","version":"v1.1.0","pci":{"pci-address":"01:02.2"}}`))
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "pci.pci-address" {
		t.Errorf("Decode(bad version and address) = %v, want the pci.pci-address error", err)
	}
}
