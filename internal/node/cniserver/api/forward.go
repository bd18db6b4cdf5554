package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
)

// Forwarder sends the CNI operation a plugin binary was started for to
// multinetd over its unix socket: multinet-shim (the runtime's CNI plugin)
// and multinet-ipam (an IPAM plugin run by delegates) are both thin
// forwarders of this kind.
type Forwarder struct {
	// Plugin names the sender in errors ("multinet-shim").
	Plugin string
	// SocketPath is multinetd's socket (absolute).
	SocketPath string
	// Timeout bounds one operation, DEL and GC resends included.
	Timeout time.Duration
	// TimeoutField is the configuration key Timeout comes from ("timeout"),
	// named in the error when it expires.
	TimeoutField string
	// WaitForServer: ADD and CHECK wait (within Timeout) while nothing
	// listens on SocketPath, instead of failing at once
	// (ExchangeWaiting): multinet-shim, so that pods created while
	// multinetd is replaced do not fail their ADD.
	WaitForServer bool
}

// Forward sends cmd with args to multinetd (Exchange: DEL and GC are sent
// again while it restarts) and returns its successful response, or its CNI
// error unchanged. When no answer arrived it returns code 50 for STATUS
// (CNI 1.1.0: "the plugin is not available") and 11 (try again later)
// otherwise, saying whether multinetd was unreachable or did not answer
// within Timeout.
func (f Forwarder) Forward(cmd string, args *skel.CmdArgs) (*Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), f.Timeout)
	defer cancel()
	exchange := Exchange
	if f.WaitForServer {
		exchange = ExchangeWaiting
	}
	resp, err := exchange(ctx, f.SocketPath, &Request{
		V:           Version,
		Command:     cmd,
		ContainerID: args.ContainerID,
		Netns:       args.Netns,
		IfName:      args.IfName,
		Args:        args.Args,
		Path:        args.Path,
		Config:      args.StdinData,
	})
	if err != nil {
		return nil, f.transportError(cmd, err)
	}
	if resp.Error != nil {
		return nil, resp.Error
	}
	return resp, nil
}

// transportError turns a failed exchange into the CNI error reported to the
// caller.
func (f Forwarder) transportError(cmd string, err error) *types.Error {
	code := uint(types.ErrTryAgainLater)
	if cmd == CmdStatus {
		code = 50 // CNI 1.1.0 STATUS: "the plugin is not available"
	}
	msg := fmt.Sprintf("%s: %s: multinetd not reachable at %s", f.Plugin, cmd, f.SocketPath)
	if errors.Is(err, context.DeadlineExceeded) {
		msg = fmt.Sprintf("%s: %s: no answer from multinetd at %s within %s (%q)", f.Plugin, cmd, f.SocketPath, f.Timeout, f.TimeoutField)
	}
	return types.NewError(code, msg, err.Error())
}

// WriteResult writes the result of a successful ADD response to w (the
// plugin's stdout). A response without a result is a CNI internal error: the
// caller must not report success with nothing to show for it.
func (f Forwarder) WriteResult(w io.Writer, resp *Response) error {
	if r := bytes.TrimSpace(resp.Result); len(r) == 0 || string(r) == "null" {
		return types.NewError(types.ErrInternal, f.Plugin+": multinetd answered ADD without a result", "")
	}
	if _, err := w.Write(resp.Result); err != nil {
		return types.NewError(types.ErrIOFailure, f.Plugin+": writing result", err.Error())
	}
	return nil
}
