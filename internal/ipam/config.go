package ipam

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
)

// PluginType is the IPAM "type" of multinet-ipam.
const PluginType = "multinet-ipam"

// SocketPathRefused is why "ipam.socketPath" is refused: a
// NetworkAttachmentDefinition's author must not choose which of the node's
// sockets a delegate's request reaches (multinetd's own CNI socket, the
// runtime's).
const SocketPathRefused = "not accepted from a network configuration: multinet-ipam's socket is node configuration (multinetd's ipamSocketPath, handed to the plugin in MULTINET_IPAM_SOCKET); remove the key"

// MaxPoolLength bounds a pool name (IPAllocation spec.pool).
const MaxPoolLength = 253

// NetConf is the part of a CNI network configuration multinet-ipam reads:
// the network's name and cniVersion, the "ipam" section, and the
// runtimeConfig keys of the capabilities "ips" and "ipamClaimReference"
// (CNI CONVENTIONS; multi-net spec §4.1.2.1.3, §4.1.2.1.11).
type NetConf struct {
	CNIVersion string `json:"cniVersion"`
	// Name is the CNI network name; the default pool.
	Name          string         `json:"name"`
	IPAM          *IPAMConf      `json:"ipam"`
	RuntimeConfig *RuntimeConfig `json:"runtimeConfig,omitempty"`
}

// IPAMConf is the "ipam" section:
//
//	{"type": "multinet-ipam", "pool": "blue",
//	 "ranges": [[{"subnet": "10.1.0.0/24", "rangeStart": "10.1.0.10", "rangeEnd": "10.1.0.200", "gateway": "10.1.0.1"}],
//	            [{"subnet": "fd10::/64"}]],
//	 "exclude": ["10.1.0.128/28"], "routes": [{"dst": "0.0.0.0/0"}]}
//
// "ranges" is a list of range sets (as host-local's): one address is
// allocated from each set; the ranges of one set share an address family.
// Timeout is read by the plugin binary (cmd/multinet-ipam); SocketPath is
// refused by both.
type IPAMConf struct {
	Type string `json:"type"`
	// Pool names the address space; default: the network's "name". Networks
	// that name the same pool share its addresses (never a duplicate).
	Pool    string         `json:"pool,omitempty"`
	Ranges  [][]RangeConf  `json:"ranges"`
	Exclude []string       `json:"exclude,omitempty"`
	Routes  []*types.Route `json:"routes,omitempty"`
	DNS     types.DNS      `json:"dns,omitempty"`
	// SocketPath is refused (Config): the socket is node configuration
	// (multinetd's ipamSocketPath), never a network's.
	SocketPath *string `json:"socketPath,omitempty"`
	// Timeout is how long the plugin waits for multinetd, a Go duration.
	Timeout string `json:"timeout,omitempty"`

	// whereabouts' range keys: not multinet-ipam's, refused with a hint
	// (docs/multinet-ipam.md "Coming from whereabouts") rather than left
	// unread, which would leave the network without its addresses.
	WhereaboutsRange      json.RawMessage `json:"range,omitempty"`
	WhereaboutsRangeStart json.RawMessage `json:"range_start,omitempty"`
	WhereaboutsRangeEnd   json.RawMessage `json:"range_end,omitempty"`
	WhereaboutsIPRanges   json.RawMessage `json:"ipRanges,omitempty"`
}

// whereaboutsKeys returns the whereabouts range keys ic sets, by name.
func (ic *IPAMConf) whereaboutsKeys() []string {
	var keys []string
	for _, k := range []struct {
		name string
		v    json.RawMessage
	}{{"range", ic.WhereaboutsRange}, {"range_start", ic.WhereaboutsRangeStart}, {"range_end", ic.WhereaboutsRangeEnd}, {"ipRanges", ic.WhereaboutsIPRanges}} {
		if len(k.v) > 0 {
			keys = append(keys, k.name)
		}
	}
	return keys
}

// RangeConf is one range of a range set as written in the configuration.
type RangeConf struct {
	Subnet     string `json:"subnet"`
	RangeStart string `json:"rangeStart,omitempty"`
	RangeEnd   string `json:"rangeEnd,omitempty"`
	Gateway    string `json:"gateway,omitempty"`
}

