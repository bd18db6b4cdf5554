package pool

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/multinet/multinet/internal/devices/deviceplugin/config"
	"github.com/multinet/multinet/pkg/spec/devinfo"
)

// netdevPool advertises host network interfaces selected by name or glob.
// Health follows netlink link state through an RTNLGRP_LINK subscription.
type netdevPool struct {
	resourceName string
	sel          config.NetdevSelector
	env          Env

	mu      sync.Mutex
	links   map[string]*linkState // by interface name
	byIndex map[int]string        // ifindex → name, for links present now
	devices []Device              // sorted snapshot, replaced on change
}

type linkState struct {
	index   int // 0 while the link is absent
	healthy bool
	numa    int
	info    *devinfo.DeviceInfo
}

// NewNetdev discovers the interfaces sel selects in env's network namespace.
// Interfaces named in sel.Names are always advertised (unhealthy while
// absent until first seen); interfaces matching sel.Patterns are added when
// they appear. An interface that was seen and then disappears (or is renamed
// away) is reported healthy: the pool's CNI plugin (multinet-netdev) moves an
// allocated device into a pod's network namespace, where the host cannot see
// it, and counting it unhealthy there would take it from allocatable a second
// time (docs/decisions/deviceplugin.md). Present links follow their state. The device ID is
// the interface name. In the host namespace (env.NetNSPath empty) the NUMA
// node and a "pci" device-info map (device-info spec §3.1.3) come from sysfs
// when the interface is backed by a PCI function.
func NewNetdev(resourceName string, sel config.NetdevSelector, env Env) (Pool, error) {
	p := &netdevPool{
		resourceName: resourceName, sel: sel, env: env,
		links: map[string]*linkState{}, byIndex: map[int]string{},
	}
	for _, n := range sel.Names {
		p.links[n] = &linkState{numa: NoNUMA}
	}
	if _, err := p.resync(); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *netdevPool) ResourceName() string { return p.resourceName }

func (p *netdevPool) Devices() []Device {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.devices
}

func (p *netdevPool) match(name string) bool {
	if slices.Contains(p.sel.Names, name) {
		return true
	}
	for _, pat := range p.sel.Patterns {
		if ok, _ := path.Match(pat, name); ok {
			return true
		}
	}
	return false
}

// linkHealthy: administratively up and operationally up, or "unknown" (what
// drivers without carrier reporting, e.g. dummy, show when up).
func linkHealthy(a *netlink.LinkAttrs) bool {
	return a.Flags&net.FlagUp != 0 && (a.OperState == netlink.OperUp || a.OperState == netlink.OperUnknown)
}

// nsHandle opens the pool's network namespace; the caller closes it.
func (p *netdevPool) nsHandle() (netns.NsHandle, error) {
	if p.env.NetNSPath == "" {
		return netns.None(), nil
	}
	h, err := netns.GetFromPath(p.env.NetNSPath)
	if err != nil {
		return netns.None(), fmt.Errorf("pool %s: open netns %s: %w", p.resourceName, p.env.NetNSPath, err)
	}
	return h, nil
}

