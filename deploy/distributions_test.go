package deploy_test

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/multinet/multinet/internal/node/daemon"
)

// distribution is an overlay of deploy/overlays for one Kubernetes
// distribution: its container runtime's CRI socket and CNI dirs, node paths
// (docs/install.md "Distributions", where each comes from).
type distribution struct {
	overlay string
	socket  string
	binDirs []string
	confDir string
	// discovered: the runtime reports binDirs and confDir through the CRI
	// (containerd does, CRI-O does not), so multinetd would find them
	// with cniBinDirs and cniConfDir unset (docs/decisions/deploy.md "The
	// runtime's own CNI settings").
	discovered bool
}

var distributions = []distribution{
	{overlay: "overlays/k3s", socket: "/run/k3s/containerd/containerd.sock",
		binDirs: []string{"/var/lib/rancher/k3s/data/cni"}, confDir: "/var/lib/rancher/k3s/agent/etc/cni/net.d", discovered: true},
	{overlay: "overlays/rke2", socket: "/run/k3s/containerd/containerd.sock",
		binDirs: []string{"/opt/cni/bin"}, confDir: "/etc/cni/net.d", discovered: true},
	{overlay: "overlays/openshift", socket: "/run/crio/crio.sock",
		binDirs: []string{"/var/lib/cni/bin", "/usr/libexec/cni"}, confDir: "/etc/kubernetes/cni/net.d", discovered: false},
	{overlay: "overlays/talos", socket: "/run/containerd/containerd.sock",
		binDirs: []string{"/opt/cni/bin"}, confDir: "/etc/cni/net.d", discovered: true},
}

// distributionOverlays are the overlays of distributions; every test of
// manifests_test.go that runs on each overlay (eachOverlay) runs on them too.
func distributionOverlays() []string {
	var out []string
	for _, d := range distributions {
		out = append(out, d.overlay)
	}
	return out
}

func multinetdConfig(t *testing.T, o objects) daemon.Config {
	t.Helper()
	cfg, err := daemon.LoadConfig(o.configFile(t, "multinetd-config", "multinetd.yaml"))
	if err != nil {
		t.Fatalf("multinetd.yaml does not load: %v", err)
	}
	return cfg
}

