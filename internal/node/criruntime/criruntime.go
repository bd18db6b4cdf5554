// Package criruntime asks a container runtime, through the CRI
// RuntimeService (k8s.io/cri-api: Version, and Status with verbose info, what
// `crictl info` shows), where it keeps its CNI plugins and its CNI
// configuration, so that multinetd can use the runtime's own settings when
// its configuration leaves cniBinDirs or cniConfDir unset
// (docs/decisions/deploy.md "The runtime's own CNI settings").
//
// What runtimes report (fixtures in testdata/):
//
//   - containerd 2.x: info["config"] is the CRI plugin's configuration as
//     JSON, with "cni": {"binDirs": [...], "confDir": "..."}; containerd 2.0
//     and 1.7 have "binDir" (one string) instead of "binDirs";
//     info["cniconfig"] is go-cni's view, {"PluginDirs": [...],
//     "PluginConfDir": "..."}.
//   - CRI-O: info["config"] is {"sandboxImage": "..."} only: nothing about
//     CNI. Parse then finds nothing, and the caller keeps its defaults.
package criruntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/multinet/multinet/internal/node/sandboxes"
)

// CNI is what a runtime reports about its CNI set-up: node paths, as the
// runtime sees them. Empty fields: not reported.
type CNI struct {
	// BinDirs are the directories the runtime looks up CNI plugins in (its
	// CNI_PATH), in order.
	BinDirs []string
	// ConfDir is the directory the runtime reads CNI configurations from.
	ConfDir string
}

// Runtime is the answer of one runtime.
type Runtime struct {
	// Name and Version are the CRI Version RPC's RuntimeName and
	// RuntimeVersion ("containerd", "v2.4.2"; "cri-o", "1.33.0").
	Name, Version string
	// Endpoint is the CRI endpoint asked.
	Endpoint string
	// CNI is what Parse found in the verbose Status info.
	CNI CNI
}

// Limits of what Parse accepts from a runtime: more, or longer, is not a
// CNI set-up but a broken or hostile answer.
const (
	maxInfoValue = 1 << 20
	maxBinDirs   = 32
	maxPathLen   = 4096
)

// Parse reads the CNI plugin dirs and conf dir from a CRI verbose Status
// info map. It prefers the runtime's configuration (info["config"]:
// "cni.binDirs", else "cni.binDir", and "cni.confDir") and fills what that
// lacks from go-cni's view (info["cniconfig"]: "PluginDirs",
// "PluginConfDir"). Every path must be absolute and clean, without NUL or
// ":" in a plugin dir (CNI_PATH is ":"-separated); values that are not are
// left out and named in the error, as is a value that is not the JSON
// expected. So the result holds only usable paths, possibly none, and the
// error says what was ignored; a runtime that reports nothing about CNI
// (CRI-O) gives an empty CNI and no error.
func Parse(info map[string]string) (CNI, error) {
	var out CNI
	var errs []error
	for _, s := range []struct {
		key   string
		parse func(string) (*cniSource, error)
	}{{"config", fromRuntimeConfig}, {"cniconfig", fromGoCNI}} {
		raw, ok := info[s.key]
		if !ok || strings.TrimSpace(raw) == "" {
			continue
		}
		if len(raw) > maxInfoValue {
			errs = append(errs, fmt.Errorf("info[%q]: %d bytes, more than %d", s.key, len(raw), maxInfoValue))
			continue
		}
		src, err := s.parse(raw)
		if err != nil {
			errs = append(errs, fmt.Errorf("info[%q]: %w", s.key, err))
			continue
		}
		if src == nil {
			continue
		}
		if len(out.BinDirs) == 0 {
			errs = append(errs, out.addBinDirs(s.key, src)...)
		}
		if out.ConfDir == "" {
			errs = append(errs, out.setConfDir(s.key, src)...)
		}
	}
	return out, errors.Join(errs...)
}

// cniSource is one info value's CNI plugin dirs and conf dir, read on
// demand (their JSON may be the wrong shape).
type cniSource struct {
	binDirs func() ([]string, error)
	confDir func() (string, error)
}

// fromRuntimeConfig reads the runtime's configuration (info["config"]):
// "cni.binDirs", else "cni.binDir", and "cni.confDir"; nil without "cni".
func fromRuntimeConfig(raw string) (*cniSource, error) {
	var c struct {
		CNI *struct {
			BinDirs json.RawMessage `json:"binDirs"`
			BinDir  json.RawMessage `json:"binDir"`
			ConfDir json.RawMessage `json:"confDir"`
		} `json:"cni"`
	}
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return nil, err
	}
	if c.CNI == nil {
		return nil, nil
	}
	cni := c.CNI
	bin := func() ([]string, error) {
		if isSet(cni.BinDirs) {
			return stringList(cni.BinDirs)
		}
		if isSet(cni.BinDir) {
			s, err := stringValue(cni.BinDir)
			if s == "" || err != nil {
				return nil, err
			}
			return []string{s}, nil
		}
		return nil, nil
	}
	return &cniSource{binDirs: bin, confDir: func() (string, error) { return stringValue(cni.ConfDir) }}, nil
}

