// Command multinet-shim is the CNI plugin the container runtime executes for
// multinet ("type": "multinet-shim" in the CNI network configuration). It
// forwards the CNI_* environment and the stdin configuration to multinetd
// over a unix socket (internal/node/cniserver/api), prints the daemon's result or
// returns its CNI error, and exits. VERSION is answered locally.
//
// It imports only internal/node/cniserver/api and the CNI library, to stay small and
// quick to start: it runs once per pod sandbox operation.
package main

import (
	"os"

	"github.com/containernetworking/cni/pkg/skel"
	cniversion "github.com/containernetworking/cni/pkg/version"
)

// version is set at build time with -ldflags '-X main.version=...'.
var version = "dev"

func main() {
	s := shim{stdout: os.Stdout}
	skel.PluginMainFuncs(skel.CNIFuncs{
		Add:    s.add,
		Del:    s.del,
		Check:  s.check,
		GC:     s.gc,
		Status: s.status,
	}, cniversion.All, "CNI plugin multinet-shim "+version)
}