// RuntimeConfig holds the capability arguments multinet-ipam honours.
type RuntimeConfig struct {
	// IPs are the addresses the network selection element requests
	// ("ips", §4.1.2.1.3), in CIDR form or bare.
	IPs []string `json:"ips,omitempty"`
	// IPAMClaimReference names an IPAMClaim in the pod's namespace
	// ("ipam-claim-reference", §4.1.2.1.11, §8).
	IPAMClaimReference string `json:"ipamClaimReference,omitempty"`
}

// Config is a checked IPAM configuration: what Allocate needs.
type Config struct {
	// Network is the CNI network name.
	Network string
	// Pool is the address space's name (default Network); after
	// Tenancy.Resolve its key: "namespace/name" for a namespace's pool.
	Pool string
	// LegacyPool is the key the pool's allocations had before pools
	// belonged to namespaces (the unqualified name of a tenant
	// namespace's pool), "" when the same as Pool: those allocations are
	// still the attachments' own and their addresses still held
	// (docs/decisions/ipam-tenancy.md "Upgrade").
	LegacyPool string
	// RangeSets are the range sets, in configuration order; one address
	// comes from each.
	RangeSets []RangeSet
	// Exclude are prefixes no address is allocated from.
	Exclude []netip.Prefix
	Routes  []*types.Route
	DNS     types.DNS

	// resolved: Tenancy.Resolve made Pool the key.
	resolved bool
}

// inPool reports whether an allocation's spec.pool is cfg's pool (its key
// or its key before tenancy).
func (c *Config) inPool(pool string) bool {
	return pool == c.Pool || (c.LegacyPool != "" && pool == c.LegacyPool)
}

// RangeSet is one range set: ranges of one address family.
type RangeSet []Range

// Range is a checked range: Start..End (inclusive) inside Subnet. Gateway
// is the subnet's gateway (reported in the result, never allocated).
type Range struct {
	Subnet  netip.Prefix // masked
	Start   netip.Addr
	End     netip.Addr
	Gateway netip.Addr // invalid when the subnet has none (/31, /32, /127, /128)
}

// ConfigError is an invalid IPAM configuration; Field names the offending
// field ("ipam.ranges[0][1].rangeEnd").
type ConfigError struct {
	Field string
	Msg   string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("multinet-ipam configuration: %s: %s", e.Field, e.Msg)
}

// ParseNetConf decodes a CNI network configuration (the plugin's stdin).
// Errors: not JSON, no "ipam" section, an "ipam" of another type.
func ParseNetConf(stdin []byte) (*NetConf, error) {
	var nc NetConf
	if err := json.Unmarshal(stdin, &nc); err != nil {
		return nil, &ConfigError{Field: "(network configuration)", Msg: err.Error()}
	}
	if nc.IPAM == nil {
		return nil, &ConfigError{Field: "ipam", Msg: "missing"}
	}
	if nc.IPAM.Type != PluginType {
		return nil, &ConfigError{Field: "ipam.type", Msg: fmt.Sprintf("%q is not %q", nc.IPAM.Type, PluginType)}
	}
	return &nc, nil
}

