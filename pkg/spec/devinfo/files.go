package devinfo

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/multinet/multinet/internal/process/atomicfile"
)

// DefaultRoot is the device-info root directory of spec §4.1 and §4.2; the
// device-plugin files live in DefaultRoot/dp and the CNI files in DefaultRoot/cni.
const DefaultRoot = "/var/run/k8s.cni.cncf.io/devinfo"

const (
	// MaxFileSize is the largest device-info file ReadFile accepts, in bytes.
	// A device-info map is a few hundred bytes.
	MaxFileSize = 64 << 10

	// DirMode is the mode of the dp/ and cni/ directories when this package
	// creates them (spec §4.1.1, §4.2.1 say they must be created; not how).
	DirMode fs.FileMode = 0o755
	// FileMode is the mode of the device-info files this package writes.
	// Their content is not secret; CNI plugins and tools may run as other users.
	FileMode fs.FileMode = 0o644

	// nameMax is the longest file name Linux file systems accept (NAME_MAX).
	nameMax = 255
)

// Store names, writes, reads and removes the device-info files under one root
// directory (spec §4). The zero value uses DefaultRoot; tests set Root to a
// temporary directory. A Store is a value and safe for concurrent use.
type Store struct {
	// Root replaces DefaultRoot when not empty.
	Root string
}

func (s Store) root() string {
	if s.Root == "" {
		return DefaultRoot
	}
	return s.Root
}

// DPDir is the directory of the Device Plugin Device Information files,
// "<root>/dp" (spec §4.1).
func (s Store) DPDir() string { return filepath.Join(s.root(), "dp") }

// CNIDir is the directory of the CNI Plugin Device Information files,
// "<root>/cni" (spec §4.2).
func (s Store) CNIDir() string { return filepath.Join(s.root(), "cni") }

// DPFileName is the base name of the Device Plugin Device Information file of
// one device (spec §4.1): "<resourceName>-<deviceID>-device.json" with every
// "/" of resourceName replaced by "-". It returns an error naming the field
// when resourceName or deviceID is empty, is "." or "..", contains NUL or
// another control character, or (deviceID) contains "/", or when the name
// would be longer than 255 bytes: none of these can name a file in the dp
// directory.
func DPFileName(resourceName, deviceID string) (string, error) {
	if err := checkComponent("resourceName", resourceName, true); err != nil {
		return "", err
	}
	if err := checkComponent("deviceID", deviceID, false); err != nil {
		return "", err
	}
	name := strings.ReplaceAll(resourceName, "/", "-") + "-" + deviceID + "-device.json"
	if len(name) > nameMax {
		return "", fmt.Errorf("device-info file name for resourceName %q and deviceID %q: longer than %d bytes", resourceName, deviceID, nameMax)
	}
	return name, nil
}

// DPPath is the full path of the Device Plugin Device Information file of one
// device, "<root>/dp/<resourceName>-<deviceID>-device.json" (spec §4.1).
// Errors as DPFileName.
func (s Store) DPPath(resourceName, deviceID string) (string, error) {
	name, err := DPFileName(resourceName, deviceID)
	if err != nil {
		return "", err
	}
	return s.inside(s.DPDir(), name)
}

// CNIPath is the full path of a CNI Plugin Device Information file,
// "<root>/cni/<uniqueName>" (spec §4.2). uniqueName must be a single file
// name: not empty, not "." or "..", without "/", NUL or control characters,
// at most 255 bytes; otherwise the error names the field "uniqueName".
func (s Store) CNIPath(uniqueName string) (string, error) {
	if err := checkComponent("uniqueName", uniqueName, false); err != nil {
		return "", err
	}
	if len(uniqueName) > nameMax {
		return "", fmt.Errorf("uniqueName %q: longer than %d bytes", uniqueName, nameMax)
	}
	return s.inside(s.CNIDir(), uniqueName)
}

// inside joins dir and name and double-checks the result is a direct child of dir.
func (s Store) inside(dir, name string) (string, error) {
	p := filepath.Join(dir, name)
	if filepath.Dir(p) != filepath.Clean(dir) {
		return "", fmt.Errorf("device-info file name %q escapes %s", name, dir)
	}
	return p, nil
}

// checkComponent rejects values that cannot be (part of) one file name.
// slashOK allows "/" (resourceName, where it is replaced by "-").
func checkComponent(field, v string, slashOK bool) error {
	switch {
	case v == "":
		return fmt.Errorf("%s: must not be empty", field)
	case v == "." || v == "..":
		return fmt.Errorf("%s %q: not allowed in a device-info file name", field, v)
	case !slashOK && strings.Contains(v, "/"):
		return fmt.Errorf("%s %q: must not contain \"/\"", field, v)
	}
	if slashOK {
		for _, part := range strings.Split(v, "/") {
			if part == "." || part == ".." {
				return fmt.Errorf("%s %q: must not contain a %q path element", field, v, part)
			}
		}
	}
	for _, c := range []byte(v) {
		if c < 0x20 || c == 0x7f {
			return fmt.Errorf("%s %q: must not contain NUL or control characters", field, v)
		}
	}
	return nil
}

