package status

import (
	"encoding/json"
	"fmt"
	"net"
	"reflect"

	"github.com/containernetworking/cni/pkg/types"
	types020 "github.com/containernetworking/cni/pkg/types/020"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/multinet/multinet/pkg/spec/devinfo"
)

// mainRouteTable is the Linux main routing table (RT_TABLE_MAIN).
const mainRouteTable = 254

// Options carries what FromResult cannot learn from the CNI result.
type Options struct {
	// Default marks the cluster-wide default network's entry (§5.2, §5.3.6).
	Default bool
	// DefaultRoute is true when this attachment carries the pod's default
	// route: its network selection element had the "default-route" key
	// (§4.1.2.1.9), or it is the cluster-wide default network and no element
	// had the key (§6). Only then is "default-route" written (§5.3.7.4).
	DefaultRoute bool
	// GatewayRequest is the element's "default-route" list of gateway IPs
	// (§4.1.2.1.9); may be empty. When not empty it is what "default-route"
	// reports, since these are the gateways the pod's default routes use.
	GatewayRequest []string
	// DeviceInfo is the content of the attachment's CNI device-info file
	// (device-info spec; §5.3.8), a JSON object; written compacted as
	// "device-info". Empty means none.
	DeviceInfo json.RawMessage
}

// FromResult builds the network-status entry of one attachment (spec §5.1,
// §5.3) from the CNI result of its ADD (or GET/CHECK) and returns it.
//
//   - result: a CNI result of any version 0.1.0–1.1.0; it is converted to the
//     1.1.0 types with the CNI library and is not modified. nil gives the
//     minimal entry of §5.1.1: name, default, interface = ifName.
//   - networkKey: the "name" value, "namespace/name" of the
//     NetworkAttachmentDefinition or the default network's name (§5.3.1).
//   - ifName: the CNI_IFNAME given to the delegate; it is the "interface" of a
//     result older than 0.3.0, which has no interfaces (§5.3.2.1).
//
// Then: "interface", "mac" and "mtu" come from the first interface with a
// non-empty "sandbox" (§5.3.2.1, §5.3.4.1); "ips" from the result's ips whose
// "interface" index is that interface, or, with no sandbox interface, from the
// ips without an index (§5.3.3.1; see docs/decisions/status.md); "dns" from the
// result's dns; "default-route" per Options.DefaultRoute (§5.3.7.4);
// "device-info" from Options.DeviceInfo, else from a 1.1.0 sandbox interface's
// "pciID" when it is a PCI address (§5.3.8).
//
// An optional value of the result that the entry cannot carry is left out:
// a sandbox interface's "mac" that is not a hardware address, or whose
// interface has no name (§5.3.4); a negative "mtu" (§5.3.5); a "dns"
// nameserver that is not an IP address (§5.3.7.1). FromResultWithOmissions
// reports which.
//
// Errors: empty networkKey, a result that cannot be converted, a
// GatewayRequest item that is not an IP, or DeviceInfo that is not a JSON
// object. These are the caller's inputs, not optional values of the result.
func FromResult(result types.Result, networkKey, ifName string, opts Options) (NetworkStatus, error) {
	st, _, err := FromResultWithOmissions(result, networkKey, ifName, opts)
	return st, err
}

// Omission is an optional value of a CNI result that FromResult left out of
// the status entry because the entry cannot carry it.
type Omission struct {
	// Field is the status key path of the value, e.g. `dns.nameservers[1]`
	// (the index is the one in the result).
	Field string
	// Reason says why, e.g. `"dns.example.com" is not an IP address (spec §5.3.7.1)`
	// or `interfaces[1].mac "zz" is not a hardware address (spec §5.3.4)`.
	Reason string
}

func (o Omission) String() string { return o.Field + ": " + o.Reason }

