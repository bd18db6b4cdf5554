//go:build e2e

package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The node layouts of the local cluster (hack/lib/nodes.sh
// NODE_LAYOUTS, docs/local-cluster.md "Node layouts"): on the 3-node cluster
// node 1 is plain, node 2 has k3s's layout and node 3 NixOS's.

// nodeLayout is the node's layout (the env file's NODE_LAYOUTS, node 1
// first; a node it does not name is plain).
func nodeLayout(i int) string {
	l := strings.Fields(testCluster.env["NODE_LAYOUTS"])
	if i < len(l) {
		return l[i]
	}
	return "plain"
}

// runtimeBinDir is the CNI bin dir the node's containerd is configured with.
func runtimeBinDir(t *testing.T, layout string) string {
	if layout == "k3s" {
		return testCluster.mustEnv(t, "K3S_CNI_BIN_DIR")
	}
	return testCluster.mustEnv(t, "CNI_BIN_DIR")
}

// checkLayout fails the test unless the node has its layout: k3s's current
// an absolute link to a release dir, its reference plugins relative links
// to the multi-call cni, containerd configured with k3s's dirs; NixOS's
// plugins absolute links into the store; plain's regular files. And the
// node's multinetd took the bin and conf dirs from containerd (cniBinDirs
// and cniConfDir are unset in deploy/overlays/local): its last start logged
// those dirs, from the runtime.
func checkLayout(t *testing.T, n clusterNode, layout string) {
	t.Helper()
	bin := runtimeBinDir(t, layout)
	cfg, err := os.ReadFile(filepath.Join(n.clusterDir(t), "containerd", "config.toml"))
	if err != nil {
		t.Fatalf("node %s: containerd's config: %v", n.Name, err)
	}
	if want := fmt.Sprintf("bin_dirs = [%q]", bin); !strings.Contains(string(cfg), want) {
		t.Errorf("node %s (%s): containerd's config.toml has no %s", n.Name, layout, want)
	}
	// Links are read on the node (its mount namespace): an absolute link
	// under /proc/<holder>/root would resolve in this process's root.
	switch layout {
	case "k3s":
		cur := strings.TrimSpace(n.run(t, "readlink", path.Dir(bin)))
		if !path.IsAbs(cur) || path.Dir(cur) != path.Dir(path.Dir(bin)) {
			t.Errorf("node %s: %s -> %s, want an absolute link to a release dir beside it", n.Name, path.Dir(bin), cur)
		}
		for _, p := range []string{"bridge", "host-local", "macvlan", "tuning", "portmap"} {
			if got := strings.TrimSpace(n.run(t, "readlink", path.Join(bin, p))); got != "cni" {
				t.Errorf("node %s: %s/%s -> %q, want a relative link to the multi-call cni", n.Name, bin, p, got)
			}
		}
		if want := fmt.Sprintf("conf_dir = %q", testCluster.mustEnv(t, "K3S_CNI_CONF_DIR")); !strings.Contains(string(cfg), want) {
			t.Errorf("node %s: containerd's config.toml has no %s", n.Name, want)
		}
	case "nixos":
		store := testCluster.mustEnv(t, "NIX_CNI_PACKAGE")
		for _, p := range []string{"bridge", "host-local", "macvlan", "tuning", "portmap"} {
			if got := strings.TrimSpace(n.run(t, "readlink", path.Join(bin, p))); got != path.Join(store, "bin", p) {
				t.Errorf("node %s: %s/%s -> %q, want an absolute link into the store %s", n.Name, bin, p, got, store)
			}
		}
	default:
		for _, p := range []string{"bridge", "macvlan"} {
			if fi, err := os.Lstat(n.path(path.Join(bin, p))); err != nil || !fi.Mode().IsRegular() {
				t.Errorf("node %s: %s/%s is not a regular file (%v)", n.Name, bin, p, err)
			}
		}
	}
	// The running multinetd's start: its log is the newest that says.
	files, _ := filepath.Glob(filepath.Join(n.podLogsDir(t), systemNamespace+"_multinetd-*", "multinetd", "*.log*"))
	var newest string
	var newestTime time.Time
	for _, f := range files {
		fi, err := os.Stat(f)
		if err != nil || strings.HasSuffix(f, ".gz") || fi.ModTime().Before(newestTime) {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, `"CNI dirs"`) {
				newest, newestTime = line, fi.ModTime()
			}
		}
	}
	switch {
	case newest == "":
		t.Errorf("node %s: no multinetd log (%d files under %s) says which CNI dirs it uses", n.Name, len(files), n.podLogsDir(t))
	case !strings.Contains(newest, `"`+bin+`"`) || !strings.Contains(newest, `cniBinDirsSource="runtime containerd`):
		t.Errorf("node %s: multinetd's CNI bin dirs are not its containerd's %s: %s", n.Name, bin, newest)
	}
	// The conf dir too (cniConfDir is unset in deploy/overlays/local): the
	// cluster's, mounted at its own path, on a plain or NixOS node; k3s's,
	// which multinetd's container does not mount, on a k3s node, written
	// and watched through nodeRoot (cniConfDirView).
	wantConf, wantView := testCluster.mustEnv(t, "CNI_CONF_DIR"), ""
	if layout == "k3s" {
		wantConf = testCluster.mustEnv(t, "K3S_CNI_CONF_DIR")
		wantView = "/host" + wantConf
	}
	gotView := strings.Contains(newest, "cniConfDirView=")
	if newest != "" && (!strings.Contains(newest, `cniConfDir="`+wantConf+`"`) || !strings.Contains(newest, `cniConfDirSource="runtime containerd `) ||
		gotView != (wantView != "") || wantView != "" && !strings.Contains(newest, `cniConfDirView="`+wantView+`"`)) {
		t.Errorf("node %s (%s): multinetd's CNI conf dir is not its containerd's %s (seen through %q): %s", n.Name, layout, wantConf, wantView, newest)
	}
}