// TestDistributionOverlays: each distribution's overlay builds, points
// multinetd at its runtime's socket (through nodeRoot, where the node's /
// is mounted) and CNI dirs, mounts those dirs at their node paths in the
// installer and the daemon, and differs from deploy/overlays/default in
// nothing else: not in multinetd.yaml, not in the DaemonSet. docs/install.md
// lists each with the same paths.
func TestDistributionOverlays(t *testing.T) {
	def := render(t, "overlays/default")
	defCfg := multinetdConfig(t, def)
	var defDS appsv1.DaemonSet
	def.get(t, "DaemonSet/multinetd", &defDS)
	doc, err := os.ReadFile(filepath.Join("..", "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}

	for _, d := range distributions {
		t.Run(d.overlay, func(t *testing.T) {
			o := render(t, d.overlay)
			cfg := multinetdConfig(t, o)
			if want := "unix://" + filepath.Join(cfg.NodeRoot, d.socket); cfg.RuntimeEndpoint != want {
				t.Errorf("runtimeEndpoint %q, want %q (the runtime's socket through nodeRoot)", cfg.RuntimeEndpoint, want)
			}
			if !slices.Equal(cfg.CNIBinDirs, d.binDirs) || cfg.CNIConfDir != d.confDir {
				t.Errorf("cniBinDirs %q, cniConfDir %q; want %q, %q", cfg.CNIBinDirs, cfg.CNIConfDir, d.binDirs, d.confDir)
			}
			rest := cfg
			rest.RuntimeEndpoint, rest.CNIBinDirs, rest.CNIConfDir = defCfg.RuntimeEndpoint, defCfg.CNIBinDirs, defCfg.CNIConfDir
			if !reflect.DeepEqual(rest, defCfg) {
				t.Errorf("multinetd.yaml differs from the default overlay's beyond runtimeEndpoint, cniBinDirs, cniConfDir:\n%s", diffYAML(rest, defCfg))
			}

			var ds appsv1.DaemonSet
			o.get(t, "DaemonSet/multinetd", &ds)
			spec := ds.Spec.Template.Spec
			install := container(t, spec, "install-cni")
			if got := argValue(install.Args, "--cni-bin-dir"); got != d.binDirs[0] {
				t.Errorf("installer --cni-bin-dir %q, want %q (the shims go into the runtime's first plugin dir)", got, d.binDirs[0])
			}
			if got := argValue(install.Args, "--cni-conf-dir"); got != d.confDir {
				t.Errorf("installer --cni-conf-dir %q, want %q", got, d.confDir)
			}
			for _, c := range []struct {
				container corev1.Container
				paths     []string
			}{{install, []string{d.binDirs[0], d.confDir}}, {container(t, spec, "multinetd"), []string{d.confDir}}} {
				mounts := mountsByPath(t, spec, c.container)
				for _, p := range c.paths {
					if m, ok := mounts[p]; !ok || m.hostPath != p {
						t.Errorf("container %s: node path %s not mounted at the same path (%+v)", c.container.Name, p, m)
					}
				}
			}

			// The DaemonSet with the default paths put back is the default
			// overlay's (the ConfigMap's name carries its content's hash).
			back := ds.DeepCopy()
			bs := &back.Spec.Template.Spec
			bs.InitContainers[0].Args = defDS.Spec.Template.Spec.InitContainers[0].Args
			bs.InitContainers[0].VolumeMounts = defDS.Spec.Template.Spec.InitContainers[0].VolumeMounts
			bs.Containers[0].VolumeMounts = defDS.Spec.Template.Spec.Containers[0].VolumeMounts
			for i, v := range bs.Volumes {
				switch {
				case v.Name == "cni-bin" || v.Name == "cni-conf":
					bs.Volumes[i] = defDS.Spec.Template.Spec.Volumes[i]
				case v.ConfigMap != nil && strings.HasPrefix(v.ConfigMap.Name, "multinetd-config-"):
					bs.Volumes[i].ConfigMap.Name = defDS.Spec.Template.Spec.Volumes[i].ConfigMap.Name
				}
			}
			if !equality.Semantic.DeepEqual(back.Spec, defDS.Spec) {
				t.Errorf("the DaemonSet differs from the default overlay's beyond the CNI paths:\n%s", diffYAML(back.Spec, defDS.Spec))
			}

			// docs/install.md "Distributions": one table row per overlay.
			var row string
			for _, line := range strings.Split(string(doc), "\n") {
				if strings.HasPrefix(line, "|") && strings.Contains(line, "`deploy/"+d.overlay+"`") {
					row = line
				}
			}
			if row == "" {
				t.Fatalf("docs/install.md has no table row naming `deploy/%s`", d.overlay)
			}
			for _, want := range append([]string{"`" + d.socket + "`", "`" + d.confDir + "`"}, wrapEach(d.binDirs)...) {
				if !strings.Contains(row, want) {
					t.Errorf("docs/install.md row for %s lacks %s: %s", d.overlay, want, row)
				}
			}
			cells := strings.Split(row, "|")
			if len(cells) < 3 {
				t.Fatalf("docs/install.md row %q", row)
			}
			auto := strings.TrimSpace(cells[len(cells)-2])
			if d.discovered != strings.HasPrefix(auto, "yes") {
				t.Errorf("docs/install.md row for %s: auto-discovery cell %q, want it to start with %v", d.overlay, auto, map[bool]string{true: "yes", false: "no"}[d.discovered])
			}
		})
	}
}

func wrapEach(paths []string) []string {
	out := make([]string, len(paths))
	for i, p := range paths {
		out[i] = "`" + p + "`"
	}
	return out
}
