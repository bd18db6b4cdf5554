// Command multinet-ipam is multinet's cluster-wide IPAM CNI plugin
// ("ipam": {"type": "multinet-ipam", ...} in a network configuration). The
// node's delegate plugins (macvlan, ipvlan, bridge, ...) run it as their
// IPAM plugin; it forwards each ADD, DEL, CHECK, GC and STATUS with the
// CNI_* environment and the stdin configuration to multinetd over a unix
// socket (internal/node/cniserver/api; the node's: MULTINET_IPAM_SOCKET, set by
// multinetd, default /run/multinet/ipam.sock; a configuration's
// "ipam.socketPath" is refused), which allocates in the Kubernetes API with its
// own ServiceAccount (internal/ipam/ipamd, internal/ipam). The plugin holds no
// credentials. VERSION is answered locally.
package main

import (
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	cniversion "github.com/containernetworking/cni/pkg/version"
)

// version is set at build time with -ldflags '-X main.version=...'.
var version = "dev"

func main() {
	p := plugin{stdout: os.Stdout}
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add:    p.add,
		Del:    p.del,
		Check:  p.check,
		GC:     p.gc,
		Status: p.status,
	}, cniversion.All, "CNI IPAM plugin multinet-ipam "+version)
}
