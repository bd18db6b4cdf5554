package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/multinet/multinet/pkg/cniserver/api"
)

// Defaults of the keys the plugin reads.
const (
	defaultSocketPath = "/run/multinet/ipam.sock"
	// defaultTimeout is under the 60 s multinetd gives a delegate
	// (delegateTimeout), so that the delegate gets this plugin's answer.
	defaultTimeout = 50 * time.Second
)

// netConf holds the keys of the network configuration the plugin itself
// reads; multinetd reads the rest.
type netConf struct {
	IPAM *struct {
		// SocketPath is multinetd's IPAM socket (absolute).
		SocketPath string `json:"socketPath,omitempty"`
		// Timeout is a Go duration string ("30s").
		Timeout string `json:"timeout,omitempty"`
	} `json:"ipam"`
}

type config struct {
	socketPath string
	timeout    time.Duration
}

// loadConfig reads the plugin's own keys. Errors are CNI code 7 (invalid
// network config) naming the field.
func loadConfig(stdin []byte) (*config, error) {
	var nc netConf
	if err := json.Unmarshal(stdin, &nc); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "multinet-ipam: decoding network configuration", err.Error())
	}
	if nc.IPAM == nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, `multinet-ipam: field "ipam": missing`, "")
	}
	c := &config{socketPath: defaultSocketPath, timeout: defaultTimeout}
	if p := nc.IPAM.SocketPath; p != "" {
		if !filepath.IsAbs(p) {
			return nil, types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("multinet-ipam: field \"ipam.socketPath\": %q is not an absolute path", p), "")
		}
		c.socketPath = p
	}
	if t := nc.IPAM.Timeout; t != "" {
		d, err := time.ParseDuration(t)
		if err != nil || d <= 0 {
			return nil, types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("multinet-ipam: field \"ipam.timeout\": %q is not a positive duration (e.g. \"30s\")", t), "")
		}
		c.timeout = d
	}
	return c, nil
}

// plugin implements the skel callbacks by forwarding to multinetd.
type plugin struct {
	stdout io.Writer
}

func (p plugin) add(args *skel.CmdArgs) error {
	resp, err := forward(api.CmdAdd, args)
	if err != nil {
		return err
	}
	return api.Forwarder{Plugin: "multinet-ipam"}.WriteResult(p.stdout, resp)
}

func (p plugin) del(args *skel.CmdArgs) error    { _, err := forward(api.CmdDel, args); return err }
func (p plugin) check(args *skel.CmdArgs) error  { _, err := forward(api.CmdCheck, args); return err }
func (p plugin) gc(args *skel.CmdArgs) error     { _, err := forward(api.CmdGC, args); return err }
func (p plugin) status(args *skel.CmdArgs) error { _, err := forward(api.CmdStatus, args); return err }

// forward sends one operation to multinetd (api.Forwarder: DEL and GC are
// sent again while it restarts, until "ipam.timeout").
func forward(cmd string, args *skel.CmdArgs) (*api.Response, error) {
	c, err := loadConfig(args.StdinData)
	if err != nil {
		return nil, err
	}
	return api.Forwarder{Plugin: "multinet-ipam", SocketPath: c.socketPath, Timeout: c.timeout, TimeoutField: "ipam.timeout"}.Forward(cmd, args)
}
