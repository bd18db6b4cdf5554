// Package devinfo implements the NPWG Device Information Specification v1.1.0:
// the device-info JSON map (spec §3) and the device-info files that device
// plugins, NPWG implementations and CNI plugins exchange (spec §4).
//
// The types and Decode/Encode/Validate are pure. The file helpers (Store,
// WriteFile, ReadFile, RemoveFile) touch only the directory they are given.
package devinfo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// SpecVersion is the version of the Device Information Specification this
// package implements and writes into "version" (spec §3.1.2).
const SpecVersion = "1.1.0"

// Device types: the values of the "type" key (spec §3.1.1).
const (
	TypePCI       = "pci"
	TypeVDPA      = "vdpa"
	TypeVhostUser = "vhost-user"
	TypeMemif     = "memif"
)

// vDPA drivers (spec §3.1.4.2).
const (
	VDPADriverVhost  = "vhost"
	VDPADriverVirtio = "virtio"
)

// vhost-user modes (spec §3.1.5.1).
const (
	VhostUserModeClient = "client"
	VhostUserModeServer = "server"
)

// memif roles (spec §3.1.6.1) and modes (spec §3.1.6.3).
const (
	MemifRoleMaster     = "master"
	MemifRoleSlave      = "slave"
	MemifModeEthernet   = "ethernet"
	MemifModeIP         = "ip"
	MemifModeInjectPunt = "inject-punt"
)

// DeviceInfo is the device-info map (spec §3.1). Exactly the map named by Type
// is required; other maps may be present and are validated when they are.
type DeviceInfo struct {
	// Type is one of TypePCI, TypeVDPA, TypeVhostUser, TypeMemif (§3.1.1). Required.
	Type string `json:"type"`
	// Version is "<MAJOR>.<MINOR>.<PATCH>" of the spec in use, e.g. SpecVersion
	// (§3.1.2). Required.
	Version string `json:"version"`
	// PCI is required when Type is "pci" (§3.1.3).
	PCI *PCI `json:"pci,omitempty"`
	// VDPA is required when Type is "vdpa" (§3.1.4).
	VDPA *VDPA `json:"vdpa,omitempty"`
	// VhostUser is required when Type is "vhost-user" (§3.1.5).
	VhostUser *VhostUser `json:"vhost-user,omitempty"`
	// Memif is required when Type is "memif" (§3.1.6).
	Memif *Memif `json:"memif,omitempty"`
}

// PCI is the "pci" map (spec §3.1.3). Empty optional fields are not written.
type PCI struct {
	// PCIAddress is the device's address in BDF form "dddd:BB:DD.f" (§3.1.3.1). Required.
	PCIAddress string `json:"pci-address"`
	// VhostNet is the path of the vhost-net char device (§3.1.3.2).
	VhostNet string `json:"vhost-net,omitempty"`
	// RDMADevice is the name of the RDMA device (§3.1.3.3).
	RDMADevice string `json:"rdma-device,omitempty"`
	// PFPCIAddress is the BDF address of the physical function (§3.1.3.4).
	PFPCIAddress string `json:"pf-pci-address,omitempty"`
	// RepresentorDevice is the netdev name of the VF representor (§3.1.3.5).
	RepresentorDevice string `json:"representor-device,omitempty"`
}

// VDPA is the "vdpa" map (spec §3.1.4).
type VDPA struct {
	// ParentDevice is the vDPA device name under /sys/bus/vdpa/devices (§3.1.4.1). Required.
	ParentDevice string `json:"parent-device"`
	// Driver is VDPADriverVhost or VDPADriverVirtio (§3.1.4.2). Required.
	Driver string `json:"driver"`
	// Path is the absolute path of the vhost or virtio device (§3.1.4.3). Required.
	Path string `json:"path"`
	// PCIAddress is the BDF address of the backing PCI device (§3.1.4.4).
	PCIAddress string `json:"pci-address,omitempty"`
	// PFPCIAddress is the BDF address of the physical function (§3.1.4.5).
	PFPCIAddress string `json:"pf-pci-address,omitempty"`
	// RepresentorDevice is the netdev name of the VF representor (§3.1.4.6).
	RepresentorDevice string `json:"representor-device,omitempty"`
}

// VhostUser is the "vhost-user" map (spec §3.1.5).
type VhostUser struct {
	// Mode is VhostUserModeClient or VhostUserModeServer (§3.1.5.1). Required.
	Mode string `json:"mode"`
	// Path is the path of the vhost-user socket file (§3.1.5.2). Required.
	Path string `json:"path"`
}

