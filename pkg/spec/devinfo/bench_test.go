package devinfo

import "testing"

// BenchmarkDecode: the daemon decodes a device-info file per attachment with
// a device (CopyToCNI, network-status).
func BenchmarkDecode(b *testing.B) {
	data := []byte(specExamples[len(specExamples)-1].json)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCopyToCNI(b *testing.B) {
	s := Store{Root: b.TempDir()}
	d := &DeviceInfo{Type: TypePCI, Version: SpecVersion, PCI: &PCI{PCIAddress: "0000:01:02.2", PFPCIAddress: "0000:01:00.0"}}
	if _, err := s.WriteDP("example.com/net", "0000:01:02.2", d); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.CopyToCNI("example.com/net", "0000:01:02.2", "u.json"); err != nil {
			b.Fatal(err)
		}
	}
}