// Config checks the configuration and returns what Allocate needs.
// Errors (*ConfigError): no network name and no pool, a pool too long, no
// range sets, an empty range set, a range that is not inside its subnet or
// ends before it starts, a gateway outside the subnet, a range set mixing
// address families, overlapping ranges, a malformed exclude prefix,
// whereabouts' range keys (range, range_start, range_end, ipRanges), a
// "socketPath" (SocketPathRefused).
func (nc *NetConf) Config() (*Config, error) {
	ic := nc.IPAM
	if ic.SocketPath != nil {
		return nil, &ConfigError{Field: "ipam.socketPath", Msg: SocketPathRefused}
	}
	c := &Config{Network: nc.Name, Pool: ic.Pool, Routes: ic.Routes, DNS: ic.DNS}
	if c.Pool == "" {
		c.Pool = nc.Name
	}
	switch {
	case c.Pool == "":
		return nil, &ConfigError{Field: "ipam.pool", Msg: `missing, and the network has no "name" to default to`}
	case len(c.Pool) > MaxPoolLength:
		return nil, &ConfigError{Field: "ipam.pool", Msg: fmt.Sprintf("%d characters, at most %d", len(c.Pool), MaxPoolLength)}
	}
	if keys := ic.whereaboutsKeys(); len(keys) > 0 {
		return nil, &ConfigError{Field: "ipam." + keys[0], Msg: fmt.Sprintf(`%s: whereabouts' keys, which multinet-ipam does not read; write the range as "ranges": [[{"subnet": ..., "rangeStart": ..., "rangeEnd": ..., "gateway": ...}]] (host-local's form; "exclude" is the same; docs/multinet-ipam.md "Coming from whereabouts")`, strings.Join(keys, ", "))}
	}
	if len(ic.Ranges) == 0 {
		return nil, &ConfigError{Field: "ipam.ranges", Msg: "at least one range set is required"}
	}
	for i, set := range ic.Ranges {
		rs, err := parseRangeSet(fmt.Sprintf("ipam.ranges[%d]", i), set)
		if err != nil {
			return nil, err
		}
		c.RangeSets = append(c.RangeSets, rs)
	}
	if err := checkOverlaps(c.RangeSets); err != nil {
		return nil, err
	}
	for i, s := range ic.Exclude {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return nil, &ConfigError{Field: fmt.Sprintf("ipam.exclude[%d]", i), Msg: fmt.Sprintf("%q is not a CIDR: %v", s, err)}
		}
		c.Exclude = append(c.Exclude, p.Masked())
	}
	return c, nil
}