// Memif is the "memif" map (spec §3.1.6).
type Memif struct {
	// Role is MemifRoleMaster or MemifRoleSlave (§3.1.6.1). Required.
	Role string `json:"role"`
	// Path is the path of the memif socket file (§3.1.6.2). Required.
	Path string `json:"path"`
	// Mode is MemifModeEthernet, MemifModeIP or MemifModeInjectPunt (§3.1.6.3). Required.
	Mode string `json:"mode"`
}

// FieldError is a validation error naming the offending key as a dotted path
// of spec keys, e.g. `pci.pci-address`, and the spec section it breaks.
type FieldError struct {
	Field   string // e.g. "vhost-user.mode"
	Section string // e.g. "3.1.5.1"
	Msg     string
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("device-info %q: %s (device-info spec §%s)", e.Field, e.Msg, e.Section)
}

func fieldErr(field, section, format string, a ...any) error {
	return &FieldError{Field: field, Section: section, Msg: fmt.Sprintf(format, a...)}
}

// Validate checks d against spec §3.1: "type" is one of the four types, the
// map named by "type" is present, every present map has its required keys
// with allowed values and PCI addresses in BDF form, and "version" is in
// MAJOR.MINOR.PATCH form (see ValidateVersion). It returns a *FieldError
// naming the first offending key. "version" is checked last: an error on
// "version" means the rest of the map is valid (IsVersionError).
func (d *DeviceInfo) Validate() error {
	if d == nil {
		return fieldErr("type", "3.1.1", "is required")
	}
	switch d.Type {
	case "":
		return fieldErr("type", "3.1.1", "is required")
	case TypePCI:
		if d.PCI == nil {
			return fieldErr(TypePCI, "3.1.3", "is required when type is %q", d.Type)
		}
	case TypeVDPA:
		if d.VDPA == nil {
			return fieldErr(TypeVDPA, "3.1.4", "is required when type is %q", d.Type)
		}
	case TypeVhostUser:
		if d.VhostUser == nil {
			return fieldErr(TypeVhostUser, "3.1.5", "is required when type is %q", d.Type)
		}
	case TypeMemif:
		if d.Memif == nil {
			return fieldErr(TypeMemif, "3.1.6", "is required when type is %q", d.Type)
		}
	default:
		return fieldErr("type", "3.1.1", "%q is not one of pci, vdpa, vhost-user, memif", d.Type)
	}
	if d.PCI != nil {
		if err := d.PCI.validate(); err != nil {
			return err
		}
	}
	if d.VDPA != nil {
		if err := d.VDPA.validate(); err != nil {
			return err
		}
	}
	if d.VhostUser != nil {
		if err := d.VhostUser.validate(); err != nil {
			return err
		}
	}
	if d.Memif != nil {
		if err := d.Memif.validate(); err != nil {
			return err
		}
	}
	return ValidateVersion(d.Version)
}

// KnownVersions are the versions of the Device Information Specification:
// 1.0.0 and 1.1.0 (SpecVersion), the version this package implements.
var KnownVersions = []string{"1.0.0", SpecVersion}

// ValidateVersion checks a "version" value (spec §3.1.2: "The format of the
// string shall be "<MAJOR>.<MINOR>.<PATCH>""): three dot-separated decimal
// numbers without sign, prefix or leading zeros. A version of that form that
// is not one of KnownVersions ("1.2.0", "2.0.0") is accepted: such a map is
// read best-effort, by the §3.1 rules of SpecVersion, which it must pass.
// "v1.1.0" (the form of the spec repository's tags, not of the key) is an
// error.
func ValidateVersion(v string) error {
	if v == "" {
		return fieldErr("version", "3.1.2", "is required")
	}
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return fieldErr("version", "3.1.2", "%q is not in MAJOR.MINOR.PATCH form", v)
	}
	for _, p := range parts {
		if p == "" || len(p) > 9 || (len(p) > 1 && p[0] == '0') || strings.TrimLeft(p, "0123456789") != "" {
			return fieldErr("version", "3.1.2", "%q is not in MAJOR.MINOR.PATCH form", v)
		}
	}
	return nil
}

// IsVersionError reports whether err is a *FieldError on "version": the
// map's "version" cannot be used, and (Validate checks it last) nothing
// else is wrong with the map.
func IsVersionError(err error) bool {
	var fe *FieldError
	return errors.As(err, &fe) && fe.Field == "version"
}

