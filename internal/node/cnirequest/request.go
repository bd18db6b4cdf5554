// Package cnirequest is one CNI operation as multinetd's engine (internal/node/attach)
// takes it: the shim's wire request (internal/node/cniserver/api) decoded once, at the
// server's edge (internal/node/cniserver.Decoding), into the pod, the sandbox, its
// network namespace and interface, the runtime's runtimeConfig and CNI_ARGS.
// The engine never reads the wire type; hot-plug builds a Request the same
// way for an attachment it adds to a running sandbox.
package cnirequest

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/containernetworking/cni/pkg/types"

	"github.com/multinet/multinet/internal/node/cniserver/api"
)

// Request is one decoded CNI operation (CNI spec "Parameters"). The command
// is not part of it: the engine's method is.
type Request struct {
	// ContainerID is CNI_CONTAINERID, the pod sandbox's ID.
	ContainerID string
	// Netns is CNI_NETNS, a path; empty on a DEL or GC without one.
	Netns string
	// IfName is CNI_IFNAME, the interface of the default network.
	IfName string
	// CNIPath is CNI_PATH verbatim: ':'-separated directories of the
	// delegates (unless the engine is configured with its own).
	CNIPath string
	// RawArgs is CNI_ARGS verbatim ("K1=V1;K2=V2"), as attachment records
	// keep it.
	RawArgs string
	// Args is CNI_ARGS decoded (ParseArgs); empty when ArgsErr is set.
	Args Args
	// ArgsErr is why CNI_ARGS could not be decoded, nil when it could.
	ArgsErr error
	// CNIVersion is the "cniVersion" of the runtime's network configuration
	// (ADD: its result is converted to it).
	CNIVersion string
	// RuntimeConfig is the configuration's "runtimeConfig" object (ADD,
	// DEL), nil when there is none.
	RuntimeConfig map[string]any
	// ValidAttachments is the configuration's cni.dev/valid-attachments
	// (GC, CNI spec 1.1).
	ValidAttachments []types.GCAttachment
	// Invalid is set when the command cannot be served as decoded: ADD
	// whose configuration has no cniVersion (code 6), whose CNI_ARGS are
	// malformed (code 4) or whose runtimeConfig is not an object (code 6);
	// GC whose cni.dev/valid-attachments is not a list of attachments (code
	// 6). The engine fails the command with it (ADD after tearing down an
	// earlier ADD of the container, recording that nothing was attempted).
	Invalid *types.Error
}

// Decode decodes the wire request w once, for its command. It never fails:
// what cannot be decoded is in ArgsErr and Invalid, for the engine to
// answer with after the work the command does regardless (an ADD tears
// down an earlier ADD of its container first).
func Decode(w *api.Request) *Request {
	r := &Request{ContainerID: w.ContainerID, Netns: w.Netns, IfName: w.IfName, CNIPath: w.Path, RawArgs: w.Args}
	r.Args, r.ArgsErr = ParseArgs(w.Args)
	switch w.Command {
	case api.CmdAdd:
		var verErr, rcErr error
		r.CNIVersion, verErr = configVersion(w.Config)
		r.RuntimeConfig, rcErr = RuntimeConfig(w.Config)
		switch {
		case verErr != nil:
			r.Invalid = types.NewError(types.ErrDecodingFailure, verErr.Error(), "")
		case r.ArgsErr != nil:
			r.Invalid = types.NewError(types.ErrInvalidEnvironmentVariables, r.ArgsErr.Error(), "")
		case rcErr != nil:
			r.Invalid = types.NewError(types.ErrDecodingFailure, rcErr.Error(), "")
		}
	case api.CmdDel:
		// A runtimeConfig DEL cannot read is none: DEL tears down what was
		// made whatever the runtime says now.
		r.RuntimeConfig, _ = RuntimeConfig(w.Config)
	case api.CmdGC:
		var cfg struct {
			Valid []types.GCAttachment `json:"cni.dev/valid-attachments"`
		}
		if err := json.Unmarshal(w.Config, &cfg); err != nil {
			r.Invalid = types.NewError(types.ErrDecodingFailure, fmt.Sprintf("GC: cni.dev/valid-attachments: %v", err), "")
			return r
		}
		r.ValidAttachments = cfg.Valid
	}
	return r
}

