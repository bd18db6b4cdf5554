package selection

import (
	"encoding/json"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Spec sections of the rules, as they appear in errors.
const (
	secNaming        = "3.3"
	secComma         = "4.1.1"
	secJSON          = "4.1.2"
	secKeys          = "4.1.2.1"
	secName          = "4.1.2.1.1"
	secNamespace     = "4.1.2.1.2"
	secIPs           = "4.1.2.1.3"
	secMAC           = "4.1.2.1.4"
	secInterface     = "4.1.2.1.5"
	secCNIArgs       = "4.1.2.1.6"
	secPortMappings  = "4.1.2.1.7"
	secBandwidth     = "4.1.2.1.8"
	secDefaultRoute  = "4.1.2.1.9"
	secInfiniband    = "4.1.2.1.10"
	secIPAMClaimRef  = "4.1.2.1.11"
	secIPAMClaimName = "8.3"
)

// Limits from Kubernetes object naming and the Linux kernel.
const (
	maxLabelLen     = 63  // DNS-1123 label (namespace names)
	maxSubdomainLen = 253 // DNS-1123 subdomain (object names)
	maxIfNameLen    = 15  // IFNAMSIZ - 1
	maxPort         = 65535
)

// fieldSet marks the keys of one element that already have a problem, so
// that validation does not report them twice.
type fieldSet uint16

const (
	fName fieldSet = 1 << iota
	fNamespace
	fIPs
	fMAC
	fInterface
	fCNIArgs
	fPortMappings
	fBandwidth
	fDefaultRoute
	fInfiniband
	fIPAMClaim
	fExtensions
)

// options vary the rules between the two annotations.
type options struct {
	// forbidInterface: the default network always uses the runtime's CNI_IFNAME.
	forbidInterface bool
	// allowIPsWithClaim: "ips" and "ipam-claim-reference" in one element.
	allowIPsWithClaim bool
	// keepEmptyNamespace: Marshal has no pod namespace to fill in.
	keepEmptyNamespace bool
	// maxElements > 0 bounds the elements of a list (ParseLimit).
	maxElements int
}

// validateElement checks the values of e (already decoded) and puts them in
// canonical form. podNamespace fills an empty Namespace, unless
// opt.keepEmptyNamespace.
func validateElement(c *collector, idx int, e *Element, podNamespace string, bad fieldSet, opt options) {
	nw := e.Name
	validateNames(c, idx, e, podNamespace, bad, opt)
	if bad&fIPs == 0 && e.IPRequest != nil {
		validateIPRequest(c, idx, e)
	}
	if bad&fMAC == 0 && e.MacRequest != "" {
		if canon, r := canonicalMAC(e.MacRequest); r != "" {
			c.add(idx, nw, "mac", e.MacRequest, r, secMAC)
		} else {
			e.MacRequest = canon
		}
	}
	if bad&fInterface == 0 && e.InterfaceRequest != "" {
		if opt.forbidInterface {
			c.add(idx, nw, "interface", e.InterfaceRequest, "cannot be set: the default network always uses the runtime's CNI_IFNAME", secInterface)
		} else if r := ifNameProblem(e.InterfaceRequest); r != "" {
			c.add(idx, nw, "interface", e.InterfaceRequest, r, secInterface)
		}
	}
	if bad&fPortMappings == 0 && e.PortMappingsRequest != nil {
		validatePortMappings(c, idx, e)
	}
	if bad&fBandwidth == 0 && e.BandwidthRequest != nil {
		validateBandwidth(c, idx, nw, e.BandwidthRequest)
	}
	if bad&fDefaultRoute == 0 && e.GatewayRequest != nil {
		validateGatewayRequest(c, idx, e)
	}
	if bad&fInfiniband == 0 && e.InfinibandGUIDRequest != "" {
		if canon, r := canonicalGUID(e.InfinibandGUIDRequest); r != "" {
			c.add(idx, nw, "infiniband-guid", e.InfinibandGUIDRequest, r, secInfiniband)
		} else {
			e.InfinibandGUIDRequest = canon
		}
	}
	if bad&fIPAMClaim == 0 && e.IPAMClaimReference != "" {
		if r := subdomainProblem(e.IPAMClaimReference); r != "" {
			c.add(idx, nw, "ipam-claim-reference", e.IPAMClaimReference, r, secIPAMClaimName)
		} else if !opt.allowIPsWithClaim && e.IPRequest != nil {
			c.add(idx, nw, "ipam-claim-reference", e.IPAMClaimReference, `cannot be combined with "ips" in one element: the IPAMClaim decides the addresses`, secIPAMClaimRef)
		}
	}
	if bad&fExtensions == 0 {
		validateExtensions(c, idx, e)
	}
}

// validateNames checks e's name and namespace (unless bad marks them),
// filling an empty namespace with podNamespace unless
// opt.keepEmptyNamespace.
func validateNames(c *collector, idx int, e *Element, podNamespace string, bad fieldSet, opt options) {
	nw := e.Name
	if bad&fName == 0 {
		if e.Name == "" {
			c.add(idx, nw, "name", "", "is required", secName)
		} else if r := subdomainProblem(e.Name); r != "" {
			c.add(idx, nw, "name", e.Name, r, secNaming)
		}
	}
	if bad&fNamespace != 0 {
		return
	}
	if e.Namespace != "" {
		if r := labelProblem(e.Namespace); r != "" {
			c.add(idx, nw, "namespace", e.Namespace, r, secNamespace)
		}
		return
	}
	if !opt.keepEmptyNamespace {
		if r := labelProblem(podNamespace); r != "" {
			c.add(idx, nw, "namespace", podNamespace, "(the pod's namespace, used because the key is absent) "+r, secNamespace)
		}
		e.Namespace = podNamespace
	}
}

// validateIPRequest checks e's "ips" (at least one, each an address or
// prefix) and puts them in canonical form.
func validateIPRequest(c *collector, idx int, e *Element) {
	if len(e.IPRequest) == 0 {
		c.add(idx, e.Name, "ips", "", "must contain at least one address", secIPs)
	}
	for i, s := range e.IPRequest {
		canon, r := canonicalIPOrPrefix(s)
		if r != "" {
			c.add(idx, e.Name, indexed("ips", i), s, r, secIPs)
			continue
		}
		e.IPRequest[i] = canon
	}
}

// validateGatewayRequest checks e's "default-route" (addresses, none
// repeated) and puts them in canonical form.
func validateGatewayRequest(c *collector, idx int, e *Element) {
	seen := newFirstSeen(len(e.GatewayRequest))
	for i, s := range e.GatewayRequest {
		canon, r := canonicalIP(s)
		if r != "" {
			c.add(idx, e.Name, indexed("default-route", i), s, r, secDefaultRoute)
			continue
		}
		e.GatewayRequest[i] = canon
		if j, dup := seen.check(e.GatewayRequest, i); dup {
			c.add(idx, e.Name, indexed("default-route", i), s, "repeats default-route["+strconv.Itoa(j)+"]", secDefaultRoute)
		}
	}
}

// validateExtensions checks that e's extension keys use reverse domain
// notation and their values are JSON.
func validateExtensions(c *collector, idx int, e *Element) {
	for k, v := range e.Extensions {
		if !strings.Contains(k, ".") {
			c.add(idx, e.Name, k, "", "is not a key of the spec; extension keys must use reverse domain notation (contain a period)", secKeys)
		} else if !json.Valid(v) {
			c.add(idx, e.Name, k, "", "is not valid JSON", secKeys)
		}
	}
}

func validatePortMappings(c *collector, idx int, e *Element) {
	nw := e.Name
	if len(e.PortMappingsRequest) == 0 {
		c.add(idx, nw, "portMappings", "", "must contain at least one port mapping", secPortMappings)
		return
	}
	for i := range e.PortMappingsRequest {
		pm := &e.PortMappingsRequest[i]
		field := indexed("portMappings", i)
		if pm.HostPort < 1 || pm.HostPort > maxPort {
			c.add(idx, nw, field+".hostPort", strconv.Itoa(int(pm.HostPort)), "is not a port number 1-65535", secPortMappings)
		}
		if pm.ContainerPort < 1 || pm.ContainerPort > maxPort {
			c.add(idx, nw, field+".containerPort", strconv.Itoa(int(pm.ContainerPort)), "is not a port number 1-65535", secPortMappings)
		}
		switch strings.ToLower(pm.Protocol) {
		case "", "tcp":
			pm.Protocol = "tcp"
		case "udp":
			pm.Protocol = "udp"
		case "sctp":
			pm.Protocol = "sctp"
		default:
			c.add(idx, nw, field+".protocol", pm.Protocol, `is not one of "TCP", "UDP", "SCTP" (case-insensitive)`, secPortMappings)
		}
		if pm.HostIP != "" {
			canon, r := canonicalIP(pm.HostIP)
			if r != "" {
				c.add(idx, nw, field+".hostIP", pm.HostIP, r, secPortMappings)
			} else {
				pm.HostIP = canon
			}
		}
	}
}

func validateBandwidth(c *collector, idx int, nw string, b *Bandwidth) {
	if *b == (Bandwidth{}) {
		c.add(idx, nw, "bandwidth", "", "must contain at least one of ingressRate, ingressBurst, egressRate, egressBurst", secBandwidth)
		return
	}
	check := func(key string, v int64) {
		if v < 0 {
			c.add(idx, nw, "bandwidth."+key, strconv.FormatInt(v, 10), "must be a positive integer", secBandwidth)
		}
	}
	check("ingressRate", b.IngressRate)
	check("ingressBurst", b.IngressBurst)
	check("egressRate", b.EgressRate)
	check("egressBurst", b.EgressBurst)
	if b.IngressBurst != 0 && b.IngressRate == 0 {
		c.add(idx, nw, "bandwidth.ingressBurst", "", `needs "ingressRate"`, secBandwidth)
	}
	if b.EgressBurst != 0 && b.EgressRate == 0 {
		c.add(idx, nw, "bandwidth.egressBurst", "", `needs "egressRate"`, secBandwidth)
	}
}

// validateSet checks the rules between elements: unique interface names
// (§4.1.2.1.5) and at most one "default-route" (§4.1.2.1.9).
func validateSet(c *collector, elems []Element) {
	firstRoute := -1
	var buf [8]string
	names := buf[:0]
	if len(elems) > len(buf) {
		names = make([]string, 0, len(elems))
	}
	names = names[:len(elems)]
	seen := newFirstSeen(len(elems))
	for i := range elems {
		e := &elems[i]
		names[i] = e.InterfaceRequest
		if e.InterfaceRequest != "" {
			if j, dup := seen.check(names, i); dup {
				c.add(i, e.Name, "interface", e.InterfaceRequest, "is already requested by "+elementRef(j, elems[j].Name), secInterface)
			}
		}
		if e.GatewayRequest != nil {
			if firstRoute >= 0 {
				c.add(i, e.Name, "default-route", "", "is already set by "+elementRef(firstRoute, elems[firstRoute].Name)+"; only one element may carry it", secDefaultRoute)
			} else {
				firstRoute = i
			}
		}
	}
}

// firstSeen finds the first earlier occurrence of a string: by a linear
// scan for the short lists of real annotations, by a map for long ones, so
// that hostile input cannot take quadratic time.
type firstSeen struct {
	m map[string]int
}

func newFirstSeen(n int) firstSeen {
	if n > 16 {
		return firstSeen{m: make(map[string]int, n)}
	}
	return firstSeen{}
}

// check reports the index of the first list[j] == list[i] with j < i, and
// records list[i]. Empty strings are never duplicates.
func (f firstSeen) check(list []string, i int) (int, bool) {
	s := list[i]
	if f.m == nil {
		for j := 0; j < i; j++ {
			if list[j] == s && s != "" {
				return j, true
			}
		}
		return 0, false
	}
	if j, ok := f.m[s]; ok {
		return j, true
	}
	if s != "" {
		f.m[s] = i
	}
	return 0, false
}

func elementRef(i int, name string) string {
	return "networks[" + strconv.Itoa(i) + "] " + strconv.Quote(name)
}

func indexed(field string, i int) string {
	return field + "[" + strconv.Itoa(i) + "]"
}

// labelProblem says why s is not a DNS-1123 label (Kubernetes namespace
// names), or returns "".
func labelProblem(s string) string {
	if s == "" {
		return "must not be empty"
	}
	if len(s) > maxLabelLen {
		return "is not a DNS-1123 label: longer than 63 characters"
	}
	if r := labelChars(s); r != "" {
		return "is not a DNS-1123 label: " + r
	}
	return ""
}

// subdomainProblem says why s is not a DNS-1123 subdomain (Kubernetes object
// names: dot-separated DNS-1123 labels, at most 253 characters), or returns "".
func subdomainProblem(s string) string {
	if s == "" {
		return "must not be empty"
	}
	if len(s) > maxSubdomainLen {
		return "is not a DNS-1123 subdomain: longer than 253 characters"
	}
	for rest := s; ; {
		label, tail, more := strings.Cut(rest, ".")
		if label == "" {
			return "is not a DNS-1123 subdomain: empty label between periods"
		}
		if r := labelChars(label); r != "" {
			return "is not a DNS-1123 subdomain: " + r
		}
		if !more {
			return ""
		}
		rest = tail
	}
}

// labelChars checks the characters of one non-empty label:
// [a-z0-9]([-a-z0-9]*[a-z0-9])?
func labelChars(s string) string {
	for i := 0; i < len(s); i++ {
		b := s[i]
		switch {
		case b >= 'a' && b <= 'z', b >= '0' && b <= '9':
		case b == '-':
			if i == 0 || i == len(s)-1 {
				return "must start and end with a lower case letter or digit"
			}
		case b >= 'A' && b <= 'Z':
			return "must be lower case"
		default:
			return "may contain only lower case letters, digits and '-'"
		}
	}
	return ""
}

// ifNameProblem says why s is not a usable Linux interface name, or returns "".
// The kernel (dev_valid_name) refuses empty names, names of 16 bytes or more,
// "." and "..", and names with '/', ':' or white space; '%' makes the kernel
// pick a name itself. We also refuse control and non-ASCII bytes.
func ifNameProblem(s string) string {
	if s == "" {
		return "must not be empty"
	}
	if len(s) > maxIfNameLen {
		return "is longer than 15 bytes (Linux IFNAMSIZ)"
	}
	if s == "." || s == ".." {
		return "is not a valid Linux interface name"
	}
	for i := 0; i < len(s); i++ {
		switch b := s[i]; {
		case b <= ' ' || b >= 0x7f:
			return "may contain only printable ASCII without white space"
		case b == '/' || b == ':' || b == '%':
			return "must not contain " + strconv.QuoteRune(rune(b))
		}
	}
	return ""
}

// canonicalIP parses an IPv4 or IPv6 address without prefix or zone.
func canonicalIP(s string) (string, string) {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return "", "is not an IPv4 or IPv6 address"
	}
	return a.String(), ""
}

