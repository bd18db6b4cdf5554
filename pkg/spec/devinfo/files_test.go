package devinfo

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func vhostInfo(path string) *DeviceInfo {
	return &DeviceInfo{Type: TypeVhostUser, Version: SpecVersion, VhostUser: &VhostUser{Mode: VhostUserModeClient, Path: path}}
}

func TestStorePaths(t *testing.T) {
	// §4.1 and §4.2: the default root and file names.
	var def Store
	p, err := def.DPPath("example.com/sriov_a", "0000:01:02.2")
	if err != nil {
		t.Fatal(err)
	}
	if want := "/var/run/k8s.cni.cncf.io/devinfo/dp/example.com-sriov_a-0000:01:02.2-device.json"; p != want {
		t.Errorf("DPPath = %s, want %s", p, want)
	}
	p, err = def.CNIPath("abc.json")
	if err != nil {
		t.Fatal(err)
	}
	if want := "/var/run/k8s.cni.cncf.io/devinfo/cni/abc.json"; p != want {
		t.Errorf("CNIPath = %s, want %s", p, want)
	}
	// §4.1: every "/" of resourceName is replaced by "-".
	name, err := DPFileName("a.example/b/c", "x")
	if err != nil || name != "a.example-b-c-x-device.json" {
		t.Errorf("DPFileName = %q, %v", name, err)
	}
}

func TestPathSafety(t *testing.T) {
	s := Store{Root: t.TempDir()}
	tests := []struct {
		name, resourceName, deviceID, field string
	}{
		{"empty resourceName", "", "0", "resourceName"},
		{"empty deviceID", "example.com/a", "", "deviceID"},
		{"deviceID with slash", "example.com/a", "../../etc/passwd", "deviceID"},
		{"deviceID dotdot", "example.com/a", "..", "deviceID"},
		{"deviceID NUL", "example.com/a", "a\x00b", "deviceID"},
		{"deviceID newline", "example.com/a", "a\nb", "deviceID"},
		{"resourceName dotdot element", "../x", "0", "resourceName"},
		{"resourceName dotdot", "..", "0", "resourceName"},
		{"resourceName NUL", "example.com/a\x00", "0", "resourceName"},
		{"name too long", "example.com/a", strings.Repeat("x", 250), "deviceID"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.DPPath(tc.resourceName, tc.deviceID)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("DPPath(%q, %q) = %v, want error naming %s", tc.resourceName, tc.deviceID, err, tc.field)
			}
			if _, err := s.WriteDP(tc.resourceName, tc.deviceID, vhostInfo("/s")); err == nil {
				t.Fatal("WriteDP succeeded")
			}
		})
	}
	for _, u := range []string{"", ".", "..", "a/b", "../x", "a\x00", strings.Repeat("u", 256)} {
		if _, err := s.CNIPath(u); err == nil || !strings.Contains(err.Error(), "uniqueName") {
			t.Errorf("CNIPath(%q) = %v, want error naming uniqueName", u, err)
		}
	}
	// Nothing was written outside (or inside) the root.
	entries, _ := os.ReadDir(s.Root)
	if len(entries) != 0 {
		t.Fatalf("root has entries after rejected writes: %v", entries)
	}
}

