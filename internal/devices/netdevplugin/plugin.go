// Package netdevplugin is the logic of multinet-netdev, the CNI plugin of
// multinet's netdev device pool (the seed slides' "abc-plugin"): ADD moves the
// host network interface named by runtimeConfig "deviceID" into the pod's
// network namespace under CNI_IFNAME, runs the configured IPAM plugin and
// returns the interface and its addresses; DEL moves it back under its
// original name; CHECK verifies it. It supports CNI spec versions 0.3.0 to
// 1.1.0.
//
// The device's original name, up state and alias are kept in its alias
// (AliasPrefix) while it is in a pod, so DEL needs no state file and works
// after plugin restarts and after the pod's namespace is gone.
package netdevplugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ipam"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// SupportedVersions are the CNI spec versions multinet-netdev speaks.
var SupportedVersions = version.PluginSupports("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")

// DefaultTimeout bounds one CNI command run through Funcs, IPAM plugin
// included, when Plugin.Timeout is zero.
const DefaultTimeout = 60 * time.Second

// DefaultDeviceWait is how long ADD waits, when Plugin.DeviceWait is zero,
// for a device that is not in the host: it may be on its way back from the
// pod that held it, whose sandbox teardown (the CNI DEL that returns it) can
// still run when the kubelet or the DRA scheduler has already given the
// device to the next pod.
const DefaultDeviceWait = 20 * time.Second

// rollbackTimeout bounds the IPAM DEL of a failed ADD.
const rollbackTimeout = 10 * time.Second

// Plugin runs the CNI commands. The zero value is ready to use in a CNI
// plugin binary. Methods work in the network namespace of the calling thread,
// which is the host's for a CNI plugin; callers lock their goroutine to its OS
// thread (the binary does so in init).
type Plugin struct {
	// Exec runs the IPAM plugin; nil: invoke.DefaultExec with the IPAM
	// plugin's stderr going to Stderr.
	Exec invoke.Exec
	// SysfsRoot is where sysfs is mounted; "/sys" when empty.
	SysfsRoot string
	// Timeout bounds each command run through Funcs; DefaultTimeout when zero.
	Timeout time.Duration
	// Stdout receives results (Funcs); os.Stdout when nil.
	Stdout io.Writer
	// Stderr receives the IPAM plugin's stderr; os.Stderr when nil.
	Stderr io.Writer
	// DeviceWait bounds how long ADD waits for a device absent from the host
	// to appear there; DefaultDeviceWait when zero, no wait when negative.
	DeviceWait time.Duration
}

func (p *Plugin) deviceWait() time.Duration {
	switch {
	case p.DeviceWait == 0:
		return DefaultDeviceWait
	case p.DeviceWait < 0:
		return 0
	}
	return p.DeviceWait
}

func (p *Plugin) sysfs() string {
	if p.SysfsRoot == "" {
		return "/sys"
	}
	return p.SysfsRoot
}

func (p *Plugin) exec() invoke.Exec {
	if p.Exec != nil {
		return p.Exec
	}
	stderr := p.Stderr
	if stderr == nil {
		stderr = os.Stderr
	}
	return &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: stderr}, PluginDecoder: version.PluginDecoder{}}
}

// Funcs adapts the plugin to skel.PluginMainFuncs: each command gets a
// context bounded by Timeout, and ADD prints its result in the configuration's
// cniVersion to Stdout.
func (p *Plugin) Funcs() skel.CNIFuncs {
	run := func(f func(context.Context, *skel.CmdArgs) error) func(*skel.CmdArgs) error {
		return func(args *skel.CmdArgs) error {
			timeout := p.Timeout
			if timeout == 0 {
				timeout = DefaultTimeout
			}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			return cniError(f(ctx, args))
		}
	}
	return skel.CNIFuncs{
		Add: run(func(ctx context.Context, args *skel.CmdArgs) error {
			res, err := p.Add(ctx, args)
			if err != nil {
				return err
			}
			return p.print(res, args.StdinData)
		}),
		Del:    run(p.Del),
		Check:  run(p.Check),
		GC:     run(p.GC),
		Status: run(p.Status),
	}
}