func parseRangeSet(field string, set []RangeConf) (RangeSet, error) {
	if len(set) == 0 {
		return nil, &ConfigError{Field: field, Msg: "an empty range set"}
	}
	var rs RangeSet
	for j, rc := range set {
		r, err := parseRange(fmt.Sprintf("%s[%d]", field, j), rc)
		if err != nil {
			return nil, err
		}
		if j > 0 && r.Subnet.Addr().Is4() != rs[0].Subnet.Addr().Is4() {
			return nil, &ConfigError{Field: field, Msg: "mixes IPv4 and IPv6 ranges (one range set per address family)"}
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// parseRange checks one range and fills its defaults: rangeStart the
// subnet's first address after the network address, rangeEnd its last
// before the IPv4 broadcast address, gateway the first address after the
// network address (as host-local).
func parseRange(field string, rc RangeConf) (Range, error) {
	var r Range
	p, err := netip.ParsePrefix(strings.TrimSpace(rc.Subnet))
	if err != nil {
		return r, &ConfigError{Field: field + ".subnet", Msg: fmt.Sprintf("%q is not a CIDR: %v", rc.Subnet, err)}
	}
	if p.Addr().Is4In6() || p.Addr().Zone() != "" {
		return r, &ConfigError{Field: field + ".subnet", Msg: fmt.Sprintf("%q: an IPv4-mapped or zoned address is not allowed", rc.Subnet)}
	}
	r.Subnet = p.Masked()
	first, last := usable(r.Subnet)
	addr := func(name, s string, def netip.Addr) (netip.Addr, error) {
		if s == "" {
			return def, nil
		}
		a, err := netip.ParseAddr(strings.TrimSpace(s))
		if err != nil {
			return a, &ConfigError{Field: field + "." + name, Msg: fmt.Sprintf("%q is not an IP address", s)}
		}
		if !r.Subnet.Contains(a) {
			return a, &ConfigError{Field: field + "." + name, Msg: fmt.Sprintf("%s is not in subnet %s", a, r.Subnet)}
		}
		return a, nil
	}
	if r.Start, err = addr("rangeStart", rc.RangeStart, first); err != nil {
		return r, err
	}
	if r.End, err = addr("rangeEnd", rc.RangeEnd, last); err != nil {
		return r, err
	}
	if r.End.Less(r.Start) {
		return r, &ConfigError{Field: field + ".rangeEnd", Msg: fmt.Sprintf("%s is before rangeStart %s", r.End, r.Start)}
	}
	var gw netip.Addr
	if hasNetworkAddress(r.Subnet) {
		gw = r.Subnet.Addr().Next()
	}
	if r.Gateway, err = addr("gateway", rc.Gateway, gw); err != nil {
		return r, err
	}
	return r, nil
}

// hasNetworkAddress: subnets with room for more than two addresses keep
// their network address (and IPv4 its broadcast address) out of
// allocation; /31, /32, /127 and /128 use every address (RFC 3021, 6164).
func hasNetworkAddress(p netip.Prefix) bool { return p.Addr().BitLen()-p.Bits() >= 2 }

// usable returns the first and last allocatable address of subnet p.
func usable(p netip.Prefix) (first, last netip.Addr) {
	first, last = p.Addr(), lastAddr(p)
	if hasNetworkAddress(p) {
		first = first.Next()
		if p.Addr().Is4() {
			last = last.Prev()
		}
	}
	return first, last
}

// checkOverlaps refuses ranges (of any sets) that share an address: an
// address would belong to two range sets.
func checkOverlaps(sets []RangeSet) error {
	type loc struct {
		i, j int
		r    Range
	}
	var all []loc
	for i, s := range sets {
		for j, r := range s {
			for _, o := range all {
				if !r.End.Less(o.r.Start) && !o.r.End.Less(r.Start) {
					return &ConfigError{Field: fmt.Sprintf("ipam.ranges[%d][%d]", i, j),
						Msg: fmt.Sprintf("%s-%s overlaps ipam.ranges[%d][%d] %s-%s", r.Start, r.End, o.i, o.j, o.r.Start, o.r.End)}
				}
			}
			all = append(all, loc{i, j, r})
		}
	}
	return nil
}

// RequestedIPs parses runtimeConfig "ips": each an address, in CIDR form
// (the prefix length is ignored: the range's subnet gives it) or bare.
// Errors name the entry.
func (nc *NetConf) RequestedIPs() ([]netip.Addr, error) {
	if nc.RuntimeConfig == nil {
		return nil, nil
	}
	var out []netip.Addr
	for i, s := range nc.RuntimeConfig.IPs {
		s = strings.TrimSpace(s)
		var a netip.Addr
		var err error
		if strings.Contains(s, "/") {
			var p netip.Prefix
			p, err = netip.ParsePrefix(s)
			a = p.Addr()
		} else {
			a, err = netip.ParseAddr(s)
		}
		if err != nil || a.Zone() != "" {
			return nil, &ConfigError{Field: fmt.Sprintf("runtimeConfig.ips[%d]", i), Msg: fmt.Sprintf("%q is not an IP address", s)}
		}
		out = append(out, a.Unmap())
	}
	return out, nil
}

// ClaimReference returns runtimeConfig "ipamClaimReference" ("" when none).
func (nc *NetConf) ClaimReference() string {
	if nc.RuntimeConfig == nil {
		return ""
	}
	return nc.RuntimeConfig.IPAMClaimReference
}

// rangeSetOf returns the index of the range set whose ranges contain a
// (allocatable or not), or -1.
func (c *Config) rangeSetOf(a netip.Addr) (int, Range) {
	for i, s := range c.RangeSets {
		for _, r := range s {
			if r.Subnet.Contains(a) && !a.Less(r.Start) && !r.End.Less(a) {
				return i, r
			}
		}
	}
	return -1, Range{}
}

// subnetOf returns the range of any set whose subnet contains a.
func (c *Config) subnetOf(a netip.Addr) (int, Range, bool) {
	for i, s := range c.RangeSets {
		for _, r := range s {
			if r.Subnet.Contains(a) {
				return i, r, true
			}
		}
	}
	return -1, Range{}, false
}

// allocatable reports why a, inside range r, cannot be allocated ("" when
// it can): the network or broadcast address, the gateway, an excluded
// prefix.
func (c *Config) allocatable(a netip.Addr, r Range) string {
	if hasNetworkAddress(r.Subnet) {
		if a == r.Subnet.Addr() {
			return "the subnet's network address"
		}
		if a.Is4() && a == lastAddr(r.Subnet) {
			return "the subnet's broadcast address"
		}
	}
	if r.Gateway.IsValid() && a == r.Gateway {
		return "the gateway"
	}
	for _, p := range c.Exclude {
		if p.Contains(a) {
			return "excluded (" + p.String() + ")"
		}
	}
	return ""
}

// errNotAllocatable wraps the reasons a requested address is refused.
var errNotAllocatable = errors.New("not allocatable")