// UniqueName derives a CNI device-info file name that is unique per network
// attachment (spec §4.2.1) from owner (the container ID, or the pod UID),
// network (the network key, e.g. "namespace/name") and ifname (the interface
// name in the pod). The same triple always gives the same name, so DEL can
// recompute it. Characters other than [A-Za-z0-9_.-] become "_", each part is
// cut to 64 bytes, and a hash of the untouched triple keeps names that differ
// only in replaced or cut characters apart:
// "<owner>-<network>-<ifname>-<16 hex>.json" (at most 230 bytes).
// Errors name the empty field, or the field that contains NUL.
func UniqueName(owner, network, ifname string) (string, error) {
	for _, f := range []struct{ name, v string }{{"owner", owner}, {"network", network}, {"ifname", ifname}} {
		if f.v == "" {
			return "", fmt.Errorf("%s: must not be empty", f.name)
		}
		if strings.IndexByte(f.v, 0) >= 0 {
			return "", fmt.Errorf("%s %q: must not contain NUL", f.name, f.v)
		}
	}
	sum := sha256.Sum256([]byte(owner + "\x00" + network + "\x00" + ifname))
	return sanitizePart(owner) + "-" + sanitizePart(network) + "-" + sanitizePart(ifname) + "-" +
		hex.EncodeToString(sum[:8]) + ".json", nil
}

func sanitizePart(s string) string {
	if len(s) > 64 {
		s = s[:64]
	}
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			b[i] = '_'
		}
	}
	return string(b)
}

// WriteDP writes d to the Device Plugin Device Information file of one device
// (spec §4.1), creating the dp directory when missing (§4.1.1), and returns
// the path. The write is atomic (see WriteFile).
func (s Store) WriteDP(resourceName, deviceID string, d *DeviceInfo) (string, error) {
	p, err := s.DPPath(resourceName, deviceID)
	if err != nil {
		return "", err
	}
	return p, WriteFile(p, d)
}

// ReadDP reads and validates the Device Plugin Device Information file of one
// device (spec §4.1). A missing file gives an error matching fs.ErrNotExist:
// a device plugin may write no file (§4.1.1 "can write").
func (s Store) ReadDP(resourceName, deviceID string) (*DeviceInfo, error) {
	p, err := s.DPPath(resourceName, deviceID)
	if err != nil {
		return nil, err
	}
	return ReadFile(p)
}

// RemoveDP removes the Device Plugin Device Information file of one device
// (spec §4.1.1: the device plugin deletes its files when it stops). A missing
// file is not an error.
func (s Store) RemoveDP(resourceName, deviceID string) error {
	p, err := s.DPPath(resourceName, deviceID)
	if err != nil {
		return err
	}
	return RemoveFile(p)
}

// CopyToCNI copies the Device Plugin Device Information file of (resourceName,
// deviceID) to the CNI Plugin Device Information file uniqueName (spec §4.2.1)
// and returns the CNI file's path. The content is validated (spec §3) and
// copied byte for byte, so keys this package does not know survive. A file
// whose only fault is its "version" (IsVersionError, e.g. "v1.1.0") is copied
// all the same: §4.2.1 asks for the content to be copied, the CNI plugin is
// its reader, and the NPWG implementation leaves it out of network-status.
// When the device plugin wrote no file the error matches fs.ErrNotExist and
// no CNI file is written.
func (s Store) CopyToCNI(resourceName, deviceID, uniqueName string) (string, error) {
	src, err := s.DPPath(resourceName, deviceID)
	if err != nil {
		return "", err
	}
	dst, err := s.CNIPath(uniqueName)
	if err != nil {
		return "", err
	}
	data, err := readLimited(src)
	if err != nil {
		return "", err
	}
	if _, err := Decode(data); err != nil && !IsVersionError(err) {
		return "", fmt.Errorf("%s: %w", src, err)
	}
	if err := writeAtomic(dst, bytes.TrimSpace(data)); err != nil {
		return "", err
	}
	return dst, nil
}

// WriteFile validates d and writes its JSON encoding to path atomically
// (internal/process/atomicfile): a temporary file in the same directory is written,
// fsynced and renamed over path, then the directory is fsynced; readers see
// the old or the new file, never a part. The directory is created (DirMode)
// when missing; the file gets FileMode.
func WriteFile(path string, d *DeviceInfo) error {
	data, err := d.Encode()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return writeAtomic(path, data)
}

func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), DirMode); err != nil {
		return fmt.Errorf("create device-info directory: %w", err)
	}
	if err := atomicfile.WriteFile(path, data, FileMode); err != nil {
		return fmt.Errorf("device-info file: %w", err)
	}
	return nil
}

// ReadFile reads and validates the device-info file at path (spec §4). It
// fails when path is not a regular file or is larger than MaxFileSize; a
// missing file gives an error matching fs.ErrNotExist.
func ReadFile(path string) (*DeviceInfo, error) {
	data, err := readLimited(path)
	if err != nil {
		return nil, err
	}
	d, err := Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// ReadFileRaw reads and validates the device-info file at path like ReadFile
// and returns its content as written, without surrounding white space: keys
// this package does not know are kept (network-status publishes the content,
// multi-net spec §5.3.8). Errors as ReadFile.
func ReadFileRaw(path string) ([]byte, error) {
	data, err := readLimited(path)
	if err != nil {
		return nil, err
	}
	if _, err := Decode(data); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return bytes.TrimSpace(data), nil
}

func readLimited(path string) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO planted at path must not block.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("read device-info file: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read device-info file: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("read device-info file %s: not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("read device-info file %s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("read device-info file %s: larger than %d bytes", path, MaxFileSize)
	}
	return data, nil
}

// RemoveFile removes the device-info file at path; a missing file is not an error.
func RemoveFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove device-info file: %w", err)
	}
	return nil
}