// FromResultWithOmissions is FromResult, and also returns the optional
// values it left out, in result order (nil when none), so that the caller
// can tell the pod (a Warning Event).
func FromResultWithOmissions(result types.Result, networkKey, ifName string, opts Options) (NetworkStatus, []Omission, error) {
	st := NetworkStatus{Name: networkKey, Default: opts.Default}
	if networkKey == "" {
		return NetworkStatus{}, nil, fmt.Errorf("network key (%q): must not be empty (spec §5.3.1)", keyName)
	}
	if len(opts.DeviceInfo) > 0 {
		di, err := compactObject(opts.DeviceInfo)
		if err != nil {
			return NetworkStatus{}, nil, fmt.Errorf("network %q: device-info: %w", networkKey, err)
		}
		st.DeviceInfo = di
	}
	requested, err := requestedGateways(networkKey, opts.GatewayRequest)
	if err != nil {
		return NetworkStatus{}, nil, err
	}

	if isNil(result) { // §5.1.1: no result, minimal status map
		st.Interface = ifName
		if opts.DefaultRoute && len(requested) > 0 {
			st.DefaultRoute = requested
		}
		return st, nil, nil
	}

	res, err := toCurrent(result)
	if err != nil {
		return NetworkStatus{}, nil, fmt.Errorf("network %q: %w", networkKey, err)
	}

	var ips []*current.IPConfig
	var omitted []Omission
	switch sandbox := sandboxInterface(res); {
	case isLegacy(result):
		// §5.3.2.1, §5.3.3.1: no interfaces before 0.3.0; ip4 and ip6 became
		// ips without an interface index in the conversion.
		st.Interface = ifName
		ips = unindexedIPs(res.IPs)
	case sandbox >= 0:
		omitted = st.setInterface(res.Interfaces[sandbox], sandbox)
		ips = sandboxIPs(res.IPs, sandbox)
	default:
		ips = unindexedIPs(res.IPs)
	}
	for _, ipc := range ips {
		st.IPs = append(st.IPs, ipc.Address.IP.String())
	}
	var dnsOmitted []Omission
	st.DNS, dnsOmitted = dnsOf(res.DNS)
	omitted = append(omitted, dnsOmitted...)

	if opts.DefaultRoute {
		if len(requested) > 0 {
			st.DefaultRoute = requested
		} else {
			st.DefaultRoute = defaultGateways(res.Routes, ips)
		}
	}
	return st, omitted, nil
}

// requestedGateways are the gateways of the selection element's
// "default-route" (spec §4.1.2.1.9), normalized and without duplicates.
// Errors: one is not an IP address.
func requestedGateways(networkKey string, gateways []string) ([]string, error) {
	requested := make([]string, 0, len(gateways))
	for i, gw := range gateways {
		ip := net.ParseIP(gw)
		if ip == nil {
			return nil, fmt.Errorf("network %q: default-route[%d]: %q is not an IP address (spec §4.1.2.1.9)", networkKey, i, gw)
		}
		requested = appendUnique(requested, ip.String())
	}
	return requested, nil
}

// sandboxInterface is the index of res's first interface in the sandbox,
// -1 when none is.
func sandboxInterface(res *current.Result) int {
	for i, intf := range res.Interfaces {
		if intf != nil && intf.Sandbox != "" {
			return i
		}
	}
	return -1
}

// setInterface fills the entry's interface, mac, mtu and (without one
// given) PCI device-info from intf, the result's interfaces[index], and
// returns the optional values it left out: "mac" and "mtu" are optional
// (§5.3.4, §5.3.5), a value the entry cannot carry is left out, not a
// failed attachment.
func (st *NetworkStatus) setInterface(intf *current.Interface, index int) []Omission {
	var omitted []Omission
	st.Interface = intf.Name
	switch _, err := net.ParseMAC(intf.Mac); {
	case intf.Mac == "":
	case err != nil:
		omitted = append(omitted, Omission{
			Field:  keyMac,
			Reason: fmt.Sprintf("interfaces[%d].mac %q is not a hardware address (spec §5.3.4)", index, intf.Mac),
		})
	case intf.Name == "":
		// §5.3.4: "If the "mac" key is present, "interface" must also be present."
		omitted = append(omitted, Omission{
			Field:  keyMac,
			Reason: fmt.Sprintf("interfaces[%d] has no name, and \"mac\" needs \"interface\" (spec §5.3.4)", index),
		})
	default:
		st.Mac = intf.Mac
	}
	if intf.Mtu < 0 {
		omitted = append(omitted, Omission{
			Field:  keyMTU,
			Reason: fmt.Sprintf("interfaces[%d].mtu %d is negative, and \"mtu\" is a uint (spec §5.3.5)", index, intf.Mtu),
		})
	} else {
		st.MTU = intf.Mtu
	}
	if st.DeviceInfo == nil && devinfo.IsPCIAddress(intf.PciID) {
		st.DeviceInfo = pciDeviceInfo(intf.PciID)
	}
	return omitted
}

