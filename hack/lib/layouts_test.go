package lib_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/multinet/multinet/internal/node/nodeexec"
)

// TestNodeLayoutsSetting: NODE_LAYOUTS defaults to plain, k3s, NixOS on a
// cluster of 3 nodes and to plain otherwise; node_layout reads it (a node
// it does not name is plain); the preflight refuses an unknown layout, a
// layout for node 1 (the host) and more layouts than nodes, saying why.
func TestNodeLayoutsSetting(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want string // node_layout 1..3
	}{
		{[]string{"NODES=3"}, "plain k3s nixos"},
		{[]string{"NODES=2"}, "plain plain plain"},
		{[]string{"NODES=1"}, "plain plain plain"},
		{[]string{"NODES=3", "NODE_LAYOUTS=plain nixos"}, "plain nixos plain"},
		{[]string{"NODES=3", "NODE_LAYOUTS=plain nixos k3s"}, "plain nixos k3s"},
	} {
		out, ok := sourceAndRun(t, tc.env, ". ./nodes.sh && nodes_preflight && echo $(node_layout 1) $(node_layout 2) $(node_layout 3)")
		if !ok || strings.TrimSpace(out) != tc.want {
			t.Errorf("%v: %q (ok %v), want %q", tc.env, out, ok, tc.want)
		}
	}
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"NODES=3", "NODE_LAYOUTS=plain k3s alpine"}, "node 3's layout alpine: want plain, k3s or nixos"},
		{[]string{"NODES=3", "NODE_LAYOUTS=k3s plain nixos"}, "node 1 (the host) is plain"},
		{[]string{"NODES=2", "NODE_LAYOUTS=plain k3s nixos"}, "names 3 nodes, NODES=2"},
		{[]string{"NODES=1", "NODE_LAYOUTS=plain k3s"}, "names 2 nodes, NODES=1"},
	} {
		out, ok := sourceAndRun(t, tc.env, ". ./nodes.sh && nodes_preflight")
		if ok || !strings.Contains(out, tc.want) {
			t.Errorf("%v: accepted %v, output %q; want a refusal saying %q", tc.env, ok, out, tc.want)
		}
	}
}

// TestNodeLayoutContainerdConfig: a k3s node's containerd config is node
// 1's with k3s's CNI bin and conf dirs; plain and NixOS nodes keep node
// 1's; a config without node 1's CNI dirs is refused rather than left with
// them.
func TestNodeLayoutContainerdConfig(t *testing.T) {
	env := []string{"NODES=3", "MULTINET_CLUSTER_DIR=/c"}
	conf := "[x]\n    bin_dirs = [\"/c/cni/bin\"]\n    conf_dir = \"/c/cni/net.d\"\n    max_conf_num = 1\n"
	run := func(layout, in string) (string, bool) {
		return sourceAndRun(t, env, ". ./nodes.sh && printf '%s' '"+in+"' | node_containerd_config "+layout)
	}
	out, ok := run("k3s", conf)
	want := "[x]\n    bin_dirs = [\"/var/lib/rancher/k3s/data/current/bin\"]\n    conf_dir = \"/var/lib/rancher/k3s/agent/etc/cni/net.d\"\n    max_conf_num = 1\n"
	if !ok || out != want {
		t.Errorf("k3s: %q (ok %v), want %q", out, ok, want)
	}
	for _, l := range []string{"plain", "nixos"} {
		if out, ok := run(l, conf); !ok || out != conf {
			t.Errorf("%s: %q (ok %v), want node 1's unchanged", l, out, ok)
		}
	}
	if out, ok := run("k3s", "[x]\n    bin_dirs = [\"/opt/cni/bin\"]\n"); ok || !strings.Contains(out, "to give k3s's CNI dirs") {
		t.Errorf("a config without node 1's CNI dirs: accepted %v, output %q", ok, out)
	}
}

