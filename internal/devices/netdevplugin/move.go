package netdevplugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/containernetworking/plugins/pkg/netlinksafe"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// netNS is a network namespace and a netlink handle working in it. Working
// through handles instead of switching the thread's namespace keeps every step
// of a move in one goroutine, with no thread left in the wrong namespace.
type netNS struct {
	what string // "host", "pod <path>", "temporary" (for errors)
	fd   int
	h    netlinksafe.Handle
	ns   ns.NetNS  // nil for the host
	own  io.Closer // what to close: the ns.NetNS or the netns.NsHandle
}

// hostNetNS opens the network namespace of the calling thread: the host, for
// a CNI plugin. The caller must keep its goroutine on one OS thread (main
// locks it).
func hostNetNS() (*netNS, error) {
	h, err := netns.Get()
	if err != nil {
		return nil, fmt.Errorf("open the host network namespace: %w", err)
	}
	n, err := withHandle("host", h, nil)
	if err != nil {
		_ = h.Close()
		return nil, err
	}
	n.own = &h
	return n, nil
}

// podNetNS opens the network namespace at path. A path that no longer exists
// or is no longer a namespace gives an error matching errGone.
func podNetNS(path string) (*netNS, error) {
	p, err := ns.GetNS(path)
	if err != nil {
		var notExist ns.NSPathNotExistErr
		var notNS ns.NSPathNotNSErr
		if errors.As(err, &notExist) || errors.As(err, &notNS) {
			return nil, fmt.Errorf("pod network namespace %s: %w (%w)", path, errGone, err)
		}
		return nil, fmt.Errorf("open pod network namespace %s: %w", path, err)
	}
	n, err := withHandle("pod network namespace "+path, netns.NsHandle(p.Fd()), p)
	if err != nil {
		_ = p.Close()
		return nil, err
	}
	n.own = p
	return n, nil
}

// tempNetNS creates an empty network namespace that goes away when closed.
// Devices are renamed there, away from udev, NetworkManager and from names
// taken in the host or the pod.
func tempNetNS() (*netNS, error) {
	p, err := ns.TempNetNS()
	if err != nil {
		return nil, fmt.Errorf("create a temporary network namespace: %w", err)
	}
	n, err := withHandle("temporary network namespace", netns.NsHandle(p.Fd()), p)
	if err != nil {
		_ = p.Close()
		return nil, err
	}
	n.own = p
	return n, nil
}

func withHandle(what string, h netns.NsHandle, p ns.NetNS) (*netNS, error) {
	nh, err := netlinksafe.NewHandleAt(h)
	if err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", what, err)
	}
	return &netNS{what: what, fd: int(h), h: nh, ns: p}, nil
}

// Close releases the handle and the namespace file.
func (n *netNS) Close() {
	if n == nil {
		return
	}
	n.h.Close()
	if n.own != nil {
		_ = n.own.Close()
	}
}

// errGone marks a pod network namespace that no longer exists.
var errGone = errors.New("gone")

// link looks up the link name in n.
func (n *netNS) link(name string) (netlink.Link, error) {
	l, err := n.h.LinkByName(name)
	if err != nil {
		return nil, fmt.Errorf("link %s in %s: %w", name, n.what, err)
	}
	return l, nil
}