// layoutNAD creates the NAD layout-<i>: a macvlan on the underlay link with
// host-local (node i's own range) and tuning chained, three reference
// plugins found and run through the node's layout. It returns the
// network's name (host-local's data dir) and range.
func layoutNAD(t *testing.T, ns string, i int) (string, netip.Prefix) {
	t.Helper()
	name := "layout-" + strconv.Itoa(i)
	rng := netip.MustParsePrefix(fmt.Sprintf("10.250.160.%d/28", 16*i))
	first := rng.Addr().Next().Next()
	last := first
	for range 11 {
		last = last.Next()
	}
	netName := ns + "-" + name
	createNAD(t, ns, name, map[string]any{
		"cniVersion": "1.0.0",
		"name":       netName,
		"plugins": []any{
			map[string]any{
				"type": "macvlan", "master": testCluster.mustEnv(t, "UNDERLAY_IF"), "mode": "bridge",
				"ipam": map[string]any{"type": "host-local", "ranges": []any{[]any{map[string]any{
					"subnet": "10.250.160.0/24", "rangeStart": first.String(), "rangeEnd": last.String(),
				}}}},
			},
			map[string]any{"type": "tuning"},
		},
	}, nil)
	return netName, rng
}

// allocated reports whether host-local on the node holds ip for the network
// (its file in the node's /var/lib/cni/networks/<network>).
func allocated(n clusterNode, network string, ip netip.Addr) bool {
	_, err := os.Stat(n.path(filepath.Join("/var/lib/cni/networks", network, ip.String())))
	return err == nil
}

