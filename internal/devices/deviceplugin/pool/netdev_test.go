package pool

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/multinet/multinet/internal/devices/deviceplugin/config"
)

// newTestNS creates a network namespace for the test and removes it (and
// every link in it) at cleanup, so the host is never touched.
func newTestNS(t *testing.T) ns.NetNS {
	t.Helper()
	n, err := testutils.NewNS()
	if err != nil {
		t.Fatalf("cannot create a network namespace (run the tests as root): %v", err)
	}
	t.Cleanup(func() {
		_ = n.Close()
		_ = testutils.UnmountNS(n)
	})
	return n
}

// inNS runs netlink operations inside n.
func inNS(t *testing.T, n ns.NetNS, f func() error) {
	t.Helper()
	if err := n.Do(func(ns.NetNS) error { return f() }); err != nil {
		t.Fatal(err)
	}
}

// addDummy adds a dummy link, or an ifb link where the kernel has no dummy
// driver (ifb behaves the same here: no carrier, oper state "unknown" when up).
func addDummy(name string, up bool) error {
	var l netlink.Link = &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: name}}
	if err := netlink.LinkAdd(l); errors.Is(err, unix.EOPNOTSUPP) {
		l = &netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Name: name}}
		err = netlink.LinkAdd(l)
		if err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if up {
		return netlink.LinkSetUp(l)
	}
	return nil
}

func setLink(name string, up bool) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	if up {
		return netlink.LinkSetUp(l)
	}
	return netlink.LinkSetDown(l)
}

func health(ds []Device) map[string]bool {
	m := map[string]bool{}
	for _, d := range ds {
		m[d.ID] = d.Healthy
	}
	return m
}

func TestNetdevPoolNetlink(t *testing.T) {
	n := newTestNS(t)
	inNS(t, n, func() error {
		for name, up := range map[string]bool{"mntdp0": true, "mntdp1": false, "mntother0": true} {
			if err := addDummy(name, up); err != nil {
				return err
			}
		}
		return nil
	})
	sel := config.NetdevSelector{Names: []string{"mntdp0", "mntdpgone"}, Patterns: []string{"mntdp[1-9]"}}
	p, err := NewNetdev("example.com/net", sel, Env{NetNSPath: n.Path()})
	if err != nil {
		t.Fatal(err)
	}
	// Discovery: named + pattern-matched; a named interface that is absent is
	// advertised unhealthy; a down link is unhealthy; others are ignored.
	want := map[string]bool{"mntdp0": true, "mntdp1": false, "mntdpgone": false}
	if got := health(p.Devices()); !reflect.DeepEqual(got, want) {
		t.Fatalf("initial devices = %v, want %v", got, want)
	}
	for _, d := range p.Devices() {
		if d.NUMANode != NoNUMA || d.Info != nil {
			t.Errorf("%s: NUMA %d info %v; want none for a dummy in a test netns", d.ID, d.NUMANode, d.Info)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changed := make(chan struct{}, 100)
	done := make(chan error, 1)
	go func() { done <- p.Watch(ctx, func() { changed <- struct{}{} }) }()

	steps := []struct {
		name string
		do   func() error
		want map[string]bool
	}{
		{"mntdp0 down", func() error { return setLink("mntdp0", false) }, map[string]bool{"mntdp0": false, "mntdp1": false, "mntdpgone": false}},
		{"mntdp0 up", func() error { return setLink("mntdp0", true) }, map[string]bool{"mntdp0": true, "mntdp1": false, "mntdpgone": false}},
		{"mntdp1 up", func() error { return setLink("mntdp1", true) }, map[string]bool{"mntdp0": true, "mntdp1": true, "mntdpgone": false}},
		{"new mntdp2 matches the pattern", func() error { return addDummy("mntdp2", true) }, map[string]bool{"mntdp0": true, "mntdp1": true, "mntdp2": true, "mntdpgone": false}},
		{"mntdpgone appears", func() error { return addDummy("mntdpgone", true) }, map[string]bool{"mntdp0": true, "mntdp1": true, "mntdp2": true, "mntdpgone": true}},
		{"mntdp1 gone (moved into a pod) keeps its last health", func() error {
			l, err := netlink.LinkByName("mntdp1")
			if err != nil {
				return err
			}
			return netlink.LinkDel(l)
		}, map[string]bool{"mntdp0": true, "mntdp1": true, "mntdp2": true, "mntdpgone": true}},
		{"mntdp2 renamed away", func() error {
			l, err := netlink.LinkByName("mntdp2")
			if err != nil {
				return err
			}
			if err := netlink.LinkSetDown(l); err != nil {
				return err
			}
			return netlink.LinkSetName(l, "mntother2")
		}, map[string]bool{"mntdp0": true, "mntdp1": true, "mntdp2": true, "mntdpgone": true}},
		// Oper state: a veth whose peer is down is admin up but LOWERLAYERDOWN.
		{"veth mntdp3 up with peer up", func() error {
			v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "mntdp3"}, PeerName: "mntpeer3"}
			if err := netlink.LinkAdd(v); err != nil {
				return err
			}
			if err := setLink("mntpeer3", true); err != nil {
				return err
			}
			return setLink("mntdp3", true)
		}, map[string]bool{"mntdp0": true, "mntdp1": true, "mntdp2": true, "mntdp3": true, "mntdpgone": true}},
		{"veth peer down makes mntdp3 unhealthy", func() error { return setLink("mntpeer3", false) },
			map[string]bool{"mntdp0": true, "mntdp1": true, "mntdp2": true, "mntdp3": false, "mntdpgone": true}},
		{"changes of unselected links are ignored", func() error { return setLink("mntother0", false) },
			map[string]bool{"mntdp0": true, "mntdp1": true, "mntdp2": true, "mntdp3": false, "mntdpgone": true}},
	}
	for _, s := range steps {
		inNS(t, n, s.do)
		waitFor(t, s.name, func() bool { return reflect.DeepEqual(health(p.Devices()), s.want) })
	}
	if len(changed) == 0 {
		t.Error("changed was never called")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Watch = %v", err)
	}
}

func TestNetdevBadNetNS(t *testing.T) {
	if _, err := NewNetdev("example.com/net", config.NetdevSelector{Names: []string{"x"}}, Env{NetNSPath: "/nonexistent/netns"}); err == nil {
		t.Fatal("NewNetdev with a missing netns succeeded")
	}
}

// AssumeSeen: a named interface absent since the pool started counts as
// in use (healthy) once a server says it published it before; a present
// down interface and an unknown name are not touched.
func TestNetdevAssumeSeen(t *testing.T) {
	n := newTestNS(t)
	inNS(t, n, func() error { return addDummy("seen0", false) })
	p, err := NewNetdev("example.com/net", config.NetdevSelector{Names: []string{"away0", "seen0"}}, Env{NetNSPath: n.Path()})
	if err != nil {
		t.Fatal(err)
	}
	if h := health(p.Devices()); h["away0"] || h["seen0"] {
		t.Fatalf("health before = %v, want both unhealthy (absent; down)", h)
	}
	s, ok := p.(Seeder)
	if !ok {
		t.Fatal("the netdev pool is no Seeder")
	}
	if !s.AssumeSeen([]string{"away0", "seen0", "other"}) {
		t.Error("AssumeSeen reported no change")
	}
	if h := health(p.Devices()); !h["away0"] || h["seen0"] {
		t.Errorf("health after = %v, want away0 healthy (in use), seen0 still down", h)
	}
	if s.AssumeSeen([]string{"away0"}) {
		t.Error("a second AssumeSeen reported a change")
	}
}