// cniError keeps the context of a wrapped *types.Error (an IPAM plugin's, or
// ours): skel would print the innermost one alone. The code is the inner one's.
func cniError(err error) error {
	var te *types.Error
	if err == nil || !errors.As(err, &te) || error(te) == err {
		return err
	}
	return &types.Error{Code: te.Code, Msg: err.Error()}
}

func (p *Plugin) print(res *current.Result, conf []byte) error {
	c, err := ParseConf(conf)
	if err != nil {
		return err
	}
	out, err := res.GetAsVersion(c.CNIVersion)
	if err != nil {
		return fmt.Errorf("multinet-netdev: convert result to CNI %s: %w", c.CNIVersion, err)
	}
	w := p.Stdout
	if w == nil {
		w = os.Stdout
	}
	return out.PrintTo(w)
}

// Add moves the configured device into the pod's network namespace
// (args.Netns) under args.IfName, sets it up, runs IPAM and returns a result
// with the interface (name, MAC, MTU, sandbox, PCI address when sysfs shows
// one) and the IPAM addresses, routes and DNS (or the configuration's DNS).
// When runtimeConfig CNIDeviceInfoFile names a file that does not exist yet
// and the device is a PCI function, a "pci" device-info map is written there
// (device-info spec §4.2.2). Any failure after the move returns the device to
// the host under its original name and releases the IPAM addresses.
func (p *Plugin) Add(ctx context.Context, args *skel.CmdArgs) (*current.Result, error) {
	conf, err := ParseConf(args.StdinData)
	if err != nil {
		return nil, err
	}
	dev, err := conf.resolveDevice(p.sysfs())
	if err != nil {
		return nil, err
	}
	host, err := hostNetNS()
	if err != nil {
		return nil, err
	}
	defer host.Close()
	pod, err := podNetNS(args.Netns)
	if err != nil {
		return nil, err
	}
	defer pod.Close()

	hl, err := host.waitLink(ctx, dev, p.deviceWait())
	if err != nil {
		return nil, fmt.Errorf("multinet-netdev: device %s: %w", dev, err)
	}
	o := origin{Name: dev, Up: hl.Attrs().Flags&net.FlagUp != 0, Alias: hl.Attrs().Alias}
	if prev, ok := parseOrigin(o.Alias); ok {
		o.Alias = prev.Alias // a device a lost pod namespace returned with our alias
	}
	if err := o.check(); err != nil {
		return nil, fmt.Errorf("multinet-netdev: %w", err)
	}
	pci := pciOf(p.sysfs(), dev)

	cl, err := moveIn(host, pod, o, args.IfName)
	if err != nil {
		return nil, fmt.Errorf("multinet-netdev: device %s to %s in %s: %w", dev, args.IfName, args.Netns, err)
	}
	res := &current.Result{
		CNIVersion: current.ImplementedSpecVersion,
		Interfaces: []*current.Interface{{
			Name:    args.IfName,
			Mac:     cl.Attrs().HardwareAddr.String(),
			Mtu:     cl.Attrs().MTU,
			Sandbox: args.Netns,
		}},
		DNS: conf.DNS,
	}
	if pci != nil {
		res.Interfaces[0].PciID = pci.PCIAddress
	}
	// undo returns the device and releases IPAM after a failure.
	undo := func(cause error) error {
		errs := []error{fmt.Errorf("multinet-netdev: device %s as %s: %w", dev, args.IfName, cause)}
		if conf.IPAM.Type != "" {
			// Release even when ctx ran out: that may be why we are here.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
			defer cancel()
			if err := p.ipamCall(rctx, "DEL", conf.IPAM.Type, args); err != nil {
				errs = append(errs, fmt.Errorf("releasing IPAM addresses: %w", err))
			}
		}
		if err := moveOut(pod, args.IfName, o, host); err != nil {
			errs = append(errs, fmt.Errorf("returning %s to the host: %w", dev, err))
		}
		return errors.Join(errs...)
	}

	if conf.IPAM.Type != "" {
		if err := p.addIPAM(ctx, args, conf, pod, res); err != nil {
			return nil, undo(err)
		}
	}
	if _, err := writeDeviceInfo(conf.RuntimeConfig.CNIDeviceInfoFile, pci); err != nil {
		return nil, undo(err)
	}
	return res, nil
}