func TestWriteReadRemoveDP(t *testing.T) {
	root := filepath.Join(t.TempDir(), "devinfo") // §4.1.1: created when missing
	s := Store{Root: root}
	d := &DeviceInfo{Type: TypePCI, Version: SpecVersion, PCI: &PCI{PCIAddress: "0000:01:02.2", PFPCIAddress: "0000:01:00.0"}}
	p, err := s.WriteDP("example.com/net", "0000:01:02.2", d)
	if err != nil {
		t.Fatalf("WriteDP: %v", err)
	}
	if want := filepath.Join(root, "dp", "example.com-net-0000:01:02.2-device.json"); p != want {
		t.Fatalf("WriteDP path = %s, want %s", p, want)
	}
	st, err := os.Stat(filepath.Join(root, "dp"))
	if err != nil || st.Mode().Perm() != DirMode {
		t.Fatalf("dp dir: %v mode %v, want %v", err, st.Mode().Perm(), DirMode)
	}
	st, err = os.Stat(p)
	if err != nil || st.Mode().Perm() != FileMode {
		t.Fatalf("file: %v mode %v, want %v", err, st.Mode().Perm(), FileMode)
	}
	got, err := s.ReadDP("example.com/net", "0000:01:02.2")
	if err != nil || got.PCI.PFPCIAddress != "0000:01:00.0" {
		t.Fatalf("ReadDP = %+v, %v", got, err)
	}
	// Overwrite is atomic and leaves no temporary files behind.
	d.PCI.RDMADevice = "mlx5_1"
	if _, err := s.WriteDP("example.com/net", "0000:01:02.2", d); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(filepath.Join(root, "dp"))
	if len(entries) != 1 {
		t.Fatalf("dp dir has %d entries, want 1: %v", len(entries), entries)
	}
	if got, _ := s.ReadDP("example.com/net", "0000:01:02.2"); got.PCI.RDMADevice != "mlx5_1" {
		t.Fatalf("after overwrite: %+v", got.PCI)
	}
	if err := s.RemoveDP("example.com/net", "0000:01:02.2"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadDP("example.com/net", "0000:01:02.2"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadDP after remove = %v, want fs.ErrNotExist", err)
	}
	// §4.1.1: removing a file that is gone is not an error.
	if err := s.RemoveDP("example.com/net", "0000:01:02.2"); err != nil {
		t.Fatalf("second RemoveDP = %v", err)
	}
	// An invalid map is not written.
	if _, err := s.WriteDP("example.com/net", "x", &DeviceInfo{Type: TypePCI, Version: SpecVersion}); err == nil {
		t.Fatal("WriteDP of an invalid map succeeded")
	}
}

func TestReadFileRejects(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte(`{"type":"vhost-user","version":"1.1.0","vhost-user":{"mode":"client","path":"/`+strings.Repeat("a", MaxFileSize)+`"}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(big); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("ReadFile(big) = %v, want size error", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(fifo); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("ReadFile(fifo) = %v, want not-regular error", err)
	}
	if _, err := ReadFile(dir); err == nil {
		t.Error("ReadFile(dir) succeeded")
	}
	bad := filepath.Join(dir, "bad")
	_ = os.WriteFile(bad, []byte(`{"type":"vhost-user","version":"1.1.0"}`), 0o644)
	if _, err := ReadFile(bad); err == nil || !strings.Contains(err.Error(), `"vhost-user"`) {
		t.Errorf("ReadFile(bad) = %v, want error naming vhost-user", err)
	}
}

func TestCopyToCNI(t *testing.T) {
	s := Store{Root: t.TempDir()}
	// A device plugin file with a key this package does not know: §4.2.1
	// "copy the content", so it survives byte for byte.
	content := `{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:01:02.2","x-vendor":"kept"}}`
	if err := os.MkdirAll(s.DPDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	src, _ := s.DPPath("example.com/net", "0000:01:02.2")
	if err := os.WriteFile(src, []byte(content+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unique, err := UniqueName("c0ffee", "default/net-a", "net1")
	if err != nil {
		t.Fatal(err)
	}
	dst, err := s.CopyToCNI("example.com/net", "0000:01:02.2", unique)
	if err != nil {
		t.Fatalf("CopyToCNI: %v", err)
	}
	if want := filepath.Join(s.CNIDir(), unique); dst != want {
		t.Fatalf("CopyToCNI path = %s, want %s", dst, want)
	}
	b, err := os.ReadFile(dst)
	if err != nil || string(b) != content {
		t.Fatalf("CNI file = %q, %v; want %q", b, err, content)
	}
	if _, err := ReadFile(dst); err != nil {
		t.Fatalf("ReadFile: %v", err)
	}
	if err := RemoveFile(dst); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dst); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("CNI file still there: %v", err)
	}

	// No device plugin file: fs.ErrNotExist and no CNI file.
	if _, err := s.CopyToCNI("example.com/net", "0000:01:02.3", "u2"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("CopyToCNI(missing) = %v, want fs.ErrNotExist", err)
	}
	// An invalid device plugin file is not copied.
	src2, _ := s.DPPath("example.com/net", "bad")
	_ = os.WriteFile(src2, []byte(`{"type":"pci","version":"1.1.0"}`), 0o644)
	if _, err := s.CopyToCNI("example.com/net", "bad", "u3"); err == nil {
		t.Fatal("CopyToCNI(invalid) succeeded")
	}
	for _, u := range []string{"u2", "u3"} {
		if _, err := os.Stat(filepath.Join(s.CNIDir(), u)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("CNI file %s written: %v", u, err)
		}
	}
	// Unsafe names are rejected before anything is read.
	if _, err := s.CopyToCNI("example.com/net", "0000:01:02.2", "../dp/x"); err == nil || !strings.Contains(err.Error(), "uniqueName") {
		t.Fatalf("CopyToCNI(../dp/x) = %v", err)
	}
}

func TestUniqueName(t *testing.T) {
	s := Store{Root: t.TempDir()}
	a, err := UniqueName("0123456789abcdef", "ns1/net-a", "net1")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := UniqueName("0123456789abcdef", "ns1/net-a", "net1"); a != b {
		t.Errorf("UniqueName not deterministic: %s vs %s", a, b)
	}
	if !strings.HasPrefix(a, "0123456789abcdef-ns1_net-a-net1-") || !strings.HasSuffix(a, ".json") {
		t.Errorf("UniqueName = %s", a)
	}
	// Different attachments that sanitize to the same text stay apart.
	seen := map[string]string{}
	for _, in := range [][3]string{
		{"c", "ns1/net-a", "net1"}, {"c", "ns1_net-a", "net1"}, {"c", "ns1/net", "a-net1"},
		{"c", "ns1/net-a", "net2"}, {"d", "ns1/net-a", "net1"},
		{"c", strings.Repeat("n", 64) + "1", "x"}, {"c", strings.Repeat("n", 64) + "2", "x"},
		{"../../etc", "a/../../b", "../x"},
	} {
		u, err := UniqueName(in[0], in[1], in[2])
		if err != nil {
			t.Fatalf("UniqueName(%q): %v", in, err)
		}
		if prev, dup := seen[u]; dup {
			t.Errorf("UniqueName(%q) = UniqueName(%s) = %s", in, prev, u)
		}
		seen[u] = strings.Join(in[:], ",")
		if _, err := s.CNIPath(u); err != nil {
			t.Errorf("UniqueName(%q) = %q is not a safe CNI file name: %v", in, u, err)
		}
	}
	long, _ := UniqueName(strings.Repeat("o", 300), strings.Repeat("n", 300), strings.Repeat("i", 300))
	if len(long) > 230 {
		t.Errorf("len(UniqueName(long)) = %d, want <= 230", len(long))
	}
	for _, in := range [][3]string{{"", "n", "i"}, {"o", "", "i"}, {"o", "n", ""}, {"o", "n\x00", "i"}} {
		if _, err := UniqueName(in[0], in[1], in[2]); err == nil {
			t.Errorf("UniqueName(%q) succeeded", in)
		}
	}
}

// A device plugin file whose only fault is a "version" we cannot use
// ("v1.1.0", the form of the spec repository's tags, not of the key) is
// copied all the same (§4.2.1 "copy the content"): the CNI plugin reads it,
// network-status leaves it out. ReadFile still reports the version.
func TestCopyToCNIUnusableVersion(t *testing.T) {
	s := Store{Root: t.TempDir()}
	content := `{"type":"pci","version":"v1.1.0","pci":{"pci-address":"0000:01:02.2"}}`
	if err := os.MkdirAll(s.DPDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	src, _ := s.DPPath("example.com/net", "0000:01:02.2")
	if err := os.WriteFile(src, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	dst, err := s.CopyToCNI("example.com/net", "0000:01:02.2", "u1")
	if err != nil {
		t.Fatalf("CopyToCNI: %v", err)
	}
	if b, err := os.ReadFile(dst); err != nil || string(b) != content {
		t.Fatalf("CNI file = %q, %v; want %q", b, err, content)
	}
	_, err = ReadFile(dst)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "version" {
		t.Fatalf("ReadFile = %v, want the version FieldError", err)
	}
	if _, err := ReadFileRaw(dst); !errors.As(err, &fe) || fe.Field != "version" {
		t.Fatalf("ReadFileRaw = %v, want the version FieldError", err)
	}
	// A bad version does not excuse another fault: not copied.
	src2, _ := s.DPPath("example.com/net", "bad")
	_ = os.WriteFile(src2, []byte(`{"type":"pci","version":"v1.1.0","pci":{}}`), 0o644)
	if _, err := s.CopyToCNI("example.com/net", "bad", "u2"); err == nil {
		t.Fatal("CopyToCNI(bad version and no pci-address) succeeded")
	}
	if _, err := os.Stat(filepath.Join(s.CNIDir(), "u2")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("CNI file u2 written: %v", err)
	}
}

// ReadFileRaw returns the file's content as written (unknown keys kept),
// trimmed, after the same checks as ReadFile.
func TestReadFileRaw(t *testing.T) {
	dir := t.TempDir()
	content := `{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:01:02.2","x-vendor":"kept"}}`
	p := filepath.Join(dir, "f.json")
	if err := os.WriteFile(p, []byte("\n"+content+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := ReadFileRaw(p); err != nil || string(b) != content {
		t.Fatalf("ReadFileRaw = %q, %v; want %q", b, err, content)
	}
	if _, err := ReadFileRaw(filepath.Join(dir, "none")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadFileRaw(missing) = %v, want fs.ErrNotExist", err)
	}
}
