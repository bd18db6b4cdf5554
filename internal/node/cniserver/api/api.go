// Package api is the wire protocol between multinet-shim (the CNI plugin the
// container runtime executes) and multinetd (the node daemon that does the
// work).
//
// One request per connection over a unix stream socket. Each message, in both
// directions, is one frame:
//
//	+----------------------------+---------------------------+
//	| length: uint32, big endian | body: length bytes of JSON |
//	+----------------------------+---------------------------+
//
// The client writes one Request frame, the server answers with one Response
// frame and closes the connection. A request body is at most MaxRequestSize
// bytes, a response body at most MaxResponseSize bytes; a zero length is
// invalid. Both bodies carry "v": Version; a server answers a request of
// another version with a CNI error (code 6) instead of guessing.
//
// This package is imported by the shim, so it depends only on the standard
// library and the CNI types package: no client-go, no net/http.
package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/types"
)

// Version is the protocol version this package speaks ("v" in every body).
const Version = 1

const (
	// MaxRequestSize bounds a request body in bytes (1 MiB). The largest
	// request in practice is a GC whose cni.dev/valid-attachments lists every
	// attachment on the node: about 100 bytes each.
	MaxRequestSize = 1 << 20
	// MaxResponseSize bounds a response body in bytes (4 MiB).
	MaxResponseSize = 4 << 20
	// headerSize is the length prefix of a frame in bytes.
	headerSize = 4
)

// ArgNetworkNamespace is the CNI_ARGS key multinetd adds for every delegate
// it runs: the namespace of the attachment's NetworkAttachmentDefinition
// (the part before "/" of its "namespace/name"), empty for a network of the
// node's own configuration (a CNI config file: the admin's). Delegates pass
// CNI_ARGS on to their IPAM plugin, so multinet-ipam learns whose pool a
// network names (internal/ipam Tenancy); a runtime's pair of this key is
// dropped, and neither pods nor NADs can set one.
const ArgNetworkNamespace = "MULTINET_NETWORK_NAMESPACE"

// NetworkNamespaceArg is the ArgNetworkNamespace pair of the network whose
// key is networkKey ("namespace/name" for a NAD, a name for a file).
func NetworkNamespaceArg(networkKey string) [2]string {
	ns, _, ok := strings.Cut(networkKey, "/")
	if !ok {
		ns = ""
	}
	return [2]string{ArgNetworkNamespace, ns}
}

// DefaultSocketPath is where multinetd listens and multinet-shim dials unless
// the CNI network configuration sets "socketPath".
const DefaultSocketPath = "/run/multinet/multinetd.sock"

// IPAMSocketEnv is the environment variable that gives multinet-ipam
// multinetd's IPAM socket (absolute path). multinetd sets it in its own
// environment at start, so every delegate it runs, and the IPAM plugin a
// delegate runs, inherits it; unset, the plugin dials DefaultIPAMSocketPath.
// The path is node configuration only: a network configuration's
// "ipam.socketPath" is refused (docs/decisions/sockets.md).
const IPAMSocketEnv = "MULTINET_IPAM_SOCKET"

// DefaultIPAMSocketPath is multinet-ipam's socket unless IPAMSocketEnv says
// otherwise.
const DefaultIPAMSocketPath = "/run/multinet/ipam.sock"

// CNI commands a Request may carry (CNI spec "CNI operations"). VERSION is
// never forwarded: the shim answers it itself.
const (
	CmdAdd    = "ADD"
	CmdDel    = "DEL"
	CmdCheck  = "CHECK"
	CmdGC     = "GC"
	CmdStatus = "STATUS"
)

// ErrFrameTooLarge is returned (wrapped) when a frame's length prefix exceeds
// the limit for its direction.
var ErrFrameTooLarge = errors.New("frame exceeds size limit")