// resync lists all links and brings the state in line; it reports a change.
func (p *netdevPool) resync() (bool, error) {
	nsh, err := p.nsHandle()
	if err != nil {
		return false, err
	}
	defer nsh.Close()
	var h *netlink.Handle
	if nsh.IsOpen() {
		h, err = netlink.NewHandleAt(nsh, unix.NETLINK_ROUTE)
	} else {
		h, err = netlink.NewHandle(unix.NETLINK_ROUTE)
	}
	if err != nil {
		return false, fmt.Errorf("pool %s: netlink: %w", p.resourceName, err)
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
		return false, fmt.Errorf("pool %s: list links: %w", p.resourceName, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	present := map[string]bool{}
	changed := p.devices == nil
	for _, l := range links {
		a := l.Attrs()
		present[a.Name] = true
		changed = p.upsertLocked(a) || changed
	}
	for name, st := range p.links {
		if !present[name] && st.index != 0 {
			changed = p.goneLocked(name) || changed
		}
	}
	if changed {
		p.rebuildLocked()
	}
	return changed, nil
}

// apply handles one RTM_NEWLINK/RTM_DELLINK message; it reports a change.
func (p *netdevPool) apply(u netlink.LinkUpdate) bool {
	a := u.Link.Attrs()
	p.mu.Lock()
	defer p.mu.Unlock()
	changed := false
	if old, ok := p.byIndex[a.Index]; ok && old != a.Name { // renamed
		changed = p.goneLocked(old)
	}
	if u.Header.Type == unix.RTM_DELLINK {
		if st, ok := p.links[a.Name]; ok && st.index == a.Index {
			changed = p.goneLocked(a.Name) || changed
		}
	} else {
		changed = p.upsertLocked(a) || changed
	}
	if changed {
		p.rebuildLocked()
	}
	return changed
}

func (p *netdevPool) upsertLocked(a *netlink.LinkAttrs) bool {
	if !p.match(a.Name) {
		return false
	}
	st, ok := p.links[a.Name]
	if !ok {
		st = &linkState{numa: NoNUMA}
		p.links[a.Name] = st
	}
	if st.index == 0 && p.env.NetNSPath == "" {
		st.numa, st.info = p.sysfsFacts(a.Name)
	}
	healthy := linkHealthy(a)
	changed := !ok || st.index != a.Index || st.healthy != healthy
	if st.index != 0 && st.index != a.Index {
		delete(p.byIndex, st.index)
	}
	st.index, st.healthy = a.Index, healthy
	p.byIndex[a.Index] = a.Name
	return changed
}

func (p *netdevPool) goneLocked(name string) bool {
	st, ok := p.links[name]
	if !ok || st.index == 0 {
		return false
	}
	delete(p.byIndex, st.index)
	// Gone from this namespace: most likely moved into a pod by the pool's
	// CNI plugin, where its health cannot be seen; it stays allocatable-neutral.
	st.index, st.healthy = 0, true
	return true
}

// AssumeSeen implements Seeder: each named interface of ids that is absent
// and was never seen by this pool counts as seen and then gone (healthy:
// in a pod's network namespace). It reports whether a device changed.
func (p *netdevPool) AssumeSeen(ids []string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	changed := false
	for _, id := range ids {
		if st, ok := p.links[id]; ok && st.index == 0 && !st.healthy {
			st.healthy, changed = true, true
		}
	}
	if changed {
		p.rebuildLocked()
	}
	return changed
}

// InHost implements HostPresence: the interface is in the pool's network
// namespace now.
func (p *netdevPool) InHost(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	st, ok := p.links[id]
	return ok && st.index != 0
}

func (p *netdevPool) rebuildLocked() {
	ds := make([]Device, 0, len(p.links))
	for name, st := range p.links {
		ds = append(ds, Device{ID: name, Healthy: st.healthy, NUMANode: st.numa, Info: st.info})
	}
	sortDevices(ds)
	p.devices = ds
}

// sysfsFacts reads the NUMA node and PCI identity of a host interface.
func (p *netdevPool) sysfsFacts(name string) (int, *devinfo.DeviceInfo) {
	dev := filepath.Join(p.env.sysfs(), "class", "net", name, "device")
	numa := NoNUMA
	if n, err := strconv.Atoi(readAttr(dev, "numa_node")); err == nil && n >= 0 {
		numa = n
	}
	addr := linkBase(dev)
	if !devinfo.IsPCIAddress(addr) {
		return numa, nil
	}
	info := &devinfo.PCI{PCIAddress: addr}
	if pf := linkBase(filepath.Join(dev, "physfn")); devinfo.IsPCIAddress(pf) {
		info.PFPCIAddress = pf
	}
	if ib := dirNames(filepath.Join(dev, "infiniband")); len(ib) > 0 {
		info.RDMADevice = ib[0]
	}
	return numa, &devinfo.DeviceInfo{Type: devinfo.TypePCI, Version: devinfo.SpecVersion, PCI: info}
}

// Watch subscribes to netlink link notifications (RTNLGRP_LINK) in the
// pool's namespace, then re-lists links so that nothing between discovery
// and subscription is missed, and applies every RTM_NEWLINK/RTM_DELLINK. If
// the subscription fails (e.g. ENOBUFS after a burst) it subscribes again and
// re-lists, with backoff up to 5 s. There is no polling.
func (p *netdevPool) Watch(ctx context.Context, changed func()) error {
	backoff := 100 * time.Millisecond
	for {
		err := p.watchOnce(ctx, changed)
		if ctx.Err() != nil {
			return nil
		}
		klog.ErrorS(err, "Netlink link subscription ended, subscribing again", "resource", p.resourceName, "backoff", backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (p *netdevPool) watchOnce(ctx context.Context, changed func()) error {
	nsh, err := p.nsHandle()
	if err != nil {
		return err
	}
	defer nsh.Close()
	ch := make(chan netlink.LinkUpdate, 64)
	done := make(chan struct{})
	errs := make(chan error, 1)
	opts := netlink.LinkSubscribeOptions{
		Namespace: &nsh,
		ErrorCallback: func(err error) {
			select {
			case errs <- err:
			default:
			}
		},
	}
	if err := netlink.LinkSubscribeWithOptions(ch, done, opts); err != nil {
		return fmt.Errorf("pool %s: subscribe to link updates: %w", p.resourceName, err)
	}
	defer func() {
		close(done)
		for range ch { // the receiver goroutine closes ch once the socket is closed
		}
	}()
	if c, err := p.resync(); err != nil {
		return err
	} else if c {
		changed()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case u, ok := <-ch:
			if !ok {
				return fmt.Errorf("pool %s: link subscription closed", p.resourceName)
			}
			if p.apply(u) {
				changed()
			}
		case err := <-errs:
			return fmt.Errorf("pool %s: link subscription: %w", p.resourceName, err)
		}
	}
}
