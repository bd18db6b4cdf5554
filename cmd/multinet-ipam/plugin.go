package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/multinet/multinet/internal/node/cniserver/api"
)

// Defaults of the keys the plugin reads.
const (
	// defaultTimeout is under the 60 s multinetd gives a delegate
	// (delegateTimeout), so that the delegate gets this plugin's answer.
	defaultTimeout = 50 * time.Second
)

// ipamSocketPathRefused is the refusal of "ipam.socketPath", the same as
// internal/ipam.SocketPathRefused (multinetd's side; this binary does not link
// internal/ipam and its Kubernetes client).
const ipamSocketPathRefused = "not accepted from a network configuration: multinet-ipam's socket is node configuration (multinetd's ipamSocketPath, handed to the plugin in " + api.IPAMSocketEnv + "); remove the key"

// netConf holds the keys of the network configuration the plugin itself
// reads; multinetd reads the rest.
type netConf struct {
	IPAM *struct {
		// SocketPath is refused: the socket is node configuration
		// (socketPath), never a network's.
		SocketPath *string `json:"socketPath,omitempty"`
		// Timeout is a Go duration string ("30s").
		Timeout string `json:"timeout,omitempty"`
	} `json:"ipam"`
}

type config struct {
	socketPath string
	timeout    time.Duration
}

// socketPath is multinetd's IPAM socket as the node says it: getenv's
// api.IPAMSocketEnv (set by multinetd in its environment, which the
// delegates and so this plugin inherit), else api.DefaultIPAMSocketPath.
// Error (CNI code 6, invalid environment variables): a relative path.
func socketPath(getenv func(string) string) (string, error) {
	p := getenv(api.IPAMSocketEnv)
	if p == "" {
		return api.DefaultIPAMSocketPath, nil
	}
	if !filepath.IsAbs(p) {
		return "", types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("multinet-ipam: %s=%q is not an absolute path", api.IPAMSocketEnv, p), "")
	}
	return p, nil
}

// loadConfig reads the plugin's own keys, and the socket from the node's
// configuration (socketPath). Errors are CNI code 7 (invalid network
// config) naming the field; a network configuration that sets
// "ipam.socketPath" is one: a NetworkAttachmentDefinition's author must
// not choose which of the node's sockets a delegate's request reaches.
func loadConfig(stdin []byte, getenv func(string) string) (*config, error) {
	var nc netConf
	if err := json.Unmarshal(stdin, &nc); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "multinet-ipam: decoding network configuration", err.Error())
	}
	if nc.IPAM == nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, `multinet-ipam: field "ipam": missing`, "")
	}
	if nc.IPAM.SocketPath != nil {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "multinet-ipam: field \"ipam.socketPath\": "+ipamSocketPathRefused, "")
	}
	sock, err := socketPath(getenv)
	if err != nil {
		return nil, err
	}
	c := &config{socketPath: sock, timeout: defaultTimeout}
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
	c, err := loadConfig(args.StdinData, os.Getenv)
	if err != nil {
		return nil, err
	}
	return api.Forwarder{Plugin: "multinet-ipam", SocketPath: c.socketPath, Timeout: c.timeout, TimeoutField: "ipam.timeout"}.Forward(cmd, args)
}