// TestNodeLayoutFiles lays out a bin dir (two reference plugins, one of
// multinet's) as each layout has it, mounts it as the node's binds do (a
// directory tree standing for the node's root) and finds each plugin there
// with internal/node/nodeexec, as multinetd does: k3s's current is an absolute link
// to the release dir, its reference plugins relative links to the
// dispatcher (which runs them from the release's bin/.multicall), multinet's
// plugin a regular file; NixOS's reference plugins absolute links into the
// store; plain's regular files. Each layout's node binds say where its
// dirs are mounted.
func TestNodeLayoutFiles(t *testing.T) {
	tools := t.TempDir()
	// hack/tools is a module of its own: build from there.
	build := exec.Command("go", "-C", "../tools", "build", "-o", tools, "./cni-multicall")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build cni-multicall: %v\n%s", err, out)
	}
	src := t.TempDir()
	for name, body := range map[string]string{"bridge": "bridge", "host-local": "host-local", "multinet-shim": "shim"} {
		if err := os.WriteFile(filepath.Join(src, name), []byte("#!/bin/sh\n# "+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const clusterDir = "/c"
	for _, tc := range []struct {
		layout  string
		binDir  string            // the runtime's bin dir on the node
		confDir string            // the runtime's conf dir on the node
		mounts  map[string]string // node path -> dir under the node dir
		links   map[string]string // plugin -> its link's target ("" a regular file)
		runs    map[string]string // plugin -> the node path of what the kernel runs
	}{
		{"plain", "/c/cni/bin", "/c/cni/net.d", map[string]string{"/c/cni": "cni"},
			map[string]string{"bridge": "", "host-local": "", "multinet-shim": ""},
			map[string]string{"bridge": "/c/cni/bin/bridge"}},
		{"k3s", "/var/lib/rancher/k3s/data/current/bin", "/var/lib/rancher/k3s/agent/etc/cni/net.d",
			map[string]string{"/var/lib/rancher/k3s": "rancher-k3s"},
			map[string]string{"bridge": "cni", "host-local": "cni", "multinet-shim": ""},
			map[string]string{"bridge": "/var/lib/rancher/k3s/data/release-1/bin/cni", "multinet-shim": "/var/lib/rancher/k3s/data/release-1/bin/multinet-shim"}},
		{"nixos", "/c/cni/bin", "/c/cni/net.d", map[string]string{"/c/cni": "cni", "/nix": "nix"},
			map[string]string{"bridge": "/nix/store/0multinet0local0cluster0store0-cni-plugins-1.9.1/bin/bridge", "multinet-shim": ""},
			map[string]string{"bridge": "/nix/store/0multinet0local0cluster0store0-cni-plugins-1.9.1/bin/bridge"}},
	} {
		t.Run(tc.layout, func(t *testing.T) {
			d := t.TempDir()
			env := []string{"NODES=3", "MULTINET_CLUSTER_DIR=" + clusterDir, "CNI_PLUGINS_VERSION=v1.9.1", "NODE_LAYOUTS=plain " + tc.layout}
			out, ok := sourceAndRun(t, env, ". ./nodes.sh && TOOLS_DIR="+tools+" && node_cni_files "+tc.layout+" "+d+" "+src+" && node_binds 2 | tail -n +11")
			if !ok {
				t.Fatalf("node_cni_files: %s", out)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			// The node's root: each bind's node dir at its node path.
			root := t.TempDir()
			for nodePath, key := range tc.mounts {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(root, nodePath)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(filepath.Join(d, key), filepath.Join(root, nodePath)); err != nil {
					t.Fatal(err)
				}
			}
			binds := strings.Join(lines[1:], "\n")
			switch tc.layout {
			case "k3s":
				want := "rancher-k3s /var/lib/rancher/k3s\nrancher-k3s/data/release-1/bin /c/cni/bin\nrancher-k3s/agent/etc/cni/net.d /c/cni/net.d"
				if binds != want {
					t.Errorf("binds %q, want %q", binds, want)
				}
				cur, err := os.Readlink(filepath.Join(root, "var/lib/rancher/k3s/data/current"))
				if err != nil || cur != "/var/lib/rancher/k3s/data/release-1" {
					t.Errorf("data/current -> %q (%v), want the absolute link /var/lib/rancher/k3s/data/release-1", cur, err)
				}
				for _, p := range []string{"bridge", "host-local"} {
					if _, err := os.Stat(filepath.Join(root, "var/lib/rancher/k3s/data/release-1/bin/.multicall", p)); err != nil {
						t.Errorf("%s is not in the release's store: %v", p, err)
					}
				}
			case "nixos":
				if binds != "nix /nix" {
					t.Errorf("binds %q, want %q", binds, "nix /nix")
				}
			default:
				if binds != "" {
					t.Errorf("binds %q beyond the common ones, want none", binds)
				}
			}
			// The conf dir node_cni_files printed is the runtime's, where
			// the node sees it.
			gotConf := lines[0]
			for nodePath, key := range tc.mounts {
				if rest, ok := strings.CutPrefix(gotConf, filepath.Join(d, key)); ok {
					gotConf = nodePath + rest
				}
			}
			if gotConf != tc.confDir {
				t.Errorf("conf dir %s (node path %s), want %s", lines[0], gotConf, tc.confDir)
			}
			for p, target := range tc.links {
				fi, err := os.Lstat(filepath.Join(root, tc.binDir, p))
				switch {
				case err != nil:
					// The bin dir itself may be reached through a link.
					r, rerr := nodeexec.Resolve(root, filepath.Join(tc.binDir, p))
					if rerr != nil {
						t.Errorf("%s: %v", p, rerr)
						continue
					}
					fi, err = os.Lstat(r)
					if err != nil {
						t.Errorf("%s: %v", p, err)
						continue
					}
					if target == "" && !fi.Mode().IsRegular() {
						t.Errorf("%s: %s is a %v, want a regular file", p, r, fi.Mode())
					}
				case target == "":
					if !fi.Mode().IsRegular() {
						t.Errorf("%s is a %v, want a regular file", p, fi.Mode())
					}
				default:
					got, _ := os.Readlink(filepath.Join(root, tc.binDir, p))
					if got != target {
						t.Errorf("%s -> %q, want -> %q", p, got, target)
					}
				}
			}
			// What multinetd finds, resolved inside the node's root as the
			// node resolves it.
			for p, want := range tc.runs {
				got, err := nodeexec.Resolve(root, filepath.Join(tc.binDir, p))
				if err != nil {
					t.Errorf("%s: %v", p, err)
					continue
				}
				if got != filepath.Join(root, want) {
					t.Errorf("%s resolves to %s, want %s", p, got, filepath.Join(root, want))
				}
				if fi, err := os.Stat(got); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
					t.Errorf("%s: %s is not an executable file (%v)", p, got, err)
				}
			}
		})
	}
}

// TestMkdirRecorded: the directories a layout's bind mount creates on the
// host are recorded for cluster-down, parents first, and nothing is
// recorded for a directory that exists.
func TestMkdirRecorded(t *testing.T) {
	base := t.TempDir()
	record := filepath.Join(t.TempDir(), "host-record")
	if out, ok := sourceAndRun(t, nil, ". ./nodes.sh && HOST_RECORD="+record+" && mkdir_recorded "+base+"/a/b && mkdir_recorded "+base+"/a/b && mkdir_recorded "+base); !ok {
		t.Fatalf("mkdir_recorded: %s", out)
	}
	got, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	if want := "created-dir " + base + "/a\ncreated-dir " + base + "/a/b\n"; string(got) != want {
		t.Errorf("record %q, want %q", got, want)
	}
}