// waitLink looks up the link name in n, waiting up to within (while ctx
// lasts) for it to appear when it is not there: a device the previous
// holder's CNI DEL is still moving back. Errors: the lookup fails otherwise,
// or the link is still missing at the end, naming how long it waited.
func (n *netNS) waitLink(ctx context.Context, name string, within time.Duration) (netlink.Link, error) {
	deadline := time.Now().Add(within)
	for {
		l, err := n.h.LinkByName(name)
		switch {
		case err == nil:
			return l, nil
		case !isNotFound(err):
			return nil, fmt.Errorf("link %s in %s: %w", name, n.what, err)
		case within <= 0:
			return nil, fmt.Errorf("link %s in %s: %w", name, n.what, err)
		case !time.Now().Before(deadline) || ctx.Err() != nil:
			return nil, fmt.Errorf("link %s in %s: %w (waited %s for it to come back from the pod that held it)", name, n.what, err, within)
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// first returns the first of names that is a link in n.
func (n *netNS) first(names ...string) (string, error) {
	for _, name := range names {
		if _, err := n.h.LinkByName(name); err == nil {
			return name, nil
		} else if !isNotFound(err) {
			return "", fmt.Errorf("link %s in %s: %w", name, n.what, err)
		}
	}
	return "", fmt.Errorf("none of %v in %s", names, n.what)
}

// isNotFound reports whether err says a link does not exist.
func isNotFound(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf)
}

// moveIn moves the host interface o.Name into pod as ifname, records o in its
// alias and sets it up. On failure it puts the device back in the host under
// its name, alias and up state; the error says when that failed too.
func moveIn(host, pod *netNS, o origin, ifname string) (netlink.Link, error) {
	tmp, err := tempNetNS()
	if err != nil {
		return nil, err
	}
	defer tmp.Close()

	l, err := host.link(o.Name)
	if err != nil {
		return nil, err
	}
	if err := host.h.LinkSetNsFd(l, tmp.fd); err != nil {
		return nil, fmt.Errorf("move %s out of the host network namespace: %w", o.Name, err)
	}
	if err := renameAndMove(tmp, o.Name, ifname, o.encode(), pod); err != nil {
		if rerr := fromTemp(tmp, []string{ifname, o.Name}, o, host); rerr != nil {
			return nil, errors.Join(err, fmt.Errorf("and returning %s to the host failed: %w", o.Name, rerr))
		}
		return nil, err
	}
	cl, err := pod.link(ifname)
	if err == nil {
		if err = pod.h.LinkSetUp(cl); err != nil {
			err = fmt.Errorf("set %s up in %s: %w", ifname, pod.what, err)
		}
	}
	if err != nil {
		if rerr := moveOut(pod, ifname, o, host); rerr != nil {
			return nil, errors.Join(err, fmt.Errorf("and returning %s to the host failed: %w", o.Name, rerr))
		}
		return nil, err
	}
	// Read the link again: index, MAC and flags as the pod sees them now.
	return pod.link(ifname)
}

// renameAndMove renames the link from → to in src, sets its alias and moves
// it to dst.
func renameAndMove(src *netNS, from, to, alias string, dst *netNS) error {
	l, err := src.link(from)
	if err != nil {
		return err
	}
	if from != to {
		if err := src.h.LinkSetName(l, to); err != nil {
			return fmt.Errorf("rename %s to %s: %w", from, to, err)
		}
		if l, err = src.link(to); err != nil {
			return err
		}
	}
	if l.Attrs().Alias != alias {
		if err := src.h.LinkSetAlias(l, alias); err != nil {
			return fmt.Errorf("set alias of %s: %w", to, err)
		}
	}
	if err := src.h.LinkSetNsFd(l, dst.fd); err != nil {
		if errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("move %s to %s: a link named %s is already there: %w", to, dst.what, to, err)
		}
		return fmt.Errorf("move %s to %s: %w", to, dst.what, err)
	}
	return nil
}

// moveOut sets the pod interface cur down and moves it back to the host under
// o.Name with o's alias and up state. When that fails it tries to leave the
// device in src as it was (name cur, our alias), so that a later DEL can try
// again.
func moveOut(src *netNS, cur string, o origin, host *netNS) error {
	l, err := src.link(cur)
	if err != nil {
		return err
	}
	tmp, err := tempNetNS()
	if err != nil {
		return err
	}
	defer tmp.Close()
	if err := src.h.LinkSetDown(l); err != nil {
		return fmt.Errorf("set %s down in %s: %w", cur, src.what, err)
	}
	if err := src.h.LinkSetNsFd(l, tmp.fd); err != nil {
		return fmt.Errorf("move %s out of %s: %w", cur, src.what, err)
	}
	if err := fromTemp(tmp, []string{cur}, o, host); err != nil {
		// Back where it was: a temporary namespace destroys virtual devices and
		// sends physical ones to the initial namespace under any name.
		name, rerr := tmp.first(o.Name, cur)
		if rerr == nil {
			rerr = renameAndMove(tmp, name, cur, o.encode(), src)
		}
		if rerr != nil {
			return errors.Join(err, fmt.Errorf("and moving %s back to %s failed: %w", cur, src.what, rerr))
		}
		return err
	}
	return nil
}

// fromTemp moves the device, found in tmp under the first of names that
// exists, to host as o.Name with o.Alias, and sets it up when o.Up.
func fromTemp(tmp *netNS, names []string, o origin, host *netNS) error {
	name, err := tmp.first(names...)
	if err != nil {
		return err
	}
	if err := renameAndMove(tmp, name, o.Name, o.Alias, host); err != nil {
		return err
	}
	if !o.Up {
		return nil
	}
	l, err := host.link(o.Name)
	if err != nil {
		return err
	}
	if err := host.h.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %s up in the host network namespace: %w", o.Name, err)
	}
	return nil
}

// restoreInHost gives a device that is in the host under a pod name, with our
// alias, its original name, alias and up state back. The kernel returns
// physical devices to the initial network namespace, under the name they had
// in the pod, when the pod's namespace is destroyed.
func restoreInHost(host *netNS, l netlink.Link, o origin) error {
	cur := l.Attrs().Name
	if cur != o.Name {
		if other, err := host.h.LinkByName(o.Name); err == nil {
			return fmt.Errorf("device %s came back to the host as %s, but %s is taken by another link (index %d)",
				o.Name, cur, o.Name, other.Attrs().Index)
		}
		if err := host.h.LinkSetDown(l); err != nil {
			return fmt.Errorf("set %s down: %w", cur, err)
		}
		if err := host.h.LinkSetName(l, o.Name); err != nil {
			return fmt.Errorf("rename %s to %s: %w", cur, o.Name, err)
		}
	}
	l, err := host.link(o.Name)
	if err != nil {
		return err
	}
	if err := host.h.LinkSetAlias(l, o.Alias); err != nil {
		return fmt.Errorf("set alias of %s: %w", o.Name, err)
	}
	if o.Up && l.Attrs().Flags&net.FlagUp == 0 {
		if err := host.h.LinkSetUp(l); err != nil {
			return fmt.Errorf("set %s up: %w", o.Name, err)
		}
	}
	return nil
}
