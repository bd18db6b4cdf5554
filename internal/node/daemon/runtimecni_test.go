package daemon

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/textlogger"

	"github.com/multinet/multinet/internal/node/criruntime"
)

const testEndpoint = "unix:///run/k3s/containerd/containerd.sock"

func k3sRuntime(context.Context, string) (criruntime.Runtime, error) {
	return criruntime.Runtime{Name: "containerd", Version: "v2.4.2-k3s1", Endpoint: testEndpoint, CNI: criruntime.CNI{
		BinDirs: []string{"/var/lib/rancher/k3s/data/current/bin"},
		ConfDir: "/var/lib/rancher/k3s/agent/etc/cni/net.d",
	}}, nil
}

func logged(r RuntimeCNI) string {
	var buf bytes.Buffer
	r.Log(textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&buf))))
	return buf.String()
}

// TestResolveRuntimeCNI: set values win (the runtime is not even asked);
// then the runtime's; then the defaults, and the log says which and why.
func TestResolveRuntimeCNI(t *testing.T) {
	k3sSource := "runtime containerd v2.4.2-k3s1 via " + testEndpoint
	for _, tt := range []struct {
		name               string
		confDir            string
		binDirs            []string
		endpoint           string
		discover           DiscoverFunc
		wantAsked          bool
		wantConf           string
		wantConfSource     string
		wantBin            []string
		wantBinSource      string
		wantErr, wantInLog string
	}{
		{name: "both set: not asked", confDir: "/etc/x", binDirs: []string{"/opt/x"}, endpoint: testEndpoint,
			discover: func(context.Context, string) (criruntime.Runtime, error) {
				t.Error("runtime asked although both are set")
				return criruntime.Runtime{}, nil
			},
			wantConf: "/etc/x", wantConfSource: SourceConfig, wantBin: []string{"/opt/x"}, wantBinSource: SourceConfig},
		{name: "both from the runtime", endpoint: testEndpoint, discover: k3sRuntime, wantAsked: true,
			wantConf: "/var/lib/rancher/k3s/agent/etc/cni/net.d", wantConfSource: k3sSource,
			wantBin: []string{"/var/lib/rancher/k3s/data/current/bin"}, wantBinSource: k3sSource, wantInLog: `cniConfDirSource="` + k3sSource + `"`},
		{name: "conf dir set, bin dirs from the runtime", confDir: "/etc/x", endpoint: testEndpoint, discover: k3sRuntime, wantAsked: true,
			wantConf: "/etc/x", wantConfSource: SourceConfig,
			wantBin: []string{"/var/lib/rancher/k3s/data/current/bin"}, wantBinSource: k3sSource},
		{name: "bin dirs set, conf dir from the runtime", binDirs: []string{"/opt/x"}, endpoint: testEndpoint, discover: k3sRuntime, wantAsked: true,
			wantConf: "/var/lib/rancher/k3s/agent/etc/cni/net.d", wantConfSource: k3sSource,
			wantBin: []string{"/opt/x"}, wantBinSource: SourceConfig},
		{name: "CRI-O reports nothing", endpoint: "unix:///var/run/crio/crio.sock", wantAsked: true,
			discover: func(context.Context, string) (criruntime.Runtime, error) {
				return criruntime.Runtime{Name: "cri-o", Version: "1.33.0"}, nil
			},
			wantConf: DefaultCNIConfDir, wantConfSource: SourceDefault, wantBinSource: SourceDefault,
			wantInLog: "reports no CNI settings"},
		{name: "runtime does not answer", endpoint: testEndpoint, wantAsked: true,
			discover: func(ctx context.Context, ep string) (criruntime.Runtime, error) {
				dl, ok := ctx.Deadline()
				if !ok || time.Until(dl) > RuntimeCNITimeout {
					t.Errorf("discover's context: deadline %v (%v), want within %s", dl, ok, RuntimeCNITimeout)
				}
				return criruntime.Runtime{Endpoint: ep}, errors.New("CRI Version: context deadline exceeded")
			},
			wantConf: DefaultCNIConfDir, wantConfSource: SourceDefault, wantBinSource: SourceDefault,
			wantErr: "deadline exceeded", wantInLog: "could not take the CNI settings from the container runtime"},
		{name: "part of the answer unusable", endpoint: testEndpoint, wantAsked: true,
			discover: func(context.Context, string) (criruntime.Runtime, error) {
				return criruntime.Runtime{Name: "containerd", Version: "v2.4.2", CNI: criruntime.CNI{BinDirs: []string{"/opt/cni/bin"}}},
					errors.New(`info["config"] conf dir "etc/cni": not an absolute path`)
			},
			wantConf: DefaultCNIConfDir, wantConfSource: SourceDefault,
			wantBin: []string{"/opt/cni/bin"}, wantBinSource: "runtime containerd v2.4.2 via " + testEndpoint,
			wantErr: "not an absolute path", wantInLog: "using the defaults for what it did not give"},
		{name: "no runtimeEndpoint", discover: k3sRuntime,
			wantConf: DefaultCNIConfDir, wantConfSource: SourceDefault, wantBinSource: SourceDefault,
			wantErr: "runtimeEndpoint is unset", wantInLog: "the CNI_PATH of each request"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Defaults()
			c.CNIConfDir, c.CNIBinDirs, c.RuntimeEndpoint = tt.confDir, tt.binDirs, tt.endpoint
			r := c.ResolveRuntimeCNI(context.Background(), tt.discover)
			if (r.Asked != "") != tt.wantAsked {
				t.Errorf("asked %q, want asked %v", r.Asked, tt.wantAsked)
			}
			if c.CNIConfDir != tt.wantConf || r.ConfDir != tt.wantConf || r.ConfDirSource != tt.wantConfSource {
				t.Errorf("cniConfDir %q (reported %q) from %q, want %q from %q", c.CNIConfDir, r.ConfDir, r.ConfDirSource, tt.wantConf, tt.wantConfSource)
			}
			if !slices.Equal(c.CNIBinDirs, tt.wantBin) || !slices.Equal(r.BinDirs, tt.wantBin) || r.BinDirsSource != tt.wantBinSource {
				t.Errorf("cniBinDirs %q from %q, want %q from %q", c.CNIBinDirs, r.BinDirsSource, tt.wantBin, tt.wantBinSource)
			}
			if tt.wantErr == "" && r.Err != nil || tt.wantErr != "" && (r.Err == nil || !strings.Contains(r.Err.Error(), tt.wantErr)) {
				t.Errorf("Err %v, want %q", r.Err, tt.wantErr)
			}
			out := logged(r)
			if !strings.Contains(out, `"CNI dirs"`) || !strings.Contains(out, tt.wantInLog) {
				t.Errorf("log:\n%s\nwant it to contain %q", out, tt.wantInLog)
			}
			c.NodeName = "node-a"
			if err := c.Complete(); err != nil || c.DefaultNetwork.ConfDir != c.CNIConfDir {
				t.Errorf("Complete: %v; defaultNetwork.confDir %q", err, c.DefaultNetwork.ConfDir)
			}
		})
	}
}