// Request is one CNI operation as the runtime invoked the shim: the CNI_*
// environment variables and the network configuration from stdin.
type Request struct {
	// V is the protocol version; Version when built by this package.
	V int `json:"v"`
	// Command is CNI_COMMAND: one of CmdAdd, CmdDel, CmdCheck, CmdGC, CmdStatus.
	Command string `json:"command"`
	// ContainerID is CNI_CONTAINERID (required for ADD, DEL, CHECK).
	ContainerID string `json:"containerID,omitempty"`
	// Netns is CNI_NETNS, a path (required for ADD and CHECK; may be empty on DEL).
	Netns string `json:"netns,omitempty"`
	// IfName is CNI_IFNAME (required for ADD, DEL, CHECK).
	IfName string `json:"ifName,omitempty"`
	// Args is CNI_ARGS verbatim: "K1=V1;K2=V2" (K8S_POD_NAMESPACE, K8S_POD_NAME, …).
	Args string `json:"args,omitempty"`
	// Path is CNI_PATH verbatim: a ':'-separated list of directories.
	Path string `json:"path,omitempty"`
	// Config is the network configuration the runtime wrote to the shim's
	// stdin, as a JSON object (whitespace may be compacted in transit).
	Config json.RawMessage `json:"config"`
	// TimeoutMillis is how long the client will wait for the response, in
	// milliseconds; 0 means unknown. The server finishes (or gives up) before
	// then so that its answer, not a client timeout, reaches the runtime.
	TimeoutMillis int64 `json:"timeoutMs,omitempty"`
}

// Response is the daemon's answer to one Request. Exactly one of Result and
// Error is set for a failed operation (Error) or a successful ADD (Result);
// both are empty for any other successful command.
type Response struct {
	// V is the protocol version; Version when built by this package.
	V int `json:"v"`
	// Result is the CNI result JSON of a successful ADD, already in the
	// cniVersion of the request's configuration; the shim prints it as is.
	Result json.RawMessage `json:"result,omitempty"`
	// Error is the CNI error to report (CNI spec "Error"), code preserved.
	Error *types.Error `json:"error,omitempty"`
}

// Timeout returns TimeoutMillis as a duration (0 when unknown), saturating
// at the largest time.Duration instead of overflowing.
func (r *Request) Timeout() time.Duration {
	if r.TimeoutMillis > int64(math.MaxInt64/time.Millisecond) {
		return math.MaxInt64
	}
	return time.Duration(r.TimeoutMillis) * time.Millisecond
}

// Validate checks the fields a server relies on: the protocol version, a
// known command, a JSON object in Config, the environment variables the CNI
// spec requires for the command, and a non-negative timeout. The error names
// the offending field.
func (r *Request) Validate() error {
	if r.V != Version {
		return fmt.Errorf("field \"v\": unsupported protocol version %d (this side speaks %d)", r.V, Version)
	}
	var needContainer, needNetns bool
	switch r.Command {
	case CmdAdd, CmdCheck:
		needContainer, needNetns = true, true
	case CmdDel:
		needContainer = true
	case CmdGC, CmdStatus:
	case "":
		return errors.New("field \"command\": missing")
	default:
		return fmt.Errorf("field \"command\": unknown CNI command %q", r.Command)
	}
	if needContainer {
		if r.ContainerID == "" {
			return fmt.Errorf("field \"containerID\": required for %s", r.Command)
		}
		if r.IfName == "" {
			return fmt.Errorf("field \"ifName\": required for %s", r.Command)
		}
	}
	if needNetns && r.Netns == "" {
		return fmt.Errorf("field \"netns\": required for %s", r.Command)
	}
	if firstByte(r.Config) != '{' {
		return errors.New("field \"config\": must be a JSON object")
	}
	if r.TimeoutMillis < 0 {
		return fmt.Errorf("field \"timeoutMs\": negative (%d)", r.TimeoutMillis)
	}
	return nil
}

// Validate checks a Response: the protocol version, and that Result, when
// set, is a JSON object.
func (r *Response) Validate() error {
	if r.V != Version {
		return fmt.Errorf("field \"v\": unsupported protocol version %d (this side speaks %d)", r.V, Version)
	}
	if c := firstByte(r.Result); c != 0 && c != 'n' && c != '{' {
		return errors.New("field \"result\": must be a JSON object or null")
	}
	return nil
}

// ErrorResponse builds a Response carrying a CNI error.
func ErrorResponse(code uint, msg, details string) *Response {
	return &Response{V: Version, Error: types.NewError(code, msg, details)}
}

// firstByte returns the first non-whitespace byte of raw JSON, or 0.
func firstByte(raw json.RawMessage) byte {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c
	}
	return 0
}
