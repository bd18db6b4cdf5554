package attach

import (
	"fmt"
	"net"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// setDefaultRoute gives the attachment chosen by "default-route"
// (spec §4.1.2.1.9) the pod's default route(s): for each IP family of its
// gateways, every default route of that family is removed from the pod (the
// default network's included) and one default route per gateway is added on
// the attachment's interface, the first gateway with the lowest metric.
// Families without a gateway keep their routes. The gateways are the
// element's list, or, when it is empty, the gateways of the attachment's IPs
// in its CNI result. It returns the gateways installed, in order: none (and
// no route touched) for an empty list and a result without gateway. Errors
// name the interface and the route; a listed gateway the kernel cannot route
// through on the interface is one.
func setDefaultRoute(netnsPath string, p *plan, results []types.Result) ([]string, error) {
	a := p.attachments[p.gateway]
	gws, err := gatewayIPs(a.Element.GatewayRequest, results[p.gateway], a.IfName)
	if err != nil {
		return nil, fmt.Errorf("network %s: default-route: %w", a.NetworkKey, err)
	}
	if len(gws) == 0 {
		return nil, nil
	}
	err = ns.WithNetNSPath(netnsPath, func(ns.NetNS) error {
		link, err := netlink.LinkByName(a.IfName)
		if err != nil {
			return fmt.Errorf("network %s: default-route: interface %s: %w", a.NetworkKey, a.IfName, err)
		}
		for _, family := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
			var mine []net.IP
			for _, gw := range gws {
				if (gw.To4() != nil) == (family == netlink.FAMILY_V4) {
					mine = append(mine, gw)
				}
			}
			if len(mine) == 0 {
				continue
			}
			routes, err := netlink.RouteList(nil, family)
			if err != nil {
				return fmt.Errorf("list routes: %w", err)
			}
			for _, r := range routes {
				if isDefault(r.Dst) {
					if err := netlink.RouteDel(&r); err != nil {
						return fmt.Errorf("delete default route via %s: %w", r.Gw, err)
					}
				}
			}
			for i, gw := range mine {
				r := &netlink.Route{LinkIndex: link.Attrs().Index, Gw: gw, Priority: i, Scope: netlink.SCOPE_UNIVERSE}
				if err := netlink.RouteReplace(r); err != nil {
					return fmt.Errorf("network %s: add default route via %s dev %s: %w", a.NetworkKey, gw, a.IfName, err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	via := make([]string, len(gws))
	for i, gw := range gws {
		via[i] = gw.String()
	}
	return via, nil
}

// isDefault reports whether dst is a default route's destination (netlink
// gives nil or 0.0.0.0/0, ::/0).
func isDefault(dst *net.IPNet) bool {
	if dst == nil {
		return true
	}
	ones, _ := dst.Mask.Size()
	return ones == 0 && dst.IP.IsUnspecified()
}

// gatewayIPs returns the requested gateways, or the gateways of the
// result's IPs on interface ifName when none were requested.
func gatewayIPs(requested []string, res types.Result, ifName string) ([]net.IP, error) {
	var out []net.IP
	for _, s := range requested {
		ip := net.ParseIP(s)
		if ip == nil {
			return nil, fmt.Errorf("gateway %q is not an IP address", s)
		}
		out = append(out, ip)
	}
	if len(out) > 0 || res == nil {
		return out, nil
	}
	r, err := current.NewResultFromResult(res)
	if err != nil {
		return nil, fmt.Errorf("convert result: %w", err)
	}
	for _, ipc := range r.IPs {
		if ipc.Gateway == nil {
			continue
		}
		if ipc.Interface != nil && *ipc.Interface >= 0 && *ipc.Interface < len(r.Interfaces) && r.Interfaces[*ipc.Interface].Name != ifName {
			continue
		}
		out = append(out, ipc.Gateway)
	}
	return out, nil
}