// canonicalIPOrPrefix parses an IPv4 or IPv6 address with an optional prefix
// length ("10.1.1.5/24"); host bits are kept.
func canonicalIPOrPrefix(s string) (string, string) {
	if !strings.Contains(s, "/") {
		return canonicalIP(s)
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return "", "is not an IPv4 or IPv6 address with an optional prefix length"
	}
	return p.String(), ""
}

// canonicalMAC parses a 6-byte unicast Ethernet MAC address in any form
// net.ParseMAC accepts and returns it as "aa:bb:cc:dd:ee:ff".
func canonicalMAC(s string) (string, string) {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 6 {
		return "", "is not a 6-byte MAC address"
	}
	if hw[0]&1 != 0 {
		return "", "is a multicast MAC address; an interface needs a unicast one"
	}
	if hw[0]|hw[1]|hw[2]|hw[3]|hw[4]|hw[5] == 0 {
		return "", "is the all-zero MAC address"
	}
	return hw.String(), ""
}

// canonicalGUID parses an 8-byte InfiniBand GUID and returns it as
// "aa:bb:cc:dd:ee:ff:00:11".
func canonicalGUID(s string) (string, string) {
	hw, err := net.ParseMAC(s)
	if err != nil || len(hw) != 8 {
		return "", "is not an 8-byte InfiniBand GUID"
	}
	return hw.String(), ""
}

func itoa(i int) string { return strconv.Itoa(i) }
