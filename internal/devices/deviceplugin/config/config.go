// Package config loads and validates the configuration file of
// multinet-deviceplugin: a list of device pools, each advertised to kubelet as
// one extended resource (Device Plugin API v1beta1). See docs/deviceplugin.md.
//
// The package is pure apart from Load, which reads one file.
package config

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/multinet/multinet/pkg/spec/devinfo"
)

// MaxFileSize is the largest configuration file Load reads, in bytes.
const MaxFileSize = 1 << 20

// MaxSlots is the largest number of socket slots one pool may have.
const MaxSlots = 1024

// Defaults applied by Validate.
const (
	DefaultVhostUserSocket = "vhost.sock"
	DefaultMemifSocket     = "memif.sock"
)

// Config is the whole configuration file.
type Config struct {
	// Pools are the device pools; each is one resource. At least one.
	Pools []Pool `json:"pools"`
}

// Pool is one device pool: one resourceName and exactly one selector.
type Pool struct {
	// ResourceName is the extended resource name "vendor-domain/type"
	// advertised to kubelet, e.g. "example.com/sriov-a".
	ResourceName string `json:"resourceName"`

	Netdev    *NetdevSelector `json:"netdev,omitempty"`
	PCI       *PCISelector    `json:"pci,omitempty"`
	VhostUser *VhostUserSlots `json:"vhostUser,omitempty"`
	Memif     *MemifSlots     `json:"memif,omitempty"`
}

// Kind names the selector set in p: "netdev", "pci", "vhostUser", "memif",
// or "" when none is (Validate rejects that).
func (p *Pool) Kind() string {
	switch {
	case p.Netdev != nil:
		return "netdev"
	case p.PCI != nil:
		return "pci"
	case p.VhostUser != nil:
		return "vhostUser"
	case p.Memif != nil:
		return "memif"
	}
	return ""
}

// NetdevSelector selects host network interfaces by name. The device ID is
// the interface name. At least one name or pattern.
type NetdevSelector struct {
	// Names are exact interface names.
	Names []string `json:"names,omitempty"`
	// Patterns are shell globs (Go path.Match syntax), e.g. "ens*f1".
	Patterns []string `json:"patterns,omitempty"`
}

// PCISelector selects PCI network functions (class 0x02) from sysfs. A
// function is selected when it matches every non-empty list. The device ID is
// the PCI address. At least one list must be set.
type PCISelector struct {
	// Vendors are PCI vendor IDs, 4 hex digits with or without "0x", e.g. "8086".
	Vendors []string `json:"vendors,omitempty"`
	// Devices are PCI device IDs, e.g. "154c".
	Devices []string `json:"devices,omitempty"`
	// Drivers are kernel driver names, e.g. "iavf", "vfio-pci".
	Drivers []string `json:"drivers,omitempty"`
	// PFNames select VFs whose physical function has one of these netdev
	// names, and PFs without VFs that have one of these names themselves.
	PFNames []string `json:"pfNames,omitempty"`
	// Addresses are PCI addresses in "dddd:BB:DD.f" form.
	Addresses []string `json:"addresses,omitempty"`
}

// VhostUserSlots is a pool of vhost-user socket slots: Slots directories
// "<Dir>/slot<N>" on the host, each mounted into the container at
// "<ContainerPath>/slot<N>". The device ID is "slot<N>".
type VhostUserSlots struct {
	// Dir is the absolute host directory holding the slot directories.
	Dir string `json:"dir"`
	// Slots is the number of devices, 1..MaxSlots.
	Slots int `json:"slots"`
	// Mode is the device-info vhost-user mode, "client" or "server"
	// (device-info spec §3.1.5.1).
	Mode string `json:"mode"`
	// SocketName is the socket file name in a slot; default "vhost.sock".
	SocketName string `json:"socketName,omitempty"`
	// ContainerPath is the absolute directory in the container under which
	// the slot directories are mounted.
	ContainerPath string `json:"containerPath"`
}

// MemifSlots is a pool of memif socket slots, laid out like VhostUserSlots.
type MemifSlots struct {
	Dir   string `json:"dir"`
	Slots int    `json:"slots"`
	// Role is "master" or "slave" (device-info spec §3.1.6.1).
	Role string `json:"role"`
	// Mode is "ethernet", "ip" or "inject-punt" (device-info spec §3.1.6.3).
	Mode string `json:"mode"`
	// SocketName is the socket file name in a slot; default "memif.sock".
	SocketName    string `json:"socketName,omitempty"`
	ContainerPath string `json:"containerPath"`
}