func (p *PCI) validate() error {
	if p.PCIAddress == "" {
		return fieldErr("pci.pci-address", "3.1.3.1", "is required")
	}
	if !IsPCIAddress(p.PCIAddress) {
		return fieldErr("pci.pci-address", "3.1.3.1", "%q is not a PCI address in BDF form dddd:BB:DD.f", p.PCIAddress)
	}
	if p.PFPCIAddress != "" && !IsPCIAddress(p.PFPCIAddress) {
		return fieldErr("pci.pf-pci-address", "3.1.3.4", "%q is not a PCI address in BDF form dddd:BB:DD.f", p.PFPCIAddress)
	}
	return nil
}

func (v *VDPA) validate() error {
	if v.ParentDevice == "" {
		return fieldErr("vdpa.parent-device", "3.1.4.1", "is required")
	}
	switch v.Driver {
	case "":
		return fieldErr("vdpa.driver", "3.1.4.2", "is required")
	case VDPADriverVhost, VDPADriverVirtio:
	default:
		return fieldErr("vdpa.driver", "3.1.4.2", "%q is not one of vhost, virtio", v.Driver)
	}
	if v.Path == "" {
		return fieldErr("vdpa.path", "3.1.4.3", "is required")
	}
	if !strings.HasPrefix(v.Path, "/") {
		return fieldErr("vdpa.path", "3.1.4.3", "%q is not an absolute path", v.Path)
	}
	if v.PCIAddress != "" && !IsPCIAddress(v.PCIAddress) {
		return fieldErr("vdpa.pci-address", "3.1.4.4", "%q is not a PCI address in BDF form dddd:BB:DD.f", v.PCIAddress)
	}
	if v.PFPCIAddress != "" && !IsPCIAddress(v.PFPCIAddress) {
		return fieldErr("vdpa.pf-pci-address", "3.1.4.5", "%q is not a PCI address in BDF form dddd:BB:DD.f", v.PFPCIAddress)
	}
	return nil
}

func (v *VhostUser) validate() error {
	switch v.Mode {
	case "":
		return fieldErr("vhost-user.mode", "3.1.5.1", "is required")
	case VhostUserModeClient, VhostUserModeServer:
	default:
		return fieldErr("vhost-user.mode", "3.1.5.1", "%q is not one of client, server", v.Mode)
	}
	if v.Path == "" {
		return fieldErr("vhost-user.path", "3.1.5.2", "is required")
	}
	return nil
}

func (m *Memif) validate() error {
	switch m.Role {
	case "":
		return fieldErr("memif.role", "3.1.6.1", "is required")
	case MemifRoleMaster, MemifRoleSlave:
	default:
		return fieldErr("memif.role", "3.1.6.1", "%q is not one of master, slave", m.Role)
	}
	if m.Path == "" {
		return fieldErr("memif.path", "3.1.6.2", "is required")
	}
	switch m.Mode {
	case "":
		return fieldErr("memif.mode", "3.1.6.3", "is required")
	case MemifModeEthernet, MemifModeIP, MemifModeInjectPunt:
	default:
		return fieldErr("memif.mode", "3.1.6.3", "%q is not one of ethernet, ip, inject-punt", m.Mode)
	}
	return nil
}

