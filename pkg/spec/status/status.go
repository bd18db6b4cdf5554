// Package status builds, encodes and decodes the pod annotation
// "k8s.v1.cni.cncf.io/network-status" of the NPWG multi-net spec v1.3, §5:
// one status map per network attachment, made from the attachment's CNI result.
//
// The package is pure: it talks to no API server and enters no network namespace.
package status

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
)

// Annotation is the pod annotation that carries the network-status list (spec §5).
const Annotation = "k8s.v1.cni.cncf.io/network-status"

// The status map keys defined by spec §5.3.
const (
	keyName         = "name"          // §5.3.1
	keyInterface    = "interface"     // §5.3.2
	keyIPs          = "ips"           // §5.3.3
	keyMac          = "mac"           // §5.3.4
	keyMTU          = "mtu"           // §5.3.5
	keyDefault      = "default"       // §5.3.6
	keyDNS          = "dns"           // §5.3.7
	keyDefaultRoute = "default-route" // §5.3.7.4
	keyDeviceInfo   = "device-info"   // §5.3.8
)

// NetworkStatus is one element of the network-status list (spec §5.3): the
// status of one network attachment.
//
// JSON: keys are written in the order of §5.3, then the Extra keys sorted.
// Empty optional fields are left out; "name" and "default" are always written.
// Unmarshalling validates the element (see Validate) and keeps unknown keys in Extra.
type NetworkStatus struct {
	// Name is "namespace/name" of the NetworkAttachmentDefinition, or the name of
	// the cluster-wide default network (§5.3.1). Required.
	Name string
	// Interface is the interface name inside the pod (§5.3.2).
	Interface string
	// IPs are the IPv4/IPv6 addresses of the attachment (§5.3.3). FromResult writes
	// bare addresses ("192.0.2.2"); Decode also accepts "192.0.2.2/24".
	IPs []string
	// Mac is the hardware address of Interface (§5.3.4); requires Interface.
	Mac string
	// MTU of Interface in bytes (§5.3.5); 0 means unknown and is not written.
	MTU int
	// Default is true only for the cluster-wide default network (§5.2, §5.3.6).
	Default bool
	// DNS gathered from the attachment (§5.3.7); nil is not written.
	DNS *DNS
	// DefaultRoute are the default gateways of this attachment (key
	// "default-route", §5.3.7.4).
	DefaultRoute []string
	// DeviceInfo is the device-info map (§5.3.8, device-info spec), kept as opaque
	// compact JSON; when set it must be a JSON object.
	DeviceInfo json.RawMessage
	// Extra holds keys this package does not define (extension keys, §5.3:
	// reverse domain notation such as "org.example.key"), each value compact JSON.
	// They are kept verbatim through Decode/Encode so that a read-modify-write
	// does not drop another writer's keys.
	Extra map[string]json.RawMessage
}

// DNS is the "dns" map of a status entry (spec §5.3.7.1–§5.3.7.3).
type DNS struct {
	// Nameservers are IPv4/IPv6 addresses of DNS servers (§5.3.7.1).
	Nameservers []string `json:"nameservers,omitempty"`
	// Domain is the local domain name (§5.3.7.2).
	Domain string `json:"domain,omitempty"`
	// Search is the list of DNS search names (§5.3.7.3).
	Search []string `json:"search,omitempty"`
}

// wireStatus is the JSON shape of the standard keys, in §5.3 order.
type wireStatus struct {
	Name         string          `json:"name"`
	Interface    string          `json:"interface,omitempty"`
	IPs          []string        `json:"ips,omitempty"`
	Mac          string          `json:"mac,omitempty"`
	MTU          int             `json:"mtu,omitempty"`
	Default      bool            `json:"default"`
	DNS          *DNS            `json:"dns,omitempty"`
	DefaultRoute []string        `json:"default-route,omitempty"`
	DeviceInfo   json.RawMessage `json:"device-info,omitempty"`
}

