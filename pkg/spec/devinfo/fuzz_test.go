package devinfo

import (
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// FuzzDecode: Decode never panics; whatever it accepts is valid (§3.1) and
// survives an Encode/Decode round trip unchanged.
func FuzzDecode(f *testing.F) {
	for _, tc := range specExamples {
		f.Add([]byte(tc.json))
	}
	f.Add([]byte(`{"type":"vdpa","version":"1.1.0","vdpa":{"parent-device":"vdpa2","driver":"vhost","path":"/dev/vhost-vdpa0","pci-address":"0000:02:01:6"}}`))
	f.Add([]byte(`{"type":"pci","version":"1.1.0","pci":null}`))
	f.Add([]byte(`{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:01:02.2"}} x`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Decode(data)
		if err != nil {
			return
		}
		if err := d.Validate(); err != nil {
			t.Fatalf("Decode accepted an invalid map: %v", err)
		}
		b, err := d.Encode()
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		again, err := Decode(b)
		if err != nil {
			t.Fatalf("Decode(Encode) = %v for %s", err, b)
		}
		if !reflect.DeepEqual(d, again) {
			t.Fatalf("round trip changed the map: %+v vs %+v", d, again)
		}
	})
}

// FuzzPaths: whatever DPPath, CNIPath and UniqueName accept is a direct child
// of the dp or cni directory (spec §4.1, §4.2).
func FuzzPaths(f *testing.F) {
	f.Add("example.com/net", "0000:01:02.2", "ns/net-a")
	f.Add("../..", "..", "../../x")
	f.Add("a/./b", "x/y", "\x00")
	f.Fuzz(func(t *testing.T, resourceName, deviceID, network string) {
		s := Store{Root: "/r"}
		if p, err := s.DPPath(resourceName, deviceID); err == nil {
			if filepath.Dir(p) != "/r/dp" || strings.ContainsRune(filepath.Base(p), 0) {
				t.Fatalf("DPPath(%q, %q) = %q escapes /r/dp", resourceName, deviceID, p)
			}
		}
		if p, err := s.CNIPath(deviceID); err == nil && filepath.Dir(p) != "/r/cni" {
			t.Fatalf("CNIPath(%q) = %q escapes /r/cni", deviceID, p)
		}
		u, err := UniqueName(resourceName, network, deviceID)
		if err != nil {
			return
		}
		if _, err := s.CNIPath(u); err != nil {
			t.Fatalf("UniqueName(%q, %q, %q) = %q, rejected by CNIPath: %v", resourceName, network, deviceID, u, err)
		}
	})
}

// bdfRE is an independent statement of the BDF form "dddd:BB:DD.f" that
// IsPCIAddress checks: device 00-1f, function 0-7, hex of either case.
var bdfRE = regexp.MustCompile(`^[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[01][0-9a-fA-F]\.[0-7]$`)

// FuzzIsPCIAddress: IsPCIAddress agrees with bdfRE, and an accepted address
// is its own domain, bus, device and function printed back in BDF form.
func FuzzIsPCIAddress(f *testing.F) {
	for s := range pciAddressCases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := IsPCIAddress(s)
		if want := bdfRE.MatchString(s); got != want {
			t.Fatalf("IsPCIAddress(%q) = %v, want %v", s, got, want)
		}
		if !got {
			return
		}
		var domain, bus, dev, fn uint
		if n, err := fmt.Sscanf(s, "%4x:%2x:%2x.%1x", &domain, &bus, &dev, &fn); n != 4 || err != nil {
			t.Fatalf("accepted %q does not scan as BDF: %d, %v", s, n, err)
		}
		if back := fmt.Sprintf("%04x:%02x:%02x.%x", domain, bus, dev, fn); back != strings.ToLower(s) {
			t.Fatalf("accepted %q prints back as %q", s, back)
		}
	})
}
