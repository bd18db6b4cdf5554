package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/klog/v2"

	"github.com/multinet/multinet/internal/node/criruntime"
	"github.com/multinet/multinet/internal/node/nodeexec"
)

// DefaultCNIConfDir is cniConfDir when neither the configuration nor the
// container runtime gives one.
const DefaultCNIConfDir = "/etc/cni/net.d"

// RuntimeCNITimeout bounds asking the container runtime for its CNI
// settings at start: a runtime that does not answer by then is not waited
// for (the defaults apply, with a warning).
const RuntimeCNITimeout = 5 * time.Second

// The sources of cniConfDir and cniBinDirs besides a runtime
// ("runtime <name> <version> via <endpoint>").
const (
	SourceConfig  = "config"
	SourceDefault = "default"
)

// RuntimeCNI is what ResolveRuntimeCNI decided: the values of cniConfDir and
// cniBinDirs and where each came from.
type RuntimeCNI struct {
	ConfDir       string
	ConfDirSource string
	// BinDirs empty (source "default") means the CNI_PATH of each request.
	BinDirs       []string
	BinDirsSource string
	// Asked is the runtime endpoint asked; "" when nothing was asked.
	Asked string
	// Runtime is what the runtime answered (Name empty: it did not).
	Runtime criruntime.Runtime
	// Err is why the runtime could not be asked, or what of its answer
	// was not usable; what it did give is used.
	Err error
	// Warning is a problem with a value taken from the runtime.
	Warning string
	// ConfDirView is where multinetd writes and watches ConfDir when that
	// is not ConfDir itself (ViewPath); "" when it is.
	ConfDirView string
}

// ViewPath returns where multinetd writes and watches the node directory
// p: p itself when p is "", when nodeRoot is "/" (a host process) or p exists in the
// daemon's own view (a container mounting it at the same path, as the
// DaemonSet does); otherwise p under nodeRoot, every symlink in it
// resolved inside the node's root as the node resolves it
// (nodeexec.Resolve), when that is a directory. The error says why neither
// is usable (a *nodeexec.ResolveError for a link leaving the root or a
// loop).
func ViewPath(nodeRoot, p string) (string, error) {
	if p == "" || filepath.Clean("/"+nodeRoot) == "/" {
		return p, nil
	}
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	v, err := nodeexec.Resolve(nodeRoot, p)
	if err != nil {
		return p, err
	}
	fi, err := os.Stat(v)
	if err != nil {
		return p, err
	}
	if !fi.IsDir() {
		return p, fmt.Errorf("%s: not a directory", v)
	}
	return v, nil
}

// DiscoverFunc asks the CRI runtime at endpoint for its CNI settings
// (criruntime.Discover).
type DiscoverFunc func(ctx context.Context, endpoint string) (criruntime.Runtime, error)

// ResolveRuntimeCNI fills cniConfDir and cniBinDirs when they are unset:
// set values (the file or the flags) win; then what the container runtime
// at runtimeEndpoint reports through the CRI (discover, bounded by
// RuntimeCNITimeout); then the defaults (DefaultCNIConfDir; for the bin
// dirs, the CNI_PATH of each request, as before). The runtime is asked only
// when a value is unset; a runtime that does not answer, or answers nothing
// usable (CRI-O reports no CNI settings), leaves the defaults, and
// RuntimeCNI.Err says why. Call it before Complete; log the result with
// RuntimeCNI.Log (docs/decisions/deploy.md "The runtime's own CNI
// settings").
func (c *Config) ResolveRuntimeCNI(ctx context.Context, discover DiscoverFunc) RuntimeCNI {
	r := RuntimeCNI{ConfDirSource: SourceConfig, BinDirsSource: SourceConfig}
	needConf, needBin := c.CNIConfDir == "", len(c.CNIBinDirs) == 0
	var runtimeSource string
	if (needConf || needBin) && c.RuntimeEndpoint != "" && discover != nil {
		ctx, cancel := context.WithTimeout(ctx, RuntimeCNITimeout)
		r.Asked = c.RuntimeEndpoint
		r.Runtime, r.Err = discover(ctx, c.RuntimeEndpoint)
		cancel()
		if r.Runtime.Name != "" {
			runtimeSource = fmt.Sprintf("runtime %s %s via %s", r.Runtime.Name, r.Runtime.Version, c.RuntimeEndpoint)
		}
	} else if needConf || needBin {
		r.Err = fmt.Errorf("runtimeEndpoint is unset: the container runtime was not asked")
	}
	if needConf {
		if d := r.Runtime.CNI.ConfDir; runtimeSource != "" && d != "" {
			c.CNIConfDir, r.ConfDirSource = d, runtimeSource
			// A node path, read through nodeRoot (netconf.ConfDir); the
			// daemon writes and watches it at its path in its own view.
			v, err := ViewPath(c.NodeRoot, d)
			if err != nil {
				r.Warning = fmt.Sprintf("the runtime's CNI conf dir %s is neither at that path in multinetd's view nor under nodeRoot %s (%v): mount the node's %s there, or set cniConfDir", d, c.NodeRoot, err, d)
			} else if v != d {
				r.ConfDirView = v
			}
		} else {
			c.CNIConfDir, r.ConfDirSource = DefaultCNIConfDir, SourceDefault
		}
	}
	if needBin {
		if d := r.Runtime.CNI.BinDirs; runtimeSource != "" && len(d) > 0 {
			c.CNIBinDirs, r.BinDirsSource = append([]string(nil), d...), runtimeSource
		} else {
			r.BinDirsSource = SourceDefault
		}
	}
	r.ConfDir, r.BinDirs = c.CNIConfDir, c.CNIBinDirs
	return r
}

// Log logs once what ResolveRuntimeCNI decided: the values and their
// sources, and, when the runtime was asked and did not give everything
// asked for, a warning saying why the defaults apply.
func (r RuntimeCNI) Log(log klog.Logger) {
	bin := any(r.BinDirs)
	if len(r.BinDirs) == 0 {
		bin = "the CNI_PATH of each request"
	}
	kv := []any{"cniConfDir", r.ConfDir, "cniConfDirSource", r.ConfDirSource,
		"cniBinDirs", bin, "cniBinDirsSource", r.BinDirsSource}
	if r.ConfDirView != "" {
		kv = append(kv, "cniConfDirView", r.ConfDirView)
	}
	log.Info("CNI dirs", kv...)
	fellBack := r.ConfDirSource == SourceDefault || r.BinDirsSource == SourceDefault
	switch {
	case r.Err != nil && fellBack:
		log.Error(r.Err, "WARNING: could not take the CNI settings from the container runtime; using the defaults for what it did not give", "runtimeEndpoint", r.Asked)
	case r.Err != nil:
		log.Error(r.Err, "WARNING: part of the container runtime's CNI settings was not usable", "runtimeEndpoint", r.Asked)
	case fellBack && r.Runtime.Name != "":
		log.Info("WARNING: the container runtime reports no CNI settings (CRI-O never does); using the defaults for what it did not give",
			"runtime", r.Runtime.Name, "version", r.Runtime.Version, "runtimeEndpoint", r.Asked)
	}
	if r.Warning != "" {
		log.Info("WARNING: " + r.Warning)
	}
}