// TestResolveRuntimeCNIWarnsOfConfDirNotInView: in a container (nodeRoot
// not "/"), a conf dir from the runtime that is neither mounted at the same
// path nor under nodeRoot is used, with a warning naming the fix.
func TestResolveRuntimeCNIWarnsOfConfDirNotInView(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "not-mounted", "net.d") // a path no host has
	c := Defaults()
	c.NodeRoot, c.RuntimeEndpoint = t.TempDir(), testEndpoint
	r := c.ResolveRuntimeCNI(context.Background(), func(context.Context, string) (criruntime.Runtime, error) {
		return criruntime.Runtime{Name: "containerd", Version: "v2.4.2", CNI: criruntime.CNI{ConfDir: missing}}, nil
	})
	if c.CNIConfDir != missing || !strings.Contains(r.Warning, "mount the node's "+missing+" there") {
		t.Errorf("cniConfDir %q, warning %q", c.CNIConfDir, r.Warning)
	}
	if out := logged(r); !strings.Contains(out, "WARNING: the runtime's CNI conf dir") {
		t.Errorf("log:\n%s", out)
	}
}

// TestResolveRuntimeCNIConfDirThroughNodeRoot: in a container, the
// runtime's conf dir that is not mounted at its own path stays cniConfDir
// (a node path, read through nodeRoot) and is written and watched through
// nodeRoot (ViewPath), its symlinks resolved inside the node's root as the
// node resolves them (k3s: an absolute link to a versioned dir); the log
// says where. A link that leaves the root is not followed out of it.
func TestResolveRuntimeCNIConfDirThroughNodeRoot(t *testing.T) {
	root := t.TempDir()
	// k3s's layout under a top dir no host has (the k3s node of the
	// local cluster may have made /var/lib/rancher/k3s on this one).
	top := "/" + filepath.Base(root) + "-rancher"
	real := filepath.Join(root, top, "k3s/agent-v2/etc/cni/net.d")
	if err := os.MkdirAll(real, 0o755); err != nil {
		t.Fatal(err)
	}
	// agent -> <top>/k3s/agent-v2: absolute, a node path.
	if err := os.Symlink(top+"/k3s/agent-v2", filepath.Join(root, top, "k3s/agent")); err != nil {
		t.Fatal(err)
	}
	// escape -> /../../..: climbs above the node's root.
	if err := os.Symlink("/../../..", filepath.Join(root, "escape")); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, nodeConfDir, wantView, wantWarning string
	}{
		{name: "absolute symlink", nodeConfDir: top + "/k3s/agent/etc/cni/net.d", wantView: real},
		{name: "leaves the root", nodeConfDir: "/escape" + real, wantWarning: `".." above the node's root`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := Defaults()
			c.NodeRoot, c.RuntimeEndpoint = root, testEndpoint
			r := c.ResolveRuntimeCNI(context.Background(), func(context.Context, string) (criruntime.Runtime, error) {
				return criruntime.Runtime{Name: "containerd", Version: "v2.4.2", CNI: criruntime.CNI{ConfDir: tt.nodeConfDir}}, nil
			})
			if c.CNIConfDir != tt.nodeConfDir || r.ConfDirView != tt.wantView {
				t.Errorf("cniConfDir %q, view %q; want %q, %q", c.CNIConfDir, r.ConfDirView, tt.nodeConfDir, tt.wantView)
			}
			if v, err := ViewPath(root, tt.nodeConfDir); tt.wantView != "" && (err != nil || v != tt.wantView) {
				t.Errorf("ViewPath: %q, %v; want %q", v, err, tt.wantView)
			}
			if tt.wantWarning == "" {
				if out := logged(r); r.Warning != "" || !strings.Contains(out, `cniConfDirView="`+real+`"`) {
					t.Errorf("warning %q, log:\n%s\nwant cniConfDirView %s, no warning", r.Warning, out, real)
				}
			} else if !strings.Contains(r.Warning, tt.wantWarning) {
				t.Errorf("warning %q, want it to contain %q", r.Warning, tt.wantWarning)
			}
		})
	}
}

// TestCompleteDefaultsCNIConfDir: without ResolveRuntimeCNI (tests, tools),
// Complete gives the old default.
func TestCompleteDefaultsCNIConfDir(t *testing.T) {
	c := Defaults()
	c.NodeName = "n"
	if err := c.Complete(); err != nil || c.CNIConfDir != DefaultCNIConfDir {
		t.Errorf("Complete: %v, cniConfDir %q", err, c.CNIConfDir)
	}
}
