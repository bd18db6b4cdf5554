package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/ns"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/multinet/multinet/internal/node/cniserver/api"
)

// defaultTimeout bounds one forwarded operation unless the configuration sets
// "timeout". It is well under the kubelet's sandbox timeout (2 × the 2 min
// runtime request timeout) so that a stuck daemon yields a CNI error, not a
// killed plugin.
const defaultTimeout = 120 * time.Second

// netConf holds the keys of the CNI network configuration the shim itself
// reads; everything else is for the daemon.
type netConf struct {
	CNIVersion string `json:"cniVersion"`
	// SocketPath is multinetd's socket (absolute); default api.DefaultSocketPath.
	SocketPath string `json:"socketPath,omitempty"`
	// Timeout is a Go duration string ("90s", "2m"); default defaultTimeout.
	Timeout string `json:"timeout,omitempty"`
}

// config is netConf checked and defaulted.
type config struct {
	socketPath string
	timeout    time.Duration
}

// loadConfig reads the shim's own keys from the stdin configuration.
// Errors are CNI code 7 (invalid network config) naming the field.
func loadConfig(stdin []byte) (*config, error) {
	var nc netConf
	if err := json.Unmarshal(stdin, &nc); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "multinet-shim: decoding network configuration", err.Error())
	}
	c := &config{socketPath: api.DefaultSocketPath, timeout: defaultTimeout}
	if nc.SocketPath != "" {
		if !filepath.IsAbs(nc.SocketPath) {
			return nil, types.NewError(types.ErrInvalidNetworkConfig,
				fmt.Sprintf("multinet-shim: field \"socketPath\": %q is not an absolute path", nc.SocketPath), "")
		}
		c.socketPath = nc.SocketPath
	}
	if nc.Timeout != "" {
		d, err := time.ParseDuration(nc.Timeout)
		if err != nil {
			return nil, types.NewError(types.ErrInvalidNetworkConfig,
				fmt.Sprintf("multinet-shim: field \"timeout\": %q is not a duration (e.g. \"90s\")", nc.Timeout), err.Error())
		}
		if d <= 0 {
			return nil, types.NewError(types.ErrInvalidNetworkConfig,
				fmt.Sprintf("multinet-shim: field \"timeout\": %q must be positive", nc.Timeout), "")
		}
		c.timeout = d
	}
	return c, nil
}

// shim implements the skel callbacks by forwarding to multinetd.
type shim struct {
	stdout io.Writer
}

func (s shim) add(args *skel.CmdArgs) error {
	if err := checkNetns(args); err != nil {
		return err
	}
	resp, err := forward(api.CmdAdd, args)
	if err != nil {
		return err
	}
	return api.Forwarder{Plugin: "multinet-shim"}.WriteResult(s.stdout, resp)
}

func (s shim) del(args *skel.CmdArgs) error {
	if err := checkNetns(args); err != nil {
		return err
	}
	_, err := forward(api.CmdDel, args)
	return err
}

func (s shim) check(args *skel.CmdArgs) error {
	_, err := forward(api.CmdCheck, args)
	return err
}

func (s shim) gc(args *skel.CmdArgs) error {
	_, err := forward(api.CmdGC, args)
	return err
}

func (s shim) status(args *skel.CmdArgs) error {
	_, err := forward(api.CmdStatus, args)
	return err
}

// checkNetns refuses CNI_NETNS naming the shim's own network namespace (the
// host's, where multinetd also runs) before the daemon acts on it. skel does
// the same check, but only after the operation.
func checkNetns(args *skel.CmdArgs) error {
	if o := strings.ToUpper(args.NetnsOverride); o == "TRUE" || o == "1" {
		return nil
	}
	same, cerr := ns.CheckNetNS(args.Netns)
	if cerr != nil {
		return cerr
	}
	if same {
		return types.NewError(types.ErrInvalidNetNS,
			fmt.Sprintf("multinet-shim: CNI_NETNS %q is the plugin's own network namespace", args.Netns), "")
	}
	return nil
}

// forward sends one operation to multinetd (api.Forwarder: DEL and GC are
// sent again while it restarts, ADD and CHECK while nothing listens on its
// socket, until the shim's timeout).
func forward(cmd string, args *skel.CmdArgs) (*api.Response, error) {
	c, err := loadConfig(args.StdinData)
	if err != nil {
		return nil, err
	}
	return c.forwarder().Forward(cmd, args)
}

// forwarder is the api.Forwarder of c.
func (c *config) forwarder() api.Forwarder {
	return api.Forwarder{Plugin: "multinet-shim", SocketPath: c.socketPath, Timeout: c.timeout, TimeoutField: "timeout", WaitForServer: true}
}