// fromGoCNI reads go-cni's view (info["cniconfig"]): "PluginDirs",
// "PluginConfDir".
func fromGoCNI(raw string) (*cniSource, error) {
	var c struct {
		PluginDirs    json.RawMessage `json:"PluginDirs"`
		PluginConfDir json.RawMessage `json:"PluginConfDir"`
	}
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return nil, err
	}
	return &cniSource{
		binDirs: func() ([]string, error) { return stringList(c.PluginDirs) },
		confDir: func() (string, error) { return stringValue(c.PluginConfDir) },
	}, nil
}

// addBinDirs adds src's usable plugin dirs (at most maxBinDirs) and
// returns what it left out, naming info[key].
func (out *CNI) addBinDirs(key string, src *cniSource) []error {
	var errs []error
	dirs, err := src.binDirs()
	if err != nil {
		errs = append(errs, fmt.Errorf("info[%q] plugin dirs: %w", key, err))
	}
	for _, d := range dirs {
		if err := checkPath(d, true); err != nil {
			errs = append(errs, fmt.Errorf("info[%q] plugin dir %q: %w", key, d, err))
			continue
		}
		if len(out.BinDirs) == maxBinDirs {
			errs = append(errs, fmt.Errorf("info[%q]: more than %d plugin dirs; the rest ignored", key, maxBinDirs))
			break
		}
		out.BinDirs = append(out.BinDirs, d)
	}
	return errs
}

// setConfDir sets src's conf dir when it is usable, else returns why not,
// naming info[key].
func (out *CNI) setConfDir(key string, src *cniSource) []error {
	dir, err := src.confDir()
	if err != nil {
		return []error{fmt.Errorf("info[%q] conf dir: %w", key, err)}
	}
	if dir == "" {
		return nil
	}
	if err := checkPath(dir, false); err != nil {
		return []error{fmt.Errorf("info[%q] conf dir %q: %w", key, dir, err)}
	}
	out.ConfDir = dir
	return nil
}

func isSet(raw json.RawMessage) bool {
	return len(raw) > 0 && string(raw) != "null"
}

// stringValue decodes a JSON string ("" for absent or null).
func stringValue(raw json.RawMessage) (string, error) {
	if !isSet(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("want a string: %w", err)
	}
	return s, nil
}

// stringList decodes a JSON list of strings (nil for absent or null).
func stringList(raw json.RawMessage) ([]string, error) {
	if !isSet(raw) {
		return nil, nil
	}
	var l []string
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, fmt.Errorf("want a list of strings: %w", err)
	}
	return l, nil
}

// checkPath accepts an absolute, clean path without NUL (and, for a plugin
// dir, without ":", CNI_PATH's separator).
func checkPath(p string, pluginDir bool) error {
	switch {
	case p == "":
		return errors.New("empty")
	case len(p) > maxPathLen:
		return fmt.Errorf("longer than %d bytes", maxPathLen)
	case strings.ContainsRune(p, 0):
		return errors.New("contains NUL")
	case !filepath.IsAbs(p):
		return errors.New("not an absolute path")
	case filepath.Clean(p) != p:
		return fmt.Errorf("not a clean path (%s)", filepath.Clean(p))
	case pluginDir && strings.ContainsRune(p, ':'):
		return errors.New(`contains ":", CNI_PATH's separator`)
	}
	return nil
}

// Discover asks the CRI runtime at endpoint ("unix:///path" or a socket
// path, in the caller's view) for its name, version and CNI set-up: the
// Version RPC, then Status with verbose info. Give ctx a deadline: a runtime
// that does not answer blocks until it ends. Errors: a malformed endpoint,
// either RPC failing (Runtime then holds what was learnt), and what Parse
// ignored (Runtime.CNI then holds the usable rest).
func Discover(ctx context.Context, endpoint string) (Runtime, error) {
	rt := Runtime{Endpoint: endpoint}
	target, err := sandboxes.DialTarget(endpoint)
	if err != nil {
		return rt, err
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
	if err != nil {
		return rt, fmt.Errorf("CRI runtime endpoint %s: %w", endpoint, err)
	}
	defer conn.Close()
	client := runtimeapi.NewRuntimeServiceClient(conn)
	v, err := client.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return rt, fmt.Errorf("CRI Version at %s: %w", endpoint, err)
	}
	rt.Name, rt.Version = v.RuntimeName, v.RuntimeVersion
	st, err := client.Status(ctx, &runtimeapi.StatusRequest{Verbose: true})
	if err != nil {
		return rt, fmt.Errorf("CRI Status at %s: %w", endpoint, err)
	}
	rt.CNI, err = Parse(st.Info)
	if err != nil {
		return rt, fmt.Errorf("CRI Status at %s (%s %s): %w", endpoint, rt.Name, rt.Version, err)
	}
	return rt, nil
}
