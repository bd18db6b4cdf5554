package status

import (
	"reflect"
	"testing"
)

// FuzzDecode: Decode never panics, and whatever it accepts encodes, decodes
// back to an equal value, and re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		example54SingleGateway, example54MultipleGateways, example54DeviceInfo,
		`[]`, `null`, `[{"name":"a"}]`, `[{"name":"a","default":true},{"name":"b","default":true}]`,
		`[{"name":"a","dns":{},"org.x":null,"NAME":"b","ips":[]}]`,
		`[{"name":"a","interface":"e","mac":"02:00:00:00:00:01","mtu":1500,"device-info":{"type":"pci"}}]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		list, err := Decode(in)
		if err != nil {
			return
		}
		enc, err := Encode(list)
		if err != nil {
			t.Fatalf("Decode accepted %q but Encode failed: %v", in, err)
		}
		back, err := Decode(enc)
		if err != nil {
			t.Fatalf("Decode(Encode(Decode(%q))) failed: %v\n%s", in, err, enc)
		}
		if !reflect.DeepEqual(back, list) {
			t.Fatalf("round trip of %q differs:\n%#v\nwant\n%#v", in, back, list)
		}
		if enc2, err := Encode(back); err != nil || enc2 != enc {
			t.Fatalf("second Encode differs (%v):\n%s\n%s", err, enc2, enc)
		}
	})
}