// dnsOf is the entry's "dns" of the result's (nil when nothing usable is
// left), and the nameservers it left out.
func dnsOf(d types.DNS) (*DNS, []Omission) {
	if len(d.Nameservers) == 0 && d.Domain == "" && len(d.Search) == 0 {
		return nil, nil
	}
	var omitted []Omission
	dns := &DNS{Domain: d.Domain}
	for i, ns := range d.Nameservers {
		if net.ParseIP(ns) == nil {
			// §5.3.7.1: "an array of IPv4 and/or IPv6 addresses". An
			// optional value: left out, not a failed attachment.
			omitted = append(omitted, Omission{
				Field:  fmt.Sprintf("%s.nameservers[%d]", keyDNS, i),
				Reason: fmt.Sprintf("%q is not an IP address (spec §5.3.7.1)", ns),
			})
			continue
		}
		dns.Nameservers = append(dns.Nameservers, ns)
	}
	dns.Search = append(dns.Search, d.Search...)
	if len(dns.Nameservers) == 0 && dns.Domain == "" && len(dns.Search) == 0 {
		return nil, omitted // nothing usable was left
	}
	return dns, omitted
}

// toCurrent converts r to the CNI 1.1.0 result types without modifying r.
func toCurrent(r types.Result) (*current.Result, error) {
	if cr, ok := r.(*current.Result); ok {
		return cr, nil // 1.0.0 and 1.1.0 share the types; only read from here on
	}
	conv, err := r.GetAsVersion(current.ImplementedSpecVersion)
	if err != nil {
		return nil, fmt.Errorf("converting CNI result version %q to %s: %w", r.Version(), current.ImplementedSpecVersion, err)
	}
	cr, ok := conv.(*current.Result)
	if !ok {
		return nil, fmt.Errorf("converting CNI result version %q to %s: got %T", r.Version(), current.ImplementedSpecVersion, conv)
	}
	return cr, nil
}

// isLegacy reports whether r is older than CNI 0.3.0 (no "interfaces").
func isLegacy(r types.Result) bool {
	if _, ok := r.(*types020.Result); ok {
		return true
	}
	v := r.Version()
	if v == "" {
		return false
	}
	ge, err := version.GreaterThanOrEqualTo(v, "0.3.0")
	return err == nil && !ge
}

// isNil reports whether r is nil or a typed nil pointer.
func isNil(r types.Result) bool {
	if r == nil {
		return true
	}
	v := reflect.ValueOf(r)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// sandboxIPs returns the ips whose interface index is sandbox (§5.3.3.1 rule 1).
// When no ip of the result has any interface index the plugin did not
// attribute its addresses, and the ips without an index are used.
func sandboxIPs(all []*current.IPConfig, sandbox int) []*current.IPConfig {
	var out []*current.IPConfig
	indexed := false
	for _, ipc := range all {
		if ipc == nil || ipc.Interface == nil || *ipc.Interface < 0 {
			continue
		}
		indexed = true
		if *ipc.Interface == sandbox && ipc.Address.IP != nil {
			out = append(out, ipc)
		}
	}
	if !indexed {
		return unindexedIPs(all)
	}
	return out
}

// unindexedIPs returns the ips without an interface index or with a negative
// one (§5.3.3.1 rule 2).
func unindexedIPs(all []*current.IPConfig) []*current.IPConfig {
	var out []*current.IPConfig
	for _, ipc := range all {
		if ipc != nil && (ipc.Interface == nil || *ipc.Interface < 0) && ipc.Address.IP != nil {
			out = append(out, ipc)
		}
	}
	return out
}

// defaultGateways returns the gateways of the result's default routes
// (0.0.0.0/0, ::/0) in the main table, in order, without duplicates. A default
// route without "gw" uses the gateway of the attachment's ip of its family.
func defaultGateways(routes []*types.Route, ips []*current.IPConfig) []string {
	var out []string
	for _, r := range routes {
		if r == nil || r.Dst.IP == nil || !r.Dst.IP.IsUnspecified() {
			continue
		}
		if ones, _ := r.Dst.Mask.Size(); ones != 0 || r.Dst.Mask == nil {
			continue
		}
		if r.Table != nil && *r.Table != mainRouteTable {
			continue
		}
		gw := r.GW
		if gw == nil {
			gw = gatewayOfFamily(ips, r.Dst.IP.To4() != nil)
		}
		if gw != nil {
			out = appendUnique(out, gw.String())
		}
	}
	return out
}

func gatewayOfFamily(ips []*current.IPConfig, v4 bool) net.IP {
	for _, ipc := range ips {
		if ipc.Gateway != nil && (ipc.Gateway.To4() != nil) == v4 {
			return ipc.Gateway
		}
	}
	return nil
}

func appendUnique(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// pciDeviceInfo is the device-info map (device-info spec v1.1.0, type "pci")
// for a PCI address reported as a CNI 1.1.0 interface "pciID".
func pciDeviceInfo(addr string) json.RawMessage {
	return json.RawMessage(`{"type":"pci","version":"1.1.0","pci":{"pci-address":"` + addr + `"}}`)
}
