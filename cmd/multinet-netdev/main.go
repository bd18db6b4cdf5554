// Command multinet-netdev is the CNI plugin of multinet's netdev device pool:
// it moves the host interface named by runtimeConfig "deviceID" into the pod
// under CNI_IFNAME, runs IPAM, and moves it back on DEL. See
// docs/multinet-netdev.md; the logic is in internal/devices/netdevplugin.
package main

import (
	"runtime"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/multinet/multinet/internal/devices/netdevplugin"
)

func init() {
	// Namespace operations act on the calling thread; the plugin treats the
	// namespace of the main thread as the host's.
	runtime.LockOSThread()
}

func main() {
	p := &netdevplugin.Plugin{}
	skel.PluginMainFuncs(p.Funcs(), netdevplugin.SupportedVersions, "multinet-netdev: moves a host network device into the pod (CNI 0.3.0-1.1.0)")
}