// addIPAM runs IPAM ADD, puts its addresses, routes and DNS into res and
// configures them on the pod interface.
func (p *Plugin) addIPAM(ctx context.Context, args *skel.CmdArgs, conf *NetConf, pod *netNS, res *current.Result) error {
	r, err := p.ipamAdd(ctx, conf.IPAM.Type, args)
	if err != nil {
		return err
	}
	ipRes, err := current.NewResultFromResult(r)
	if err != nil {
		return fmt.Errorf("IPAM %s result: %w", conf.IPAM.Type, err)
	}
	if len(ipRes.IPs) == 0 {
		return fmt.Errorf("IPAM %s returned no addresses", conf.IPAM.Type)
	}
	for _, ipc := range ipRes.IPs {
		ipc.Interface = current.Int(0)
	}
	res.IPs, res.Routes = ipRes.IPs, ipRes.Routes
	if len(ipRes.DNS.Nameservers) > 0 || ipRes.DNS.Domain != "" || len(ipRes.DNS.Search) > 0 || len(ipRes.DNS.Options) > 0 {
		res.DNS = ipRes.DNS
	}
	if err := pod.ns.Do(func(ns.NetNS) error { return ipam.ConfigureIface(args.IfName, res) }); err != nil {
		return fmt.Errorf("configure %s: %w", args.IfName, err)
	}
	return nil
}

// Del returns the device to the host and releases its IPAM addresses. It is
// idempotent and succeeds when the pod's namespace or the device is gone:
//   - the pod namespace exists and has args.IfName with our alias: it is set
//     down, renamed to its original name and moved to the host, up again when
//     it was up before ADD;
//   - a device in the host with our alias came back when the pod's namespace
//     was destroyed (the kernel returns physical devices to the initial
//     namespace under their pod name, or "dev<ifindex>" when that is taken):
//     when its original name is the configured device (for a PCI-address
//     deviceID: when it is the function's interface, or is named
//     args.IfName) it gets its name, alias and up state back;
//   - then IPAM DEL runs, whatever happened before.
//
// Errors of all steps are joined.
func (p *Plugin) Del(ctx context.Context, args *skel.CmdArgs) error {
	conf, err := ParseConf(args.StdinData)
	if err != nil {
		return err
	}
	var errs []error
	if err := p.returnDevice(args, conf); err != nil {
		errs = append(errs, fmt.Errorf("multinet-netdev: DEL %s: %w", args.IfName, err))
	}
	if conf.IPAM.Type != "" {
		if err := p.ipamCall(ctx, "DEL", conf.IPAM.Type, args); err != nil {
			errs = append(errs, fmt.Errorf("multinet-netdev: DEL %s: IPAM %s: %w", args.IfName, conf.IPAM.Type, err))
		}
	}
	return errors.Join(errs...)
}

func (p *Plugin) returnDevice(args *skel.CmdArgs, conf *NetConf) error {
	host, err := hostNetNS()
	if err != nil {
		return err
	}
	defer host.Close()
	want := conf.hostName()
	if args.Netns != "" {
		pod, err := podNetNS(args.Netns)
		switch {
		case errors.Is(err, errGone):
		case err != nil:
			return err
		default:
			err := returnFromPod(pod, host, args.IfName)
			pod.Close()
			if err != nil {
				return err
			}
		}
	}
	// Which host link with our alias is this attachment's device: the one of
	// the configured name; else, for a PCI address, the interface sysfs now
	// shows for it; else the one still named args.IfName.
	mine := func(l netlink.Link, o origin) bool { return o.Name == want }
	if want == "" {
		pciName, _ := conf.resolveDevice(p.sysfs()) // works once the device is back in the host
		mine = func(l netlink.Link, _ origin) bool {
			return l.Attrs().Name == args.IfName || (pciName != "" && l.Attrs().Name == pciName)
		}
	}
	return returnLost(host, mine)
}