// MarshalJSON writes the entry as a JSON object with the standard keys in §5.3
// order followed by Extra sorted by key. It fails when the entry does not pass
// Validate.
func (s NetworkStatus) MarshalJSON() ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	w := wireStatus{
		Name: s.Name, Interface: s.Interface, IPs: s.IPs, Mac: s.Mac, MTU: s.MTU,
		Default: s.Default, DNS: s.DNS, DefaultRoute: s.DefaultRoute, DeviceInfo: s.DeviceInfo,
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(w); err != nil {
		return nil, err
	}
	if len(s.Extra) == 0 {
		return bytes.TrimRight(buf.Bytes(), "\n"), nil
	}
	out := bytes.Clone(bytes.TrimRight(buf.Bytes(), "\n")) // buf is reused below
	keys := make([]string, 0, len(s.Extra))
	for k := range s.Extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out = out[:len(out)-1] // drop the closing brace
	for _, k := range keys {
		buf.Reset()
		if err := enc.Encode(k); err != nil {
			return nil, err
		}
		out = append(out, ',')
		out = append(out, bytes.TrimRight(buf.Bytes(), "\n")...)
		out = append(out, ':')
		out = append(out, s.Extra[k]...)
	}
	return append(out, '}'), nil
}

// UnmarshalJSON reads one status map. Standard keys must have the types of
// §5.3; unknown keys go to Extra; JSON null is the same as an absent key;
// empty lists become nil. The result must pass Validate. Errors name the key.
func (s *NetworkStatus) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return fmt.Errorf("want a JSON map, got %s", describe(data))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return fmt.Errorf("malformed map: %w", err)
	}
	var out NetworkStatus
	for k, v := range raw {
		if isNull(v) && k != keyName {
			if !isStandardKey(k) {
				out.setExtra(k, v)
			}
			continue
		}
		var err error
		switch k {
		case keyName:
			err = unmarshalString(v, &out.Name)
		case keyInterface:
			err = unmarshalString(v, &out.Interface)
		case keyIPs:
			out.IPs, err = unmarshalStrings(v)
		case keyMac:
			err = unmarshalString(v, &out.Mac)
		case keyMTU:
			err = json.Unmarshal(v, &out.MTU)
		case keyDefault:
			err = json.Unmarshal(v, &out.Default)
		case keyDNS:
			out.DNS, err = unmarshalDNS(v)
		case keyDefaultRoute:
			out.DefaultRoute, err = unmarshalStrings(v)
		case keyDeviceInfo:
			out.DeviceInfo, err = compactObject(v)
		default:
			out.setExtra(k, v)
		}
		if err != nil {
			return fmt.Errorf("%q: %w", k, err)
		}
	}
	if err := out.Validate(); err != nil {
		return err
	}
	*s = out
	return nil
}

// Validate checks one entry against spec §5.3: "name" is required (§5.3.1);
// every ips, dns nameserver and default-route item is an IP address (ips may
// carry a "/prefix"); "mac" is a hardware address and needs "interface"
// (§5.3.4); "mtu" is not negative (§5.3.5); device-info is a JSON object
// (§5.3.8); Extra keys are not standard keys and hold valid JSON. The error
// names the offending key and list index.
func (s *NetworkStatus) Validate() error {
	if s.Name == "" {
		return fmt.Errorf("%q: required key is missing or empty (spec §5.3.1)", keyName)
	}
	for i, ip := range s.IPs {
		if !isIPOrCIDR(ip) {
			return fmt.Errorf("%q[%d]: %q is not an IP address (spec §5.3.3)", keyIPs, i, ip)
		}
	}
	if s.Mac != "" {
		if _, err := net.ParseMAC(s.Mac); err != nil {
			return fmt.Errorf("%q: %q is not a hardware address (spec §5.3.4): %w", keyMac, s.Mac, err)
		}
		if s.Interface == "" {
			return fmt.Errorf("%q is set but %q is missing (spec §5.3.4)", keyMac, keyInterface)
		}
	}
	if s.MTU < 0 {
		return fmt.Errorf("%q: %d is negative (spec §5.3.5)", keyMTU, s.MTU)
	}
	if s.DNS != nil {
		for i, ns := range s.DNS.Nameservers {
			if net.ParseIP(ns) == nil {
				return fmt.Errorf("%q.nameservers[%d]: %q is not an IP address (spec §5.3.7.1)", keyDNS, i, ns)
			}
		}
	}
	for i, gw := range s.DefaultRoute {
		if net.ParseIP(gw) == nil {
			return fmt.Errorf("%q[%d]: %q is not an IP address (spec §5.3.7.4)", keyDefaultRoute, i, gw)
		}
	}
	if len(s.DeviceInfo) > 0 {
		if _, err := compactObject(s.DeviceInfo); err != nil {
			return fmt.Errorf("%q: %w (spec §5.3.8)", keyDeviceInfo, err)
		}
	}
	for k, v := range s.Extra {
		if isStandardKey(k) {
			return fmt.Errorf("extension key %q collides with a standard key (spec §5.3)", k)
		}
		if !json.Valid(v) {
			return fmt.Errorf("extension key %q: value is not valid JSON", k)
		}
	}
	return nil
}