// IsPCIAddress reports whether s is a PCI address in the form the
// device-info spec gives for "pci-address" (§3.1.3.1; the same words in
// §3.1.3.4, §3.1.4.4 and §3.1.4.5):
//
//	This required key’s value (type string) shall contain the PCI Address of the device (in standard BDF format “dddd:BB:DD.f”).
//
// That is 4 hex digits of domain, ':', 2 of bus, ':', 2 of device (at most
// 0x1f), '.' and one function digit 0-7. Hex digits may be either case
// (sysfs writes lower case). It is multinet's only PCI address check: the
// device plugin's config, its sysfs discovery, multinet-netdev and the
// network-status "pciID" mapping all use it (docs/decisions/devinfo.md).
func IsPCIAddress(s string) bool {
	if len(s) != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.' {
		return false
	}
	for _, i := range []int{0, 1, 2, 3, 5, 6, 8, 9} {
		if !isHex(s[i]) {
			return false
		}
	}
	if dev, _ := strconv.ParseUint(s[8:10], 16, 8); dev > 0x1f {
		return false
	}
	return s[11] >= '0' && s[11] <= '7'
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// Decode parses one device-info JSON object (spec §3) and validates it.
// Keys are matched exactly (JSON is case-sensitive; "Type" is not "type").
// Keys this package does not know are ignored (forward compatibility: later
// versions add keys; see ValidateVersion). A known key with a value of the
// wrong JSON type and trailing data after the object are errors. Errors name
// the offending key.
func Decode(data []byte) (*DeviceInfo, error) {
	top, err := decodeObject(data, "")
	if err != nil {
		return nil, err
	}
	var d DeviceInfo
	if d.Type, err = stringKey(top, "", "type"); err != nil {
		return nil, err
	}
	if d.Version, err = stringKey(top, "", "version"); err != nil {
		return nil, err
	}
	if raw, ok := top[TypePCI]; ok {
		m, err := decodeObject(raw, TypePCI)
		if err != nil {
			return nil, err
		}
		d.PCI = &PCI{}
		for key, dst := range map[string]*string{
			"pci-address": &d.PCI.PCIAddress, "vhost-net": &d.PCI.VhostNet, "rdma-device": &d.PCI.RDMADevice,
			"pf-pci-address": &d.PCI.PFPCIAddress, "representor-device": &d.PCI.RepresentorDevice,
		} {
			if *dst, err = stringKey(m, TypePCI, key); err != nil {
				return nil, err
			}
		}
	}
	if raw, ok := top[TypeVDPA]; ok {
		m, err := decodeObject(raw, TypeVDPA)
		if err != nil {
			return nil, err
		}
		d.VDPA = &VDPA{}
		for key, dst := range map[string]*string{
			"parent-device": &d.VDPA.ParentDevice, "driver": &d.VDPA.Driver, "path": &d.VDPA.Path,
			"pci-address": &d.VDPA.PCIAddress, "pf-pci-address": &d.VDPA.PFPCIAddress,
			"representor-device": &d.VDPA.RepresentorDevice,
		} {
			if *dst, err = stringKey(m, TypeVDPA, key); err != nil {
				return nil, err
			}
		}
	}
	if raw, ok := top[TypeVhostUser]; ok {
		m, err := decodeObject(raw, TypeVhostUser)
		if err != nil {
			return nil, err
		}
		d.VhostUser = &VhostUser{}
		if d.VhostUser.Mode, err = stringKey(m, TypeVhostUser, "mode"); err != nil {
			return nil, err
		}
		if d.VhostUser.Path, err = stringKey(m, TypeVhostUser, "path"); err != nil {
			return nil, err
		}
	}
	if raw, ok := top[TypeMemif]; ok {
		m, err := decodeObject(raw, TypeMemif)
		if err != nil {
			return nil, err
		}
		d.Memif = &Memif{}
		for key, dst := range map[string]*string{"role": &d.Memif.Role, "path": &d.Memif.Path, "mode": &d.Memif.Mode} {
			if *dst, err = stringKey(m, TypeMemif, key); err != nil {
				return nil, err
			}
		}
	}
	if err := d.Validate(); err != nil {
		return nil, err
	}
	return &d, nil
}

// decodeObject decodes data, which must be exactly one JSON object, into its
// members. field names the object in errors ("" for the device-info map).
func decodeObject(data []byte, field string) (map[string]json.RawMessage, error) {
	name := "device-info"
	if field != "" {
		name = fmt.Sprintf("device-info %q", field)
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, fmt.Errorf("%s: not a JSON object (device-info spec §3.1)", name)
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	var m map[string]json.RawMessage
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s: trailing data after the JSON object", name)
	}
	return m, nil
}

// stringKey returns the string value of key in m, "" when the key is absent
// or null, and an error naming parent.key when the value is not a string.
func stringKey(m map[string]json.RawMessage, parent, key string) (string, error) {
	raw, ok := m[key]
	if !ok {
		return "", nil
	}
	var s *string
	if err := json.Unmarshal(raw, &s); err != nil {
		path := key
		if parent != "" {
			path = parent + "." + key
		}
		return "", fmt.Errorf("device-info %q: value is not a JSON string (device-info spec §3.1)", path)
	}
	if s == nil {
		return "", nil
	}
	return *s, nil
}

// Encode validates d and returns its compact JSON encoding (spec §3), keys
// in the order of the spec, empty optional keys left out.
func (d *DeviceInfo) Encode() ([]byte, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(d)
	if err != nil {
		return nil, fmt.Errorf("device-info: encode: %w", err)
	}
	return b, nil
}