// Load reads the configuration file at path (JSON or YAML, at most
// MaxFileSize bytes) and returns it parsed and validated.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("device plugin config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("device plugin config %s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("device plugin config %s: larger than %d bytes", path, MaxFileSize)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("device plugin config %s: %w", path, err)
	}
	return c, nil
}

// Parse decodes a JSON or YAML configuration, rejecting unknown keys, and
// validates it (see Validate).
func Parse(data []byte) (*Config, error) {
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("parse: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks c and fills defaults (socket names). Errors name the pool
// (by index and resourceName) and the field.
func (c *Config) Validate() error {
	if len(c.Pools) == 0 {
		return errors.New("pools: at least one pool is required")
	}
	names := map[string]int{}
	envs := map[string]int{}
	dirs := map[string]int{}
	for i := range c.Pools {
		p := &c.Pools[i]
		if err := p.validate(); err != nil {
			return fmt.Errorf("pools[%d] (%s): %w", i, p.ResourceName, err)
		}
		if j, dup := names[p.ResourceName]; dup {
			return fmt.Errorf("pools[%d]: resourceName %q is also used by pools[%d]", i, p.ResourceName, j)
		}
		names[p.ResourceName] = i
		env := EnvName(p.ResourceName)
		if j, dup := envs[env]; dup {
			return fmt.Errorf("pools[%d]: resourceName %q gives the same environment variable %s as pools[%d]", i, p.ResourceName, env, j)
		}
		envs[env] = i
		dir := ""
		if p.VhostUser != nil {
			dir = filepath.Clean(p.VhostUser.Dir)
		} else if p.Memif != nil {
			dir = filepath.Clean(p.Memif.Dir)
		}
		if dir != "" {
			if j, dup := dirs[dir]; dup {
				return fmt.Errorf("pools[%d]: dir %q is also used by pools[%d]", i, dir, j)
			}
			dirs[dir] = i
		}
	}
	return nil
}

func (p *Pool) validate() error {
	if err := ValidateResourceName(p.ResourceName); err != nil {
		return err
	}
	n := 0
	for _, set := range []bool{p.Netdev != nil, p.PCI != nil, p.VhostUser != nil, p.Memif != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("exactly one of netdev, pci, vhostUser, memif is required, found %d", n)
	}
	switch {
	case p.Netdev != nil:
		return p.Netdev.validate()
	case p.PCI != nil:
		return p.PCI.validate()
	case p.VhostUser != nil:
		v := p.VhostUser
		if v.Mode != "client" && v.Mode != "server" {
			return fmt.Errorf("vhostUser.mode %q: must be client or server", v.Mode)
		}
		if v.SocketName == "" {
			v.SocketName = DefaultVhostUserSocket
		}
		return validateSlots("vhostUser", v.Dir, v.Slots, v.SocketName, v.ContainerPath)
	default:
		m := p.Memif
		if m.Role != "master" && m.Role != "slave" {
			return fmt.Errorf("memif.role %q: must be master or slave", m.Role)
		}
		switch m.Mode {
		case "ethernet", "ip", "inject-punt":
		default:
			return fmt.Errorf("memif.mode %q: must be ethernet, ip or inject-punt", m.Mode)
		}
		if m.SocketName == "" {
			m.SocketName = DefaultMemifSocket
		}
		return validateSlots("memif", m.Dir, m.Slots, m.SocketName, m.ContainerPath)
	}
}

func (s *NetdevSelector) validate() error {
	if len(s.Names) == 0 && len(s.Patterns) == 0 {
		return errors.New("netdev: at least one of names, patterns is required")
	}
	for i, n := range s.Names {
		if err := validateIfName(n); err != nil {
			return fmt.Errorf("netdev.names[%d]: %w", i, err)
		}
	}
	for i, pat := range s.Patterns {
		if pat == "" || strings.ContainsAny(pat, "/ \t\n\x00") {
			return fmt.Errorf("netdev.patterns[%d] %q: must be a non-empty glob without \"/\" or whitespace", i, pat)
		}
		if _, err := path.Match(pat, ""); err != nil {
			return fmt.Errorf("netdev.patterns[%d] %q: %w", i, pat, err)
		}
	}
	return nil
}

// validateIfName checks a Linux interface name: 1-15 bytes, not "." or "..",
// no "/", ":" or whitespace (the kernel's dev_valid_name, plus ":").
func validateIfName(n string) error {
	if n == "" || len(n) > 15 || n == "." || n == ".." || strings.ContainsAny(n, "/: \t\n\x00") {
		return fmt.Errorf("%q: not a valid interface name (1-15 bytes, no \"/\", \":\" or whitespace)", n)
	}
	return nil
}

func (s *PCISelector) validate() error {
	if len(s.Vendors)+len(s.Devices)+len(s.Drivers)+len(s.PFNames)+len(s.Addresses) == 0 {
		return errors.New("pci: at least one of vendors, devices, drivers, pfNames, addresses is required")
	}
	for i, v := range s.Vendors {
		if !isHexID(v) {
			return fmt.Errorf("pci.vendors[%d] %q: must be 4 hex digits, e.g. 8086", i, v)
		}
	}
	for i, v := range s.Devices {
		if !isHexID(v) {
			return fmt.Errorf("pci.devices[%d] %q: must be 4 hex digits, e.g. 154c", i, v)
		}
	}
	for i, d := range s.Drivers {
		if d == "" || strings.ContainsAny(d, "/ \t\n\x00") {
			return fmt.Errorf("pci.drivers[%d] %q: not a driver name", i, d)
		}
	}
	for i, n := range s.PFNames {
		if err := validateIfName(n); err != nil {
			return fmt.Errorf("pci.pfNames[%d]: %w", i, err)
		}
	}
	for i, a := range s.Addresses {
		if !devinfo.IsPCIAddress(a) {
			return fmt.Errorf("pci.addresses[%d] %q: must be a PCI address dddd:BB:DD.f", i, a)
		}
	}
	return nil
}

// NormalizeHexID returns a 4-hex-digit PCI ID in lower case without "0x".
func NormalizeHexID(s string) string {
	return strings.ToLower(strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X"))
}

func isHexID(s string) bool {
	s = NormalizeHexID(s)
	if len(s) != 4 {
		return false
	}
	return strings.Trim(s, "0123456789abcdef") == ""
}

func validateSlots(kind, dir string, slots int, socketName, containerPath string) error {
	if !filepath.IsAbs(dir) {
		return fmt.Errorf("%s.dir %q: must be an absolute path", kind, dir)
	}
	if slots < 1 || slots > MaxSlots {
		return fmt.Errorf("%s.slots %d: must be 1..%d", kind, slots, MaxSlots)
	}
	if socketName == "." || socketName == ".." || strings.ContainsAny(socketName, "/\x00") {
		return fmt.Errorf("%s.socketName %q: must be a plain file name", kind, socketName)
	}
	if !filepath.IsAbs(containerPath) || filepath.Clean(containerPath) == "/" {
		return fmt.Errorf("%s.containerPath %q: must be an absolute path other than /", kind, containerPath)
	}
	return nil
}

// ValidateResourceName checks an extended resource name "vendor-domain/type"
// as kubelet requires of a device plugin (k8s docs "Device plugin
// registration"): a DNS subdomain prefix outside kubernetes.io, one "/", and
// a name part of at most 63 characters [A-Za-z0-9._-] starting and ending
// alphanumeric. The error names the field resourceName.
func ValidateResourceName(name string) error {
	if name == "" {
		return errors.New("resourceName: is required")
	}
	domain, typ, ok := strings.Cut(name, "/")
	if !ok || domain == "" || typ == "" {
		return fmt.Errorf("resourceName %q: must be vendor-domain/type, e.g. example.com/net-a", name)
	}
	if errs := validation.IsQualifiedName(name); len(errs) > 0 {
		return fmt.Errorf("resourceName %q: %s", name, strings.Join(errs, "; "))
	}
	if domain == "kubernetes.io" || strings.HasSuffix(domain, ".kubernetes.io") {
		return fmt.Errorf("resourceName %q: the kubernetes.io domain is reserved for native resources", name)
	}
	if strings.HasPrefix(name, "requests.") {
		return fmt.Errorf("resourceName %q: the \"requests.\" prefix is reserved for quota", name)
	}
	return nil
}

// EnvName is the environment variable Allocate sets in a container to the
// comma-separated device IDs of resourceName: "MULTINET_" followed by
// resourceName in upper case with every character other than [A-Z0-9]
// replaced by "_", e.g. "example.com/net-a" → "MULTINET_EXAMPLE_COM_NET_A".
func EnvName(resourceName string) string {
	b := []byte(strings.ToUpper(resourceName))
	for i, c := range b {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	return "MULTINET_" + string(b)
}