func (s *NetworkStatus) setExtra(k string, v json.RawMessage) {
	if s.Extra == nil {
		s.Extra = make(map[string]json.RawMessage)
	}
	var buf bytes.Buffer
	// v came out of a successful json.Unmarshal, so it is valid JSON.
	_ = json.Compact(&buf, v)
	s.Extra[k] = buf.Bytes()
}

func isStandardKey(k string) bool {
	switch k {
	case keyName, keyInterface, keyIPs, keyMac, keyMTU, keyDefault, keyDNS, keyDefaultRoute, keyDeviceInfo:
		return true
	}
	return false
}

func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

func isIPOrCIDR(s string) bool {
	if net.ParseIP(s) != nil {
		return true
	}
	_, _, err := net.ParseCIDR(s)
	return err == nil
}

func unmarshalString(v json.RawMessage, dst *string) error {
	if isNull(v) {
		return errors.New("want a string, got null")
	}
	return json.Unmarshal(v, dst)
}

// unmarshalStrings reads a JSON list of strings; an empty list gives nil.
func unmarshalStrings(v json.RawMessage) ([]string, error) {
	var out []string
	if err := json.Unmarshal(v, &out); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

func unmarshalDNS(v json.RawMessage) (*DNS, error) {
	var d DNS
	if err := json.Unmarshal(v, &d); err != nil {
		return nil, err
	}
	if len(d.Nameservers) == 0 {
		d.Nameservers = nil
	}
	if len(d.Search) == 0 {
		d.Search = nil
	}
	return &d, nil
}

// compactObject checks that v is a JSON object and returns it compacted.
func compactObject(v json.RawMessage) (json.RawMessage, error) {
	t := bytes.TrimSpace(v)
	if len(t) == 0 || t[0] != '{' {
		return nil, fmt.Errorf("want a JSON map, got %s", describe(t))
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, t); err != nil {
		return nil, fmt.Errorf("malformed JSON map: %w", err)
	}
	return buf.Bytes(), nil
}

// describe names the JSON type of v for error messages.
func describe(v []byte) string {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return "nothing"
	}
	switch c := v[0]; {
	case c == '{':
		return "a map"
	case c == '[':
		return "a list"
	case c == '"':
		return "a string"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || (c >= '0' && c <= '9'):
		return "a number"
	}
	s := string(v)
	if len(s) > 16 {
		s = s[:16] + "..."
	}
	return fmt.Sprintf("%q", strings.ToValidUTF8(s, "?"))
}

// Equal reports whether s and o hold the same status; nil and empty lists,
// maps and device-info compare equal.
func (s *NetworkStatus) Equal(o *NetworkStatus) bool {
	if s.Name != o.Name || s.Interface != o.Interface || s.Mac != o.Mac || s.MTU != o.MTU ||
		s.Default != o.Default || !slices.Equal(s.IPs, o.IPs) || !slices.Equal(s.DefaultRoute, o.DefaultRoute) ||
		!bytes.Equal(s.DeviceInfo, o.DeviceInfo) || len(s.Extra) != len(o.Extra) {
		return false
	}
	if (s.DNS == nil) != (o.DNS == nil) {
		return false
	}
	if s.DNS != nil && (s.DNS.Domain != o.DNS.Domain || !slices.Equal(s.DNS.Nameservers, o.DNS.Nameservers) ||
		!slices.Equal(s.DNS.Search, o.DNS.Search)) {
		return false
	}
	for k, v := range s.Extra {
		w, ok := o.Extra[k]
		if !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}