// returnFromPod moves ifname out of pod when it is a device we moved in.
func returnFromPod(pod, host *netNS, ifname string) error {
	l, err := pod.h.LinkByName(ifname)
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("link %s in %s: %w", ifname, pod.what, err)
	}
	o, ok := parseOrigin(l.Attrs().Alias)
	if !ok {
		return nil // not a device multinet-netdev moved: not ours to touch
	}
	// The alias, not the configuration, says which host device this is.
	return moveOut(pod, ifname, o, host)
}

// returnLost restores the devices in the host that still carry our alias and
// that mine selects: the kernel moved them there, under their pod name or
// "dev<ifindex>", when their pod's namespace was destroyed.
func returnLost(host *netNS, mine func(netlink.Link, origin) bool) error {
	links, err := host.h.LinkList()
	if err != nil {
		return fmt.Errorf("list links in the host network namespace: %w", err)
	}
	var errs []error
	for _, l := range links {
		if o, ok := parseOrigin(l.Attrs().Alias); ok && mine(l, o) {
			if err := restoreInHost(host, l, o); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Check verifies an attachment (CNI CHECK): args.IfName exists in the pod's
// namespace, carries our alias (for the configured device, when named), is
// up, has the MAC of prevResult's interface and every prevResult address of
// that interface; then IPAM CHECK runs.
func (p *Plugin) Check(ctx context.Context, args *skel.CmdArgs) error {
	conf, err := ParseConf(args.StdinData)
	if err != nil {
		return err
	}
	if err := version.ParsePrevResult(&conf.PluginConf); err != nil {
		return fmt.Errorf("multinet-netdev: CHECK: %w", err)
	}
	if conf.PrevResult == nil {
		return fmt.Errorf("multinet-netdev: CHECK %s: prevResult is missing", args.IfName)
	}
	prev, err := current.NewResultFromResult(conf.PrevResult)
	if err != nil {
		return fmt.Errorf("multinet-netdev: CHECK %s: prevResult: %w", args.IfName, err)
	}
	if err := p.checkDevice(args, conf, prev); err != nil {
		return fmt.Errorf("multinet-netdev: CHECK %s: %w", args.IfName, err)
	}
	if conf.IPAM.Type != "" {
		if err := p.ipamCall(ctx, "CHECK", conf.IPAM.Type, args); err != nil {
			return fmt.Errorf("multinet-netdev: CHECK %s: IPAM %s: %w", args.IfName, conf.IPAM.Type, err)
		}
	}
	return nil
}

func (p *Plugin) checkDevice(args *skel.CmdArgs, conf *NetConf, prev *current.Result) error {
	pod, err := podNetNS(args.Netns)
	if err != nil {
		return err
	}
	defer pod.Close()
	l, err := pod.link(args.IfName)
	if err != nil {
		return err
	}
	o, ok := parseOrigin(l.Attrs().Alias)
	if !ok {
		return fmt.Errorf("%s in %s was not moved there by multinet-netdev (alias %q)", args.IfName, pod.what, l.Attrs().Alias)
	}
	if want := conf.hostName(); want != "" && o.Name != want {
		return fmt.Errorf("%s in %s is host device %s, want %s", args.IfName, pod.what, o.Name, want)
	}
	if l.Attrs().Flags&net.FlagUp == 0 {
		return fmt.Errorf("%s in %s is down", args.IfName, pod.what)
	}
	idx := -1
	for i, intf := range prev.Interfaces {
		if intf.Name == args.IfName && (intf.Sandbox == "" || intf.Sandbox == args.Netns) {
			idx = i
			break
		}
	}
	if idx < 0 {
		return fmt.Errorf("prevResult has no interface %s in %s", args.IfName, args.Netns)
	}
	if mac := prev.Interfaces[idx].Mac; mac != "" && !strings.EqualFold(mac, l.Attrs().HardwareAddr.String()) {
		return fmt.Errorf("%s has MAC %s, prevResult says %s", args.IfName, l.Attrs().HardwareAddr, mac)
	}
	addrs, err := pod.h.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("addresses of %s: %w", args.IfName, err)
	}
	for _, ipc := range prev.IPs {
		if ipc.Interface != nil && *ipc.Interface != idx {
			continue
		}
		if !hasAddr(addrs, ipc.Address) {
			return fmt.Errorf("%s lacks address %s of prevResult", args.IfName, ipc.Address.String())
		}
	}
	return nil
}

func hasAddr(addrs []netlink.Addr, want net.IPNet) bool {
	for _, a := range addrs {
		if a.IPNet != nil && a.IP.Equal(want.IP) && a.Mask.String() == want.Mask.String() {
			return true
		}
	}
	return false
}

// GC (CNI 1.1) has no devices to collect: a device is either in a pod or back
// in the host. It passes GC on to the IPAM plugin, with the runtime's
// cni.dev/valid-attachments, so that addresses of attachments the runtime no
// longer knows are released.
func (p *Plugin) GC(ctx context.Context, args *skel.CmdArgs) error {
	return p.delegate(ctx, "GC", args)
}

// Status (CNI 1.1) reports whether ADD can work: it passes STATUS on to the
// IPAM plugin (host-local, for one, is always ready).
func (p *Plugin) Status(ctx context.Context, args *skel.CmdArgs) error {
	return p.delegate(ctx, "STATUS", args)
}

func (p *Plugin) delegate(ctx context.Context, cmd string, args *skel.CmdArgs) error {
	conf, err := ParseConf(args.StdinData)
	if err != nil {
		return err
	}
	if conf.IPAM.Type == "" {
		return nil
	}
	if err := p.ipamCall(ctx, cmd, conf.IPAM.Type, args); err != nil {
		return fmt.Errorf("multinet-netdev: %s: IPAM %s: %w", cmd, conf.IPAM.Type, err)
	}
	return nil
}

// ipamArgs are the CNI_* variables for the IPAM plugin: the command's own,
// explicitly, not whatever this process's environment holds.
func ipamArgs(cmd string, args *skel.CmdArgs) *invoke.Args {
	return &invoke.Args{Command: cmd, ContainerID: args.ContainerID, NetNS: args.Netns,
		PluginArgsStr: args.Args, IfName: args.IfName, Path: args.Path}
}

func (p *Plugin) findIPAM(typ string, args *skel.CmdArgs) (string, error) {
	path, err := p.exec().FindInPath(typ, filepath.SplitList(args.Path))
	if err != nil {
		return "", fmt.Errorf("IPAM plugin %s in CNI_PATH %q: %w", typ, args.Path, err)
	}
	return path, nil
}

func (p *Plugin) ipamAdd(ctx context.Context, typ string, args *skel.CmdArgs) (types.Result, error) {
	path, err := p.findIPAM(typ, args)
	if err != nil {
		return nil, err
	}
	r, err := invoke.ExecPluginWithResult(ctx, path, args.StdinData, ipamArgs("ADD", args), p.exec())
	if err != nil {
		return nil, fmt.Errorf("IPAM %s ADD: %w", typ, err)
	}
	return r, nil
}

func (p *Plugin) ipamCall(ctx context.Context, cmd, typ string, args *skel.CmdArgs) error {
	path, err := p.findIPAM(typ, args)
	if err != nil {
		return err
	}
	return invoke.ExecPluginWithoutResult(ctx, path, args.StdinData, ipamArgs(cmd, args), p.exec())
}
