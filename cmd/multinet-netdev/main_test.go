package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/multinet/multinet/internal/testing/cnitest"
)

func TestMain(m *testing.M) {
	os.Exit(cnitest.Main(m, "github.com/multinet/multinet/cmd/multinet-netdev"))
}

// TestBinaryThroughLibcni runs the built binary the way a runtime does:
// libcni with a configuration list, capability args and a real pod netns,
// for every CNI version the plugin supports.
func TestBinaryThroughLibcni(t *testing.T) {
	cnitest.RequireRoot(t)
	bin := cnitest.BinDir(t)
	for _, ver := range []string{"0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"} {
		t.Run(ver, func(t *testing.T) {
			host, pod := cnitest.NewNS(t), cnitest.NewNS(t)
			hostH, podH := cnitest.Handle(t, host), cnitest.Handle(t, pod)
			dev := cnitest.UniqueName("mnb")
			mac := cnitest.Dummy(t, host, dev, true).Attrs().HardwareAddr.String()
			ipamDir := t.TempDir()
			list, err := libcni.NetworkConfFromBytes(fmt.Appendf(nil, `{
				"cniVersion": %q, "name": "data",
				"plugins": [{
					"type": "multinet-netdev",
					"capabilities": {"deviceID": true, "CNIDeviceInfoFile": true},
					"ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": "10.125.0.0/24"}]]}
				}]}`, ver, ipamDir))
			if err != nil {
				t.Fatal(err)
			}
			cni := libcni.NewCNIConfigWithCacheDir([]string{bin}, t.TempDir(), nil)
			rt := &libcni.RuntimeConf{
				ContainerID: "ctr-" + cnitest.UniqueName(""), NetNS: pod.Path(), IfName: "net1",
				Args:           [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", "web"}},
				CapabilityArgs: map[string]any{"deviceID": dev, "CNIDeviceInfoFile": t.TempDir() + "/cni/att.json"},
			}
			ctx := context.Background()
			inHost := func(f func() error) error { return host.Do(func(ns.NetNS) error { return f() }) }

			var r types.Result
			if err := inHost(func() (err error) { r, err = cni.AddNetworkList(ctx, list, rt); return err }); err != nil {
				t.Fatalf("ADD: %v", err)
			}
			res, err := current.NewResultFromResult(r)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Interfaces) != 1 || res.Interfaces[0].Name != "net1" || res.Interfaces[0].Mac != mac {
				t.Fatalf("interfaces = %v", res.Interfaces)
			}
			if len(res.IPs) != 1 || res.IPs[0].Address.String() != "10.125.0.2/24" {
				t.Fatalf("ips = %v", res.IPs)
			}
			l, err := podH.LinkByName("net1")
			if err != nil || l.Attrs().Flags&net.FlagUp == 0 {
				t.Fatalf("net1 in the pod: %v, %v", l, err)
			}
			if _, err := hostH.LinkByName(dev); err == nil {
				t.Fatalf("%s still in the host", dev)
			}

			if ver != "0.3.0" && ver != "0.3.1" {
				if err := inHost(func() error { return cni.CheckNetworkList(ctx, list, rt) }); err != nil {
					t.Fatalf("CHECK: %v", err)
				}
			}
			if ver == "1.1.0" {
				if err := inHost(func() error { return cni.GetStatusNetworkList(ctx, list) }); err != nil {
					t.Fatalf("STATUS: %v", err)
				}
				gc := &libcni.GCArgs{ValidAttachments: []types.GCAttachment{{ContainerID: rt.ContainerID, IfName: "net1"}}}
				if err := inHost(func() error { return cni.GCNetworkList(ctx, list, gc) }); err != nil {
					t.Fatalf("GC: %v", err)
				}
				if _, err := podH.LinkByName("net1"); err != nil {
					t.Fatalf("GC touched the attachment: %v", err)
				}
			}

			for i := range 2 {
				if err := inHost(func() error { return cni.DelNetworkList(ctx, list, rt) }); err != nil {
					t.Fatalf("DEL %d: %v", i, err)
				}
			}
			hl, err := hostH.LinkByName(dev)
			if err != nil || hl.Attrs().Flags&net.FlagUp == 0 || hl.Attrs().Alias != "" {
				t.Fatalf("%s after DEL: %+v, %v; want it back, up, without alias", dev, hl, err)
			}
			if _, err := podH.LinkByName("net1"); !errors.As(err, &netlink.LinkNotFoundError{}) {
				t.Fatalf("net1 still in the pod: %v", err)
			}
			entries, _ := os.ReadDir(ipamDir + "/data") // <dataDir>/<network name>/<ip> per reservation
			for _, e := range entries {
				if net.ParseIP(e.Name()) != nil {
					t.Fatalf("host-local still holds %s", e.Name())
				}
			}
		})
	}
}

// TestBinaryErrors checks that failures come back as CNI errors with a
// message that says what is wrong.
func TestBinaryErrors(t *testing.T) {
	cnitest.RequireRoot(t)
	bin := cnitest.BinDir(t)
	host, pod := cnitest.NewNS(t), cnitest.NewNS(t)
	cni := libcni.NewCNIConfigWithCacheDir([]string{bin}, t.TempDir(), nil)
	conf, err := libcni.NetworkPluginConfFromBytes([]byte(`{"cniVersion": "1.0.0", "name": "data", "type": "multinet-netdev",
		"capabilities": {"deviceID": true}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		caps map[string]any
		want string
	}{
		{nil, "deviceID"},
		{map[string]any{"deviceID": "mnb-nonesuch"}, "mnb-nonesuch"},
	} {
		rt := &libcni.RuntimeConf{ContainerID: "ctr-x", NetNS: pod.Path(), IfName: "net1", CapabilityArgs: tc.caps}
		err := host.Do(func(ns.NetNS) error { _, err := cni.AddNetwork(context.Background(), conf, rt); return err })
		var cniErr *types.Error
		if !errors.As(err, &cniErr) || !strings.Contains(cniErr.Error(), tc.want) {
			t.Errorf("ADD with %v: %v, want a CNI error naming %q", tc.caps, err, tc.want)
		}
	}
}
