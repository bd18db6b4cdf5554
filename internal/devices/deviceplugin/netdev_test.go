package deviceplugin

import (
	"errors"
	"reflect"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/multinet/multinet/internal/devices/deviceplugin/config"
	"github.com/multinet/multinet/internal/devices/deviceplugin/pool"
	"github.com/multinet/multinet/pkg/spec/devinfo"
)

// addTestLink adds a dummy link in the current netns (an ifb where the
// kernel has no dummy driver; both report oper state "unknown" when up).
func addTestLink(name string) error {
	var l netlink.Link = &netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: name}}
	err := netlink.LinkAdd(l)
	if errors.Is(err, unix.EOPNOTSUPP) {
		l = &netlink.Ifb{LinkAttrs: netlink.LinkAttrs{Name: name}}
		err = netlink.LinkAdd(l)
	}
	if err != nil {
		return err
	}
	return netlink.LinkSetUp(l)
}

func setLinkUp(name string, up bool) func(ns.NetNS) error {
	return func(ns.NetNS) error {
		l, err := netlink.LinkByName(name)
		if err != nil {
			return err
		}
		if up {
			return netlink.LinkSetUp(l)
		}
		return netlink.LinkSetDown(l)
	}
}

// A netdev pool in a network namespace the test creates: setting a link
// down sends a new ListAndWatch list with it Unhealthy; up restores it.
func TestNetdevHealthOverListAndWatch(t *testing.T) {
	n, err := testutils.NewNS()
	if err != nil {
		t.Fatalf("cannot create a network namespace (run the tests as root): %v", err)
	}
	t.Cleanup(func() { _ = n.Close(); _ = testutils.UnmountNS(n) })
	if err := n.Do(func(ns.NetNS) error {
		for _, name := range []string{"mntdp0", "mntdp1"} {
			if err := addTestLink(name); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	p, err := pool.NewNetdev("example.com/netdev", config.NetdevSelector{Patterns: []string{"mntdp*"}}, pool.Env{NetNSPath: n.Path()})
	if err != nil {
		t.Fatal(err)
	}
	dpDir := t.TempDir()
	k := startKubelet(t, dpDir)
	store := devinfo.Store{Root: t.TempDir()}
	rp := startPlugin(t, p, dpDir, store)
	k.next(t)
	c := dialPlugin(t, rp.SocketPath())
	recv := listAndWatch(t, c)

	want := map[string]string{"mntdp0": pluginapi.Healthy, "mntdp1": pluginapi.Healthy}
	if got := healthOf(recv()); !reflect.DeepEqual(got, want) {
		t.Fatalf("initial list = %v, want %v", got, want)
	}
	for _, step := range []struct {
		name string
		up   bool
		want string
	}{{"mntdp1", false, pluginapi.Unhealthy}, {"mntdp1", true, pluginapi.Healthy}, {"mntdp0", false, pluginapi.Unhealthy}} {
		if err := n.Do(setLinkUp(step.name, step.up)); err != nil {
			t.Fatal(err)
		}
		want[step.name] = step.want
		if got := healthOf(recv()); !reflect.DeepEqual(got, want) {
			t.Fatalf("after %s up=%v: list = %v, want %v", step.name, step.up, got, want)
		}
	}
	// Netdevs without a PCI function have no device-info (nothing written).
	if _, err := store.ReadDP("example.com/netdev", "mntdp0"); err == nil {
		t.Error("a device-info file was written for a dummy netdev")
	}
}