// CNI_ARGS keys Kubernetes runtimes pass (CNI CONVENTIONS, "CNI_ARGS").
const (
	argPodNamespace = "K8S_POD_NAMESPACE"
	argPodName      = "K8S_POD_NAME"
	argPodUID       = "K8S_POD_UID"
	argIgnore       = "IgnoreUnknown"
)

// Args is the pod identity of a request and the CNI_ARGS pairs passed on to
// every delegate.
type Args struct {
	Namespace, Name, UID string
	// Pairs are the runtime's CNI_ARGS in order, with IgnoreUnknown=1 first
	// (delegates that do not know K8S_* keys must not fail on them).
	Pairs [][2]string
}

// HasPod reports whether the request names a Kubernetes pod.
func (a Args) HasPod() bool { return a.Namespace != "" && a.Name != "" }

// ParseArgs splits CNI_ARGS ("K1=V1;K2=V2"); a runtime's
// api.ArgNetworkNamespace pair is dropped (multinetd sets it per
// attachment, NetworkNamespaceArg). Errors name the malformed item; Args
// is then empty.
func ParseArgs(s string) (Args, error) {
	var a Args
	a.Pairs = append(a.Pairs, [2]string{argIgnore, "1"})
	if strings.TrimSpace(s) == "" {
		return a, nil
	}
	for i, item := range strings.Split(s, ";") {
		if item == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		if !ok || k == "" {
			return Args{}, fmt.Errorf("CNI_ARGS item %d %q: want KEY=VALUE", i, item)
		}
		switch k {
		case argIgnore:
			continue // already first
		case api.ArgNetworkNamespace:
			continue // multinetd's own, set per attachment
		case argPodNamespace:
			a.Namespace = v
		case argPodName:
			a.Name = v
		case argPodUID:
			a.UID = v
		}
		a.Pairs = append(a.Pairs, [2]string{k, v})
	}
	return a, nil
}

// NetworkNamespaceArg is the api.ArgNetworkNamespace pair multinetd passes
// to the delegates of the network whose key is networkKey.
func NetworkNamespaceArg(networkKey string) [2]string { return api.NetworkNamespaceArg(networkKey) }

// configVersion returns the "cniVersion" of the runtime's network
// configuration (the shim's stdin). Errors name the field.
func configVersion(config []byte) (string, error) {
	var c struct {
		CNIVersion string `json:"cniVersion"`
	}
	if err := json.Unmarshal(config, &c); err != nil {
		return "", fmt.Errorf("network configuration: %w", err)
	}
	if c.CNIVersion == "" {
		return "", fmt.Errorf("network configuration: field cniVersion is missing")
	}
	return c.CNIVersion, nil
}

// RuntimeConfig returns the "runtimeConfig" object of the CNI config the
// container runtime passed to multinet's shim (its stdin), nil when there is
// none. An error names the field.
func RuntimeConfig(stdin []byte) (map[string]any, error) {
	var conf struct {
		RuntimeConfig json.RawMessage `json:"runtimeConfig"`
	}
	if err := json.Unmarshal(stdin, &conf); err != nil {
		return nil, fmt.Errorf("CNI config from the runtime: %w", err)
	}
	if len(conf.RuntimeConfig) == 0 || string(conf.RuntimeConfig) == "null" {
		return nil, nil
	}
	var rc map[string]any
	if err := json.Unmarshal(conf.RuntimeConfig, &rc); err != nil {
		return nil, fmt.Errorf("CNI config from the runtime: field runtimeConfig: not a JSON object: %w", err)
	}
	return rc, nil
}

// ErrorMessage is the text of err as the runtime and the pod's Events show
// it: a CNI error's msg (with its details when msg does not say them), any
// other error's Error().
func ErrorMessage(err error) string {
	var te *types.Error
	if errors.As(err, &te) {
		if te.Details != "" && !strings.Contains(te.Msg, te.Details) {
			return te.Msg + ": " + te.Details
		}
		return te.Msg
	}
	return err.Error()
}