// TestMultiNodeLayouts: on each node of the 3-node
// cluster, plain, k3s and NixOS layouts (checkLayout), a pod with a
// macvlan + host-local + tuning attachment runs with it in network-status
// and host-local's allocation on the node, and its delete completes with
// the allocation released: ADD and DEL found and ran every plugin (the
// default network's bridge, host-local and portmap too) through the
// node's symlinks. On the k3s node the node is upgraded while the pod
// runs: current is re-pointed to a new release dir (a copy of the old
// one) and the old dir is moved away, as k3s's upgrade leaves it; the
// pod's DEL and a new pod's ADD and DEL must still work (multus-cni#927:
// a meta-plugin that keeps the path it resolved before the upgrade fails
// them). Before delegates were resolved in the node's root, no pod on the
// k3s and NixOS nodes got
// its network: multinetd looked the plugins up through the links from its
// own container, where their absolute targets do not exist.
func TestMultiNodeLayouts(t *testing.T) {
	nodes := requireNodes(t, 3)
	seen := map[string]bool{}
	for i := range nodes {
		seen[nodeLayout(i)] = true
	}
	if !seen["k3s"] || !seen["nixos"] || nodeLayout(0) != "plain" {
		t.Fatalf("NODE_LAYOUTS=%q: want node 1 plain and a k3s and a NixOS node (the default of NODES=3)", testCluster.env["NODE_LAYOUTS"])
	}
	ns := newNamespace(t)
	for i, n := range nodes {
		layout := nodeLayout(i)
		t.Run(n.Name+"-"+layout, func(t *testing.T) {
			checkLayout(t, n, layout)
			network, rng := layoutNAD(t, ns, i)
			networks := fmt.Sprintf(`[{"name":"layout-%d","interface":"net1"}]`, i)
			attach := func(name string) netip.Addr {
				t.Helper()
				p := runPod(t, onNode(podSpec(ns, name, networks), n.Name))
				ip := attachmentIP(t, p, "net1")
				if !rng.Contains(ip) {
					t.Errorf("pod %s on %s: net1 %s is outside node %d's range %s", name, n.Name, ip, i+1, rng)
				}
				if got := podInterfaces(t, ns, name)["net1"]; got == nil || len(got.IPs) != 1 || got.IPs[0] != ip.String() {
					t.Errorf("pod %s: net1 inside the pod is %+v, network-status says %s", name, got, ip)
				}
				if !allocated(n, network, ip) {
					t.Errorf("pod %s: host-local on %s holds no %s for %s", name, n.Name, ip, network)
				}
				return ip
			}
			detach := func(name string, ip netip.Addr) {
				t.Helper()
				deletePodOn(t, n, ns, name)
				if allocated(n, network, ip) {
					t.Errorf("pod %s deleted: host-local on %s still holds %s for %s (its IPAM DEL did not run)", name, n.Name, ip, network)
				}
			}
			name := "layout-" + strconv.Itoa(i)
			ip := attach(name)
			if layout == "k3s" {
				upgradeK3sNode(t, n)
				detach(name, ip)
				ip = attach(name + "-upgraded")
				name += "-upgraded"
			}
			detach(name, ip)
		})
	}
}

// upgradeK3sNode does to the k3s node what a k3s upgrade does to its CNI
// bin dir: a new release dir (here a copy of the current one, with the
// plugins installers put there), current re-pointed to it atomically, the
// old dir moved away. The test's cleanup puts the old release back.
func upgradeK3sNode(t *testing.T, n clusterNode) {
	t.Helper()
	current := path.Dir(testCluster.mustEnv(t, "K3S_CNI_BIN_DIR"))
	data := path.Dir(current)
	old := strings.TrimSpace(n.run(t, "readlink", current))
	next, retired := path.Join(data, "release-e2e-upgraded"), old+".e2e-retired"
	n.try("rm", "-rf", next)
	t.Cleanup(func() {
		n.try("mv", "-T", retired, old)
		n.try("ln", "-sfn", old, current+".e2e")
		n.try("mv", "-T", current+".e2e", current)
		n.try("rm", "-rf", next)
	})
	n.run(t, "cp", "-a", old, next)
	n.run(t, "ln", "-sfn", next, current+".e2e")
	n.run(t, "mv", "-T", current+".e2e", current)
	n.run(t, "mv", "-T", old, retired)
	if got := strings.TrimSpace(n.run(t, "readlink", current)); got != next {
		t.Fatalf("node %s: %s -> %s after the upgrade, want %s", n.Name, current, got, next)
	}
	t.Logf("node %s upgraded: %s -> %s (was %s, moved to %s)", n.Name, current, next, old, retired)
}
