package dra

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzDeviceName: any device ID gives a DNS label or an error, never
// anything else; IDs that are labels already are kept.
func FuzzDeviceName(f *testing.F) {
	for _, s := range []string{"eth0", "0000:3b:02.0", "slot12", "ENS1F0V3", "a_b", "-x", "", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		n, err := DeviceName(id)
		if err != nil {
			return
		}
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			t.Fatalf("DeviceName(%q) = %q, not a DNS label: %v", id, n, errs)
		}
		if len(validation.IsDNS1123Label(id)) == 0 && n != id {
			t.Fatalf("DeviceName(%q) = %q, want the label unchanged", id, n)
		}
	})
}
